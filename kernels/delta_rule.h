// The Gated DeltaNet recurrence (Qwen3-Next, Qwen3.5): one value head's state S [dk][dv] through one token,
//   S ← S·decay;  S ← S + k·((v − Sᵀk)·β)ᵀ;  out = Sᵀq.
// Every loop runs over the dv columns with the dk rows in a fixed order, so each output element is the same chain
// of IEEE operations in every build (the baseline, AVX2 and AVX-512 clones of GCC's function multiversioning, with
// -ffp-contract=off): the bits do not depend on the CPU, the thread or how a prompt was cut into chunks.
#pragma once
#include <cstddef>

namespace colibri::kernels {

// q, k: dk floats (normalised and scaled by the caller); v, out: dv floats; scratch: dv floats. No allocation.
void gated_delta_step(float* state, const float* q, const float* k, const float* v, float decay, float beta, size_t dk,
                      size_t dv, float* out, float* scratch);

// The depthwise causal conv1d of one token's channels followed by SiLU: window holds kernel rows of `channels`
// floats (the oldest first, the token's own last), weight [channels][kernel]; out[c] = silu(Σ_i weight[c][i]·window[i][c]).
void causal_conv_silu(const float* window, const float* weight, size_t channels, size_t kernel, float* out);

}  // namespace colibri::kernels
