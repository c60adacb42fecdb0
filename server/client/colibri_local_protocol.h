/* The local transport of `colibri serve --socket PATH` (docs/SERVER.md, "Local mode"), shared by the server (C++)
 * and the client library (C). Requests and replies go over a Unix domain socket; the tokens of a reply come
 * through a ring in shared memory, so that a token reaches the client without a system call when the client is
 * already waiting for it (it spins briefly, then sleeps on a futex).
 *
 * Connection: the client sends a HELLO header with the API key as its body (length 0 without one). The server
 * answers with a reply header, status 200, and two descriptors (SCM_RIGHTS) of memory made for this connection
 * alone: the reply segment (read-only for the client, sealed against writes, shrinking and growing) and the
 * client page (the client's only writable shared memory, sealed against shrinking and growing). Or it answers
 * with an error status (401 wrong key, 429 too many connections) and closes.
 * Request: a request header and `length` bytes of JSON, the body /v1/chat/completions or /v1/completions takes.
 * The server answers with a reply header: 200 (the tokens follow in the ring), or an error status with
 * `length` bytes of an OpenAI error body. Closing the socket, or a CANCEL header, cancels the request. A
 * connection idle for the server's idle timeout is closed; the client library then reconnects.
 * Ring: single producer (the server), single consumer (the client). `head` (reply segment) and `tail` (client
 * page) count bytes ever written and consumed; a record starts on an 8-byte boundary and never wraps (a PAD
 * record fills the end). The server trusts nothing in the client page, and the client checks every record
 * against the ring before it reads it (colibri_ring_reader.h). */
#ifndef COLIBRI_LOCAL_PROTOCOL_H
#define COLIBRI_LOCAL_PROTOCOL_H

#include <stdint.h>

#define COLIBRI_LOCAL_MAGIC 0x52424c43u /* "CLBR" */
#define COLIBRI_LOCAL_VERSION 2u
#define COLIBRI_LOCAL_MAX_KEY 4096u          /* the longest API key a HELLO may carry */
#define COLIBRI_LOCAL_MAX_REPLY (1u << 20)   /* the longest body of a reply header (an error) */
#define COLIBRI_LOCAL_MIN_RING 4096u         /* ring_bytes: a power of two in [MIN_RING, MAX_RING] */
#define COLIBRI_LOCAL_MAX_RING (1u << 30)

enum colibri_local_kind {
    COLIBRI_LOCAL_CHAT = 1,
    COLIBRI_LOCAL_COMPLETIONS = 2,
    COLIBRI_LOCAL_CANCEL = 3,
    COLIBRI_LOCAL_HELLO = 4,
};

typedef struct colibri_local_request_header {
    uint32_t magic, version, kind, length;
} colibri_local_request_header;

typedef struct colibri_local_reply_header {
    uint32_t magic, status, reserved, length;
} colibri_local_reply_header;

/* The start of the reply segment; the ring's data follows at data_offset. Written by the server only. head_seq
 * is a futex word bumped after every publish. */
typedef struct colibri_reply_segment {
    uint32_t magic, version, ring_bytes, data_offset;
    uint64_t head;
    uint32_t head_seq, pad0;
    uint8_t pad1[40];
} colibri_reply_segment;

/* The client page: written by the client, read by the server. head_waiting says the client sleeps on head_seq. */
typedef struct colibri_client_page {
    uint64_t tail;
    uint32_t head_waiting, pad0;
    uint8_t pad1[48];
} colibri_client_page;

enum colibri_record_kind {
    COLIBRI_RECORD_TOKEN = 1, /* colibri_token_record, then text_length bytes of UTF-8 */
    COLIBRI_RECORD_END = 2,   /* colibri_end_record: the request is over */
    COLIBRI_RECORD_ERROR = 3, /* colibri_error_record, then length bytes of an OpenAI error body: over */
    COLIBRI_RECORD_PAD = 4,   /* fills the ring to its end */
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

#endif /* COLIBRI_LOCAL_PROTOCOL_H */
