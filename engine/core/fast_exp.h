// e^x without a libm call, in branch-free code the compiler vectorises: the SwiGLU activation and the
// attention softmax evaluate tens of thousands of exponentials per decoded token, and glibc's scalar expf was
// 4-5 % of q4_k decode. Cody–Waite reduction x = n·ln2 + r (|r| ≤ ln2/2, ln2 split in two so n·ln2_hi is
// exact), e^r by Cephes expf's degree-7 polynomial, 2^n assembled in the exponent bits. Within 2 ulp of the
// correctly rounded e^x for x in [−87.3, 88.3] (tested against double-precision exp); below, the smallest
// normal 2^−126 instead of a denormal or 0, above, e^88.3 instead of a larger value or +Inf; NaN gives NaN.
// The router keeps std::exp (its probabilities are compared with the reference's).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace colibri {

inline float fast_exp(float x) {
    constexpr float kLo = -87.33654f, kHi = 88.3f;  // n stays in [−126, 127]
    x = x < kLo ? kLo : x;  // NaN passes both
    x = x > kHi ? kHi : x;
    constexpr float kLog2e = 1.44269504088896341f;
    constexpr float kRound = 12582912.0f;  // 1.5·2^23: t's low mantissa bits hold round(x·log2e)
    const float t = x * kLog2e + kRound;
    const float n = t - kRound;
    float r = x - n * 0.693359375f;  // ln2_hi: 9 significant bits, so n·ln2_hi is exact
    r = r - n * -2.12194440e-4f;     // ln2_lo
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    uint32_t bits;
    std::memcpy(&bits, &t, 4);
    const uint32_t e = (bits - 0x4B400000u + 127u) << 23;  // (n + 127) << 23, unsigned: no overflow for NaN
    float scale;
    std::memcpy(&scale, &e, 4);
    return p * scale;
}

}  // namespace colibri
