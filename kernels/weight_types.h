// The weight-type table: one row per storage type with its names, block geometry, ggml id, what the rest of the
// program may do with it, and its entry points (dequantise, quantise, random rows). The format (sizes and
// names), the kernel registry, tuner and dispatch, the converters and GGUF import/export, the quantiser, the
// random-model writer, the CLI and the Studio's dialogs read this table instead of keeping their own lists or
// switch statements, so a new type is a row here, its block layout in kernels/types.h, its entry points and
// its kernels (docs/ARCHITECTURE.md, "Adding a weight type"; tests/tools/test_table_rows.cpp walks every
// row through every path).
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

#include "types.h"

namespace colibri {

namespace kernels {
class RandomStream;  // kernels/random_blocks.h

// A type's entry points. Each takes or gives `cols` values of one row (a multiple of the type's block).
// Exact dequantisation to f32, as the kernels read the row (kernels/dequantize.cpp).
using DequantizeFn = void (*)(const uint8_t* row, size_t cols, float* out);
// Quantisation of finite values (kernels/quantize.cpp): returns cols, or the first column of the first block
// whose values the type's scales cannot represent (`out` then holds nothing meaningful).
using QuantizeFn = size_t (*)(const float* values, size_t cols, uint8_t* out);
// Random values of standard deviation about `sd`, drawn straight in the type (kernels/random_blocks.cpp).
using RandomFn = void (*)(size_t cols, float sd, RandomStream& r, uint8_t* out);

void dequantize_f32(const uint8_t*, size_t, float*);
void dequantize_f16(const uint8_t*, size_t, float*);
void dequantize_bf16(const uint8_t*, size_t, float*);
void dequantize_q8_0(const uint8_t*, size_t, float*);
void dequantize_q4_k(const uint8_t*, size_t, float*);
void dequantize_q4_0(const uint8_t*, size_t, float*);
void dequantize_q5_k(const uint8_t*, size_t, float*);
void dequantize_q6_k(const uint8_t*, size_t, float*);
void dequantize_mxfp4(const uint8_t*, size_t, float*);

size_t quantize_f32(const float*, size_t, uint8_t*);
size_t quantize_f16(const float*, size_t, uint8_t*);
size_t quantize_bf16(const float*, size_t, uint8_t*);
size_t quantize_q8_0(const float*, size_t, uint8_t*);
size_t quantize_q4_k(const float*, size_t, uint8_t*);
size_t quantize_q4_0(const float*, size_t, uint8_t*);
size_t quantize_q5_k(const float*, size_t, uint8_t*);
size_t quantize_q6_k(const float*, size_t, uint8_t*);
size_t quantize_mxfp4(const float*, size_t, uint8_t*);

void random_f32(size_t, float, RandomStream&, uint8_t*);
void random_f16(size_t, float, RandomStream&, uint8_t*);
void random_bf16(size_t, float, RandomStream&, uint8_t*);
void random_q8_0(size_t, float, RandomStream&, uint8_t*);
void random_q4_k(size_t, float, RandomStream&, uint8_t*);
void random_q4_0(size_t, float, RandomStream&, uint8_t*);
void random_q5_k(size_t, float, RandomStream&, uint8_t*);
void random_q6_k(size_t, float, RandomStream&, uint8_t*);
void random_mxfp4(size_t, float, RandomStream&, uint8_t*);
}  // namespace kernels

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
    uint32_t ggml_type;        // ggml's type id of the same block layout (tools/gguf_format.h): GGUF import and export
    const char* range;         // what bounds the values it can hold, for the quantiser's error ("f16 scales")
    kernels::DequantizeFn dequantize;
    kernels::QuantizeFn quantize;
    kernels::RandomFn random;
};

