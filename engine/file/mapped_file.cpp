#include "engine/file/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

namespace colibri {

void* map_anonymous_aligned(uint64_t bytes, uint64_t align, int prot, int extra_flags) {
    const uint64_t reserve = bytes + align;
    void* region = mmap(nullptr, reserve, prot, MAP_PRIVATE | MAP_ANONYMOUS | extra_flags, -1, 0);
    if (region == MAP_FAILED) return MAP_FAILED;
    const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const auto base = reinterpret_cast<uintptr_t>(region);
    const uintptr_t at = (base + align - 1) & ~uintptr_t(align - 1);
    const uintptr_t end = (at + bytes + page - 1) & ~(page - 1), reserve_end = (base + reserve + page - 1) & ~(page - 1);
    if (at > base) munmap(region, at - base);
    if (reserve_end > end) munmap(reinterpret_cast<void*>(end), reserve_end - end);
    return reinterpret_cast<void*>(at);
}

namespace {
// Maps the whole file read-only at an address that is a multiple of 2 MiB, with MADV_HUGEPAGE: the page cache
// then keeps large files in 2 MiB folios (read ahead 2 MiB at a time on a fault) and the kernel maps each with
// one page-table entry instead of 512, so streaming the weights walks a fraction of the page tables and the
// hardware prefetchers are not stopped at every 4 KiB boundary. (With 4 KiB pages q4_k decode measured about
// 1 % slower on a Zen 5 guest, three copies of the file each way.) Falls back to a plain mapping.
void* map_file(int fd, uint64_t size) {
#ifdef MADV_HUGEPAGE
    constexpr uint64_t kHuge = uint64_t(2) << 20;
    if (size >= kHuge) {
        // The file at a 2 MiB boundary of an address-space reservation that holds nothing else.
        void* region = map_anonymous_aligned(size, kHuge, PROT_NONE, MAP_NORESERVE);
        if (region != MAP_FAILED) {
            void* map = mmap(region, size, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0);
            if (map == MAP_FAILED) {
                const int e = errno;
                munmap(region, size);
                errno = e;
                return MAP_FAILED;
            }
            madvise(map, size, MADV_HUGEPAGE);  // advice only: without transparent huge pages nothing changes
            return map;
        }
    }
#endif
    return mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
}
}  // namespace

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

namespace {
// Opens a regular file for reading. O_NONBLOCK: opening a FIFO (or some devices) would otherwise wait for a
// writer forever; it changes nothing for a regular file. Anything else is refused after fstat.
Result<int> open_regular(const std::string& path, struct stat* st) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return error(path + ": " + std::strerror(errno));
    if (fstat(fd, st) != 0) {
        const int e = errno;
        ::close(fd);
        return error(path + ": " + std::strerror(e));
    }
    if (!S_ISREG(st->st_mode)) {
        ::close(fd);
        const char* what = S_ISDIR(st->st_mode) ? "a directory" : S_ISFIFO(st->st_mode) ? "a FIFO" : S_ISSOCK(st->st_mode) ? "a socket"
                           : (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode)) ? "a device" : "not a file";
        return error(path + ": not a regular file (" + what + ")");
    }
    return fd;
}
}  // namespace

Result<std::string> read_small_file(const std::string& path, uint64_t max_bytes) {
    struct stat st {};
    auto fd = open_regular(path, &st);
    if (!fd) return fd.status();
    if (static_cast<uint64_t>(st.st_size) > max_bytes) {
        ::close(fd.value());
        return error(path + ": too large (" + std::to_string(st.st_size) + " bytes, at most " + std::to_string(max_bytes) + ")");
    }
    std::string out(static_cast<size_t>(st.st_size), '\0');
    size_t done = 0;
    while (done < out.size()) {
        const ssize_t n = ::read(fd.value(), out.data() + done, out.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            const int e = n < 0 ? errno : 0;
            ::close(fd.value());
            return error(path + ": " + (e ? std::strerror(e) : "the file shrank while it was read"));
        }
        done += static_cast<size_t>(n);
    }
    ::close(fd.value());
    return out;
}

Result<MappedFile> MappedFile::open(const std::string& path) {
    struct stat st {};
    auto opened = open_regular(path, &st);
    if (!opened) return opened.status();
    const int fd = opened.value();
    MappedFile m;
    m.size_ = static_cast<uint64_t>(st.st_size);
    if (m.size_ > 0) {
        void* map = map_file(fd, m.size_);
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
