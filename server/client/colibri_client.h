/* libcolibri_client: talks to `colibri serve --socket PATH` on the same machine. Requests go over the Unix domain
 * socket; the reply's tokens arrive through shared memory the server made for this connection alone (read-only
 * here, but for one small page the client writes its read position to). Small and dependency-free (C, libc):
 * `pkg-config --cflags --libs colibri-client`. A client is one connection; use it from one thread at a time.
 *
 * What the client trusts: nothing it reads from the server's memory. Every record is checked against the ring
 * before it is read, so a damaged or forged ring gives an error (status 502), never a read outside the memory the
 * server passed; every wait for the server is bounded (colibri_client_set_timeout) and ends when the server
 * goes away (status 503). The memory must come sealed against shrinking, so that it cannot vanish under the
 * reader. Who may connect, and what a member of the socket's group can and cannot do: docs/SERVER.md. */
#ifndef COLIBRI_CLIENT_H
#define COLIBRI_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct colibri_client colibri_client;

typedef struct colibri_client_result {
    int status;              /* 200, or the HTTP status of the error (400 bad request, 401 wrong API key, 413 body
                                larger than the server's --max-body, 429 busy, 502 damaged reply, 503 server gone or
                                silent past the timeout) */
    char finish_reason[16];  /* "stop", "length" or "cancelled" */
    uint32_t prompt_tokens, cached_tokens, completion_tokens;
    double queued_ms, prompt_ms, decode_ms; /* the server's own times */
    char error[512];         /* the error message when status is not 200 */
} colibri_client_result;

/* Called for each generated token with the text it completes (UTF-8, whole characters, may be empty) and its
 * log-probability (NaN unless the request asked for logprobs). Return 0 to cancel the request. */
typedef int (*colibri_client_token_fn)(int32_t token, const char* text, size_t length, float logprob, void* user);

/* Connects to the server's socket with the API key of the server's --api-key (NULL or "" for none). NULL on
 * failure (no such socket, no permission, a wrong key, every connection in use), with the reason in error (may
 * be NULL). */
colibri_client* colibri_client_connect_key(const char* socket_path, const char* api_key, char* error, size_t error_size);
/* The same with the key in the environment variable COLIBRI_API_KEY, if set. */
colibri_client* colibri_client_connect(const char* socket_path, char* error, size_t error_size);
void colibri_client_close(colibri_client* client);

/* The longest the client waits for the server: to answer, or to write the next token of a reply (which
 * includes the time a request waits for a free slot). 0 waits as long as the server lives. Default 600 s. */
void colibri_client_set_timeout(colibri_client* client, unsigned milliseconds);

/* Runs one request: endpoint "chat" (body as /v1/chat/completions takes it: messages, max_tokens, seed, ...)
 * or "completions" (prompt as a string or token ids). Streams the tokens to fn (may be NULL) and returns 0
 * when the request ran to its end or was cancelled, -1 otherwise; result (may be NULL) says how it went. A
 * connection the server closed while it was idle (its idle timeout) is opened again first. */
int colibri_client_request(colibri_client* client, const char* endpoint, const char* body, colibri_client_token_fn fn,
                           void* user, colibri_client_result* result);

#ifdef __cplusplus
}
#endif

#endif /* COLIBRI_CLIENT_H */
