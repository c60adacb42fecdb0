// Shared by the libFuzzer targets.
//
// The readers take paths and map what they open (MappedFile). Rather than add an in-memory entry point to
// every reader, each input is written to one memfd, an anonymous in-memory file, and opened through
// /proc/self/fd/N: no disk I/O, nothing to clean up, and the real open + mmap path is what gets fuzzed.
// The price is that ASan cannot see reads past the end of a mapping, so the targets check every view a
// reader hands out against the mapping itself (MemFile::mapping).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace colibri::fuzz {

class MemFile {
public:
    explicit MemFile(const char* name);
    ~MemFile();
    MemFile(const MemFile&) = delete;
    MemFile& operator=(const MemFile&) = delete;

    // Replaces the file's contents.
    void write(const uint8_t* data, size_t size);
    const std::string& path() const { return path_; }
    uint64_t size() const { return size_; }
    // The bytes of this file as mapped by whoever opened path() (found in /proc/self/maps); base is null
    // when nobody maps it.
    struct Mapping {
        const uint8_t* base = nullptr;
        uint64_t size = 0;
        // [p, p + n) lies inside the mapped file.
        bool holds(const void* p, uint64_t n) const;
    };
    Mapping mapping() const;

private:
    int fd_ = -1;
    std::string name_, path_;
    uint64_t size_ = 0;
};

// A finding: prints what broke and aborts, so libFuzzer saves the input that did it.
[[noreturn]] void fuzz_fail(const std::string& what);
inline void fuzz_check(bool ok, const char* what) {
    if (!ok) fuzz_fail(what);
}
// Errors must be one non-empty line (the CLI prints them as "colibri: <what>: <why>").
void check_error_message(std::string_view message);

// A scratch directory for outputs (converters), created once per process and removed at exit; on tmpfs
// (/dev/shm) when there is one.
const std::string& scratch_dir();

}  // namespace colibri::fuzz
