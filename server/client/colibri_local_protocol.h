/* The local transport of `colibri serve --socket PATH --shm-key KEY` (docs/SERVER.md, "Local mode"), shared by
 * the server (C++) and the client library (C). Requests and replies go over a Unix domain socket; the tokens of
 * a reply come through a ring in shared memory, one ring per connection, so that a token reaches the client
 * without a system call when the client is already waiting for it (it spins briefly, then sleeps on a futex).
 *
 * Connection: the server answers a new connection with a reply header (status 200, the connection's ring) and
 * the shared memory's file descriptor (SCM_RIGHTS), or with an error status and closes.
 * Request: a request header and `length` bytes of JSON, the body /v1/chat/completions or /v1/completions takes.
 * The server answers with a reply header: 200 (the tokens follow in the ring), or an error status with
 * `length` bytes of an OpenAI error body. Closing the socket, or a CANCEL header, cancels the request.
 * Ring: single producer (the server), single consumer (the client). `head` and `tail` count bytes ever
 * written and consumed; a record starts on an 8-byte boundary and never wraps (a PAD record fills the end). */
#ifndef COLIBRI_LOCAL_PROTOCOL_H
#define COLIBRI_LOCAL_PROTOCOL_H

#include <stdint.h>

#define COLIBRI_LOCAL_MAGIC 0x52424c43u /* "CLBR" */
#define COLIBRI_LOCAL_VERSION 1u
#define COLIBRI_LOCAL_MAX_BODY (4u << 20)

enum colibri_local_kind {
    COLIBRI_LOCAL_CHAT = 1,
    COLIBRI_LOCAL_COMPLETIONS = 2,
    COLIBRI_LOCAL_CANCEL = 3,
};

typedef struct colibri_local_request_header {
    uint32_t magic, version, kind, length;
} colibri_local_request_header;

typedef struct colibri_local_reply_header {
    uint32_t magic, status, ring, length;
} colibri_local_reply_header;

typedef struct colibri_shm_header {
    uint32_t magic, version, rings, ring_bytes; /* ring_bytes: a power of two */
    uint8_t pad[48];
} colibri_shm_header;

/* One ring's control block; its data follows (ring_bytes). head_seq and tail_seq are futex words bumped after
 * every publish; *_waiting says a side sleeps on them. */
typedef struct colibri_ring_control {
    uint64_t head;
    uint32_t head_seq, head_waiting;
    uint8_t pad0[48];
    uint64_t tail;
    uint32_t tail_seq, tail_waiting;
    uint8_t pad1[48];
} colibri_ring_control;

enum colibri_record_kind {
    COLIBRI_RECORD_TOKEN = 1, /* colibri_token_record, then text_length bytes of UTF-8 */
    COLIBRI_RECORD_END = 2,   /* colibri_end_record: the request is over */
    COLIBRI_RECORD_ERROR = 3, /* colibri_error_record, then length bytes of an OpenAI error body: over */
    COLIBRI_RECORD_PAD = 4,   /* skip to the end of the ring */
};

typedef struct colibri_record_header {
    uint32_t length; /* the whole record, header included, a multiple of 8 */
    uint16_t kind, flags;
} colibri_record_header;

typedef struct colibri_token_record {
    int32_t token;
    float logprob; /* NaN unless logprobs were asked for */
    uint32_t text_length, index;
} colibri_token_record;

typedef struct colibri_end_record {
    uint32_t finish; /* 1 stop, 2 length, 3 cancelled */
    uint32_t prompt_tokens, cached_tokens, completion_tokens;
    double queued_ms, prompt_ms, decode_ms;
} colibri_end_record;

typedef struct colibri_error_record {
    uint32_t status, length;
} colibri_error_record;

/* Byte offset of ring i's control block in the shared memory. */
static inline uint64_t colibri_ring_offset(const colibri_shm_header* h, uint32_t i) {
    return sizeof(colibri_shm_header) + (uint64_t)i * (sizeof(colibri_ring_control) + h->ring_bytes);
}

#endif /* COLIBRI_LOCAL_PROTOCOL_H */
