// Weight storage types known to the kernels. The numeric values are part of the .bin format; the block layouts
// (docs/FORMAT.md, "Weight types") are byte-identical to ggml's, so GGUF tensors of these types carry over as is.
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
}  // namespace blocks

}  // namespace colibri
