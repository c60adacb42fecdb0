/* colibri-client: one request to a local `colibri serve --socket PATH`, the reply streamed to stdout. */
#define _POSIX_C_SOURCE 200809L
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "colibri_client.h"

static void usage(FILE* out) {
    fputs("usage: colibri-client --socket PATH [options] [MESSAGE]\n"
          "  -s, --socket PATH     the server's socket (colibri serve --socket PATH --shm-key KEY)\n"
          "  -n, --max-tokens N    longest reply (default 256)\n"
          "      --seed S          sampling seed\n"
          "      --temperature T   0 is greedy\n"
          "      --completions     MESSAGE is a raw prompt for /v1/completions, not a chat message\n"
          "      --body JSON       send this request body as it is (MESSAGE and the options above are ignored)\n"
          "      --logprobs        print each token's log-probability on stderr\n"
          "      --api-key KEY     the server's --api-key (default: COLIBRI_API_KEY)\n"
          "      --timeout S       longest wait for the server's next word, 0 for none (default 600)\n"
          "  MESSAGE defaults to standard input.\n",
          out);
}

/* MESSAGE as a JSON string literal. */
static char* json_string(const char* s) {
    const size_t n = strlen(s);
    char* out = (char*)malloc(n * 6 + 3);
    if (out == NULL) return NULL;
    char* o = out;
    *o++ = '"';
    for (const unsigned char* p = (const unsigned char*)s; *p; ++p) {
        if (*p == '"' || *p == '\\') {
            *o++ = '\\';
            *o++ = (char)*p;
        } else if (*p < 0x20) {
            o += sprintf(o, "\\u%04x", *p);
        } else {
            *o++ = (char)*p;
        }
    }
    *o++ = '"';
    *o = '\0';
    return out;
}

static char* read_stdin(void) {
    size_t cap = 4096, n = 0;
    char* buf = (char*)malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n - 1, stdin)) > 0) {
        n += got;
        if (cap - n < 2) {
            char* grown = (char*)realloc(buf, cap *= 2);
            if (grown == NULL) {
                free(buf);
                return NULL;
            }
            buf = grown;
        }
    }
    if (buf) buf[n] = '\0';
    while (buf && n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) buf[--n] = '\0';
    return buf;
}

static int print_logprobs = 0;

static int on_token(int32_t token, const char* text, size_t length, float logprob, void* user) {
    (void)user;
    fwrite(text, 1, length, stdout);
    fflush(stdout);
    if (print_logprobs) fprintf(stderr, "[%d %.4f]\n", token, isnan(logprob) ? 0.0 : (double)logprob);
    return 1;
}

int main(int argc, char** argv) {
    const char* socket_path = NULL;
    const char* raw_body = NULL;
    const char* api_key = getenv("COLIBRI_API_KEY");
    long timeout_s = -1;
    int max_tokens = 256, completions = 0, have_seed = 0;
    long long seed = 0;
    double temperature = -1;
    static const struct option options[] = {
        {"socket", required_argument, 0, 's'}, {"max-tokens", required_argument, 0, 'n'}, {"seed", required_argument, 0, 'S'},
        {"temperature", required_argument, 0, 'T'}, {"completions", no_argument, 0, 'C'}, {"body", required_argument, 0, 'B'},
        {"logprobs", no_argument, 0, 'L'}, {"api-key", required_argument, 0, 'K'}, {"timeout", required_argument, 0, 'W'},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int opt;
    while ((opt = getopt_long(argc, argv, "s:n:h", options, NULL)) != -1) {
        char* end = NULL;
        switch (opt) {
            case 's': socket_path = optarg; break;
            case 'n':
                max_tokens = (int)strtol(optarg, &end, 10);
                if (*end || max_tokens <= 0) return fprintf(stderr, "colibri-client: -n: '%s' is not a positive number\n", optarg), 2;
                break;
            case 'S':
                seed = strtoll(optarg, &end, 10);
                if (*end) return fprintf(stderr, "colibri-client: --seed: '%s' is not a number\n", optarg), 2;
                have_seed = 1;
                break;
            case 'T':
                temperature = strtod(optarg, &end);
                if (*end || temperature < 0) return fprintf(stderr, "colibri-client: --temperature: '%s' is not a number >= 0\n", optarg), 2;
                break;
            case 'C': completions = 1; break;
            case 'B': raw_body = optarg; break;
            case 'L': print_logprobs = 1; break;
            case 'K': api_key = optarg; break;
            case 'W':
                timeout_s = strtol(optarg, &end, 10);
                if (*end || timeout_s < 0 || timeout_s > 4000000) return fprintf(stderr, "colibri-client: --timeout: '%s' is not a number of seconds\n", optarg), 2;
                break;
            case 'h': usage(stdout); return 0;
            default: usage(stderr); return 2;
        }
    }
    if (socket_path == NULL) {
        fputs("colibri-client: usage: --socket PATH is required (see --help)\n", stderr);
        return 2;
    }
    char* body = NULL;
    if (raw_body != NULL) {
        body = strdup(raw_body);
    } else {
        char* message = optind < argc ? strdup(argv[optind]) : read_stdin();
        char* quoted = message ? json_string(message) : NULL;
        free(message);
        if (quoted == NULL) return fputs("colibri-client: out of memory\n", stderr), 1;
        body = (char*)malloc(strlen(quoted) + 256);
        if (body == NULL) return fputs("colibri-client: out of memory\n", stderr), 1;
        int n = completions ? sprintf(body, "{\"prompt\":%s,\"max_tokens\":%d", quoted, max_tokens)
                            : sprintf(body, "{\"messages\":[{\"role\":\"user\",\"content\":%s}],\"max_tokens\":%d", quoted,
                                      max_tokens);
        if (have_seed) n += sprintf(body + n, ",\"seed\":%lld", seed);
        if (temperature >= 0) n += sprintf(body + n, ",\"temperature\":%g", temperature);
        if (print_logprobs) n += sprintf(body + n, completions ? ",\"logprobs\":0" : ",\"logprobs\":true");
        sprintf(body + n, "}");
        free(quoted);
    }
    char error[512];
    colibri_client* client = colibri_client_connect_key(socket_path, api_key, error, sizeof error);
    if (client == NULL) {
        fprintf(stderr, "colibri-client: %s\n", error);
        free(body);
        return 1;
    }
    if (timeout_s >= 0) colibri_client_set_timeout(client, (unsigned)(timeout_s * 1000));
    colibri_client_result r;
    const int rc = colibri_client_request(client, completions ? "completions" : "chat", body, on_token, NULL, &r);
    colibri_client_close(client);
    free(body);
    fputs("\n", stdout);
    if (rc != 0) {
        fprintf(stderr, "colibri-client: %d: %s\n", r.status, r.error);
        return 1;
    }
    fprintf(stderr, "[%s; %u prompt tokens (%u cached), %u generated; prompt %.1f ms, decode %.1f ms]\n", r.finish_reason, r.prompt_tokens,
            r.cached_tokens, r.completion_tokens, r.prompt_ms, r.decode_ms);
    return 0;
}
