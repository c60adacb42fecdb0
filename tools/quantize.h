// Quantisation of f32 rows into the block types of kernels/types.h.
#pragma once
#include <cstddef>
#include <cstdint>

namespace colibri::tools {

// q8_0: per block of 32 values an f16 scale d = max|x| / 127 and 32 int8 q = round(x / d), so x ≈ d·q.
// `values` holds n values, n a multiple of 32; `out` receives n / 32 * 34 bytes.
void quantize_q8_0(const float* values, size_t n, uint8_t* out);

}  // namespace colibri::tools
