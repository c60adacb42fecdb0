// The tune cache file (kernels/tuner.h says what it holds): read at every start, written by `colibri tune` and
// the Studio's tuner. A cache that cannot be used only costs the tuned choice, never a command: the CPUID
// default gives the same results. Writes commit through engine/temp_output (a complete file or the old one).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "engine/base/status.h"
#include "kernels/tuner.h"

namespace colibri::tools {

inline constexpr uint64_t kMaxTuneCacheBytes = uint64_t(16) << 20;  // about 10,000 machines' entries

// The choice stored at `path` for (cpu_model, version); nullopt when there is no file there, no entry or no
// usable choice. Errors ("tune cache <path>: <why>") for a file that is there but cannot be used: not a regular
// file (a directory, a FIFO: refused without opening it for long), unreadable, too large, not a tune cache.
Result<std::optional<kernels::TuneChoice>> load_tune_cache(const std::string& path, const std::string& cpu_model,
                                                           const std::string& version);

// Adds or replaces the report's (CPU model, version) entry, keeping other machines' entries, creating the
// directory. Refuses a path that holds something other than a regular file (a symlink's target is replaced).
Status save_tune_cache(const kernels::TuneReport& report, const std::string& path);

// Startup configuration of the kernels: COLIBRI_KERNEL when set, else the tune cache entry for this CPU and
// version, else the CPUID default. False with a one-line `error` for a bad COLIBRI_KERNEL; a cache that cannot
// be used is skipped (the default gives the same results) and described in `warning`.
bool configure_kernels(std::string* error, std::string* warning = nullptr);

}  // namespace colibri::tools
