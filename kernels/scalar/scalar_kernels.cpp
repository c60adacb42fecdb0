// The portable reference variant: the 16 canonical lanes as a plain array, each updated with std::fma.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/generic_kernels.h"
#include "kernels/half.h"
#include "kernels/variants.h"

namespace colibri::kernels {
namespace {

struct ScalarIsa {
    struct V {
        float v[canonical::kLanes];
    };
    static constexpr size_t kMatvecRows = 4, kMatmulVectors = 4;

    static V zero() { return V{}; }
    static V load(const float* p) {
        V r;
        std::memcpy(r.v, p, sizeof r.v);
        return r;
    }
    static V fma(const V& a, const V& b, V c) {
        for (size_t k = 0; k < canonical::kLanes; ++k) c.v[k] = std::fma(a.v[k], b.v[k], c.v[k]);
        return c;
    }
    static void store(float* p, const V& v) { std::memcpy(p, v.v, sizeof v.v); }
    static float half(const uint8_t* p) { return f16_to_f32(generic::load_u16(p)); }
    static V f16(const uint8_t* p) {
        V r;
        for (size_t k = 0; k < canonical::kLanes; ++k) r.v[k] = half(p + 2 * k);
        return r;
    }
    static V bf16(const uint8_t* p) {
        V r;
        for (size_t k = 0; k < canonical::kLanes; ++k) r.v[k] = bf16_to_f32(generic::load_u16(p + 2 * k));
        return r;
    }
    static V mul(const V& a, const V& b) {
        V r;
        for (size_t k = 0; k < canonical::kLanes; ++k) r.v[k] = a.v[k] * b.v[k];
        return r;
    }
    static V f16_strided(const uint8_t* p, size_t stride, size_t nb) {
        V r{};
        for (size_t k = 0; k < nb; ++k) r.v[k] = half(p + k * stride);
        return r;
    }
    static float sum_lanes(V v) { return canonical::sum_lanes(v.v); }
    static V halves(float a, float b) {
        V r;
        for (size_t k = 0; k < canonical::kLanes; ++k) r.v[k] = k < 8 ? a : b;
        return r;
    }
    static V u8_16(uint64_t lo, uint64_t hi) {
        V r;
        for (size_t k = 0; k < canonical::kLanes; ++k) r.v[k] = float(((k < 8 ? lo : hi) >> (8 * (k % 8))) & 0xFF);
        return r;
    }
    // The reference integer sums (canonical.h, 2b): one unit at a time, the plain definition.
    struct Chunk {
        const uint8_t* row;
        size_t g0;
    };
    template <WeightType T>
    static void prepare(const uint8_t* row, size_t g0, size_t, Chunk& c) {
        c.row = row;
        c.g0 = g0;
    }
    template <WeightType T>
    static V isums(const Chunk& c, size_t nb, const int8_t* qx, const int32_t*) {
        const uint8_t* row = c.row;
        const size_t g0 = c.g0;
        V r{};
        for (size_t k = 0; k < nb; ++k) {
            const size_t g = g0 + k;
            const int8_t* x = qx + k * canonical::kActBlock;
            int32_t s = 0;
            if constexpr (T == WeightType::Q8_0) {
                const auto* w = reinterpret_cast<const int8_t*>(row + g * blocks::kQ8_0Bytes + 2);
                for (size_t i = 0; i < 32; ++i) s += int32_t(w[i]) * x[i];
            } else if constexpr (T == WeightType::Q4_0) {
                const uint8_t* qs = row + g * blocks::kQ4_0Bytes + 2;
                for (size_t i = 0; i < 16; ++i) s += (int32_t(qs[i] & 0x0F) - 8) * x[i] + (int32_t(qs[i] >> 4) - 8) * x[16 + i];
            } else if constexpr (T == WeightType::Q4_K) {
                const uint8_t* qs = row + (g / 8) * blocks::kQ4_KBytes + 4 + blocks::kQ4_KScaleBytes;
                for (size_t e = 0; e < 32; ++e) s += int32_t(blocks::q4_k_code(qs, g % 8, e)) * x[e];
            } else if constexpr (T == WeightType::Q5_K) {
                const uint8_t* b = row + (g / 8) * blocks::kQ5_KBytes;
                for (size_t e = 0; e < 32; ++e) s += int32_t(blocks::q5_k_code(b, g % 8, e)) * x[e];
            } else if constexpr (T == WeightType::Q6_K) {
                const uint8_t* b = row + (g / 8) * blocks::kQ6_KBytes;
                for (size_t e = 0; e < 32; ++e)
                    s += int32_t(blocks::q6_k_scale(b, g % 8, e)) * (int32_t(blocks::q6_k_code(b, g % 8, e)) - 32) * x[e];
            } else {
                static_assert(T == WeightType::MXFP4);
                const uint8_t* qs = row + g * blocks::kMxfp4Bytes + 1;
                for (size_t i = 0; i < 16; ++i)
                    s += int32_t(blocks::kMxfp4Doubled[qs[i] & 0x0F]) * x[i] + int32_t(blocks::kMxfp4Doubled[qs[i] >> 4]) * x[16 + i];
            }
            r.v[k] = float(s);
        }
        return r;
    }
};

constexpr KernelSet kScalar = generic::make_kernel_set<ScalarIsa>();

}  // namespace

const KernelSet& scalar_kernel_set() { return kScalar; }

}  // namespace colibri::kernels
