#include "temp_output.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace colibri {

TempOutput::~TempOutput() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_ && !temp_path_.empty()) ::unlink(temp_path_.c_str());
}

Status TempOutput::create(const std::string& final_path) {
    path_ = final_path;
    std::string templ = final_path + ".tmp.XXXXXX";
    std::vector<char> buf(templ.begin(), templ.end());
    buf.push_back('\0');
    const int fd = mkstemp(buf.data());
    if (fd < 0) return error(final_path + ": cannot create output file: " + std::strerror(errno));
    fd_ = fd;
    temp_path_ = buf.data();
    fchmod(fd, 0644);
    return Status::ok();
}

Status TempOutput::write_at(uint64_t offset, const void* data, uint64_t bytes) {
    const auto* p = static_cast<const uint8_t*>(data);
    while (bytes > 0) {
        const ssize_t n = ::pwrite(fd_, p, bytes, static_cast<off_t>(offset));
        if (n < 0) {
            if (errno == EINTR) continue;
            return error(path_ + ": write failed: " + std::strerror(errno));
        }
        p += n;
        offset += static_cast<uint64_t>(n);
        bytes -= static_cast<uint64_t>(n);
    }
    return Status::ok();
}

Status TempOutput::resize(uint64_t bytes) {
    if (ftruncate(fd_, static_cast<off_t>(bytes)) != 0) return error(path_ + ": " + std::strerror(errno));
    return Status::ok();
}

Status TempOutput::commit() {
    if (fsync(fd_) != 0) return error(path_ + ": fsync failed: " + std::strerror(errno));
    // Drop the written pages from the page cache (they are on disk now). Pages cached by small writes stay
    // small folios, which a mapping can only map 4 KiB at a time; read back through MappedFile they come in
    // 2 MiB folios (engine/mapped_file.cpp). Costs one read of the file at its first load; also keeps a large
    // conversion from pushing everything else out of the cache.
    posix_fadvise(fd_, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd_);
    fd_ = -1;
    if (::rename(temp_path_.c_str(), path_.c_str()) != 0)
        return error(path_ + ": cannot rename into place: " + std::strerror(errno));
    committed_ = true;
    return Status::ok();
}

}  // namespace colibri
