/* libcolibri_client: the client side of server/client/colibri_local_protocol.h. */
#define _GNU_SOURCE
#include "colibri_client.h"

#include <errno.h>
#include <fcntl.h>
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
#include "colibri_ring_reader.h"

#define DEFAULT_TIMEOUT_MS 600000u

struct colibri_client {
    int sock; /* -1 while not connected (a broken connection is dropped and opened again by the next request) */
    char* socket_path;
    char* api_key;
    const uint8_t* reply; /* the reply segment, mapped read-only */
    size_t reply_size;
    colibri_client_page* page; /* the client page, the only shared memory written here */
    size_t page_size;
    colibri_ring_reader ring;
    long spin_ns; /* how long to poll the ring before sleeping on its futex */
    unsigned timeout_ms;
};

static void set_message(char* out, size_t size, const char* text) {
    if (out == NULL || size == 0) return;
    snprintf(out, size, "%s", text);
}

static long now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

/* Milliseconds left before deadline (-1: none), for poll. */
static int left_ms(long deadline) {
    if (deadline < 0) return -1;
    const long left = deadline - now_ms();
    return left <= 0 ? 0 : left > 1000000000L ? 1000000000 : (int)left;
}

/* now_ms() counts whole milliseconds, so one more keeps the wait at least the timeout (never 299 ms of 300). */
static long deadline_after(const colibri_client* c) { return c->timeout_ms ? now_ms() + (long)c->timeout_ms + 1 : -1; }

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

/* Waits until fd is readable; 0, or -1 past the deadline. */
static int wait_readable(int fd, long deadline) {
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        const int r = poll(&p, 1, left_ms(deadline));
        if (r > 0) return 0;
        if (r == 0) return -1;
        if (errno != EINTR) return -1;
    }
}

/* Reads n bytes; with fds (room for max_fds), also the descriptors that came with them. 0, or -1 when the
 * connection broke or the deadline passed. */
