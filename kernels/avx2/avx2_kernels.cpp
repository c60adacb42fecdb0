// AVX2 + FMA + F16C: the 16 canonical lanes as two 256-bit registers (lanes 0..7 and 8..15).
// Built with -mavx2 -mfma -mf16c (kernels/CMakeLists.txt) and called only when CPUID reports them.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/generic_kernels.h"
#include "kernels/variants.h"

namespace colibri::kernels {
namespace {

struct Avx2Isa {
    struct V {
        __m256 lo, hi;
    };
    static constexpr size_t kMatvecRows = 4, kMatmulVectors = 4;

    static V zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
    static V load(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
    static V fma(V a, V b, V c) { return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)}; }
    static void store(float* p, V v) {
        _mm256_storeu_ps(p, v.lo);
        _mm256_storeu_ps(p + 8, v.hi);
    }
    static float half(const uint8_t* p) { return _cvtsh_ss(generic::load_u16(p)); }
    static V f16(const uint8_t* p) {
        return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
                _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16)))};
    }
    static __m256 bf16_8(const uint8_t* p) {
        const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
    }
    static V bf16(const uint8_t* p) { return {bf16_8(p), bf16_8(p + 16)}; }
    // 8 signed bytes, widened and converted.
    static __m256 i8_8(__m128i bytes) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes)); }
    static void q8_0(const uint8_t* blk, V* out) {
        const __m256 d = _mm256_set1_ps(half(blk));
        const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 18));
        out[0] = {_mm256_mul_ps(d, i8_8(a)), _mm256_mul_ps(d, i8_8(_mm_srli_si128(a, 8)))};
        out[1] = {_mm256_mul_ps(d, i8_8(b)), _mm256_mul_ps(d, i8_8(_mm_srli_si128(b, 8)))};
    }
    static void q4_0(const uint8_t* blk, V* out) {
        const __m256 d = _mm256_set1_ps(half(blk));
        const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
        const __m128i mask = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
        const __m128i lo = _mm_sub_epi8(_mm_and_si128(bytes, mask), eight);
        const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(bytes, 4), mask), eight);
        out[0] = {_mm256_mul_ps(d, i8_8(lo)), _mm256_mul_ps(d, i8_8(_mm_srli_si128(lo, 8)))};
        out[1] = {_mm256_mul_ps(d, i8_8(hi)), _mm256_mul_ps(d, i8_8(_mm_srli_si128(hi, 8)))};
    }
    static void q4_k(const uint8_t* q, int shift, float step, float offset, V* out) {
        __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
        if (shift != 0) bytes = _mm256_srli_epi16(bytes, 4);
        bytes = _mm256_and_si256(bytes, _mm256_set1_epi8(0x0F));
        const __m128i a = _mm256_castsi256_si128(bytes), b = _mm256_extracti128_si256(bytes, 1);
        const __m256 s = _mm256_set1_ps(step), o = _mm256_set1_ps(offset);
        // step·q is exact, so the fused form rounds exactly as step·q − offset does.
        auto value8 = [&](__m128i v) { return _mm256_fmsub_ps(s, i8_8(v), o); };
        out[0] = {value8(a), value8(_mm_srli_si128(a, 8))};
        out[1] = {value8(b), value8(_mm_srli_si128(b, 8))};
    }
};

constexpr KernelSet kAvx2 = generic::make_kernel_set<Avx2Isa>();

}  // namespace

const KernelSet& avx2_kernel_set() { return kAvx2; }

}  // namespace colibri::kernels
