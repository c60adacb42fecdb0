// NEON: the 16 canonical lanes as four 128-bit registers. Included after <arm_neon.h> (native aarch64,
// neon_kernels.cpp) or after SIMDe's <simde/arm/neon.h> with native aliases (x86, neon_translated_kernels.cpp):
// one source, so "NEON (translated)" runs and is timed on x86 exactly as NEON runs on aarch64.
#pragma once
#include <cstdint>
#include <cstring>

#include "kernels/generic_kernels.h"
#include "kernels/half.h"

namespace colibri::kernels {
namespace {

struct NeonIsa {
    struct V {
        float32x4_t q[4];
    };
    static constexpr size_t kMatvecRows = 4, kMatmulVectors = 4;

    static V zero() {
        const float32x4_t z = vdupq_n_f32(0.0f);
        return {{z, z, z, z}};
    }
    static V load(const float* p) { return {{vld1q_f32(p), vld1q_f32(p + 4), vld1q_f32(p + 8), vld1q_f32(p + 12)}}; }
    static V fma(const V& a, const V& b, const V& c) {
        return {{vfmaq_f32(c.q[0], a.q[0], b.q[0]), vfmaq_f32(c.q[1], a.q[1], b.q[1]),
                 vfmaq_f32(c.q[2], a.q[2], b.q[2]), vfmaq_f32(c.q[3], a.q[3], b.q[3])}};
    }
    static void store(float* p, const V& v) {
        for (int k = 0; k < 4; ++k) vst1q_f32(p + 4 * k, v.q[k]);
    }
    static float half(const uint8_t* p) { return f16_to_f32(generic::load_u16(p)); }
    static uint16x8_t load_u16x8(const uint8_t* p) {
        uint16_t v[8];
        std::memcpy(v, p, sizeof v);  // rows of a block type need not be 2-byte aligned
        return vld1q_u16(v);
    }
    static V f16(const uint8_t* p) {
        const uint16x8_t a = load_u16x8(p), b = load_u16x8(p + 16);
        return {{vcvt_f32_f16(vreinterpret_f16_u16(vget_low_u16(a))), vcvt_f32_f16(vreinterpret_f16_u16(vget_high_u16(a))),
                 vcvt_f32_f16(vreinterpret_f16_u16(vget_low_u16(b))), vcvt_f32_f16(vreinterpret_f16_u16(vget_high_u16(b)))}};
    }
    // Widen, then shift: vshll_n_u16(h, 16) is valid NEON but SIMDe under clang rejects a shift of 16.
    static float32x4_t bf16_4(uint16x4_t h) { return vreinterpretq_f32_u32(vshlq_n_u32(vmovl_u16(h), 16)); }
    static V bf16(const uint8_t* p) {
        const uint16x8_t a = load_u16x8(p), b = load_u16x8(p + 16);
        return {{bf16_4(vget_low_u16(a)), bf16_4(vget_high_u16(a)), bf16_4(vget_low_u16(b)), bf16_4(vget_high_u16(b))}};
    }
    // 16 signed bytes → 16 floats times d.
    static V scaled_i8(int8x16_t bytes, float32x4_t d) {
        const int16x8_t lo = vmovl_s8(vget_low_s8(bytes)), hi = vmovl_s8(vget_high_s8(bytes));
        return {{vmulq_f32(d, vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo)))),
                 vmulq_f32(d, vcvtq_f32_s32(vmovl_s16(vget_high_s16(lo)))),
                 vmulq_f32(d, vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi)))),
                 vmulq_f32(d, vcvtq_f32_s32(vmovl_s16(vget_high_s16(hi))))}};
    }
    static void q8_0(const uint8_t* blk, V* out) {
        const float32x4_t d = vdupq_n_f32(half(blk));
        const auto* q = reinterpret_cast<const int8_t*>(blk + 2);
        out[0] = scaled_i8(vld1q_s8(q), d);
        out[1] = scaled_i8(vld1q_s8(q + 16), d);
    }
    static void q4_0(const uint8_t* blk, V* out) {
        const float32x4_t d = vdupq_n_f32(half(blk));
        const uint8x16_t bytes = vld1q_u8(blk + 2);
        const int8x16_t eight = vdupq_n_s8(8);
        out[0] = scaled_i8(vsubq_s8(vreinterpretq_s8_u8(vandq_u8(bytes, vdupq_n_u8(0x0F))), eight), d);
        out[1] = scaled_i8(vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(bytes, 4)), eight), d);
    }
    // 16 codes 0..15 → step·q − offset (step·q is exact, so the fused form rounds as the plain one does).
    static V q4_k_16(uint8x16_t codes, float32x4_t step, float32x4_t neg_offset) {
        const uint16x8_t lo = vmovl_u8(vget_low_u8(codes)), hi = vmovl_u8(vget_high_u8(codes));
        return {{vfmaq_f32(neg_offset, step, vcvtq_f32_u32(vmovl_u16(vget_low_u16(lo)))),
                 vfmaq_f32(neg_offset, step, vcvtq_f32_u32(vmovl_u16(vget_high_u16(lo)))),
                 vfmaq_f32(neg_offset, step, vcvtq_f32_u32(vmovl_u16(vget_low_u16(hi)))),
                 vfmaq_f32(neg_offset, step, vcvtq_f32_u32(vmovl_u16(vget_high_u16(hi))))}};
    }
    static void q4_k(const uint8_t* q, int shift, float step, float offset, V* out) {
        uint8x16_t a = vld1q_u8(q), b = vld1q_u8(q + 16);
        if (shift != 0) {
            a = vshrq_n_u8(a, 4);
            b = vshrq_n_u8(b, 4);
        } else {
            a = vandq_u8(a, vdupq_n_u8(0x0F));
            b = vandq_u8(b, vdupq_n_u8(0x0F));
        }
        const float32x4_t s = vdupq_n_f32(step), o = vdupq_n_f32(-offset);
        out[0] = q4_k_16(a, s, o);
        out[1] = q4_k_16(b, s, o);
    }
};

}  // namespace
}  // namespace colibri::kernels