static int read_all(int fd, void* out, size_t n, long deadline, int* fds, size_t max_fds, size_t* n_fds) {
    uint8_t* p = (uint8_t*)out;
    while (n > 0) {
        if (wait_readable(fd, deadline) != 0) return -1;
        union {
            char buf[CMSG_SPACE(4 * sizeof(int))];
            struct cmsghdr align;
        } control;
        struct iovec iov = {p, n};
        struct msghdr msg;
        memset(&msg, 0, sizeof msg);
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.buf;
        msg.msg_controllen = sizeof control.buf;
        const ssize_t r = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (r <= 0) return -1;
        /* Every descriptor that came is kept or closed: a server cannot make this process leak them. */
        for (struct cmsghdr* m = CMSG_FIRSTHDR(&msg); m != NULL; m = CMSG_NXTHDR(&msg, m)) {
            if (m->cmsg_level != SOL_SOCKET || m->cmsg_type != SCM_RIGHTS) continue;
            const size_t count = (m->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < count; ++i) {
                int got;
                memcpy(&got, CMSG_DATA(m) + i * sizeof(int), sizeof got);
                if (fds != NULL && *n_fds < max_fds) fds[(*n_fds)++] = got;
                else close(got);
            }
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* The "message" of an OpenAI error body, unescaped enough for a one-line message. */
static void error_message(const char* body, char* out, size_t size) {
    const char* key = "\"message\":\"";
    const char* at = strstr(body, key);
    size_t o = 0;
    if (at == NULL || size == 0) {
        set_message(out, size, *body ? body : "error");
        return;
    }
    for (const char* p = at + strlen(key); *p && *p != '"' && o + 1 < size; ++p) {
        if (*p == '\\' && p[1]) ++p;
        out[o++] = *p;
    }
    out[o] = '\0';
}

/* Reads a reply header and its body (an error's JSON) into r; returns the status, or -1 when the connection
 * broke, the deadline passed or the bytes are no reply. */
static int read_reply(int sock, colibri_client_result* r, long deadline, int* fds, size_t max_fds, size_t* n_fds) {
    colibri_local_reply_header h;
    if (read_all(sock, &h, sizeof h, deadline, fds, max_fds, n_fds) != 0) return -1;
    if (h.magic != COLIBRI_LOCAL_MAGIC || h.length > COLIBRI_LOCAL_MAX_REPLY || h.status < 100 || h.status > 599) return -1;
    char* body = (char*)calloc(1, (size_t)h.length + 1);
    if (body == NULL || read_all(sock, body, h.length, deadline, NULL, 0, NULL) != 0) {
        free(body);
        return -1;
    }
    r->status = (int)h.status;
    if (h.status != 200) error_message(body, r->error, sizeof r->error);
    free(body);
    return (int)h.status;
}

static void drop_connection(colibri_client* c) {
    if (c->reply) munmap((void*)c->reply, c->reply_size);
    if (c->page) munmap(c->page, c->page_size);
    if (c->sock >= 0) close(c->sock);
    c->reply = NULL;
    c->page = NULL;
    c->sock = -1;
}

/* Maps the two descriptors of a HELLO's answer after checking them; NULL, or why not. */
static const char* map_memory(colibri_client* c, int reply_fd, int page_fd) {
    const int must = F_SEAL_SHRINK | F_SEAL_GROW;
    struct stat rs, ps;
    if (fstat(reply_fd, &rs) != 0 || fstat(page_fd, &ps) != 0 || !S_ISREG(rs.st_mode) || !S_ISREG(ps.st_mode))
        return "the server passed no shared memory";
    if ((fcntl(reply_fd, F_GET_SEALS) & must) != must || (fcntl(page_fd, F_GET_SEALS) & must) != must)
        return "the server's shared memory is not sealed against shrinking";
    if ((size_t)rs.st_size < sizeof(colibri_reply_segment) || (uint64_t)rs.st_size > (uint64_t)COLIBRI_LOCAL_MAX_RING + (1u << 20) ||
        (size_t)ps.st_size < sizeof(colibri_client_page) || ps.st_size > (1 << 20))
        return "the server's shared memory has a size this client does not expect";
    void* reply = mmap(NULL, (size_t)rs.st_size, PROT_READ, MAP_SHARED, reply_fd, 0);
    if (reply == MAP_FAILED) return "cannot map the server's shared memory";
    colibri_reply_segment s;
    memcpy(&s, reply, sizeof s);
    const uint64_t end = (uint64_t)s.data_offset + s.ring_bytes;
    if (s.magic != COLIBRI_LOCAL_MAGIC || s.version != COLIBRI_LOCAL_VERSION || s.ring_bytes < COLIBRI_LOCAL_MIN_RING ||
        s.ring_bytes > COLIBRI_LOCAL_MAX_RING || (s.ring_bytes & (s.ring_bytes - 1)) != 0 || s.data_offset < sizeof s || s.data_offset % 8 != 0 ||
        end > (uint64_t)rs.st_size) {
        munmap(reply, (size_t)rs.st_size);
        return "the server's shared memory is not what this client expects";
    }
    void* page = mmap(NULL, (size_t)ps.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, page_fd, 0);
    if (page == MAP_FAILED) {
        munmap(reply, (size_t)rs.st_size);
        return "cannot map the server's shared memory";
    }
    c->reply = (const uint8_t*)reply;
    c->reply_size = (size_t)rs.st_size;
    c->page = (colibri_client_page*)page;
    c->page_size = (size_t)ps.st_size;
    c->ring.data = c->reply + s.data_offset;
    c->ring.ring_bytes = s.ring_bytes;
    c->ring.tail = __atomic_load_n(&((const colibri_reply_segment*)reply)->head, __ATOMIC_ACQUIRE);
    if (c->ring.tail % 8 != 0) c->ring.tail = 0; /* the reader reports the damage at the first request */
    __atomic_store_n(&c->page->tail, c->ring.tail, __ATOMIC_RELEASE);
    return NULL;
}

/* Connects, says hello and maps the connection's memory; 0, or -1 with why in r. */
static int open_connection(colibri_client* c, colibri_client_result* r) {
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    memcpy(addr.sun_path, c->socket_path, strlen(c->socket_path) + 1);
    c->sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->sock < 0 || connect(c->sock, (struct sockaddr*)&addr, sizeof addr) != 0) {
        r->status = 503;
        snprintf(r->error, sizeof r->error, "%s: %s", c->socket_path, strerror(errno));
        drop_connection(c);
        return -1;
    }
    const size_t key_length = strlen(c->api_key);
    const colibri_local_request_header hello = {COLIBRI_LOCAL_MAGIC, COLIBRI_LOCAL_VERSION, COLIBRI_LOCAL_HELLO, (uint32_t)key_length};
    /* A send that fails still leaves the server's answer to read (a refusal sent before the hello arrived). */
    if (write_all(c->sock, &hello, sizeof hello) == 0) write_all(c->sock, c->api_key, key_length);
    int fds[4];
    size_t n_fds = 0;
    const int status = read_reply(c->sock, r, deadline_after(c), fds, 4, &n_fds);
    const char* why = NULL;
    if (status < 0) {
        r->status = 503;
        why = "the server did not answer as a colibri server does";
    } else if (status != 200) {
        why = r->error; /* the server's reason */
    } else if (n_fds != 2) {
        r->status = 502;
        why = "the server passed no shared memory";
    } else if ((why = map_memory(c, fds[0], fds[1])) != NULL) {
        r->status = 502;
    }
    for (size_t i = 0; i < n_fds; ++i) close(fds[i]);
    if (why == NULL) return 0;
    if (why != r->error) set_message(r->error, sizeof r->error, why);
    drop_connection(c);
    return -1;
}

colibri_client* colibri_client_connect_key(const char* socket_path, const char* api_key, char* error, size_t error_size) {
    if (socket_path == NULL || strlen(socket_path) >= sizeof(((struct sockaddr_un*)0)->sun_path)) {
        set_message(error, error_size, "no socket path, or one longer than 107 bytes");
        return NULL;
    }
    if (api_key != NULL && strlen(api_key) > COLIBRI_LOCAL_MAX_KEY) {
        set_message(error, error_size, "the API key is longer than 4096 bytes");
        return NULL;
    }
    colibri_client* c = (colibri_client*)calloc(1, sizeof *c);
    if (c != NULL) {
        c->sock = -1;
        c->socket_path = strdup(socket_path);
        c->api_key = strdup(api_key ? api_key : "");
        c->timeout_ms = DEFAULT_TIMEOUT_MS;
        const char* spin = getenv("COLIBRI_CLIENT_SPIN_US");
        c->spin_ns = spin ? atol(spin) * 1000L : 50000L;
    }
    if (c == NULL || c->socket_path == NULL || c->api_key == NULL) {
        set_message(error, error_size, "out of memory");
        colibri_client_close(c);
        return NULL;
    }
    colibri_client_result r;
    memset(&r, 0, sizeof r);
    if (open_connection(c, &r) != 0) {
        set_message(error, error_size, r.error);
        colibri_client_close(c);
        return NULL;
    }
    return c;
}

colibri_client* colibri_client_connect(const char* socket_path, char* error, size_t error_size) {
    return colibri_client_connect_key(socket_path, getenv("COLIBRI_API_KEY"), error, error_size);
}

void colibri_client_close(colibri_client* c) {
    if (c == NULL) return;
    drop_connection(c);
    free(c->socket_path);
    free(c->api_key);
    free(c);
}

void colibri_client_set_timeout(colibri_client* c, unsigned milliseconds) {
    if (c != NULL) c->timeout_ms = milliseconds;
}

/* The connection is closed, or holds bytes nobody asked for: the server closed it (its idle timeout). */
static int connection_gone(const colibri_client* c) {
    struct pollfd p = {c->sock, POLLIN, 0};
    return c->sock < 0 || (poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)));
}

