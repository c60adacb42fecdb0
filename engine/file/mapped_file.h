// A whole regular file mapped read-only and private: pages come from the page cache, and a page the model
// image later unprotects and writes (expert hot-swap) becomes a private copy that never reaches the file.
// The one place that opens and maps files: model files, safetensors checkpoints and GGUF files. Files of 2 MiB
// and more are mapped at a 2 MiB boundary with MADV_HUGEPAGE (mapped_file.cpp says why).
#pragma once
#include <cstdint>
#include <string>

#include "engine/base/status.h"

namespace colibri {

// An anonymous private mapping of `bytes` (rounded up to whole pages) starting at a multiple of `align` (a
// power of two, a multiple of the page size): `align` more is reserved and the ends around the aligned span
// are given back. prot as for mmap; extra_flags are added to MAP_PRIVATE | MAP_ANONYMOUS. MAP_FAILED (errno
// set) when the reservation fails. Both 2 MiB-aligned mappings use it: model files (over a PROT_NONE
// reservation) and huge-page activation memory.
void* map_anonymous_aligned(uint64_t bytes, uint64_t align, int prot, int extra_flags);

class MappedFile {
public:
    MappedFile() = default;
    ~MappedFile();
    MappedFile(MappedFile&& other) noexcept;
    MappedFile& operator=(MappedFile&& other) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    // Errors: "<path>: <strerror>" or "<path>: not a regular file". An empty file maps to size 0, data null.
    static Result<MappedFile> open(const std::string& path);

    const uint8_t* data() const { return data_; }
    uint64_t size() const { return size_; }

private:
    const uint8_t* data_ = nullptr;
    uint64_t size_ = 0;
};

// A small regular file's bytes (config.json, tokenizer.json, an index): opened as MappedFile::open opens, so
// a FIFO or device under that name is refused instead of blocking; "<path>: too large" past max_bytes.
Result<std::string> read_small_file(const std::string& path, uint64_t max_bytes = uint64_t(1) << 30);

}  // namespace colibri
