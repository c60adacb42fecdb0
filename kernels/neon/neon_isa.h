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
    static V mul(const V& a, const V& b) {
        return {{vmulq_f32(a.q[0], b.q[0]), vmulq_f32(a.q[1], b.q[1]), vmulq_f32(a.q[2], b.q[2]), vmulq_f32(a.q[3], b.q[3])}};
    }

    static V f16_strided(const uint8_t* p, size_t stride, size_t nb) {
        uint16_t h[16] = {};
        for (size_t k = 0; k < nb; ++k) h[k] = generic::load_u16(p + k * stride);
        return f16(reinterpret_cast<const uint8_t*>(h));
    }
    // canonical::sum_lanes: lane k += lane k + 8, + 4, + 2, + 1, as vector additions.
    static float sum_lanes(const V& v) {
        const float32x4_t b = vaddq_f32(vaddq_f32(v.q[0], v.q[2]), vaddq_f32(v.q[1], v.q[3]));
        const float32x2_t c = vadd_f32(vget_low_f32(b), vget_high_f32(b));
        return vget_lane_f32(c, 0) + vget_lane_f32(c, 1);
    }
    static V halves(float a, float b) {
        const float32x4_t va = vdupq_n_f32(a), vb = vdupq_n_f32(b);
        return {{va, va, vb, vb}};
    }
    static V u8_16(uint64_t lo, uint64_t hi) {
        const uint16x8_t l = vmovl_u8(vcreate_u8(lo)), h = vmovl_u8(vcreate_u8(hi));
        return {{vcvtq_f32_u32(vmovl_u16(vget_low_u16(l))), vcvtq_f32_u32(vmovl_u16(vget_high_u16(l))),
                 vcvtq_f32_u32(vmovl_u16(vget_low_u16(h))), vcvtq_f32_u32(vmovl_u16(vget_high_u16(h)))}};
    }
    // Integer path (canonical.h, 2b), plain NEON widening multiplies (no dot-product extension): one unit's
    // 32 products as i8 × i8 → i16 (vmull/vmlal: two products per lane, |sum| ≤ 2·128·127 < 2^15), then
    // pairwise to i32 (vpaddl/vpadal): four partial sums per unit.
    static int32x4_t dot32(int8x16_t w0, int8x16_t w1, const int8_t* x) {
        const int8x16_t x0 = vld1q_s8(x), x1 = vld1q_s8(x + 16);
        int16x8_t p0 = vmull_s8(vget_low_s8(w0), vget_low_s8(x0));
        p0 = vmlal_s8(p0, vget_high_s8(w0), vget_high_s8(x0));
        int16x8_t p1 = vmull_s8(vget_low_s8(w1), vget_low_s8(x1));
        p1 = vmlal_s8(p1, vget_high_s8(w1), vget_high_s8(x1));
        return vpadalq_s16(vpaddlq_s16(p0), p1);
    }
    // Per unit the 32 weights as signed bytes (q4_0: nibble − 8; q4_K, q5_K: the codes; q6_K: code − 32, with
    // its two int8 scales in sc; mxfp4: the doubled e2m1 values).
    struct Chunk {
        int8x16_t w[32];
        int32_t sc[32];
    };
    template <WeightType T>
    static void prepare(const uint8_t* row, size_t g0, size_t nb, Chunk& c) {
        for (size_t k = 0; k < 16; ++k) {
            const size_t g = g0 + k;
            if (k >= nb) {
                c.w[2 * k] = c.w[2 * k + 1] = vdupq_n_s8(0);
                c.sc[2 * k] = c.sc[2 * k + 1] = 0;
            } else if constexpr (T == WeightType::Q8_0) {
                const auto* w = reinterpret_cast<const int8_t*>(row + g * blocks::kQ8_0Bytes + 2);
                c.w[2 * k] = vld1q_s8(w);
                c.w[2 * k + 1] = vld1q_s8(w + 16);
            } else if constexpr (T == WeightType::Q4_0) {
                const uint8x16_t b = vld1q_u8(row + g * blocks::kQ4_0Bytes + 2);
                const int8x16_t eight = vdupq_n_s8(8);
                c.w[2 * k] = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(b, vdupq_n_u8(0x0F))), eight);
                c.w[2 * k + 1] = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(b, 4)), eight);
            } else if constexpr (T == WeightType::Q5_K) {
                // Unit j: nibble j % 2 of code bytes 32·(j / 2) .., the fifth bit is bit j of the high-bit bytes.
                const uint8_t* b = row + (g / 8) * blocks::kQ5_KBytes;
                const size_t j = g % 8;
                const int8x16_t shift = vdupq_n_s8(int8_t(-int(4 * (j % 2)))), hshift = vdupq_n_s8(int8_t(-int(j)));
                const auto code = [&](size_t h) {
                    const uint8x16_t lo = vandq_u8(vshlq_u8(vld1q_u8(b + blocks::kQ5_KCodes + 32 * (j / 2) + 16 * h), shift), vdupq_n_u8(0x0F));
                    const uint8x16_t hb = vandq_u8(vshlq_u8(vld1q_u8(b + blocks::kQ5_KHighBits + 16 * h), hshift), vdupq_n_u8(1));
                    return vreinterpretq_s8_u8(vorrq_u8(lo, vshlq_n_u8(hb, 4)));
                };
                c.w[2 * k] = code(0);  // (two statements, not a loop over the halves: see q6_K)
                c.w[2 * k + 1] = code(1);
            } else if constexpr (T == WeightType::Q6_K) {
                // Unit u = 4n + q: nibble q / 2 of low bytes 64n + 32·(q % 2) .., bits 2q, 2q + 1 of high bytes
                // 32n ..; minus 32.
                const uint8_t* b = row + (g / 8) * blocks::kQ6_KBytes;
                const size_t u = g % 8, n = u / 4, q = u % 4;
                const int8x16_t shift = vdupq_n_s8(int8_t(-int(4 * (q / 2)))), hshift = vdupq_n_s8(int8_t(-int(2 * q)));
                const auto code = [&](size_t h) {
                    const uint8x16_t lo = vandq_u8(vshlq_u8(vld1q_u8(b + 64 * n + 32 * (q % 2) + 16 * h), shift), vdupq_n_u8(0x0F));
                    const uint8x16_t hi = vandq_u8(vshlq_u8(vld1q_u8(b + blocks::kQ6_KHighBits + 32 * n + 16 * h), hshift), vdupq_n_u8(3));
                    return vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, vshlq_n_u8(hi, 4))), vdupq_n_s8(32));
                };
                // Two statements: written as a loop over the halves, GCC 12 with SIMDe's vector types left c.w
                // unwritten for the q6_K instantiation of qdot_vectors (-Wmaybe-uninitialized, wrong sums).
                c.w[2 * k] = code(0);
                c.w[2 * k + 1] = code(1);
                c.sc[2 * k] = int8_t(b[blocks::kQ6_KScales + 2 * u]);
                c.sc[2 * k + 1] = int8_t(b[blocks::kQ6_KScales + 2 * u + 1]);
            } else if constexpr (T == WeightType::MXFP4) {
                // The nibbles (as q4_0) through a table of the doubled e2m1 values.
                const uint8x16_t b = vld1q_u8(row + g * blocks::kMxfp4Bytes + 1);
                const int8x16_t table = vld1q_s8(blocks::kMxfp4Doubled);
                c.w[2 * k] = vqtbl1q_s8(table, vandq_u8(b, vdupq_n_u8(0x0F)));
                c.w[2 * k + 1] = vqtbl1q_s8(table, vshrq_n_u8(b, 4));
            } else {
                // q4_K: the 16 bytes k % 8 of super-block k / 8's codes (piece p = (k % 8) / 2, half k % 2:
                // sub-blocks 4·(k % 2) .. + 3, four codes each per nibble; blocks::q4_k_code_byte), low nibbles
                // in w[2k], high in w[2k + 1].
                const uint8_t* q = row + (g0 / 8 + k / 8) * blocks::kQ4_KBytes + 4 + blocks::kQ4_KScaleBytes;
                const uint8x16_t b = vld1q_u8(q + 16 * (k % 8));
                c.w[2 * k] = vreinterpretq_s8_u8(vandq_u8(b, vdupq_n_u8(0x0F)));
                c.w[2 * k + 1] = vreinterpretq_s8_u8(vshrq_n_u8(b, 4));
            }
        }
    }
    template <WeightType T>
    static const int8_t* matmul_activations(const canonical::QuantizedActivations& qa, size_t n) {
        if constexpr (T == WeightType::Q4_K) return canonical::q4_k_activations(qa, n);
        else return qa.q;
    }
    template <WeightType T>
    static V isums(const Chunk& c, size_t nb, const int8_t* qx, const int32_t*) {
        V r;
        if constexpr (T == WeightType::Q4_K) {
            // Units 4t .. 4t + 3 (super-block t / 2, half t % 2): products as i16 per (unit, code position),
            // eight each (at most 8·15·128 = 15360: no overflow), then pairwise to the four totals. qx in
            // canonical::q4_k_activations' order (half sh of piece p, nibble h: 16 bytes on from its offset).
            #pragma GCC unroll 4
            for (size_t t = 0; t < 4; ++t) {
                if (t >= 2 && nb <= 8) {
                    r.q[t] = vdupq_n_f32(0.0f);
                    continue;
                }
                const size_t s = t / 2, sh = t % 2;
                int16x8_t lo = vdupq_n_s16(0), hi = vdupq_n_s16(0);
                #pragma GCC unroll 8
                for (size_t m = 0; m < 8; ++m) {
                    const size_t p = m / 2, h = m % 2;
                    const int8x16_t w = c.w[2 * (8 * s + 2 * p + sh) + h];
                    const int8x16_t x = vld1q_s8(qx + 256 * s + canonical::q4_k_activation_offset(p, h) + 16 * sh);
                    lo = vmlal_s8(lo, vget_low_s8(w), vget_low_s8(x));
                    hi = vmlal_s8(hi, vget_high_s8(w), vget_high_s8(x));
                }
                r.q[t] = vcvtq_f32_s32(vpaddq_s32(vpaddlq_s16(lo), vpaddlq_s16(hi)));
            }
            return r;
        }
        #pragma GCC unroll 4
        for (size_t t = 0; t < 4; ++t) {
            int32x4_t p[4];
            #pragma GCC unroll 4
            for (size_t k = 0; k < 4; ++k) {
                const size_t u = 4 * t + k;
                if constexpr (T == WeightType::Q6_K) {
                    // Each 16 values' products (|·| ≤ 2·32·127 per i16 lane) to i32, times that 16's scale.
                    const int8x16_t x0 = vld1q_s8(qx + 32 * u), x1 = vld1q_s8(qx + 32 * u + 16);
                    const int8x16_t w0 = c.w[2 * u], w1 = c.w[2 * u + 1];
                    const int16x8_t p0 = vmlal_s8(vmull_s8(vget_low_s8(w0), vget_low_s8(x0)), vget_high_s8(w0), vget_high_s8(x0));
                    const int16x8_t p1 = vmlal_s8(vmull_s8(vget_low_s8(w1), vget_low_s8(x1)), vget_high_s8(w1), vget_high_s8(x1));
                    p[k] = vmlaq_n_s32(vmulq_n_s32(vpaddlq_s16(p0), c.sc[2 * u]), vpaddlq_s16(p1), c.sc[2 * u + 1]);
                } else {
                    p[k] = dot32(c.w[2 * u], c.w[2 * u + 1], qx + 32 * u);
                }
            }
            // [a0+a1, a2+a3, b0+b1, b2+b3], twice: the four totals in order.
            r.q[t] = vcvtq_f32_s32(vpaddq_s32(vpaddq_s32(p[0], p[1]), vpaddq_s32(p[2], p[3])));
        }
        return r;
    }
};

}  // namespace
}  // namespace colibri::kernels
