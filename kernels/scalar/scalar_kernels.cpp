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
    static void q8_0(const uint8_t* blk, V* out) {
        const float d = half(blk);
        const auto* q = reinterpret_cast<const int8_t*>(blk + 2);
        for (size_t k = 0; k < canonical::kLanes; ++k) {
            out[0].v[k] = d * float(q[k]);
            out[1].v[k] = d * float(q[16 + k]);
        }
    }
    static void q4_0(const uint8_t* blk, V* out) {
        const float d = half(blk);
        const uint8_t* qs = blk + 2;
        for (size_t k = 0; k < canonical::kLanes; ++k) {
            out[0].v[k] = d * float(int(qs[k] & 0x0F) - 8);
            out[1].v[k] = d * float(int(qs[k] >> 4) - 8);
        }
    }
    static void q4_k(const uint8_t* q, int shift, float step, float offset, V* out) {
        for (size_t k = 0; k < canonical::kLanes; ++k) {
            out[0].v[k] = step * float((q[k] >> shift) & 0x0F) - offset;
            out[1].v[k] = step * float((q[16 + k] >> shift) & 0x0F) - offset;
        }
    }
};

constexpr KernelSet kScalar = generic::make_kernel_set<ScalarIsa>();

}  // namespace

const KernelSet& scalar_kernel_set() { return kScalar; }

}  // namespace colibri::kernels