/* Waits until the ring's head moves from tail; 0, -1 when the server went away, -2 past the deadline. */
static int wait_for_data(colibri_client* c, uint64_t tail, long deadline) {
    const colibri_reply_segment* s = (const colibri_reply_segment*)c->reply;
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        if (__atomic_load_n(&s->head, __ATOMIC_ACQUIRE) != tail) return 0;
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((now.tv_sec - start.tv_sec) * 1000000000L + (now.tv_nsec - start.tv_nsec) < c->spin_ns) continue;
        const uint32_t seq = __atomic_load_n(&s->head_seq, __ATOMIC_SEQ_CST);
        __atomic_store_n(&c->page->head_waiting, 1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&s->head, __ATOMIC_ACQUIRE) == tail) {
            const int left = left_ms(deadline);
            const long slice_ms = left < 0 || left > 200 ? 200 : left;
            struct timespec timeout = {0, slice_ms * 1000000L};
            syscall(SYS_futex, &s->head_seq, FUTEX_WAIT, seq, &timeout, NULL, 0);
        }
        __atomic_store_n(&c->page->head_waiting, 0, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&s->head, __ATOMIC_ACQUIRE) != tail) return 0;
        /* Woken, or a timeout: is the server still there? It sends nothing on the socket while a request runs. */
        if (connection_gone(c)) return -1;
        if (deadline >= 0 && now_ms() >= deadline) return -2;
    }
}

