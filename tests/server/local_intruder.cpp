// colibri-test-intruder: a client of the local transport that tries what a hostile member of the socket's group
// would, run by test_server_local_users as a second uid. It reports what it could do on stdout; the test decides.
//   colibri-test-intruder UID GID GROUPS SOCKET MODE [ARG]
//     UID, GID: the identity to take (root is needed to take it); GROUPS: supplementary gids, comma-separated
//     ("-" for none). Exit 77 when the identity cannot be taken.
//   MODE probe          exit 0 (the identity could be taken)
//        connect        connect once; print "connected" or "refused: <why>"
//        snoop PID      connect; write every byte of the shared memory it was given to stdout, then every byte it
//                       could read of /dev/shm/colibri-* and of the server's (PID) open files; "denied" lines on
//                       stderr
//        scribble       connect; print "scribbling", then write every byte it can write of the shared memory it
//                       was given, and try to make the rest writable, until stdin closes; print what it managed
//        raw            the handshake by hand; then try to write, remap writable, reopen writable, truncate and
//                       punch the reply segment and to truncate the client page; one line per attempt
//        hold N         open up to N connections (until refused for a second), print "held K" and the refusal, keep
//                       them until stdin closes
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "colibri_client.h"
#include "colibri_local_protocol.h"
#include "shared_mappings.h"

using namespace colibri::test;

namespace {

std::vector<gid_t> parse_groups(const char* s) {
    std::vector<gid_t> out;
    if (std::strcmp(s, "-") == 0) return out;
    for (char* p = const_cast<char*>(s); *p;) {
        out.push_back(static_cast<gid_t>(std::strtoul(p, &p, 10)));
        if (*p != ',') break;
        ++p;
    }
    return out;
}

bool become(uid_t uid, gid_t gid, const std::vector<gid_t>& groups) {
    return ::setgroups(groups.size(), groups.data()) == 0 && ::setgid(gid) == 0 && ::setuid(uid) == 0 && ::getuid() == uid && ::geteuid() == uid;
}

void wait_for_stdin_eof() {
    char buf[64];
    while (::read(0, buf, sizeof buf) > 0) {
    }
}

void write_out(const std::string& bytes) { std::fwrite(bytes.data(), 1, bytes.size(), stdout); }

// Every byte a file lets this process read.
bool read_file(const std::string& path, std::string& out) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return false;
    char buf[65536];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
    ::close(fd);
    return true;
}

int snoop(const char* socket, const char* server_pid) {
    const auto before = shared_mappings();
    char error[256];
    colibri_client* c = colibri_client_connect(socket, error, sizeof error);
    if (c == nullptr) return std::fprintf(stderr, "connect: %s\n", error), 1;
    for (const SharedMapping& m : added_mappings(before, shared_mappings())) write_out(mapping_bytes(m));
    std::vector<std::string> paths;
    if (DIR* d = ::opendir("/dev/shm")) {
        while (dirent* e = ::readdir(d))
            if (std::strncmp(e->d_name, "colibri", 7) == 0) paths.push_back(std::string("/dev/shm/") + e->d_name);
        ::closedir(d);
    }
    const std::string fds = std::string("/proc/") + server_pid + "/fd";
    if (DIR* d = ::opendir(fds.c_str())) {
        while (dirent* e = ::readdir(d))
            if (e->d_name[0] != '.') paths.push_back(fds + "/" + e->d_name);
        ::closedir(d);
    } else {
        std::fprintf(stderr, "denied: %s: %s\n", fds.c_str(), std::strerror(errno));
    }
    for (const std::string& p : paths) {
        std::string bytes;
        if (read_file(p, bytes)) write_out(bytes);
        else std::fprintf(stderr, "denied: %s: %s\n", p.c_str(), std::strerror(errno));
    }
    colibri_client_close(c);
    return 0;
}

int scribble(const char* socket) {
    const auto before = shared_mappings();
    char error[256];
    colibri_client* c = colibri_client_connect(socket, error, sizeof error);
    if (c == nullptr) return std::fprintf(stderr, "connect: %s\n", error), 1;
    auto maps = added_mappings(before, shared_mappings());
    size_t made_writable = 0;
    for (SharedMapping& m : maps)
        if (!m.writable && ::mprotect(reinterpret_cast<void*>(m.start), m.size(), PROT_READ | PROT_WRITE) == 0) {
            m.writable = true;
            ++made_writable;
        }
    std::printf("scribbling\n");
    std::fflush(stdout);
    std::atomic<bool> stop{false};
    std::thread waiter([&] {
        wait_for_stdin_eof();
        stop = true;
    });
    size_t written = 0;
    for (uint8_t v = 1; !stop; ++v)
        for (const SharedMapping& m : maps)
            if (m.writable) {
                std::memset(reinterpret_cast<void*>(m.start), v, m.size());
                written += m.size();
            }
    waiter.join();
    size_t writable_bytes = 0;
    for (const SharedMapping& m : maps) writable_bytes += m.writable ? m.size() : 0;
    std::printf("made %zu read-only mappings writable; %zu writable bytes; wrote %zu bytes\n", made_writable, writable_bytes, written);
    colibri_client_close(c);
    return 0;
}

int connect_socket(const char* path) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

