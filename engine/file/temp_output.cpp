#include "engine/file/temp_output.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

namespace colibri {

namespace {

std::string directory_of(const std::string& path) {
    const size_t slash = path.rfind('/');
    if (slash == std::string::npos) return ".";
    return slash == 0 ? "/" : path.substr(0, slash);
}

// A name beside `target` that nothing uses yet, for linking the unnamed file before the rename.
std::string fresh_name(const std::string& target) {
    static thread_local std::mt19937_64 rng(std::random_device{}());
    static const char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    std::string name = target + ".tmp.";
    for (int k = 0; k < 8; ++k) name += kChars[rng() % (sizeof kChars - 1)];
    return name;
}

}  // namespace

std::string follow_symlinks(const std::string& path) {
    std::string p = path;
    for (int hops = 0; hops < 40; ++hops) {
        struct stat st {};
        if (lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return p;
        std::vector<char> buf(PATH_MAX + 1);
        const ssize_t n = readlink(p.c_str(), buf.data(), buf.size() - 1);
        if (n <= 0) return p;
        const std::string link(buf.data(), static_cast<size_t>(n));
        p = link[0] == '/' ? link : directory_of(p) + "/" + link;
    }
    return p;
}

std::string not_replaceable(const std::string& path) {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return {};
    if (S_ISDIR(st.st_mode)) return "a directory";
    if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) return "a device";
    if (S_ISFIFO(st.st_mode)) return "a FIFO";
    if (S_ISSOCK(st.st_mode)) return "a socket";
    return "not a regular file";
}

TempOutput::~TempOutput() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_ && !temp_path_.empty()) ::unlink(temp_path_.c_str());
}

Status TempOutput::create(const std::string& final_path) {
    path_ = final_path;
    target_ = follow_symlinks(final_path);
    if (const std::string what = not_replaceable(target_); !what.empty())
        return error(final_path + ": not a regular file (" + what + "): refusing to replace it");
    // Unnamed until commit: nothing is left if the process dies. Needs /proc to give it a name later.
    const int anon = ::open(directory_of(target_).c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0644);
    if (anon >= 0 && ::access("/proc/self/fd", X_OK) == 0) {
        fd_ = anon;
    } else {
        if (anon >= 0) ::close(anon);
        std::string templ = target_ + ".tmp.XXXXXX";
        std::vector<char> buf(templ.begin(), templ.end());
        buf.push_back('\0');
        const int fd = mkstemp(buf.data());
        if (fd < 0) return error(final_path + ": cannot create output file: " + std::strerror(errno));
        fd_ = fd;
        temp_path_ = buf.data();
    }
    fchmod(fd_, 0644);
    return Status::ok();
}

Status TempOutput::write_at(uint64_t offset, const void* data, uint64_t bytes) {
    const auto* p = static_cast<const uint8_t*>(data);
    while (bytes > 0) {
        const ssize_t n = ::pwrite(fd_, p, bytes, static_cast<off_t>(offset));
        if (n < 0) {
            if (errno == EINTR) continue;
            return error(path_ + ": write failed: " + std::strerror(errno));
        }
        p += n;
        offset += static_cast<uint64_t>(n);
        bytes -= static_cast<uint64_t>(n);
    }
    return Status::ok();
}

Status TempOutput::resize(uint64_t bytes) {
    if (ftruncate(fd_, static_cast<off_t>(bytes)) != 0) return error(path_ + ": " + std::strerror(errno));
    return Status::ok();
}

Status TempOutput::commit() {
    if (fsync(fd_) != 0) return error(path_ + ": fsync failed: " + std::strerror(errno));
    // Drop the written pages from the page cache (they are on disk now). Pages cached by small writes stay
    // small folios, which a mapping can only map 4 KiB at a time; read back through MappedFile they come in
    // 2 MiB folios (engine/file/mapped_file.cpp). Costs one read of the file at its first load; also keeps a large
    // conversion from pushing everything else out of the cache.
    posix_fadvise(fd_, 0, 0, POSIX_FADV_DONTNEED);
    // Checked again: something else may have appeared there while the file was written.
    if (const std::string what = not_replaceable(target_); !what.empty())
        return error(path_ + ": not a regular file (" + what + "): refusing to replace it");
    if (temp_path_.empty()) {  // give the unnamed file a name beside the target, then rename that into place
        const std::string self = "/proc/self/fd/" + std::to_string(fd_);
        for (int attempt = 0; attempt < 100 && temp_path_.empty(); ++attempt) {
            const std::string name = fresh_name(target_);
            if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, name.c_str(), AT_SYMLINK_FOLLOW) == 0) temp_path_ = name;
            else if (errno != EEXIST) return error(path_ + ": cannot name the output file: " + std::strerror(errno));
        }
        if (temp_path_.empty()) return error(path_ + ": cannot name the output file: no free temporary name");
    }
    ::close(fd_);
    fd_ = -1;
    if (::rename(temp_path_.c_str(), target_.c_str()) != 0)
        return error(path_ + ": cannot rename into place: " + std::strerror(errno));
    committed_ = true;
    return Status::ok();
}

Status write_file_atomically(const std::string& path, std::string_view bytes) {
    TempOutput out;
    COLIBRI_TRY(out.create(path));
    COLIBRI_TRY(out.write_at(0, bytes.data(), bytes.size()));
    return out.commit();
}

}  // namespace colibri
