/* libcolibri C API: load a .bin model, tokenize, evaluate, generate. For embedding Colibri in other
 * programs and languages. All functions are thread-compatible: one session per thread at a time.
 * Errors: functions return NULL or a negative value and colibri_last_error() says why (per thread). */
#ifndef COLIBRI_COLIBRI_H
#define COLIBRI_COLIBRI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct colibri_model colibri_model;
typedef struct colibri_session colibri_session;
typedef struct colibri_chat colibri_chat;

typedef struct colibri_sampler_params {
    int greedy;               /* non-zero: always the most likely token */
    float temperature;
    int32_t top_k;            /* <= 0: off */
    float top_p;              /* >= 1: off */
    float min_p;              /* <= 0: off */
    float repetition_penalty; /* 1: off */
    uint64_t seed;
} colibri_sampler_params;

/* Called for each generated token; return 0 to stop. */
typedef int (*colibri_token_callback)(int32_t token, void* user);
/* Called for each generated token of a chat turn with the text it completes (UTF-8, never a partial
 * character; may be empty, and is empty for the end-of-turn token); return 0 to stop. */
typedef int (*colibri_text_callback)(const char* text, size_t length, int32_t token, void* user);

typedef struct colibri_chat_message {
    const char* role;    /* "system", "user", "assistant" */
    const char* content; /* UTF-8 */
} colibri_chat_message;

const char* colibri_version(void);
const char* colibri_last_error(void);
colibri_sampler_params colibri_sampler_defaults(void);

colibri_model* colibri_model_open(const char* path);

/* Models larger than RAM: with ram_budget > 0 the weights stay within that many bytes. What every token uses
 * stays mapped; routed experts live in a cache of slots per layer, read from the file on a miss. Logits are
 * the same as without a budget. Fails when the budget cannot hold what every token uses plus top-k slots. */
typedef struct colibri_model_options {
    uint64_t ram_budget;      /* bytes; 0: the whole model mapped */
    const char* cache_policy; /* "lru" (also NULL) or "lfru" */
    int prefetch;             /* nonzero: read the next MoE layer's predicted experts ahead of use */
} colibri_model_options;
colibri_model_options colibri_model_options_defaults(void);
colibri_model* colibri_model_open_with(const char* path, const colibri_model_options* options);

/* The expert cache's counters since the model was opened; returns 0, or -1 for a model without a budget. */
typedef struct colibri_cache_stats {
    uint64_t hits;
    uint64_t misses;
    uint64_t bytes_read;
    uint64_t stall_ns;         /* time evaluation waited for expert reads */
    uint32_t slots_per_layer;
    uint64_t prefetched;       /* experts read ahead on a prediction (prefetch) */
    uint64_t predicted;        /* experts used where a prediction had been made */
    uint64_t predicted_right;  /* of those, the ones predicted */
} colibri_cache_stats;
int colibri_model_cache_stats(const colibri_model* model, colibri_cache_stats* stats);
void colibri_model_close(colibri_model* model);
int32_t colibri_model_vocab_size(const colibri_model* model);
int32_t colibri_model_layer_count(const colibri_model* model);
int32_t colibri_model_expert_count(const colibri_model* model);
const char* colibri_model_family(const colibri_model* model);

/* Returns the number of ids the text encodes to (which may exceed capacity: call again with more), or -1. */
int32_t colibri_tokenize(const colibri_model* model, const char* text, int add_special, int32_t* ids, size_t capacity);
/* Writes UTF-8 text with a terminating NUL; returns its length without the NUL (may exceed capacity), or -1. */
int32_t colibri_detokenize(const colibri_model* model, const int32_t* ids, size_t count, char* text, size_t capacity);

/* threads = 0: all cores; context = 0: min(model, 4096); a context beyond the model's maximum is an error (NULL). */
colibri_session* colibri_session_new(const colibri_model* model, unsigned threads, uint32_t context);
void colibri_session_free(colibri_session* session);
void colibri_session_reset(colibri_session* session);
uint32_t colibri_session_position(const colibri_session* session);
/* Router of the MoE layers: "exact" (what the model's family computes, the default) or "lut" (the integer,
 * table-exp router; softmax routers only). Returns 0, or -1 for any other name or a model the LUT cannot route. */
int colibri_session_set_router(colibri_session* session, const char* router);
/* Feeds tokens; when logits is not NULL the logits after the last token are copied there (vocab floats).
 * Returns 0 or -1. */
int colibri_session_eval(colibri_session* session, const int32_t* tokens, size_t count, float* logits);
/* Evaluates the prompt, then generates up to max_tokens (stopping at the model's end-of-turn tokens).
 * Returns the number of new ids written to out (at most capacity), or -1. */
int32_t colibri_generate(colibri_session* session, const int32_t* prompt, size_t prompt_count, int32_t max_tokens,
                         const colibri_sampler_params* params, int32_t* out, size_t capacity,
                         colibri_token_callback callback, void* user);

