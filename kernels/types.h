// Weight storage types known to the kernels. The numeric values are part of the .bin format; the block layouts
// (docs/FORMAT.md, "Weight types") follow ggml's, with one difference: q4_K keeps its codes in an interleaved
// order (q4_k_code_byte below), so a GGUF q4_K tensor is re-laid out (by re-quantising) on conversion.
#pragma once
#include <cstddef>
#include <cstdint>

namespace colibri {

enum class WeightType : uint32_t { F32 = 0, F16 = 1, BF16 = 2, Q8_0 = 3, Q4_K = 4, Q4_0 = 5 };

// The largest value of the enum: types are 0..kLastWeightType.
inline constexpr uint32_t kLastWeightType = static_cast<uint32_t>(WeightType::Q4_0);

// Block geometry of the quantised types: every block covers `values` consecutive columns of one row and takes
// `bytes` bytes; rows hold whole blocks only.
namespace blocks {
inline constexpr size_t kQ8_0Values = 32, kQ8_0Bytes = 34;    // f16 d, 32 × i8
inline constexpr size_t kQ4_0Values = 32, kQ4_0Bytes = 18;    // f16 d, 16 bytes of nibbles
inline constexpr size_t kQ4_KValues = 256, kQ4_KBytes = 144;  // f16 d, f16 dmin, 12 bytes of scales, 128 of nibbles
inline constexpr size_t kQ4_KSubBlock = 32;                    // values per sub-block (8 per super-block)
inline constexpr size_t kQ4_KScaleBytes = 12;

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
}  // namespace blocks

}  // namespace colibri
