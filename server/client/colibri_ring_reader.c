/* libcolibri_client: the checked reader of a reply ring (colibri_ring_reader.h). */
#include "colibri_ring_reader.h"

#include <string.h>

static int damaged(const char** why, const char* what) {
    if (why != NULL) *why = what;
    return COLIBRI_RING_DAMAGED;
}

int colibri_ring_next(colibri_ring_reader* r, uint64_t head, colibri_ring_record* out, const char** why) {
    const uint64_t size = r->ring_bytes;
    if (size < sizeof(colibri_record_header) || (size & (size - 1)) != 0) return damaged(why, "the ring's size is not a power of two");
    for (;;) {
        const uint64_t tail = r->tail;
        if (head == tail) return COLIBRI_RING_EMPTY;
        if (head < tail) return damaged(why, "the ring's head went back");
        if (head - tail > size) return damaged(why, "the ring's head is more than a ring ahead");
        if (tail % 8 != 0) return damaged(why, "a record off its 8-byte boundary");
        /* The record must lie whole between tail and head and inside the ring (records never wrap). */
        const uint64_t pos = tail & (size - 1);
        const uint64_t room = size - pos < head - tail ? size - pos : head - tail;
        colibri_record_header h;
        if (room < sizeof h) return damaged(why, "a record header cut by the ring's end");
        memcpy(&h, r->data + pos, sizeof h);
        if (h.length < sizeof h || h.length % 8 != 0) return damaged(why, "a record length that is not a multiple of 8");
        if (h.length > room) return damaged(why, "a record past the ring's end or its head");
        const uint8_t* payload = r->data + pos + sizeof h;
        const uint64_t n = h.length - sizeof h;
        switch (h.kind) {
            case COLIBRI_RECORD_PAD:
                if (pos + h.length != size) return damaged(why, "a pad record that does not end the ring");
                r->tail += h.length;
                continue;
            case COLIBRI_RECORD_TOKEN:
                if (n < sizeof out->token) return damaged(why, "a token record too short");
                memcpy(&out->token, payload, sizeof out->token);
                if (out->token.text_length > n - sizeof out->token) return damaged(why, "a token's text past its record");
                out->text = (const char*)payload + sizeof out->token;
                break;
            case COLIBRI_RECORD_END:
                if (n < sizeof out->end) return damaged(why, "an end record too short");
                memcpy(&out->end, payload, sizeof out->end);
                break;
            case COLIBRI_RECORD_ERROR:
                if (n < sizeof out->error) return damaged(why, "an error record too short");
                memcpy(&out->error, payload, sizeof out->error);
                if (out->error.length > n - sizeof out->error) return damaged(why, "an error's text past its record");
                out->body = (const char*)payload + sizeof out->error;
                break;
            default: return damaged(why, "a record of an unknown kind");
        }
        r->tail += h.length;
        return h.kind;
    }
}
