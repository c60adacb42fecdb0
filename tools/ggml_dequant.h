// Dequantisation of ggml's block-quantised tensor types (as llama.cpp writes them into GGUF files) to f32.
// Written from the block layouts; every value is computed with the same f32 operations, in the same order, as
// ggml's reference dequantiser and gguf-py's numpy one, so the results are bit-identical to theirs.
#pragma once
#include <cstdint>

namespace colibri::tools {

// ggml type ids (ggml.h's enum ggml_type) of the types this module reads.
enum class GgmlType : uint32_t { F32 = 0, F16 = 1, Q4_0 = 2, Q8_0 = 8, Q4_K = 12, Q6_K = 14, BF16 = 30 };

// True for the block-quantised types dequantize_row() handles: Q8_0, Q4_0, Q4_K, Q6_K.
bool ggml_is_dequantizable(uint32_t type);

// Values per block and bytes per block of a dequantizable type; 0 for any other type.
uint32_t ggml_block_values(uint32_t type);
uint32_t ggml_block_bytes(uint32_t type);

// Dequantises n values (a multiple of the type's block size) from `src`, which holds
// n / ggml_block_values(type) * ggml_block_bytes(type) bytes, into dst. `type` must be dequantizable.
//   Q8_0: per 32 values an f16 scale d and 32 int8 q; x = d·q.
//   Q4_0: per 32 values an f16 scale d and 16 bytes; byte j holds value j (low nibble) and j + 16 (high);
//         x = d·(q − 8).
//   Q4_K: per 256 values f16 d, f16 dmin, 12 bytes of eight 6-bit (scale, min) pairs, 128 bytes of nibbles;
//         each 64 values take 32 bytes, low nibbles first; x = (d·scale)·q − (dmin·min).
//   Q6_K: per 256 values 128 bytes of low nibbles, 64 bytes of high 2-bit pairs, 16 int8 scales (one per 16
//         values), f16 d; x = (d·scale)·(q − 32).
void ggml_dequantize_row(uint32_t type, const uint8_t* src, float* dst, uint64_t n);

}  // namespace colibri::tools
