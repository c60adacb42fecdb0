// Rotary position embeddings: the inverse frequencies and cos/sin scale a model uses (plain, or YaRN with the
// attention factor and DeepSeek's mscale), worked out once at load as transformers' modeling_rope_utils does
// in float32, and the two ways of rotating a head (halves as NeoX/Llama, adjacent pairs as DeepSeek's
// rope_interleave).
#pragma once
#include <cstdint>
#include <vector>

#include "engine/file/format.h"

namespace colibri {

enum class RopeStyle : uint8_t {
    Halves,  // pairs (i, i + d/2): transformers' rotate_half
    Pairs,   // pairs (2i, 2i + 1): DeepSeek's checkpoints with rope_interleave
};

struct RopeTable {
    std::vector<float> inv_freq;   // rotary_dim / 2 frequencies
    float attention_factor = 1.0f; // multiplies cos and sin (YaRN)
    float softmax_scale = 1.0f;    // extra factor on the attention softmax scale (DeepSeek's mscale_all_dim)
};

// From the hyper-parameters: rotary_dim is the number of dims rotated per head (hp.rotary_dim, or head_dim).
RopeTable rope_table(const format::HyperParams& hp, uint32_t rotary_dim);

// Rotates the first 2·half dims of v by the angles whose cos and sin are c[i], s[i] (i < half).
void rope_halves(float* v, const float* c, const float* s, uint32_t half);
void rope_pairs(float* v, const float* c, const float* s, uint32_t half);

}  // namespace colibri
