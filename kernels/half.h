// IEEE half and bfloat16 conversions (portable; the SIMD kernels use F16C/NEON where available).
#pragma once
#include <cstdint>

namespace colibri::kernels {

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);   // round to nearest even
float bf16_to_f32(uint16_t b);
uint16_t f32_to_bf16(float f);  // round to nearest even, NaN kept quiet

}  // namespace colibri::kernels
