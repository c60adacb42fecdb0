#include "tools/tune_cache.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "engine/base/json_depth.h"
#include "engine/file/mapped_file.h"
#include "engine/file/temp_output.h"
#include "kernels/cpu_info.h"
#include "kernels/registry.h"

namespace colibri::tools {

Result<std::optional<kernels::TuneChoice>> load_tune_cache(const std::string& path, const std::string& cpu_model,
                                                           const std::string& version) {
    struct stat st {};
    if (path.empty() || (::stat(path.c_str(), &st) != 0 && errno == ENOENT)) return std::optional<kernels::TuneChoice>();
    auto text = read_small_file(path, kMaxTuneCacheBytes);
    if (!text) return error("tune cache " + text.message());
    std::string why;
    kernels::TuneChoice choice;
    // nlohmann's parser takes a NUL byte for the end of the text: one inside is not a cache either.
    if (json_too_deep(text.value()) || text->find('\0') != std::string::npos) why = "not a colibri tune cache (rerun `colibri tune`)";
    else if (kernels::tune_choice_from_cache(text.value(), cpu_model, version, &choice, &why)) return std::optional(choice);
    if (!why.empty()) return error("tune cache " + path + ": " + why);
    return std::optional<kernels::TuneChoice>();
}

Status save_tune_cache(const kernels::TuneReport& report, const std::string& path) {
    if (path.empty()) return error("tune cache: no path (set COLIBRI_TUNE_CACHE, XDG_CACHE_HOME or HOME)");
    // Other machines' entries are kept; a file that cannot be read or parsed is replaced (what is not a regular
    // file is refused below, by the commit).
    std::string old;
    if (auto text = read_small_file(path, kMaxTuneCacheBytes); text && !json_too_deep(text.value())) old = std::move(text.value());
    const std::filesystem::path target(follow_symlinks(path));
    std::error_code ec;
    if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path(), ec);  // the commit reports a failure
    if (Status s = write_file_atomically(path, kernels::tune_cache_with(old, report)); !s) return error("tune cache " + s.message());
    return Status::ok();
}

bool configure_kernels(std::string* error, std::string* warning) {
    if (kernels::kernel_environment_set()) return kernels::apply_kernel_environment(error);
    auto choice = load_tune_cache(kernels::tune_cache_path(), kernels::cpu_model(), kernels::library_version());
    if (!choice) {
        if (warning != nullptr) *warning = choice.message() + "; the default kernels are used";
        return true;
    }
    if (choice->has_value()) kernels::apply_tune_choice(**choice);
    if (warning != nullptr) warning->clear();
    return true;
}

}  // namespace colibri::tools
