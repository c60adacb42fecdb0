// An output file that only appears under its final name once it is complete: data goes to a temporary file
// in the target's directory (same file system), commit() fsyncs and renames it into place, and destruction
// before commit() removes it. Every writer of model files uses this, so an interrupted or failed write never
// leaves a file that looks valid. Where the file system allows, the temporary file has no name at all until
// commit() (O_TMPFILE), so not even a kill -9 leaves a partial file behind.
//
// The target is followed through symlinks (the link stays and its target is replaced, as writing through the
// link would), and anything there that is not a regular file (a device, a FIFO, a directory) is refused: a
// rename would replace the device node itself with a regular file.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/base/status.h"

namespace colibri {

class TempOutput {
public:
    TempOutput() = default;
    ~TempOutput();
    TempOutput(const TempOutput&) = delete;
    TempOutput& operator=(const TempOutput&) = delete;

    // Errors: "<path>: cannot create output file: <strerror>", "<path>: not a regular file (a device): refusing
    // to replace it".
    Status create(const std::string& final_path);
    Status write_at(uint64_t offset, const void* data, uint64_t bytes);
    Status resize(uint64_t bytes);
    Status commit();

    const std::string& path() const { return path_; }
    int fd() const { return fd_; }

private:
    std::string path_;       // as the caller named it (messages)
    std::string target_;     // path_ with symlinks followed: what commit() replaces
    std::string temp_path_;  // the named temporary file, when the directory cannot hold an unnamed one
    int fd_ = -1;
    bool committed_ = false;
};

// `bytes` as the whole content of `path`, through a TempOutput: afterwards the file is complete or as it was
// (a symlink's target is replaced, anything that is not a regular file refused, as by TempOutput::create).
Status write_file_atomically(const std::string& path, std::string_view bytes);

// Where `path` leads through symlinks (at most 40 of them; a missing final target is fine).
std::string follow_symlinks(const std::string& path);

// Empty when `path` may be replaced by a regular file (it is one, or nothing is there), else why not
// ("a device", "a FIFO", "a directory", "a socket").
std::string not_replaceable(const std::string& path);

}  // namespace colibri
