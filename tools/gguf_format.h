// GGUF's own facts, as llama.cpp's gguf.h and ggml.h define them: the magic and versions, the default alignment,
// the metadata value types and their sizes, the tensor name limit, and the ggml tensor types with their block
// geometry. The reader (tools/gguf.cpp), the exporter (tools/export_gguf.cpp), the dequantiser
// (tools/ggml_dequant.cpp), the fuzzers' layout walker (fuzz/gguf_layout.h) and the seed maker read them here.
// Header-only and without dependencies, so the seed maker and the fuzzers can include it alone.
#pragma once
#include <cstddef>
#include <cstdint>

namespace colibri::gguf {

inline constexpr char kMagic[4] = {'G', 'G', 'U', 'F'};
inline constexpr uint32_t kMagicWord = 0x46554747u;  // kMagic read as a little-endian u32
inline constexpr uint32_t kOldestVersion = 2, kVersion = 3;  // versions read; the version written
inline constexpr uint64_t kDefaultAlignment = 32;            // GGUF_DEFAULT_ALIGNMENT, when general.alignment is absent
inline constexpr uint32_t kMaxAlignment = 65536;             // the largest general.alignment accepted (a power of two)
inline constexpr size_t kMaxTensorName = 64;                 // GGML_MAX_NAME, the terminating NUL included
inline constexpr uint32_t kMaxDims = 4;                      // GGML_MAX_DIMS
inline constexpr size_t kHeaderBytes = 24;                   // magic, version, tensor count, key/value count

// Metadata value types (gguf.h's enum gguf_type).
enum ValueType : uint32_t { kU8, kI8, kU16, kI16, kU32, kI32, kF32, kBool, kString, kArray, kU64, kI64, kF64 };
inline constexpr uint32_t kLastValueType = kF64;

// Bytes of one scalar of a value type; 0 for strings, arrays and unknown types.
constexpr uint64_t scalar_size(uint32_t type) {
    switch (type) {
        case kU8: case kI8: case kBool: return 1;
        case kU16: case kI16: return 2;
        case kU32: case kI32: case kF32: return 4;
        case kU64: case kI64: case kF64: return 8;
        default: return 0;
    }
}

// ggml tensor type ids (ggml.h's enum ggml_type) that GGUF readers meet, each with its block geometry: `block`
// consecutive values of a row take `bytes` bytes. The engine's weight types name theirs in
// kernels/weight_types.h (WeightTypeInfo::ggml_type); tools/ggml_dequant.cpp checks the two agree.
enum class GgmlType : uint32_t {
    F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13,
    Q6_K = 14, BF16 = 30, MXFP4 = 39,
};

struct GgmlTypeInfo {
    GgmlType type;
    const char* name;  // as colibri's messages spell it ("q4_k")
    uint32_t block;
    uint32_t bytes;
};

inline constexpr GgmlTypeInfo kGgmlTypes[] = {
    {GgmlType::F32, "f32", 1, 4},        {GgmlType::F16, "f16", 1, 2},         {GgmlType::Q4_0, "q4_0", 32, 18},
    {GgmlType::Q4_1, "q4_1", 32, 20},    {GgmlType::Q5_0, "q5_0", 32, 22},     {GgmlType::Q5_1, "q5_1", 32, 24},
    {GgmlType::Q8_0, "q8_0", 32, 34},    {GgmlType::Q2_K, "q2_k", 256, 84},    {GgmlType::Q3_K, "q3_k", 256, 110},
    {GgmlType::Q4_K, "q4_k", 256, 144},  {GgmlType::Q5_K, "q5_k", 256, 176},   {GgmlType::Q6_K, "q6_k", 256, 210},
    {GgmlType::BF16, "bf16", 1, 2},      {GgmlType::MXFP4, "mxfp4", 32, 17},
};

// The row of a ggml type id; nullptr for ids not in the table.
constexpr const GgmlTypeInfo* ggml_type_info(uint32_t id) {
    for (const GgmlTypeInfo& t : kGgmlTypes)
        if (static_cast<uint32_t>(t.type) == id) return &t;
    return nullptr;
}

constexpr uint64_t align_up(uint64_t v, uint64_t alignment) { return (v + alignment - 1) / alignment * alignment; }

}  // namespace colibri::gguf
