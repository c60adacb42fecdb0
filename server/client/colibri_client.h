/* libcolibri_client: talks to `colibri serve --socket PATH --shm-key KEY` on the same machine. Requests go over
 * the Unix domain socket; the reply's tokens arrive through shared memory. Small and dependency-free (C, libc):
 * `pkg-config --cflags --libs colibri-client`. A client is one connection; use it from one thread at a time. */
#ifndef COLIBRI_CLIENT_H
#define COLIBRI_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct colibri_client colibri_client;

typedef struct colibri_client_result {
    int status;              /* 200, or the HTTP status of the error (400 bad request, 429 busy, ...) */
    char finish_reason[16];  /* "stop", "length" or "cancelled" */
    uint32_t prompt_tokens, cached_tokens, completion_tokens;
    double queued_ms, prompt_ms, decode_ms; /* the server's own times */
    char error[512];         /* the error message when status is not 200 */
} colibri_client_result;

/* Called for each generated token with the text it completes (UTF-8, whole characters, may be empty) and its
 * log-probability (NaN unless the request asked for logprobs). Return 0 to cancel the request. */
typedef int (*colibri_client_token_fn)(int32_t token, const char* text, size_t length, float logprob, void* user);

/* Connects to the server's socket. NULL on failure, with the reason in error (may be NULL). */
colibri_client* colibri_client_connect(const char* socket_path, char* error, size_t error_size);
void colibri_client_close(colibri_client* client);

/* Runs one request: endpoint "chat" (body as /v1/chat/completions takes it: messages, max_tokens, seed, ...)
 * or "completions" (prompt as a string or token ids). Streams the tokens to fn (may be NULL) and returns 0
 * when the request ran to its end or was cancelled, -1 otherwise; result (may be NULL) says how it went. */
int colibri_client_request(colibri_client* client, const char* endpoint, const char* body, colibri_client_token_fn fn,
                           void* user, colibri_client_result* result);

#ifdef __cplusplus
}
#endif

#endif /* COLIBRI_CLIENT_H */
