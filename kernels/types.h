// Weight storage types known to the kernels. The numeric values are part of the .bin format; the block layouts
// (docs/FORMAT.md, "Weight types") are ggml's byte for byte, with one difference: q4_K keeps its codes in an
// interleaved order (q4_k_code_byte below), so a GGUF Q4_K tensor is re-laid out (the same nibbles moved, no
// value changes) on conversion. q5_K, q6_K and mxfp4 are ggml's Q5_K, Q6_K and MXFP4 blocks as they are.
#pragma once
#include <cstddef>
#include <cstdint>

namespace colibri {

enum class WeightType : uint32_t { F32 = 0, F16 = 1, BF16 = 2, Q8_0 = 3, Q4_K = 4, Q4_0 = 5, Q5_K = 6, Q6_K = 7, MXFP4 = 8 };

// The largest value of the enum: types are 0..kLastWeightType.
inline constexpr uint32_t kLastWeightType = static_cast<uint32_t>(WeightType::MXFP4);

// Block geometry of the quantised types: every block covers `values` consecutive columns of one row and takes
// `bytes` bytes; rows hold whole blocks only.
namespace blocks {
inline constexpr size_t kQ8_0Values = 32, kQ8_0Bytes = 34;    // f16 d, 32 × i8
inline constexpr size_t kQ4_0Values = 32, kQ4_0Bytes = 18;    // f16 d, 16 bytes of nibbles
inline constexpr size_t kQ4_KValues = 256, kQ4_KBytes = 144;  // f16 d, f16 dmin, 12 bytes of scales, 128 of nibbles
inline constexpr size_t kQ4_KSubBlock = 32;                    // values per sub-block (8 per super-block)
inline constexpr size_t kQ4_KScaleBytes = 12;
// q5_K: f16 d, f16 dmin, the 12 scale bytes of q4_K (q4_k_scale_min), 32 bytes of fifth bits, 128 of nibbles.
inline constexpr size_t kQ5_KValues = 256, kQ5_KBytes = 176;
inline constexpr size_t kQ5_KHighBits = 16, kQ5_KCodes = 48;  // offsets of the fifth bits and of the nibbles
// q6_K: 128 bytes of low nibbles, 64 of high bit pairs, 16 int8 scales (one per 16 values), f16 d last.
inline constexpr size_t kQ6_KValues = 256, kQ6_KBytes = 210;
inline constexpr size_t kQ6_KHighBits = 128, kQ6_KScales = 192, kQ6_KScale = 208;
// mxfp4 (OCP microscaling FP4): an e8m0 scale byte, then 16 bytes of e2m1 nibbles as q4_0 orders them.
inline constexpr size_t kMxfp4Values = 32, kMxfp4Bytes = 17;

// The 6-bit scale `sc` and min `mn` of sub-block j (0..7) of a q4_K super-block, from its 12 scale bytes s:
// sub-blocks 0..3 keep theirs in the low six bits of s[j] (scale) and s[j + 4] (min); sub-blocks 4..7 keep the
// low four bits in s[j + 4] (scale in the low nibble, min in the high one) and the top two bits in bits 6..7
// of s[j - 4] (scale) and s[j] (min).
inline void q4_k_scale_min(const uint8_t* s, size_t j, uint8_t* sc, uint8_t* mn) {
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = static_cast<uint8_t>((s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4));
        *mn = static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

// The 128 code bytes of a q4_K super-block (format 2.0; docs/FORMAT.md): four pieces of 32 bytes; byte 4j + b of
// piece p holds code 4p + b of sub-block j in its low nibble and code 16 + 4p + b in its high nibble
// (j = 0..7, b = 0..3). ggml instead stores sub-blocks 2i and 2i + 1 as the low and high nibbles of 32
// consecutive bytes. Why: a vector register loaded from this layout holds, in its 32-bit lane j, four codes
// of sub-block j, so one dot-product instruction per register (VNNI, pmaddubsw, NEON) accumulates every
// sub-block in its own lane, and the kernels need no horizontal reduction per sub-block (about a quarter of
// the q4_K matvec's instructions in ggml's order). The values and the arithmetic are the same.
inline constexpr size_t q4_k_code_byte(size_t j, size_t e) { return 32 * ((e % 16) / 4) + 4 * j + e % 4; }
inline constexpr unsigned q4_k_code_shift(size_t e) { return e < 16 ? 0 : 4; }
inline uint8_t q4_k_code(const uint8_t* qs, size_t j, size_t e) {
    return static_cast<uint8_t>((qs[q4_k_code_byte(j, e)] >> q4_k_code_shift(e)) & 0x0F);
}

// The 5-bit code (0..31) of value e (0..31) of sub-block j (0..7) of a q5_K super-block `b`: the low four bits are
// nibble j % 2 of code byte 32·(j / 2) + e, the fifth is bit j of high-bit byte e (ggml's Q5_K order).
inline uint8_t q5_k_code(const uint8_t* b, size_t j, size_t e) {
    const uint8_t lo = (b[kQ5_KCodes + 32 * (j / 2) + e] >> (4 * (j % 2))) & 0x0F;
    return static_cast<uint8_t>(lo | (((b[kQ5_KHighBits + e] >> j) & 1) << 4));
}

// The 6-bit code (0..63; the weight is code − 32) of value e (0..31) of 32-value unit u (0..7) of a q6_K
// super-block `b`: half n = u / 4 holds units 4n .. 4n + 3 in low-nibble bytes 64n .. 64n + 63 (unit k: byte
// 32·(k % 2) + e, nibble k / 2) and high-bit bytes 32n .. 32n + 31 (bits 2k, 2k + 1 of byte e). ggml's Q6_K order.
inline uint8_t q6_k_code(const uint8_t* b, size_t u, size_t e) {
    const size_t n = u / 4, k = u % 4;
    const uint8_t lo = (b[64 * n + 32 * (k % 2) + e] >> (4 * (k / 2))) & 0x0F;
    return static_cast<uint8_t>(lo | (((b[kQ6_KHighBits + 32 * n + e] >> (2 * k)) & 3) << 4));
}
// The int8 scale of values e of unit u of a q6_K super-block: scale 2u for e < 16, 2u + 1 after.
inline int8_t q6_k_scale(const uint8_t* b, size_t u, size_t e) { return static_cast<int8_t>(b[kQ6_KScales + 2 * u + e / 16]); }

// mxfp4: the e2m1 value of each nibble, doubled so that it is an integer (ggml's kvalues_mxfp4): 0, 0.5, 1, 1.5,
// 2, 3, 4, 6 and their negatives, times 2. The scale byte e stands for 2^(e − 127); with the doubled values the
// factor applied is 2^(e − 128), mxfp4_scale below.
inline constexpr int8_t kMxfp4Doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// 2^(e − 128) as f32, exact (denormal for e < 2), as ggml's ggml_e8m0_to_fp32_half.
inline float mxfp4_scale(uint8_t e) {
    const uint32_t bits = e < 2 ? uint32_t(0x00200000u) << e : uint32_t(e - 1) << 23;
    float f;
    __builtin_memcpy(&f, &bits, 4);
    return f;
}
}  // namespace blocks

}  // namespace colibri
