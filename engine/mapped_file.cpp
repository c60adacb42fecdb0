#include "mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace colibri {

MappedFile::~MappedFile() {
    if (data_ != nullptr) munmap(const_cast<uint8_t*>(data_), size_);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
    if (this != &other) {
        if (data_ != nullptr) munmap(const_cast<uint8_t*>(data_), size_);
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
    }
    return *this;
}

Result<MappedFile> MappedFile::open(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return error(path + ": " + std::strerror(errno));
    struct stat st {};
    if (fstat(fd, &st) != 0) {
        const int e = errno;
        ::close(fd);
        return error(path + ": " + std::strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        return error(path + ": not a regular file");
    }
    MappedFile m;
    m.size_ = static_cast<uint64_t>(st.st_size);
    if (m.size_ > 0) {
        void* map = mmap(nullptr, m.size_, PROT_READ, MAP_PRIVATE, fd, 0);
        const int e = errno;
        if (map == MAP_FAILED) {
            ::close(fd);
            return error(path + ": mmap failed: " + std::strerror(e));
        }
        m.data_ = static_cast<const uint8_t*>(map);
    }
    ::close(fd);
    return m;
}

}  // namespace colibri
