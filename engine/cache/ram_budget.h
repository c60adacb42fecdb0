// What the weights may take of RAM (--ram-budget): so many bytes, or a share of the model file, which only the
// loaded file can turn into bytes. Front ends hold it as typed; open_model resolves it against the file.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

namespace colibri {

struct RamBudget {
    uint64_t bytes = 0;       // > 0: this many bytes
    double file_share = 0.0;  // else (0, 1]: this share of the model file's (uncompressed) size
    bool is_set() const { return bytes > 0 || file_share > 0.0; }
    // The budget in bytes for a file of file_bytes; at least 1, so a tiny share is refused as too small.
    uint64_t resolve(uint64_t file_bytes) const {
        if (bytes > 0) return bytes;
        return std::max<uint64_t>(1, static_cast<uint64_t>(std::floor(double(file_bytes) * file_share)));
    }
};

}  // namespace colibri
