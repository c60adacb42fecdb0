// AVX-512 (F/BW/VL): the 16 canonical lanes are one 512-bit register. Built with -mavx512f -mavx512bw
// -mavx512vl (+ FMA, F16C) and called only when CPUID reports them. VNNI and BF16 dot-product instructions
// are not used: they would need int8/bf16 activations, leaving the canonical f32 order (docs/KERNELS.md).
// GCC 12's avx512fintrin.h seeds some conversions with _mm512_undefined_*(), which -Wmaybe-uninitialized
// reports at every inlined use; the value is never read.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/generic_kernels.h"
#include "kernels/variants.h"

namespace colibri::kernels {
namespace {

struct Avx512Isa {
    using V = __m512;
    static constexpr size_t kMatvecRows = 4, kMatmulVectors = 6;
    static constexpr size_t kMatmulRows = 4;  // 4 x 6 accumulators of the 32 zmm registers

    static V zero() { return _mm512_setzero_ps(); }
    static V load(const float* p) { return _mm512_loadu_ps(p); }
    static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
    static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
    static float half(const uint8_t* p) { return _cvtsh_ss(generic::load_u16(p)); }
    static V f16(const uint8_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
    static V bf16(const uint8_t* p) {
        const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
        return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
    }
    static V i8_16(__m128i bytes) { return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(bytes)); }
    static void q8_0(const uint8_t* blk, V* out) {
        const V d = _mm512_set1_ps(half(blk));
        out[0] = _mm512_mul_ps(d, i8_16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2))));
        out[1] = _mm512_mul_ps(d, i8_16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 18))));
    }
    // The 4-bit types look their 16 possible values up in a register (vpermps takes the low four bits of
    // each index), computed per block exactly as the scalar code computes each value.
    static V codes() { return _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15); }
    static void q4_0(const uint8_t* blk, V* out) {
        const V table = _mm512_mul_ps(_mm512_set1_ps(half(blk)), _mm512_sub_ps(codes(), _mm512_set1_ps(8.0f)));
        const __m512i idx = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2)));
        out[0] = _mm512_permutexvar_ps(idx, table);
        out[1] = _mm512_permutexvar_ps(_mm512_srli_epi32(idx, 4), table);
    }
    static void q4_k(const uint8_t* q, int shift, float step, float offset, V* out) {
        // step·q is exact, so the fused form rounds exactly as step·q − offset does.
        const V table = _mm512_fmsub_ps(_mm512_set1_ps(step), codes(), _mm512_set1_ps(offset));
        __m512i a = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)));
        __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 16)));
        if (shift != 0) {
            a = _mm512_srli_epi32(a, 4);
            b = _mm512_srli_epi32(b, 4);
        }
        out[0] = _mm512_permutexvar_ps(a, table);
        out[1] = _mm512_permutexvar_ps(b, table);
    }
};

constexpr KernelSet kAvx512 = generic::make_kernel_set<Avx512Isa>();

}  // namespace

const KernelSet& avx512_kernel_set() { return kAvx512; }

}  // namespace colibri::kernels
