// The weight-type table: one row per storage type with its names, block geometry and what the rest of the
// program may do with it. The format (sizes and names), the kernel registry and tuner, the converters, the
// quantiser, the CLI and the Studio's dialogs read this table instead of keeping their own lists, so a new
// type is a row here, its block layout in kernels/types.h and its kernels (docs/KERNELS.md).
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

#include "types.h"

namespace colibri {

struct WeightTypeInfo {
    WeightType type;
    const char* name;          // the .bin's and the CLI's name ("q4_k")
    const char* label;         // ggml's spelling, used in kernel reports ("q4_K")
    uint32_t block_values;     // consecutive columns of one row per block; 1 for the float types
    uint32_t block_bytes;      // bytes per block
    bool matrix;               // every kernel variant has matvec and matmul for it
    bool quantisable;          // the converter can write it from float values (`colibri convert --type`)
    WeightType fallback;       // what the converter stores instead for rows that are not whole blocks
    const char* summary;       // one line for help texts and dialogs
};

inline constexpr WeightTypeInfo kWeightTypeTable[] = {
    {WeightType::F32, "f32", "f32", 1, 4, true, true, WeightType::F32, "32-bit float"},
    {WeightType::F16, "f16", "f16", 1, 2, true, true, WeightType::F16, "16-bit IEEE half"},
    {WeightType::BF16, "bf16", "bf16", 1, 2, true, true, WeightType::BF16, "16-bit brain float"},
    {WeightType::Q8_0, "q8_0", "q8_0", blocks::kQ8_0Values, blocks::kQ8_0Bytes, true, true, WeightType::F16,
     "8.5 bits: blocks of 32 int8 with an f16 scale"},
    {WeightType::Q4_K, "q4_k", "q4_K", blocks::kQ4_KValues, blocks::kQ4_KBytes, true, true, WeightType::Q4_0,
     "4.5 bits: super-blocks of 256 with 6-bit sub-block scales and mins"},
    {WeightType::Q4_0, "q4_0", "q4_0", blocks::kQ4_0Values, blocks::kQ4_0Bytes, true, true, WeightType::F16,
     "4.5 bits: blocks of 32 nibbles with an f16 scale"},
    {WeightType::Q5_K, "q5_k", "q5_K", blocks::kQ5_KValues, blocks::kQ5_KBytes, true, true, WeightType::Q8_0,
     "5.5 bits: super-blocks of 256 with 6-bit sub-block scales and mins"},
    {WeightType::Q6_K, "q6_k", "q6_K", blocks::kQ6_KValues, blocks::kQ6_KBytes, true, true, WeightType::Q8_0,
     "6.6 bits: super-blocks of 256 with an int8 scale per 16 values"},
    {WeightType::MXFP4, "mxfp4", "mxfp4", blocks::kMxfp4Values, blocks::kMxfp4Bytes, true, true, WeightType::F16,
     "4.25 bits: blocks of 32 e2m1 values with a power-of-two scale (gpt-oss)"},
};
inline constexpr size_t kWeightTypeCount = sizeof(kWeightTypeTable) / sizeof(kWeightTypeTable[0]);
static_assert(kWeightTypeCount == kLastWeightType + 1, "one table row per WeightType");

constexpr bool table_in_enum_order() {
    for (size_t i = 0; i < kWeightTypeCount; ++i)
        if (static_cast<size_t>(kWeightTypeTable[i].type) != i) return false;
    return true;
}
static_assert(table_in_enum_order(), "row i describes WeightType i");

inline std::span<const WeightTypeInfo> weight_types() { return kWeightTypeTable; }
// t must be a known type (t <= kLastWeightType).
inline const WeightTypeInfo& weight_type_info(WeightType t) { return kWeightTypeTable[static_cast<size_t>(t)]; }
inline bool weight_type_known(uint32_t t) { return t < kWeightTypeCount; }

// Bytes of one row of `cols` values; cols must be a multiple of the block.
inline size_t weight_row_bytes(WeightType t, size_t cols) {
    const WeightTypeInfo& w = weight_type_info(t);
    return cols / w.block_values * w.block_bytes;
}

}  // namespace colibri
