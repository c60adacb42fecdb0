// Sizes as people type them on a command line (--ram-budget 6G): colibri's and the Studio's.
#pragma once
#include <cstdint>
#include <string>

#include "engine/base/status.h"
#include "engine/core/open_model.h"

namespace colibri::tools {

// "6G", "512M", "1.5GiB", "4096": bytes, with K, M, G, T as powers of 1024. Anything else, zero, or a size
// beyond 2^64 is an error that quotes the text.
Result<uint64_t> parse_size(const std::string& text);
// --ram-budget: a size as parse_size reads it, or a share of the model file ("50%", "12.5%": above 0, at most
// 100 %). Errors quote the text.
Result<RamBudget> parse_ram_budget(const std::string& text);

}  // namespace colibri::tools
