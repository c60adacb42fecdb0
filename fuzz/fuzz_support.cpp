#include "fuzz_support.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace colibri::fuzz {

MemFile::MemFile(const char* name) : name_(name) {
    fd_ = memfd_create(name, MFD_CLOEXEC);
    if (fd_ < 0) fuzz_fail(std::string("memfd_create: ") + std::strerror(errno));
    path_ = "/proc/self/fd/" + std::to_string(fd_);
}

MemFile::~MemFile() {
    if (fd_ >= 0) ::close(fd_);
}

void MemFile::write(const uint8_t* data, size_t size) {
    if (ftruncate(fd_, 0) != 0 || ftruncate(fd_, static_cast<off_t>(size)) != 0)
        fuzz_fail(std::string("ftruncate: ") + std::strerror(errno));
    size_t done = 0;
    while (done < size) {
        const ssize_t n = pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
        if (n <= 0) fuzz_fail(std::string("pwrite: ") + std::strerror(errno));
        done += static_cast<size_t>(n);
    }
    size_ = size;
}

MemFile::Mapping MemFile::mapping() const {
    FILE* maps = std::fopen("/proc/self/maps", "r");
    if (maps == nullptr) return {};
    // Lines look like "7f..-7f.. r--s 00000000 00:01 1234   /memfd:colibri-fuzz-gguf (deleted)".
    const std::string tag = "/memfd:" + name_ + " ";
    char line[4096];
    const uint8_t* base = nullptr;
    while (base == nullptr && std::fgets(line, sizeof line, maps) != nullptr) {
        uintptr_t start = 0, end = 0;
        unsigned long long offset = 0;
        if (std::sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %*s %llx", &start, &end, &offset) != 3) continue;
        if (offset == 0 && std::strstr(line, tag.c_str()) != nullptr) base = reinterpret_cast<const uint8_t*>(start);
    }
    std::fclose(maps);
    return Mapping{base, size_};
}

bool MemFile::Mapping::holds(const void* p, uint64_t n) const {
    const auto* q = static_cast<const uint8_t*>(p);
    return base != nullptr && q >= base && uint64_t(q - base) <= size && n <= size - uint64_t(q - base);
}

void fuzz_fail(const std::string& what) {
    std::fprintf(stderr, "colibri fuzz finding: %s\n", what.c_str());
    std::abort();
}

void check_error_message(std::string_view message) {
    fuzz_check(!message.empty(), "an error without a message");
    if (message.find('\n') != std::string_view::npos) fuzz_fail("an error message of several lines: " + std::string(message));
}

const std::string& scratch_dir() {
    static const std::string dir = [] {
        const char* tmp = std::getenv("TMPDIR");
        for (const std::string& root : {std::string("/dev/shm"), std::string(tmp ? tmp : "/tmp")}) {
            std::string templ = root + "/colibri-fuzz-XXXXXX";
            if (mkdtemp(templ.data()) != nullptr) return templ;
        }
        fuzz_fail("cannot create a scratch directory in /dev/shm or the temporary directory");
    }();
    static const bool removed_at_exit = std::atexit([] {
        std::error_code ignored;
        std::filesystem::remove_all(dir, ignored);
    }) == 0;
    (void)removed_at_exit;
    return dir;
}

}  // namespace colibri::fuzz
