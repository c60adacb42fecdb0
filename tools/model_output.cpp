#include "tools/model_output.h"

#include <unistd.h>

#include <cstdio>

namespace colibri::tools {

bool is_zst_name(const std::string& path) { return path.size() > 4 && path.compare(path.size() - 4, 4, ".zst") == 0; }

Status write_model_output(const std::string& out_path, bool zstd, const ZstOptions& zst,
                          const std::function<Status(const std::string& bin_path)>& write_bin) {
    if (!zstd) return write_bin(out_path);
    struct RemoveOnExit {
        std::string path;
        ~RemoveOnExit() { std::remove(path.c_str()); }
    };
    const RemoveOnExit intermediate{out_path + ".uncompressed-" + std::to_string(::getpid()) + ".bin"};
    COLIBRI_TRY(write_bin(intermediate.path));
    return compress_model(intermediate.path, out_path, zst);
}

}  // namespace colibri::tools
