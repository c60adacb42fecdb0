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
    static constexpr size_t kMatvecPrefetch = 2048;  // as the AVX-512 variant (generic::dot_rows)

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
    static V mul(V a, V b) { return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }

    // 8 f16 values at p + k·stride (k < n), gathered as 32-bit words (the 2 bytes after a block scale are
    // still inside the block) and cut to their low halves.
    static __m256 f16_strided8(const uint8_t* p, size_t stride, size_t n) {
        const __m256i k = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(int(n)), k);
        __m256i v = _mm256_mask_i32gather_epi32(_mm256_setzero_si256(), reinterpret_cast<const int*>(p),
                                                _mm256_mullo_epi32(k, _mm256_set1_epi32(int(stride))), mask, 1);
        v = _mm256_and_si256(v, _mm256_set1_epi32(0xFFFF));
        v = _mm256_permute4x64_epi64(_mm256_packus_epi32(v, v), 0x08);
        return _mm256_cvtph_ps(_mm256_castsi256_si128(v));
    }
    static V f16_strided(const uint8_t* p, size_t stride, size_t nb) {
        return {f16_strided8(p, stride, nb), nb > 8 ? f16_strided8(p + 8 * stride, stride, nb - 8) : _mm256_setzero_ps()};
    }
    // canonical::sum_lanes: lane k += lane k + 8, + 4, + 2, + 1, as vector additions.
    static float sum_lanes(V v) {
        const __m256 a = _mm256_add_ps(v.lo, v.hi);
        const __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
        const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
        return _mm_cvtss_f32(_mm_add_ss(c, _mm_shuffle_ps(c, c, 1)));
    }
    static V halves(float a, float b) { return {_mm256_set1_ps(a), _mm256_set1_ps(b)}; }
    static V u8_16(uint64_t lo, uint64_t hi) {
        return {_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(int64_t(lo)))),
                _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(int64_t(hi))))};
    }
    // canonical::quantize_blocks in vector registers: the operations of the reference in its order per value
    // (see the AVX-512 variant for why max, min and the NaN handling give the same bytes).
    static void quantize_blocks(const float* x, size_t blocks, int8_t* q, float* d, int32_t* sum, float* nsum) {
        const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
        const __m256 hi = _mm256_set1_ps(127.0f), lo = _mm256_set1_ps(-127.0f), round = _mm256_set1_ps(12582912.0f);
        for (size_t b = 0; b < blocks; ++b) {
            const float* xb = x + 32 * b;
            __m256 m = _mm256_setzero_ps();
            #pragma GCC unroll 4
            for (size_t k = 0; k < 4; ++k) m = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(xb + 8 * k), abs_mask), m);
            __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
            m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
            const float amax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1)));
            d[b] = amax / 127.0f;
            const __m256 inv = _mm256_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
            __m256i qi[4];
            #pragma GCC unroll 4
            for (size_t k = 0; k < 4; ++k) {
                __m256 v = _mm256_mul_ps(_mm256_loadu_ps(xb + 8 * k), inv);
                v = _mm256_max_ps(lo, _mm256_min_ps(hi, v));
                v = _mm256_and_ps(v, _mm256_cmp_ps(v, v, _CMP_ORD_Q));
                v = _mm256_sub_ps(_mm256_add_ps(v, round), round);
                qi[k] = _mm256_cvttps_epi32(v);
            }
            // i32 -> i8 in order: the packs work within 128-bit halves, the permute puts the quarters back.
            const __m256i p16 = _mm256_packs_epi32(qi[0], qi[1]), p16b = _mm256_packs_epi32(qi[2], qi[3]);
            const __m256i p8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p16, p16b), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 32 * b), p8);
            __m256i s8 = _mm256_add_epi32(_mm256_add_epi32(qi[0], qi[1]), _mm256_add_epi32(qi[2], qi[3]));
            __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
            s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
            s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
            sum[b] = _mm_cvtsi128_si32(s4);
            nsum[b] = -float(sum[b]);
        }
    }
    // Integer path (canonical.h, 2b). One unit's 32 products: vpmaddubsw (u8 × s8, adjacent pairs to i16;
    // at most 2·128·127 = 32512, so it never saturates) then vpmaddwd with ones (pairs to i32): 8 partial sums.
    static __m256i dot_u8s8(__m256i u, __m256i s) {
        return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
    }
    static __m256i load256(const void* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
    // Per unit: u = the unsigned operand (q8_0 |w|, −128 giving 0x80 = 128; the 4-, 5- and 6-bit types their
    // codes; mxfp4 its values + 12) and, for q8_0, w itself for its sign; for q6_K, w holds its scales.
    struct Chunk {
        __m256i u[16], w[16];
    };
    template <WeightType T>
    static void prepare(const uint8_t* row, size_t g0, size_t nb, Chunk& c) {
        #pragma GCC unroll 16
        for (size_t k = 0; k < 16; ++k) {
            const size_t g = g0 + k;
            if (k >= nb) {
                c.u[k] = c.w[k] = _mm256_setzero_si256();
            } else if constexpr (T == WeightType::Q8_0) {
                const __m256i w = load256(row + g * blocks::kQ8_0Bytes + 2);
                c.u[k] = _mm256_sign_epi8(w, w);
                c.w[k] = w;
            } else if constexpr (T == WeightType::Q4_0) {
                const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + g * blocks::kQ4_0Bytes + 2));
                c.u[k] = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(0x0F));
            } else if constexpr (T == WeightType::Q5_K) {
                // Unit j of a super-block: nibble j % 2 of code bytes 32·(j / 2) .., the fifth bit is bit j of
                // the 32 high-bit bytes (the 16-bit shift's spill from the next byte is masked off).
                const uint8_t* b = row + (g / 8) * blocks::kQ5_KBytes;
                const size_t j = g % 8;
                __m256i v = load256(b + blocks::kQ5_KCodes + 32 * (j / 2));
                if (j % 2) v = _mm256_srli_epi16(v, 4);
                const __m256i hb = _mm256_and_si256(_mm256_srl_epi16(load256(b + blocks::kQ5_KHighBits), _mm_cvtsi32_si128(int(j))),
                                                    _mm256_set1_epi8(1));
                c.u[k] = _mm256_or_si256(_mm256_and_si256(v, _mm256_set1_epi8(0x0F)), _mm256_slli_epi16(hb, 4));
            } else if constexpr (T == WeightType::Q6_K) {
                // Unit u = 4n + q: nibble q / 2 of low bytes 64n + 32·(q % 2) .., bits 2q and 2q + 1 of high
                // bytes 32n ..; w holds its two int8 scales as i16, one per 128-bit half (values 0..15, 16..31).
                const uint8_t* b = row + (g / 8) * blocks::kQ6_KBytes;
                const size_t u = g % 8, n = u / 4, q = u % 4;
                __m256i lo = load256(b + 64 * n + 32 * (q % 2));
                if (q / 2) lo = _mm256_srli_epi16(lo, 4);
                const __m256i hi = _mm256_and_si256(_mm256_srl_epi16(load256(b + blocks::kQ6_KHighBits + 32 * n), _mm_cvtsi32_si128(int(2 * q))),
                                                    _mm256_set1_epi8(3));
                c.u[k] = _mm256_or_si256(_mm256_and_si256(lo, _mm256_set1_epi8(0x0F)), _mm256_slli_epi16(hi, 4));
                const auto* sc = reinterpret_cast<const int8_t*>(b + blocks::kQ6_KScales + 2 * u);
                c.w[k] = _mm256_set_m128i(_mm_set1_epi16(sc[1]), _mm_set1_epi16(sc[0]));
            } else if constexpr (T == WeightType::MXFP4) {
                // The 32 nibbles (as q4_0) through a table: each one's doubled e2m1 value + 12, so unsigned.
                const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + g * blocks::kMxfp4Bytes + 1));
                const __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(0x0F));
                c.u[k] = _mm256_shuffle_epi8(mxfp4_table(), nib);
            } else {
                // q4_K: register 8s + 2p + h the low (h = 0) or high nibbles of code piece p of super-block s
                // (blocks::q4_k_code_byte): lane j holds four codes of sub-block j. Register k's activations are
                // at q4_k_x_offset(k) (canonical::q4_k_activations' order).
                const uint8_t* q = row + (g0 / 8 + k / 8) * blocks::kQ4_KBytes + 4 + blocks::kQ4_KScaleBytes;
                __m256i v = load256(q + 32 * ((k % 8) / 2));
                if (k % 2) v = _mm256_srli_epi16(v, 4);
                c.u[k] = _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
            }
        }
    }
    // blocks::kMxfp4Doubled + 12 in both 128-bit halves (vpshufb looks up within each half).
    static __m256i mxfp4_table() {
        return _mm256_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0,
                                12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0);
    }
    static constexpr size_t q4_k_x_offset(size_t k) { return 256 * (k / 8) + canonical::q4_k_activation_offset((k % 8) / 2, k % 2); }
    template <WeightType T>
    static const int8_t* matmul_activations(const canonical::QuantizedActivations& qa, size_t n) {
        if constexpr (T == WeightType::Q4_K) return canonical::q4_k_activations(qa, n);
        else return qa.q;
    }
    // 8 vectors of 8 partial sums → the 8 totals, in order.
    static __m256i reduce8(const __m256i* p) {
        const __m256i h01 = _mm256_hadd_epi32(p[0], p[1]), h23 = _mm256_hadd_epi32(p[2], p[3]);
        const __m256i h45 = _mm256_hadd_epi32(p[4], p[5]), h67 = _mm256_hadd_epi32(p[6], p[7]);
        const __m256i a = _mm256_hadd_epi32(h01, h23), b = _mm256_hadd_epi32(h45, h67);
        return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
    }
    template <WeightType T>
    static __m256 isums8(const Chunk& c, size_t k0, const int8_t* qx, const int32_t* sx) {
        if constexpr (T == WeightType::Q4_K) {
            // The 8 registers' pair sums added as i16 (each at most 2·15·127 = 3810, eight of them 30480: no
            // overflow), then once to i32: lane j is the sum of sub-block j. qx: this super-block's 256 bytes.
            __m256i acc = _mm256_setzero_si256();
            #pragma GCC unroll 8
            for (size_t k = 0; k < 8; ++k) acc = _mm256_add_epi16(acc, _mm256_maddubs_epi16(c.u[k0 + k], load256(qx + q4_k_x_offset(k))));
            return _mm256_cvtepi32_ps(_mm256_madd_epi16(acc, _mm256_set1_epi16(1)));
        }
        __m256i p[8];
        if constexpr (T == WeightType::Q6_K) {
            // Pairs of (code − 32)·x as i16 (|·| ≤ 2·32·127: the two vpmaddubsw results at most 16002 and
            // 8128, no saturation), then vpmaddwd with each half's scale: 8 partial sums of sc·(code − 32)·x.
            #pragma GCC unroll 8
            for (size_t k = 0; k < 8; ++k) {
                const __m256i x = load256(qx + 32 * k);
                const __m256i d = _mm256_sub_epi16(_mm256_maddubs_epi16(c.u[k0 + k], x), _mm256_maddubs_epi16(_mm256_set1_epi8(32), x));
                p[k] = _mm256_madd_epi16(d, c.w[k0 + k]);
            }
            return _mm256_cvtepi32_ps(reduce8(p));
        }
        #pragma GCC unroll 8
        for (size_t k = 0; k < 8; ++k) {
            const __m256i x = load256(qx + 32 * k);
            // q8_0: x takes w's sign (zero where w is zero).
            p[k] = dot_u8s8(c.u[k0 + k], T == WeightType::Q8_0 ? _mm256_sign_epi8(x, c.w[k0 + k]) : x);
        }
        __m256i s = reduce8(p);
        if constexpr (T == WeightType::Q4_0) s = _mm256_sub_epi32(s, _mm256_slli_epi32(load256(sx), 3));  // −8·Σx
        if constexpr (T == WeightType::MXFP4) {  // −12·Σx
            const __m256i sv = load256(sx);
            s = _mm256_sub_epi32(s, _mm256_add_epi32(_mm256_slli_epi32(sv, 3), _mm256_slli_epi32(sv, 2)));
        }
        return _mm256_cvtepi32_ps(s);
    }
    template <WeightType T>
    static V isums(const Chunk& c, size_t nb, const int8_t* qx, const int32_t* sx) {
        const __m256 lo = isums8<T>(c, 0, qx, sx);
        const __m256 hi = nb > 8 ? isums8<T>(c, 8, qx + 256, sx + 8) : _mm256_setzero_ps();
        return {lo, hi};
    }
};

constexpr KernelSet kAvx2 = generic::make_kernel_set<Avx2Isa>();

}  // namespace

const KernelSet& avx2_kernel_set() { return kAvx2; }

}  // namespace colibri::kernels