void attempt(const char* what, bool allowed) {
    std::printf("%s: %s\n", what, allowed ? "ALLOWED" : "refused");
}

int raw(const char* socket) {
    const int fd = connect_socket(socket);
    if (fd < 0) return std::fprintf(stderr, "connect: %s\n", std::strerror(errno)), 1;
    const colibri_local_request_header hello{COLIBRI_LOCAL_MAGIC, COLIBRI_LOCAL_VERSION, COLIBRI_LOCAL_HELLO, 0};
    if (::send(fd, &hello, sizeof hello, MSG_NOSIGNAL) != sizeof hello) return std::fprintf(stderr, "hello: %s\n", std::strerror(errno)), 1;
    colibri_local_reply_header h{};
    iovec iov{&h, sizeof h};
    alignas(cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    if (::recvmsg(fd, &msg, MSG_WAITALL | MSG_CMSG_CLOEXEC) != sizeof h || h.status != 200) return std::fprintf(stderr, "no hello\n"), 1;
    int fds[2] = {-1, -1};
    for (cmsghdr* m = CMSG_FIRSTHDR(&msg); m != nullptr; m = CMSG_NXTHDR(&msg, m))
        if (m->cmsg_level == SOL_SOCKET && m->cmsg_type == SCM_RIGHTS) std::memcpy(fds, CMSG_DATA(m), std::min<size_t>(sizeof fds, m->cmsg_len - CMSG_LEN(0)));
    if (fds[0] < 0 || fds[1] < 0) return std::fprintf(stderr, "got %d %d descriptors\n", fds[0], fds[1]), 1;
    const int reply = fds[0], page = fds[1];
    struct stat st{};
    ::fstat(reply, &st);
    const size_t size = static_cast<size_t>(st.st_size);
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, reply, 0);
    attempt("map the reply segment writable", p != MAP_FAILED);
    void* r = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, reply, 0);
    attempt("map the reply segment readable", r != MAP_FAILED);
    if (r != MAP_FAILED) attempt("make the reply mapping writable", ::mprotect(r, size, PROT_READ | PROT_WRITE) == 0);
    attempt("write to the reply segment", ::pwrite(reply, "x", 1, 0) == 1);
    const std::string self = "/proc/self/fd/" + std::to_string(reply);
    const int reopened = ::open(self.c_str(), O_RDWR | O_CLOEXEC);
    attempt("reopen the reply segment writable", reopened >= 0);
    attempt("truncate the reply segment", ::ftruncate(reply, 0) == 0 || (reopened >= 0 && ::ftruncate(reopened, 0) == 0));
    attempt("grow the reply segment", ::ftruncate(reply, static_cast<off_t>(size) * 2) == 0 ||
                                          (reopened >= 0 && ::ftruncate(reopened, static_cast<off_t>(size) * 2) == 0));
    attempt("punch a hole in the reply segment",
            ::fallocate(reply, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096) == 0 ||
                (reopened >= 0 && ::fallocate(reopened, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096) == 0));
    attempt("truncate the client page", ::ftruncate(page, 0) == 0);
    attempt("grow the client page", ::ftruncate(page, 1 << 20) == 0);
    ::close(fd);
    return 0;
}

int hold(const char* socket, int n) {
    std::vector<colibri_client*> held;
    std::string refusal;
    // Until it holds n, or has been refused for a second (connections that just closed may still count).
    for (auto refused_since = std::chrono::steady_clock::now(); static_cast<int>(held.size()) < n;) {
        char error[256];
        colibri_client* c = colibri_client_connect(socket, error, sizeof error);
        if (c != nullptr) {
            held.push_back(c);
            refused_since = std::chrono::steady_clock::now();
            continue;
        }
        refusal = error;
        if (std::chrono::steady_clock::now() - refused_since > std::chrono::seconds(1)) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::printf("held %zu%s%s\n", held.size(), refusal.empty() ? "" : "; refused: ", refusal.c_str());
    std::fflush(stdout);
    wait_for_stdin_eof();
    for (colibri_client* c : held) colibri_client_close(c);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 6) {
        std::fprintf(stderr, "usage: colibri-test-intruder UID GID GROUPS SOCKET MODE [ARG]\n");
        return 2;
    }
    if (!become(static_cast<uid_t>(std::atol(argv[1])), static_cast<gid_t>(std::atol(argv[2])), parse_groups(argv[3]))) {
        std::printf("cannot take uid %s gid %s: %s\n", argv[1], argv[2], std::strerror(errno));
        return 77;
    }
    const std::string mode = argv[5];
    const char* socket = argv[4];
    if (mode == "probe") return 0;
    if (mode == "connect") {
        char error[256];
        colibri_client* c = colibri_client_connect(socket, error, sizeof error);
        if (c == nullptr) return std::printf("refused: %s\n", error), 0;
        std::printf("connected\n");
        colibri_client_close(c);
        return 0;
    }
    if (mode == "snoop" && argc > 6) return snoop(socket, argv[6]);
    if (mode == "scribble") return scribble(socket);
    if (mode == "raw") return raw(socket);
    if (mode == "hold" && argc > 6) return hold(socket, std::atoi(argv[6]));
    std::fprintf(stderr, "colibri-test-intruder: unknown mode %s\n", mode.c_str());
    return 2;
}
