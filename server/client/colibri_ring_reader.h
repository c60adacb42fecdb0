/* The client's side of a reply ring (colibri_local_protocol.h): takes records out of the ring one by one and
 * checks each against the ring before anything of it is read, so that whatever the ring holds (a damaged or a
 * forged record) gives a clean error, never a read outside the ring or a wait for bytes that will not come.
 * Internal to libcolibri_client (and its fuzz target, fuzz/fuzz_client_ring.cpp). */
#ifndef COLIBRI_RING_READER_H
#define COLIBRI_RING_READER_H

#include <stddef.h>
#include <stdint.h>

#include "colibri_local_protocol.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct colibri_ring_reader {
    const uint8_t* data; /* the ring's ring_bytes bytes */
    uint32_t ring_bytes; /* a power of two, at least 8 */
    uint64_t tail;       /* bytes consumed: the next record starts here */
} colibri_ring_reader;

enum colibri_ring_result {
    COLIBRI_RING_DAMAGED = -1, /* the bytes at tail are no record the server writes; tail is unchanged */
    COLIBRI_RING_EMPTY = 0,    /* tail reached head: wait for more */
    COLIBRI_RING_TOKEN = COLIBRI_RECORD_TOKEN,
    COLIBRI_RING_END = COLIBRI_RECORD_END,
    COLIBRI_RING_ERROR = COLIBRI_RECORD_ERROR,
};

/* One record, its fixed part copied out of the ring; text and body point into the ring and hold exactly
 * text_length / error.length bytes. */
typedef struct colibri_ring_record {
    colibri_token_record token;
    const char* text;
    colibri_end_record end;
    colibri_error_record error;
    const char* body;
} colibri_ring_record;

/* Takes the next record before head (PAD records are skipped) and moves tail past it. On DAMAGED, *why says
 * what is wrong (a static string). */
int colibri_ring_next(colibri_ring_reader* reader, uint64_t head, colibri_ring_record* out, const char** why);

#ifdef __cplusplus
}
#endif

#endif /* COLIBRI_RING_READER_H */