static int fail(colibri_client* c, colibri_client_result* r, int status, const char* why) {
    r->status = status;
    set_message(r->error, sizeof r->error, why);
    drop_connection(c); /* the connection's state is unknown: the next request opens a new one */
    return -1;
}

/* Sends the request and reads the server's answer to it; the status, or -1 when the connection broke. */
static int send_request(colibri_client* c, uint32_t kind, const char* body, size_t length, colibri_client_result* r) {
    const colibri_local_request_header h = {COLIBRI_LOCAL_MAGIC, COLIBRI_LOCAL_VERSION, kind, (uint32_t)length};
    /* When the send fails the server may have answered already (413: it read the header, not the body). */
    if (write_all(c->sock, &h, sizeof h) == 0) write_all(c->sock, body, length);
    return read_reply(c->sock, r, deadline_after(c), NULL, 0, NULL);
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
    if (length > UINT32_MAX) {
        r->status = 413;
        set_message(r->error, sizeof r->error, "the request body is larger than 4 GiB");
        return -1;
    }
    /* A connection the server closed while idle is opened again; so is one that broke before the server said
     * anything about this request (the close of an idle connection can cross the request). */
    int reopened = 0;
    if (connection_gone(c)) {
        drop_connection(c);
        if (open_connection(c, r) != 0) return -1;
        reopened = 1;
    }
    int status = send_request(c, kind, body, length, r);
    if (status < 0 && !reopened) {
        drop_connection(c);
        memset(r, 0, sizeof *r);
        if (open_connection(c, r) != 0) return -1;
        status = send_request(c, kind, body, length, r);
    }
    if (status < 0) return fail(c, r, 503, "the connection to the server broke");
    if (status != 200) return -1;

    int cancelled = 0;
    const colibri_reply_segment* s = (const colibri_reply_segment*)c->reply;
    for (;;) {
        colibri_ring_record rec;
        const char* why = NULL;
        const int got = colibri_ring_next(&c->ring, __atomic_load_n(&s->head, __ATOMIC_ACQUIRE), &rec, &why);
        if (got == COLIBRI_RING_EMPTY) {
            const int waited = wait_for_data(c, c->ring.tail, deadline_after(c));
            if (waited == -1) return fail(c, r, 503, "the server went away");
            if (waited == -2) return fail(c, r, 503, "the server wrote nothing for longer than the client's timeout");
            continue;
        }
        if (got == COLIBRI_RING_DAMAGED) {
            if (connection_gone(c)) return fail(c, r, 503, "the server went away");
            char message[256];
            snprintf(message, sizeof message, "damaged reply from the server: %s", why);
            return fail(c, r, 502, message);
        }
        if (got == COLIBRI_RING_TOKEN && fn != NULL && !cancelled && fn(rec.token.token, rec.text, rec.token.text_length, rec.token.logprob, user) == 0) {
            const colibri_local_request_header cancel = {COLIBRI_LOCAL_MAGIC, COLIBRI_LOCAL_VERSION, COLIBRI_LOCAL_CANCEL, 0};
            write_all(c->sock, &cancel, sizeof cancel);
            cancelled = 1;
        }
        /* The record is used: its room goes back to the server. */
        __atomic_store_n(&c->page->tail, c->ring.tail, __ATOMIC_RELEASE);
        if (got == COLIBRI_RING_END) {
            static const char* const names[] = {"", "stop", "length", "cancelled"};
            set_message(r->finish_reason, sizeof r->finish_reason, rec.end.finish <= 3 ? names[rec.end.finish] : "");
            r->prompt_tokens = rec.end.prompt_tokens;
            r->cached_tokens = rec.end.cached_tokens;
            r->completion_tokens = rec.end.completion_tokens;
            r->queued_ms = rec.end.queued_ms;
            r->prompt_ms = rec.end.prompt_ms;
            r->decode_ms = rec.end.decode_ms;
            return 0;
        }
        if (got == COLIBRI_RING_ERROR) {
            r->status = rec.error.status >= 100 && rec.error.status <= 599 ? (int)rec.error.status : 502;
            char* text = (char*)calloc(1, (size_t)rec.error.length + 1);
            if (text != NULL) memcpy(text, rec.body, rec.error.length);
            error_message(text ? text : "", r->error, sizeof r->error);
            free(text);
            return -1;
        }
    }
}
