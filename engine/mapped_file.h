// A whole regular file mapped read-only and private: pages come from the page cache, and a page the model
// image later unprotects and writes (expert hot-swap) becomes a private copy that never reaches the file.
// The one place that opens and maps files: model files, safetensors checkpoints and GGUF files. Files of 2 MiB
// and more are mapped at a 2 MiB boundary with MADV_HUGEPAGE (mapped_file.cpp says why).
#pragma once
#include <cstdint>
#include <string>

#include "status.h"

namespace colibri {

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

}  // namespace colibri
