#include "tools/model_output.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "engine/file/model_file.h"
#include "engine/file/temp_output.h"

namespace colibri::tools {

bool is_zst_name(const std::string& path) { return path.size() > 4 && path.compare(path.size() - 4, 4, ".zst") == 0; }

Status write_model_output(const std::string& out_path, bool zstd, const ZstOptions& zst,
                          const std::function<Status(const std::string& bin_path)>& write_bin) {
    if (!zstd) return write_bin(out_path);
    // Refused before the long part, not after it (TempOutput checks again when it commits).
    const std::string target = follow_symlinks(out_path);
    if (const std::string what = not_replaceable(target); !what.empty())
        return error(out_path + ": not a regular file (" + what + "): refusing to replace it");
    struct RemoveOnExit {
        std::string path;
        ~RemoveOnExit() { std::remove(path.c_str()); }
    };
    // The uncompressed image is a complete, valid model: it must not outlive the conversion, even a kill -9.
    // It is written unnamed (TempOutput), named only when complete, and unlinked as soon as it is mapped, so
    // its name exists for the moment it takes to open it.
    const RemoveOnExit intermediate{target + ".tmp-uncompressed-" + std::to_string(::getpid()) + ".bin"};
    COLIBRI_TRY(write_bin(intermediate.path));
    // Opened, then unlinked at once (microseconds after the rename that named it) and read through the
    // descriptor; without /proc, unlinked once mapped.
    const int fd = ::open(intermediate.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return error(intermediate.path + ": " + std::strerror(errno));
    const std::string by_fd = "/proc/self/fd/" + std::to_string(fd);
    const bool via_fd = ::access(by_fd.c_str(), R_OK) == 0;
    if (via_fd) std::remove(intermediate.path.c_str());
    auto image = ModelFile::open(via_fd ? by_fd : intermediate.path);
    ::close(fd);  // the mapping keeps the data
    if (!image) return image.status();
    return compress_model(*image.value(), intermediate.path, out_path, zst);
}

}  // namespace colibri::tools
