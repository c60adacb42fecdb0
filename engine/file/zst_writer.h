// Writes a .bin.zst from a .bin: one zstd frame per section (docs/FORMAT.md, "Compressed files"), so a loader
// can decompress the metadata and the always-used sections at open and each expert on first use.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "engine/base/status.h"

namespace colibri {

struct ZstOptions {
    int level = 3;  // zstd level, 1..22
    // Called after each section with image bytes done and the total; return false to cancel.
    std::function<bool(uint64_t done, uint64_t total)> progress;
};

// Reads and validates bin_path, then writes zst_path (through a temporary file: nothing is left there on
// failure or cancellation). Every section's checksum is verified while it is compressed.
Status compress_model(const std::string& bin_path, const std::string& zst_path, const ZstOptions& options = {});

class ModelFile;
// The same from a model file already open; `label` names it in errors.
Status compress_model(const ModelFile& file, const std::string& label, const std::string& zst_path, const ZstOptions& options = {});

}  // namespace colibri
