// Descriptors sent over a Unix domain socket with a message (SCM_RIGHTS): how the local server hands each
// connection its shared memory.
#pragma once
#include <sys/socket.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

namespace colibri::server {

// Sends size bytes (one message: size must be small enough to go out whole) with up to four descriptors.
inline bool send_with_fds(int sock, const void* data, size_t size, const int* fds, size_t n_fds) {
    if (n_fds > 4) return false;
    iovec iov{const_cast<void*>(data), size};
    alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(n_fds * sizeof(int));
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(n_fds * sizeof(int));
    std::memcpy(CMSG_DATA(c), fds, n_fds * sizeof(int));
    ssize_t n;
    do n = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n == static_cast<ssize_t>(size);
}

}  // namespace colibri::server
