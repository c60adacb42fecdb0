// Writing a model file that may be compressed: one place decides how a .bin.zst is produced, for convert and
// swap alike.
#pragma once
#include <cstddef>
#include <functional>
#include <string>

#include "engine/base/status.h"
#include "engine/file/zst_writer.h"

namespace colibri::tools {

// True when the name asks for a compressed file (ends in .zst).
bool is_zst_name(const std::string& path);

// Produces out_path. Uncompressed: write_bin(out_path). Compressed: write_bin writes a .bin under a temporary
// name beside out_path (same file system, so a full disk shows up early), which is unlinked as soon as it is
// opened and then compressed into out_path. write_bin must itself leave nothing behind on failure (TempOutput).
Status write_model_output(const std::string& out_path, bool zstd, const ZstOptions& zst,
                          const std::function<Status(const std::string& bin_path)>& write_bin);

// Writes `bytes` to path through a temporary name (TempOutput), so a failure never leaves a partial output; a
// FIFO or a character device (/dev/stdout, a pipe) is written through, as the user asked (logits --out).
Status write_output_file(const std::string& path, const void* data, size_t bytes);

}  // namespace colibri::tools
