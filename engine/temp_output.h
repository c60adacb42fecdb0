// An output file that only appears under its final name once it is complete: data goes to a temporary file
// beside the target (same file system), commit() fsyncs and renames it into place, and destruction before
// commit() removes it. Every writer of model files uses this, so an interrupted or failed write never leaves
// a file that looks valid.
#pragma once
#include <cstdint>
#include <string>

#include "status.h"

namespace colibri {

class TempOutput {
public:
    TempOutput() = default;
    ~TempOutput();
    TempOutput(const TempOutput&) = delete;
    TempOutput& operator=(const TempOutput&) = delete;

    // Errors: "<path>: cannot create output file: <strerror>".
    Status create(const std::string& final_path);
    Status write_at(uint64_t offset, const void* data, uint64_t bytes);
    Status resize(uint64_t bytes);
    Status commit();

    const std::string& path() const { return path_; }
    int fd() const { return fd_; }

private:
    std::string path_, temp_path_;
    int fd_ = -1;
    bool committed_ = false;
};

}  // namespace colibri
