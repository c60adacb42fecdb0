/* Compiled as C: the public header must stay valid C. */
#include "colibri/colibri.h"

int colibri_c_header_check(void) {
    colibri_sampler_params p = colibri_sampler_defaults();
    colibri_chat_message m = {"user", "hi"};
    colibri_text_callback cb = 0;
    int (*follow)(colibri_session*) = colibri_session_follow;
    (void)cb;
    (void)follow;
    return p.top_k >= 0 && m.role != 0 && colibri_model_rank(0) == -1 ? 0 : 1;
}
