#include "engine/core/rope.h"

#include <algorithm>
#include <cmath>

namespace colibri {

using namespace format;

namespace {

// YaRN's attention scale for a context extension `scale` (transformers' get_mscale / yarn_get_mscale).
double yarn_mscale(double scale, double mscale) { return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

}  // namespace

RopeTable rope_table(const HyperParams& hp, uint32_t rotary_dim) {
    RopeTable t;
    const uint32_t half = rotary_dim / 2;
    t.inv_freq.resize(half);
    // float32 as transformers computes it: base ** (arange(0, dim, 2) / dim) in float, then 1 / that.
    std::vector<float> pos_freq(half);
    for (uint32_t i = 0; i < half; ++i)
        pos_freq[i] = std::pow(hp.rope_theta, static_cast<float>(2 * i) / static_cast<float>(rotary_dim));
    if (hp.rope_scaling != static_cast<uint8_t>(RopeScaling::Yarn)) {
        for (uint32_t i = 0; i < half; ++i) t.inv_freq[i] = 1.0f / pos_freq[i];
        return t;
    }
    // YaRN (_compute_yarn_parameters of transformers 5.2): frequencies blended between extrapolation and
    // interpolation by a linear ramp over the dims whose wavelengths fall between beta_fast and beta_slow
    // rotations of the original context; the attention factor from factor, mscale and mscale_all_dim.
    const double factor = hp.rope_factor, base = hp.rope_theta, dim = rotary_dim;
    const double orig = hp.rope_original_max_position;
    const double mscale = hp.yarn_mscale, mscale_all = hp.yarn_mscale_all_dim;
    t.attention_factor = mscale != 0.0 && mscale_all != 0.0
                             ? static_cast<float>(yarn_mscale(factor, mscale) / yarn_mscale(factor, mscale_all))
                             : static_cast<float>(yarn_mscale(factor, 1.0));
    // DeepSeek multiplies its softmax scale by mscale(factor, mscale_all_dim)² (DeepseekV3Attention).
    if (mscale_all != 0.0) {
        const double m = yarn_mscale(factor, mscale_all);
        t.softmax_scale = static_cast<float>(m * m);
    }
    const double beta_fast = hp.yarn_beta_fast != 0.0f ? hp.yarn_beta_fast : 32.0;
    const double beta_slow = hp.yarn_beta_slow != 0.0f ? hp.yarn_beta_slow : 1.0;
    auto correction_dim = [&](double rotations) {
        return dim * std::log(orig / (rotations * 2.0 * M_PI)) / (2.0 * std::log(base));
    };
    double low = correction_dim(beta_fast), high = correction_dim(beta_slow);
    if (hp.flags & kYarnTruncate) {
        low = std::floor(low);
        high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, dim - 1.0);
    if (low == high) high += 0.001;  // transformers' guard against a zero-width ramp
    const float lo = static_cast<float>(low), width = static_cast<float>(high - low);
    for (uint32_t i = 0; i < half; ++i) {
        const float ramp = std::clamp((static_cast<float>(i) - lo) / width, 0.0f, 1.0f);
        const float extrapolation = 1.0f - ramp;  // weight of the unscaled frequency
        const float inv_extra = 1.0f / pos_freq[i];
        const float inv_inter = 1.0f / (static_cast<float>(factor) * pos_freq[i]);
        t.inv_freq[i] = inv_inter * (1.0f - extrapolation) + inv_extra * extrapolation;
    }
    return t;
}

void rope_halves(float* v, const float* c, const float* s, uint32_t half) {
    for (uint32_t i = 0; i < half; ++i) {
        const float a = v[i], b = v[i + half];
        v[i] = a * c[i] - b * s[i];
        v[i + half] = b * c[i] + a * s[i];
    }
}

void rope_pairs(float* v, const float* c, const float* s, uint32_t half) {
    for (uint32_t i = 0; i < half; ++i) {
        const float a = v[2 * i], b = v[2 * i + 1];
        v[2 * i] = a * c[i] - b * s[i];
        v[2 * i + 1] = b * c[i] + a * s[i];
    }
}

}  // namespace colibri
