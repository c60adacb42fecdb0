// AVX-512 (F/BW/VL): the 16 canonical lanes are one 512-bit register. Built with -mavx512f -mavx512bw
// -mavx512vl -mavx512vnni (+ FMA, F16C) and called only when CPUID reports F/BW/VL. Two kernel sets: with
// VNNI (vpdpbusd) for the block types' integer sums, chosen when CPUID reports AVX512_VNNI, and without
// (vpmaddubsw + vpmaddwd); both give the same integers, hence the same bits (canonical.h).
// GCC 12's avx512fintrin.h seeds some conversions with _mm512_undefined_*(), which -Wmaybe-uninitialized
// (and, for the 512 → 256-bit casts and extracts, -Wuninitialized) reports at every inlined use; the value is
// never read.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu_info.h"
#include "kernels/generic_kernels.h"
#include "kernels/variants.h"

namespace colibri::kernels {
namespace {

template <bool kVnni>
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
    static V mul(V a, V b) { return _mm512_mul_ps(a, b); }

    // The f16 at p + k·stride (k < nb), gathered as 32-bit words (the 2 bytes after a block scale are still
    // inside the block) and cut to their low halves.
    static V f16_strided(const uint8_t* p, size_t stride, size_t nb) {
        const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                               _mm512_set1_epi32(int(stride)));
        const __mmask16 m = __mmask16((1u << nb) - 1);
        const __m512i v = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, idx, p, 1);
        return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v));
    }
    // canonical::sum_lanes: lane k += lane k + 8, + 4, + 2, + 1, as vector additions.
    static float sum_lanes(V v) {
        const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
        const __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), hi);
        const __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
        const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
        return _mm_cvtss_f32(_mm_add_ss(c, _mm_shuffle_ps(c, c, 1)));
    }
    static V halves(float a, float b) { return _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(a), _mm512_set1_ps(b)); }
    static V u8_16(uint64_t lo, uint64_t hi) {
        return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_set_epi64x(int64_t(hi), int64_t(lo))));
    }
    // Integer path (canonical.h, 2b). A register holds two units (64 bytes); u8 × s8 products summed in
    // groups of four into 16 i32 lanes, lanes 0..7 the first unit, 8..15 the second. Without VNNI:
    // vpmaddubsw (pairs to i16, at most 2·128·127 = 32512: no saturation) and vpmaddwd with ones.
    static __m512i dot_u8s8(__m512i u, __m512i s) {
        if constexpr (kVnni) return _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, s);
        else return _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1));
    }
    static __m256i load256(const void* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
    // Units 2m and 2m + 1 of the chunk in p[m] (zeros past nb), as the unsigned operand: q8_0 with VNNI
    // w + 128 (w xor 0x80; the −128·Σx is applied per unit afterwards), without VNNI |w| (−128 gives 0x80 =
    // 128) with w's negative bytes in neg[m]; q4_0 the nibbles (−8·Σx afterwards); q4_K the codes.
    struct Chunk {
        __m512i p[8];
        __mmask64 neg[8];
    };
    template <WeightType T>
    static __m512i pair(const uint8_t* row, size_t g, bool two, __mmask64* neg) {
        if constexpr (T == WeightType::Q8_0) {
            const __m256i lo = load256(row + g * blocks::kQ8_0Bytes + 2);
            const __m256i hi = two ? load256(row + (g + 1) * blocks::kQ8_0Bytes + 2) : _mm256_setzero_si256();
            const __m512i w = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
            if constexpr (kVnni) {
                return _mm512_xor_si512(w, _mm512_set1_epi8(char(0x80)));
            } else {
                *neg = _mm512_movepi8_mask(w);
                return _mm512_abs_epi8(w);
            }
        } else if constexpr (T == WeightType::Q4_0) {
            const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + g * blocks::kQ4_0Bytes + 2));
            const __m128i b = two ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + (g + 1) * blocks::kQ4_0Bytes + 2))
                                  : _mm_setzero_si128();
            const __m512i ab = _mm512_castsi256_si512(_mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1));
            // [a, a, b, b], then the high nibbles of the 2nd and 4th quarter.
            __m512i z = _mm512_shuffle_i64x2(ab, ab, 0x50);
            z = _mm512_srlv_epi16(z, _mm512_set_epi32(0x40004, 0x40004, 0x40004, 0x40004, 0, 0, 0, 0, 0x40004, 0x40004,
                                                      0x40004, 0x40004, 0, 0, 0, 0));
            return _mm512_and_si512(z, _mm512_set1_epi8(0x0F));
        } else {
            // Sub-blocks g (even) and g + 1 share 32 bytes: low nibbles, then high nibbles.
            const size_t j = g % 8;
            const __m256i c = load256(row + (g / 8) * blocks::kQ4_KBytes + 4 + blocks::kQ4_KScaleBytes + (j / 2) * 32);
            __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(c), c, 1);
            z = _mm512_srlv_epi16(z, _mm512_set_epi32(0x40004, 0x40004, 0x40004, 0x40004, 0x40004, 0x40004, 0x40004,
                                                      0x40004, 0, 0, 0, 0, 0, 0, 0, 0));
            return _mm512_and_si512(z, _mm512_set1_epi8(0x0F));
        }
    }
    template <WeightType T>
    static void prepare(const uint8_t* row, size_t g0, size_t nb, Chunk& c) {
        if (nb == 16) {
            #pragma GCC unroll 8
            for (size_t m = 0; m < 8; ++m) c.p[m] = pair<T>(row, g0 + 2 * m, true, &c.neg[m]);
        } else {
            for (size_t m = 0; m < 8; ++m) {
                c.neg[m] = 0;
                c.p[m] = 2 * m < nb ? pair<T>(row, g0 + 2 * m, 2 * m + 1 < nb, &c.neg[m]) : _mm512_setzero_si512();
            }
        }
    }
    // Adjacent lanes of a (lanes 0..7) and of b (lanes 8..15) summed.
    static __m512i pairsum(__m512i a, __m512i b) {
        const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
        return _mm512_add_epi32(_mm512_permutex2var_epi32(a, even, b), _mm512_permutex2var_epi32(a, odd, b));
    }
    template <WeightType T>
    static V isums(const Chunk& c, size_t, const int8_t* qx, const int32_t* sx) {
        __m512i p[8];
        #pragma GCC unroll 8
        for (size_t m = 0; m < 8; ++m) {
            __m512i x = _mm512_loadu_si512(qx + 64 * m);
            if constexpr (T == WeightType::Q8_0 && !kVnni) x = _mm512_mask_sub_epi8(x, c.neg[m], _mm512_setzero_si512(), x);
            p[m] = dot_u8s8(c.p[m], x);
        }
        const __m512i q0 = pairsum(p[0], p[1]), q1 = pairsum(p[2], p[3]);
        const __m512i q2 = pairsum(p[4], p[5]), q3 = pairsum(p[6], p[7]);
        __m512i s = pairsum(pairsum(q0, q1), pairsum(q2, q3));  // lane k: unit g0 + k
        if constexpr (T == WeightType::Q8_0 && kVnni) s = _mm512_sub_epi32(s, _mm512_slli_epi32(_mm512_loadu_si512(sx), 7));
        if constexpr (T == WeightType::Q4_0) s = _mm512_sub_epi32(s, _mm512_slli_epi32(_mm512_loadu_si512(sx), 3));
        return _mm512_cvtepi32_ps(s);
    }
};

constexpr KernelSet kAvx512Vnni = generic::make_kernel_set<Avx512Isa<true>>();
constexpr KernelSet kAvx512NoVnni = generic::make_kernel_set<Avx512Isa<false>>();

}  // namespace

const KernelSet& avx512_kernel_set() { return cpu_features().avx512vnni ? kAvx512Vnni : kAvx512NoVnni; }
const KernelSet& avx512_no_vnni_kernel_set() { return kAvx512NoVnni; }

}  // namespace colibri::kernels
