#include "quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/half.h"

namespace colibri::tools {

void quantize_q8_0(const float* values, size_t n, uint8_t* out) {
    for (size_t b = 0; b < n / 32; ++b) {
        const float* x = values + b * 32;
        float amax = 0.0f;
        for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
        const uint16_t d_bits = kernels::f32_to_f16(amax / 127.0f);
        // Quantise against the scale as stored, so rounding the scale to f16 costs nothing extra.
        const float d = kernels::f16_to_f32(d_bits);
        const float inv = d > 0.0f ? 1.0f / d : 0.0f;
        uint8_t* blk = out + b * 34;
        std::memcpy(blk, &d_bits, 2);
        for (int i = 0; i < 32; ++i) {
            const float q = std::nearbyint(x[i] * inv);
            blk[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(std::clamp(q, -127.0f, 127.0f)));
        }
    }
}

}  // namespace colibri::tools
