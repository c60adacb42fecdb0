/* A program on the C API as an embedder writes it, run by tests/tools/mpi_ranks_test.sh in one process and under
 * `mpirun -np 2`: rank 0 generates greedily from a prompt, waits, then chats two turns (the second reusing the first's
 * cached prefix), printing the ids and the replies; every other rank follows rank 0's session (after checking that
 * it may not use the session itself). Both runs print the same.
 * Usage: c_api_ranks MODEL.bin [PAUSE_SECONDS] */
#define _POSIX_C_SOURCE 200809L
#include <colibri/colibri.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int print_text(const char* text, size_t length, int32_t token, void* user) {
    (void)token;
    (void)user;
    fwrite(text, 1, length, stdout);
    return 1;
}

/* Rank 0: what one process does too. */
static int lead(colibri_model* model, colibri_session* session, double pause) {
    colibri_sampler_params greedy = colibri_sampler_defaults();
    greedy.greedy = 1;
    int32_t prompt[64], out[24];
    const int32_t n = colibri_tokenize(model, "Once upon a time", 1, prompt, 64);
    const int32_t got = n > 0 && n <= 64 ? colibri_generate(session, prompt, (size_t)n, 24, &greedy, out, 24, NULL, NULL) : -1;
    if (got <= 0) return fprintf(stderr, "generate: %s\n", colibri_last_error()), 1;
    for (int32_t i = 0; i < got; ++i) printf("%s%d", i ? "," : "ids: ", out[i]);
    printf("\n");
    fflush(stdout);
    /* Longer than the followers' wait limit: the session's heartbeat keeps them waiting. */
    const struct timespec idle = {(time_t)pause, (long)((pause - (double)(time_t)pause) * 1e9)};
    nanosleep(&idle, NULL);
    colibri_session_reset(session);
    colibri_chat* chat = colibri_chat_new(session);
    char first_reply[4096];
    colibri_chat_message turns[3] = {{"user", "What is 23 plus 45?"}, {"assistant", first_reply}, {"user", "Who are you?"}};
    for (size_t turn = 0; turn < 2; ++turn) {
        if (colibri_chat_turn(chat, turns, 2 * turn + 1, 96, &greedy, print_text, NULL) < 0)
            return fprintf(stderr, "chat: %s\n", colibri_last_error()), colibri_chat_free(chat), 1;
        printf("\n");
        snprintf(first_reply, sizeof first_reply, "%s", colibri_chat_reply(chat));
    }
    colibri_chat_free(chat);
    return 0;
}

int main(int argc, char** argv) {
    if (argc < 2) return 2;
    colibri_model* model = colibri_model_open(argv[1]);
    if (model == NULL) return fprintf(stderr, "open: %s\n", colibri_last_error()), 1;
    colibri_session* session = colibri_session_new(model, 1, 512);
    if (session == NULL) return fprintf(stderr, "session: %s\n", colibri_last_error()), colibri_model_close(model), 1;
    const int rank = colibri_model_rank(model);
    fprintf(stderr, "rank %d of %d\n", rank, colibri_model_rank_count(model));
    int status = 0;
    if (rank == 0) {
        status = lead(model, session, argc > 2 ? atof(argv[2]) : 0.0);
    } else {
        const int32_t token = 1;
        if (colibri_session_eval(session, &token, 1, NULL) != -1 || strstr(colibri_last_error(), "follows rank 0") == NULL) {
            fprintf(stderr, "rank %d: a follower's own eval was not refused\n", rank);
            status = 1;
        }
        if (colibri_session_follow(session) != 0) {
            fprintf(stderr, "rank %d: follow: %s\n", rank, colibri_last_error());
            status = 1;
        }
    }
    colibri_session_free(session);
    colibri_model_close(model);
    return status;
}
