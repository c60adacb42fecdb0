/* libcolibri_client: the client side of server/client/colibri_local_protocol.h. */
#define _GNU_SOURCE
#include "colibri_client.h"

#include <errno.h>
#include <linux/futex.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "colibri_local_protocol.h"

struct colibri_client {
    int sock;
    uint8_t* shm;
    size_t shm_size;
    colibri_ring_control* ring;
    const uint8_t* data;
    uint32_t ring_bytes;
    long spin_ns; /* how long to poll the ring before sleeping on its futex */
};

static void set_message(char* out, size_t size, const char* text) {
    if (out == NULL || size == 0) return;
    snprintf(out, size, "%s", text);
}

static int write_all(int fd, const void* data, size_t n) {
    const uint8_t* p = (const uint8_t*)data;
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int read_all(int fd, void* out, size_t n) {
    uint8_t* p = (uint8_t*)out;
    while (n > 0) {
        ssize_t r = recv(fd, p, n, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* The "message" of an OpenAI error body, unescaped enough for a one-line message. */
static void error_message(const char* body, size_t length, char* out, size_t size) {
    const char* key = "\"message\":\"";
    const char* at = body ? strstr(body, key) : NULL;
    size_t o = 0;
    if (at == NULL || size == 0) {
        set_message(out, size, length ? body : "error");
        return;
    }
    for (const char* p = at + strlen(key); *p && *p != '"' && o + 1 < size; ++p) {
        if (*p == '\\' && p[1]) ++p;
        out[o++] = *p;
    }
    out[o] = '\0';
}

/* Reads a reply header and its body (an error's JSON); returns the status, or -1 when the connection failed. */
static int read_reply(colibri_client* c, colibri_client_result* r, int* fd_out, uint32_t* ring_out) {
    colibri_local_reply_header h;
    if (fd_out != NULL) {
        struct iovec iov = {&h, sizeof h};
        union {
            char buf[CMSG_SPACE(sizeof(int))];
            struct cmsghdr align;
        } control;
        struct msghdr msg;
        memset(&msg, 0, sizeof msg);
        memset(&control, 0, sizeof control);
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.buf;
        msg.msg_controllen = sizeof control.buf;
        ssize_t n;
        do n = recvmsg(c->sock, &msg, MSG_CMSG_CLOEXEC | MSG_WAITALL);
        while (n < 0 && errno == EINTR);
        if (n != (ssize_t)sizeof h) return -1;
        *fd_out = -1;
        for (struct cmsghdr* m = CMSG_FIRSTHDR(&msg); m != NULL; m = CMSG_NXTHDR(&msg, m))
            if (m->cmsg_level == SOL_SOCKET && m->cmsg_type == SCM_RIGHTS) memcpy(fd_out, CMSG_DATA(m), sizeof(int));
    } else if (read_all(c->sock, &h, sizeof h) != 0) {
        return -1;
    }
    if (h.magic != COLIBRI_LOCAL_MAGIC || h.length > COLIBRI_LOCAL_MAX_BODY) return -1;
    if (ring_out != NULL) *ring_out = h.ring;
    char* body = (char*)calloc(1, (size_t)h.length + 1);
    if (body == NULL || read_all(c->sock, body, h.length) != 0) {
        free(body);
        return -1;
    }
    if (r != NULL) {
        r->status = (int)h.status;
        if (h.status != 200) error_message(body, h.length, r->error, sizeof r->error);
    }
    free(body);
    return (int)h.status;
}

colibri_client* colibri_client_connect(const char* socket_path, char* error, size_t error_size) {
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    if (socket_path == NULL || strlen(socket_path) >= sizeof addr.sun_path) {
        set_message(error, error_size, "no socket path, or one longer than 107 bytes");
        return NULL;
    }
    strcpy(addr.sun_path, socket_path);
    colibri_client* c = (colibri_client*)calloc(1, sizeof *c);
    if (c == NULL) {
        set_message(error, error_size, "out of memory");
        return NULL;
    }
    c->sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->sock < 0 || connect(c->sock, (struct sockaddr*)&addr, sizeof addr) != 0) {
        char why[300];
        snprintf(why, sizeof why, "%s: %s", socket_path, strerror(errno));
        set_message(error, error_size, why);
        if (c->sock >= 0) close(c->sock);
        free(c);
        return NULL;
    }
    colibri_client_result hello;
    memset(&hello, 0, sizeof hello);
    int fd = -1;
    uint32_t ring = 0;
    const int status = read_reply(c, &hello, &fd, &ring);
    struct stat st;
    if (status != 200 || fd < 0 || fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof(colibri_shm_header)) {
        set_message(error, error_size, status > 0 && status != 200 ? hello.error : "the server did not answer as a colibri server does");
        if (fd >= 0) close(fd);
        close(c->sock);
        free(c);
        return NULL;
    }
    c->shm_size = (size_t)st.st_size;
    void* p = mmap(NULL, c->shm_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    const colibri_shm_header* h = (const colibri_shm_header*)p;
    if (p == MAP_FAILED || h->magic != COLIBRI_LOCAL_MAGIC || h->version != COLIBRI_LOCAL_VERSION || h->ring_bytes == 0 ||
        ring >= h->rings || colibri_ring_offset(h, h->rings) > c->shm_size) {
        set_message(error, error_size, "the server's shared memory is not what this client expects");
        if (p != MAP_FAILED) munmap(p, c->shm_size);
        close(c->sock);
        free(c);
        return NULL;
    }
    c->shm = (uint8_t*)p;
    /* The hello's ring field says which ring is this connection's. */
    c->ring = (colibri_ring_control*)(c->shm + colibri_ring_offset(h, ring));
    c->data = (const uint8_t*)(c->ring + 1);
    c->ring_bytes = h->ring_bytes;
    const char* spin = getenv("COLIBRI_CLIENT_SPIN_US");
    c->spin_ns = spin ? atol(spin) * 1000L : 50000L;
    return c;
}

void colibri_client_close(colibri_client* c) {
    if (c == NULL) return;
    if (c->shm) munmap(c->shm, c->shm_size);
    close(c->sock);
    free(c);
}

static long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

/* Waits until the ring holds bytes beyond `tail`; -1 when the server went away. */
static int wait_for_data(colibri_client* c, uint64_t tail) {
    const long start = now_ns();
    for (;;) {
        if (__atomic_load_n(&c->ring->head, __ATOMIC_ACQUIRE) > tail) return 0;
        if (now_ns() - start < c->spin_ns) continue;
        const uint32_t seq = __atomic_load_n(&c->ring->head_seq, __ATOMIC_SEQ_CST);
        __atomic_store_n(&c->ring->head_waiting, 1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&c->ring->head, __ATOMIC_ACQUIRE) <= tail) {
            struct timespec timeout = {0, 200000000L};
            syscall(SYS_futex, &c->ring->head_seq, FUTEX_WAIT, seq, &timeout, NULL, 0);
            /* Woken, or a timeout: is the server still there? */
            struct pollfd p = {c->sock, POLLIN, 0};
            if (poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR))) {
                __atomic_store_n(&c->ring->head_waiting, 0, __ATOMIC_SEQ_CST);
                if (__atomic_load_n(&c->ring->head, __ATOMIC_ACQUIRE) > tail) return 0;
                return -1;
            }
        }
        __atomic_store_n(&c->ring->head_waiting, 0, __ATOMIC_SEQ_CST);
    }
}

int colibri_client_request(colibri_client* c, const char* endpoint, const char* body, colibri_client_token_fn fn, void* user,
                           colibri_client_result* result) {
    colibri_client_result local;
    colibri_client_result* r = result ? result : &local;
    memset(r, 0, sizeof *r);
    if (c == NULL || endpoint == NULL || body == NULL) {
        r->status = 400;
        set_message(r->error, sizeof r->error, "no client, endpoint or body");
        return -1;
    }
    uint32_t kind;
    if (strcmp(endpoint, "chat") == 0) kind = COLIBRI_LOCAL_CHAT;
    else if (strcmp(endpoint, "completions") == 0) kind = COLIBRI_LOCAL_COMPLETIONS;
    else {
        r->status = 400;
        set_message(r->error, sizeof r->error, "endpoint must be \"chat\" or \"completions\"");
        return -1;
    }
    const size_t length = strlen(body);
    colibri_local_request_header h = {COLIBRI_LOCAL_MAGIC, COLIBRI_LOCAL_VERSION, kind, (uint32_t)length};
    if (length > COLIBRI_LOCAL_MAX_BODY) {
        r->status = 413;
        set_message(r->error, sizeof r->error, "the request body is too large");
        return -1;
    }
    if (write_all(c->sock, &h, sizeof h) != 0 || write_all(c->sock, body, length) != 0 || read_reply(c, r, NULL, NULL) < 0) {
        r->status = 503;
        set_message(r->error, sizeof r->error, "the connection to the server broke");
        return -1;
    }
    if (r->status != 200) return -1;

    uint64_t tail = __atomic_load_n(&c->ring->tail, __ATOMIC_RELAXED);
    int cancelled = 0;
    for (;;) {
        if (wait_for_data(c, tail) != 0) {
            r->status = 503;
            set_message(r->error, sizeof r->error, "the server went away");
            return -1;
        }
        const uint64_t head = __atomic_load_n(&c->ring->head, __ATOMIC_ACQUIRE);
        int over = 0;
        while (tail < head && !over) {
            const uint8_t* p = c->data + tail % c->ring_bytes;
            colibri_record_header rh;
            memcpy(&rh, p, sizeof rh);
            if (rh.length < sizeof rh || rh.length % 8 != 0 || rh.length > c->ring_bytes) {
                r->status = 502;
                set_message(r->error, sizeof r->error, "damaged record in the ring");
                return -1;
            }
            const uint8_t* payload = p + sizeof rh;
            if (rh.kind == COLIBRI_RECORD_TOKEN) {
                colibri_token_record t;
                memcpy(&t, payload, sizeof t);
                if (t.text_length > rh.length - sizeof rh - sizeof t) t.text_length = 0;
                if (fn != NULL && !cancelled && fn(t.token, (const char*)payload + sizeof t, t.text_length, t.logprob, user) == 0) {
                    colibri_local_request_header cancel = {COLIBRI_LOCAL_MAGIC, COLIBRI_LOCAL_VERSION, COLIBRI_LOCAL_CANCEL, 0};
                    write_all(c->sock, &cancel, sizeof cancel);
                    cancelled = 1;
                }
            } else if (rh.kind == COLIBRI_RECORD_END) {
                colibri_end_record e;
                memcpy(&e, payload, sizeof e);
                static const char* const names[] = {"", "stop", "length", "cancelled"};
                set_message(r->finish_reason, sizeof r->finish_reason, e.finish <= 3 ? names[e.finish] : "");
                r->prompt_tokens = e.prompt_tokens;
                r->cached_tokens = e.cached_tokens;
                r->completion_tokens = e.completion_tokens;
                r->queued_ms = e.queued_ms;
                r->prompt_ms = e.prompt_ms;
                r->decode_ms = e.decode_ms;
                over = 1;
            } else if (rh.kind == COLIBRI_RECORD_ERROR) {
                colibri_error_record e;
                memcpy(&e, payload, sizeof e);
                r->status = (int)e.status;
                const size_t n = e.length <= rh.length - sizeof rh - sizeof e ? e.length : 0;
                char* text = (char*)calloc(1, n + 1);
                if (text) {
                    memcpy(text, payload + sizeof e, n);
                    error_message(text, n, r->error, sizeof r->error);
                    free(text);
                }
                over = 2;
            }
            tail += rh.length;
            __atomic_store_n(&c->ring->tail, tail, __ATOMIC_RELEASE);
        }
        if (over == 1) return 0;
        if (over == 2) return -1;
    }
}
