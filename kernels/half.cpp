#include "half.h"

#include <cstring>

namespace colibri::kernels {

float f16_to_f32(uint16_t h) {
    const uint32_t sign = uint32_t(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1F;
    uint32_t mant = h & 0x3FF;
    uint32_t bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else {  // subnormal: renormalise
            exp = 127 - 15 + 1;
            while ((mant & 0x400) == 0) { mant <<= 1; --exp; }
            mant &= 0x3FF;
            bits = sign | (exp << 23) | (mant << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7F800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

uint16_t f32_to_f16(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    const uint16_t sign = uint16_t((x >> 16) & 0x8000);
    const uint32_t abs = x & 0x7FFFFFFFu;
    if (abs >= 0x7F800000u) return uint16_t(sign | 0x7C00 | (abs > 0x7F800000u ? 0x200 : 0));  // inf / NaN
    if (abs >= 0x477FF000u) return uint16_t(sign | 0x7C00);  // rounds to >= 65520: overflow to inf
    if (abs < 0x38800000u) {  // result is subnormal or zero
        if (abs < 0x33000000u) return sign;  // below half the smallest subnormal
        const uint32_t e = abs >> 23;
        const uint32_t m = (abs & 0x7FFFFF) | 0x800000;
        const uint32_t shift = 126 - e;  // 14 + (112 - e) ... brings m to 10-bit subnormal mantissa
        uint32_t r = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1);
        const uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) ++r;
        return uint16_t(sign | r);
    }
    uint32_t r = ((abs >> 13) - ((127 - 15) << 10));
    const uint32_t rem = abs & 0x1FFF;
    if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) ++r;
    return uint16_t(sign | r);
}

float bf16_to_f32(uint16_t b) {
    const uint32_t bits = uint32_t(b) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

uint16_t f32_to_bf16(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t((x >> 16) | 0x40);  // quiet NaN
    const uint32_t rounding = 0x7FFF + ((x >> 16) & 1);
    return uint16_t((x + rounding) >> 16);
}

}  // namespace colibri::kernels
