// Dequantisation of ggml's block-quantised tensor types (as llama.cpp writes them into GGUF files) to f32.
// Written from the block layouts; every value is computed with the same f32 operations, in the same order, as
// ggml's reference dequantiser and gguf-py's numpy one, so the results are bit-identical to theirs.
#pragma once
#include <cstdint>
#include <optional>

#include "kernels/types.h"
#include "tools/gguf_format.h"

namespace colibri::tools {

using gguf::GgmlType;  // ggml's type ids and block geometry: tools/gguf_format.h

// True for the block-quantised types dequantize_row() handles: Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, MXFP4.
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
//   Q5_K: Q4_K's d, dmin and scales, then 32 bytes holding each value's fifth bit (bit j of byte l for value l
//         of sub-block j), then the nibbles as Q4_K's; x = (d·scale)·q − (dmin·min).
//   Q6_K: per 256 values 128 bytes of low nibbles, 64 bytes of high 2-bit pairs, 16 int8 scales (one per 16
//         values), f16 d; x = (d·scale)·(q − 32).
//   MXFP4: per 32 values an e8m0 byte e and 16 bytes of e2m1 nibbles ordered as Q4_0's; x = v·2^(e − 128)
//         with v the doubled e2m1 value (an integer of −12..12).
void ggml_dequantize_row(uint32_t type, const uint8_t* src, float* dst, uint64_t n);

// The engine's weight type that holds a ggml block type's values unchanged: the block type whose row in
// kernels/weight_types.h names this ggml id (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K and MXFP4); none for any other type.
std::optional<WeightType> ggml_carried_type(uint32_t type);

// n values (whole blocks) of a carried type from ggml's blocks into the engine's: the same bytes, except that
// Q4_K's nibbles move to the interleaved order of kernels/types.h (blocks::q4_k_code_byte); no value changes.
void ggml_carry_row(uint32_t type, const uint8_t* src, uint8_t* dst, uint64_t n);

// The ggml type id of an engine weight type (WeightTypeInfo::ggml_type: all of them have one).
uint32_t ggml_type_of(WeightType type);

// The inverse of ggml_carry_row: n values of an engine type as ggml's blocks (q4_K's nibbles back to ggml's order;
// every other type as it is).
void ggml_export_row(WeightType type, const uint8_t* src, uint8_t* dst, uint64_t n);

}  // namespace colibri::tools