// Columns: type, name, label, block values and bytes, matrix, quantisable, fallback, summary; ggml id, range;
// dequantise, quantise and random entry points.
inline constexpr WeightTypeInfo kWeightTypeTable[] = {
    {WeightType::F32, "f32", "f32", 1, 4, true, true, WeightType::F32, "32-bit float",
     0, "f32 range", kernels::dequantize_f32, kernels::quantize_f32, kernels::random_f32},
    {WeightType::F16, "f16", "f16", 1, 2, true, true, WeightType::F16, "16-bit IEEE half",
     1, "f16 range", kernels::dequantize_f16, kernels::quantize_f16, kernels::random_f16},
    {WeightType::BF16, "bf16", "bf16", 1, 2, true, true, WeightType::BF16, "16-bit brain float",
     30, "bf16 range", kernels::dequantize_bf16, kernels::quantize_bf16, kernels::random_bf16},
    {WeightType::Q8_0, "q8_0", "q8_0", blocks::kQ8_0Values, blocks::kQ8_0Bytes, true, true, WeightType::F16,
     "8.5 bits: blocks of 32 int8 with an f16 scale",
     8, "f16 scales", kernels::dequantize_q8_0, kernels::quantize_q8_0, kernels::random_q8_0},
    {WeightType::Q4_K, "q4_k", "q4_K", blocks::kQ4_KValues, blocks::kQ4_KBytes, true, true, WeightType::Q4_0,
     "4.5 bits: super-blocks of 256 with 6-bit sub-block scales and mins",
     12, "f16 scales", kernels::dequantize_q4_k, kernels::quantize_q4_k, kernels::random_q4_k},
    {WeightType::Q4_0, "q4_0", "q4_0", blocks::kQ4_0Values, blocks::kQ4_0Bytes, true, true, WeightType::F16,
     "4.5 bits: blocks of 32 nibbles with an f16 scale",
     2, "f16 scales", kernels::dequantize_q4_0, kernels::quantize_q4_0, kernels::random_q4_0},
    {WeightType::Q5_K, "q5_k", "q5_K", blocks::kQ5_KValues, blocks::kQ5_KBytes, true, true, WeightType::Q8_0,
     "5.5 bits: super-blocks of 256 with 6-bit sub-block scales and mins",
     13, "f16 scales", kernels::dequantize_q5_k, kernels::quantize_q5_k, kernels::random_q5_k},
    {WeightType::Q6_K, "q6_k", "q6_K", blocks::kQ6_KValues, blocks::kQ6_KBytes, true, true, WeightType::Q8_0,
     "6.6 bits: super-blocks of 256 with an int8 scale per 16 values",
     14, "f16 scales", kernels::dequantize_q6_k, kernels::quantize_q6_k, kernels::random_q6_k},
    {WeightType::MXFP4, "mxfp4", "mxfp4", blocks::kMxfp4Values, blocks::kMxfp4Bytes, true, true, WeightType::F16,
     "4.25 bits: blocks of 32 e2m1 values with a power-of-two scale (gpt-oss)",
     39, "e8m0 scales", kernels::dequantize_mxfp4, kernels::quantize_mxfp4, kernels::random_mxfp4},
};
inline constexpr size_t kWeightTypeCount = sizeof(kWeightTypeTable) / sizeof(kWeightTypeTable[0]);
static_assert(kWeightTypeCount == kLastWeightType + 1, "one table row per WeightType");

constexpr bool table_in_enum_order() {
    for (size_t i = 0; i < kWeightTypeCount; ++i)
        if (static_cast<size_t>(kWeightTypeTable[i].type) != i) return false;
    return true;
}
static_assert(table_in_enum_order(), "row i describes WeightType i");

constexpr std::span<const WeightTypeInfo> weight_types() { return kWeightTypeTable; }
// t must be a known type (t <= kLastWeightType).
constexpr const WeightTypeInfo& weight_type_info(WeightType t) { return kWeightTypeTable[static_cast<size_t>(t)]; }
inline bool weight_type_known(uint32_t t) { return t < kWeightTypeCount; }

// Bytes of one row of `cols` values; cols must be a multiple of the block.
constexpr size_t weight_row_bytes(WeightType t, size_t cols) {
    const WeightTypeInfo& w = weight_type_info(t);
    return cols / w.block_values * w.block_bytes;
}

}  // namespace colibri
