/* Compiled as C: the public header must stay valid C. */
#include "colibri/colibri.h"

int colibri_c_header_check(void) {
    colibri_sampler_params p = colibri_sampler_defaults();
    return p.top_k >= 0 ? 0 : 1;
}
