#include "tools/model_output.h"

#include <fcntl.h>
#include <sys/stat.h>
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

Status write_output_file(const std::string& path, const void* data, size_t bytes) {
    const std::string target = follow_symlinks(path);
    struct stat st {};
    if (stat(target.c_str(), &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode))) {
        const int fd = ::open(target.c_str(), O_WRONLY | O_CLOEXEC);
        if (fd < 0) return error(path + ": " + std::strerror(errno));
        const auto* p = static_cast<const uint8_t*>(data);
        for (size_t left = bytes; left > 0;) {
            const ssize_t n = ::write(fd, p, left);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                const int e = errno;
                ::close(fd);
                return error(path + ": write failed: " + std::strerror(e));
            }
            p += n;
            left -= static_cast<size_t>(n);
        }
        if (::close(fd) != 0) return error(path + ": write failed: " + std::strerror(errno));
        return Status::ok();
    }
    return write_file_atomically(path, std::string_view(static_cast<const char*>(data), bytes));
}

}  // namespace colibri::tools
