// Sizes as people type them on a command line (--ram-budget 6G): colibri's and the Studio's.
#pragma once
#include <cstdint>
#include <string>

#include "engine/base/status.h"

namespace colibri::tools {

// "6G", "512M", "1.5GiB", "4096": bytes, with K, M, G, T as powers of 1024. Anything else, zero, or a size
// beyond 2^64 is an error that quotes the text.
Result<uint64_t> parse_size(const std::string& text);

}  // namespace colibri::tools