/* Expert parallelism (docs/DISTRIBUTED.md). Launched by `mpirun -np N`, colibri_model_open and
 * colibri_model_open_with join the N processes (each opens the same model, in the same order): each holds its share
 * of the routed experts (round-robin, or the `colibri placement` file named by COLIBRI_PLACEMENT) and they exchange
 * expert outputs after every MoE layer, each waiting at most COLIBRI_RANK_TIMEOUT seconds (default 60) for the
 * others. Rank 0 drives: it uses its session as one process does, and tokens and logits are one process's. Every
 * other rank makes its session alike (the same threads and context) and calls colibri_session_follow, which does
 * what rank 0's session does until rank 0 frees it; there the calls that use a session fail (-1). Across ranks a
 * model has one session at a time and no expert hot-swap; the program does not call MPI itself meanwhile.
 *
 *     colibri_model* m = colibri_model_open(path);
 *     colibri_session* s = colibri_session_new(m, 0, 0);
 *     if (colibri_model_rank(m) == 0) n = colibri_generate(s, prompt, count, 32, &params, out, 32, NULL, NULL);
 *     else if (colibri_session_follow(s) != 0) fprintf(stderr, "%s\n", colibri_last_error());
 *     colibri_session_free(s);
 *     colibri_model_close(m);
 */
int32_t colibri_model_rank(const colibri_model* model);       /* this process's rank: 0 in one process; -1 for NULL */
int32_t colibri_model_rank_count(const colibri_model* model); /* the ranks: 1 in one process; -1 for NULL */
/* Every rank but 0: follows rank 0's session. Returns 0 once rank 0 freed its session, or -1 when called on rank 0
 * (or in one process) or when rank 0 stopped answering within the rank timeout. */
int colibri_session_follow(colibri_session* session);

/* How the model routes (what its family really does, not assuming a softmax). */
typedef struct colibri_routing_info {
    const char* scoring;    /* "softmax" (over all experts), "sigmoid" (each expert's logit on its own) or
                               "softmax_selected" (a softmax over the top-k logits only) */
    int renormalise;        /* non-zero: the selected scores are divided by their sum */
    float scaling;          /* every weight is multiplied by this (routed_scaling_factor); sigmoid routers'
                               weights then sum to it */
    int selection_bias;     /* non-zero: experts are selected by score + a learned bias the weights never see */
    uint32_t n_group;       /* > 1: experts in n_group groups of consecutive ids, selection limited to */
    uint32_t topk_group;    /*   the topk_group best groups */
    uint32_t n_experts;     /* routed experts per MoE layer */
    uint32_t top_k;         /* experts selected per token */
} colibri_routing_info;
/* Fills info; returns 0, or -1 for a null argument. */
int colibri_model_routing(const colibri_model* model, colibri_routing_info* info);

/* One token's routing at one MoE layer, valid during the callback only. */
typedef struct colibri_route {
    uint32_t layer;
    uint32_t position;
    uint32_t k;
    const int32_t* experts;          /* k ids, by descending weight */
    const float* weights;            /* k: what each expert's output is multiplied by */
    const float* selection_scores;   /* k: the value each expert was selected by (score + selection bias) */
    uint32_t group_count;            /* 0 without groups */
    const uint32_t* groups;          /* the groups selection was limited to, ascending */
} colibri_route;
typedef void (*colibri_route_callback)(const colibri_route* route, void* user);
/* Calls callback for every token and MoE layer the session evaluates from now on; NULL stops. Returns 0 or -1. */
int colibri_session_set_route_callback(colibri_session* session, colibri_route_callback callback, void* user);

/* A conversation on a session (the same chat service as `colibri chat` and the Studio): each turn renders
 * the whole conversation with the model's chat template, evaluates only what the session does not already
 * hold, and streams the reply until an end-of-turn token or max_tokens. The chat uses the session; free the
 * chat before the session. */
colibri_chat* colibri_chat_new(colibri_session* session);
void colibri_chat_free(colibri_chat* chat);
/* Forgets what the session holds: the next turn evaluates from scratch. */
void colibri_chat_reset(colibri_chat* chat);
/* messages: the whole conversation so far, ending with the user's message. Returns the number of tokens
 * generated (the end-of-turn token included), or -1. */
int32_t colibri_chat_turn(colibri_chat* chat, const colibri_chat_message* messages, size_t count, int32_t max_tokens,
                          const colibri_sampler_params* params, colibri_text_callback callback, void* user);
/* The last turn's reply as a message for the next turn (end-of-turn and special tokens removed); valid until
 * the next turn. */
const char* colibri_chat_reply(const colibri_chat* chat);

/* Expert hot-swap: replaces the weights of expert `expert` in `layer` with those of expert
 * (donor_layer, donor_expert) of the .bin / .bin.zst at donor_path (same weight types and shapes). Safe while
 * sessions of this model generate on other threads: the token in flight finishes first, the next waits for
 * the copy. Returns 0, or -1 with colibri_last_error() set. */
int colibri_model_swap_expert(colibri_model* model, uint32_t layer, uint32_t expert, const char* donor_path,
                              uint32_t donor_layer, uint32_t donor_expert);

#ifdef __cplusplus
}
#endif

#endif /* COLIBRI_COLIBRI_H */
