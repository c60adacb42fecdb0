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
#include <vector>

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
    static constexpr size_t kWeightedVectors = 4;  // 4 x 4 accumulators in weighted_rows
    // The float matvec prefetches 2 KB ahead in each of its 4 streams (generic::dot_rows): f16 decode on a Zen 5
    // guest x1.26 against none, x1.10 against 1 KB, x0.98 and x0.90 at 3 and 4 KB (paired alternating runs).
    static constexpr size_t kMatvecPrefetch = 2048;

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
    // The 16 f16 scales of a whole chunk of q8_0 blocks (at p + 34k) without a gather (vpgatherdd cost a quarter
    // of the q8_0 matvec on a Zen 5 guest). The 64 bytes at p + 64i hold scale 2i in the low word of dword i
    // (68i − 64i = 4i bytes) and scale 2i + 1 in the high word of dword i + 8 (4i + 34 bytes), so a tree of
    // blends of eight loads (dwords i and i + 8 from load i) collects all sixteen, and one word permute puts
    // scale k into word k. (Merge-masked loads instead of the blends measured slower.) Only for whole chunks:
    // the loads reach p + 511, inside the chunk's 544 bytes.
    static V q8_0_scales(const uint8_t* p) {
        __m512i l[8];
        #pragma GCC unroll 8
        for (size_t i = 0; i < 8; ++i) l[i] = _mm512_loadu_si512(p + 64 * i);
        // A tree of blends (dwords i and i + 8 from load i).
        const __m512i a = _mm512_mask_blend_epi32(0x0202, l[0], l[1]), b = _mm512_mask_blend_epi32(0x0808, l[2], l[3]);
        const __m512i c = _mm512_mask_blend_epi32(0x2020, l[4], l[5]), d = _mm512_mask_blend_epi32(0x8080, l[6], l[7]);
        const __m512i r = _mm512_mask_blend_epi32(0xF0F0, _mm512_mask_blend_epi32(0x0C0C, a, b), _mm512_mask_blend_epi32(0xC0C0, c, d));
        // Word k of the result: word k (k even: scale k in dword k / 2) or word k + 16 (k odd); words 16..31 unused.
        const __m512i idx = _mm512_set_epi16(31 + 16, 30, 29 + 16, 28, 27 + 16, 26, 25 + 16, 24, 23 + 16, 22, 21 + 16, 20,
                                             19 + 16, 18, 17 + 16, 16, 15 + 16, 14, 13 + 16, 12, 11 + 16, 10, 9 + 16, 8,
                                             7 + 16, 6, 5 + 16, 4, 3 + 16, 2, 1 + 16, 0);
        return _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(idx, r)));
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
    // canonical::quantize_blocks in vector registers, the same operations in the same order per value (so the
    // same bytes): max|x| skipping NaN (vmaxps returns its second operand when either is NaN, so a NaN never
    // replaces the running maximum; all values are ≥ +0, so the order of the maxima does not matter), the
    // scalar d and inv, then x·inv, min(127, v) and max(−127, v) in the operand order of the reference's
    // comparisons (a NaN v passes through both), NaN → 0, and the 1.5·2^23 rounding.
    static void quantize_blocks(const float* x, size_t blocks, int8_t* q, float* d, int32_t* sum, float* nsum) {
        const __m512 hi = _mm512_set1_ps(127.0f), lo = _mm512_set1_ps(-127.0f), round = _mm512_set1_ps(12582912.0f);
        for (size_t b = 0; b < blocks; ++b) {
            const __m512 x0 = _mm512_loadu_ps(x + 32 * b), x1 = _mm512_loadu_ps(x + 32 * b + 16);
            const __m512 m = _mm512_max_ps(_mm512_abs_ps(x1), _mm512_max_ps(_mm512_abs_ps(x0), _mm512_setzero_ps()));
            const float amax = _mm512_reduce_max_ps(m);
            d[b] = amax / 127.0f;
            const __m512 inv = _mm512_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
            __m512i qi[2];
            #pragma GCC unroll 2
            for (size_t h = 0; h < 2; ++h) {
                __m512 v = _mm512_mul_ps(h ? x1 : x0, inv);
                v = _mm512_max_ps(lo, _mm512_min_ps(hi, v));
                v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), v);
                v = _mm512_sub_ps(_mm512_add_ps(v, round), round);
                qi[h] = _mm512_cvttps_epi32(v);
                _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 32 * b + 16 * h), _mm512_cvtepi32_epi8(qi[h]));
            }
            sum[b] = _mm512_reduce_add_epi32(_mm512_add_epi32(qi[0], qi[1]));
            nsum[b] = -float(sum[b]);
        }
    }

    // q4_K's d·sc_j and dmin·m_j for the one or two super-blocks of a chunk (nb 8 or 16), unpacked in vector
    // registers rather than byte by byte (generic::chunk_scales has the scalar form): a byte shuffle puts each
    // 6-bit field's low and high source bytes side by side, then masks and shifts assemble the fields. The
    // same two 16-byte loads (each super-block's d, dmin and 12 scale bytes) give d and dmin: all 16 halves
    // go through one conversion (the scale bytes read as halves are discarded; the conversion raises no
    // exception that is unmasked) and two permutes broadcast them, instead of scalar loads and a move to a
    // vector register per super-block.
    // Always inlined: in a row's partial last chunk (the down projection's 2816 columns end in half a chunk)
    // GCC otherwise called the unpacking out of line, passing its two results through memory.
    // q5_K keeps the same 16 bytes at the start of its (176-byte) super-blocks: kBlockBytes is the stride.
    template <size_t kBlockBytes>
    [[gnu::always_inline]] static inline void k_scales(const uint8_t* row, size_t g0, size_t nb, V* a, V* b) {
        const uint8_t* blk = row + (g0 / 8) * kBlockBytes;
        const bool two = nb > 8;
        // Lane 0: the first super-block's first 16 bytes (d, dmin, the 12 scale bytes at 4..15); lane 1 the
        // second's (zero for none).
        const __m128i s0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk));
        const __m128i s1 = two ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kBlockBytes)) : _mm_setzero_si128();
        const __m256i s = _mm256_inserti128_si256(_mm256_castsi128_si256(s0), s1, 1);
        // Per lane, bytes 0..7 the scales j = 0..7, bytes 8..15 the mins. lo: the byte with the field's low
        // bits (sc: s[j] for j < 4, s[j + 4] after; m: s[j + 4]); hi: the byte whose top two bits are bits 4-5
        // (sc: s[j − 4], m: s[j], both for j ≥ 4; zero for j < 4). Scale byte i is at 4 + i.
        const __m256i lo_idx = _mm256_setr_epi8(4, 5, 6, 7, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15,
                                                4, 5, 6, 7, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15);
        const __m256i hi_idx = _mm256_setr_epi8(-1, -1, -1, -1, 4, 5, 6, 7, -1, -1, -1, -1, 8, 9, 10, 11,
                                                -1, -1, -1, -1, 4, 5, 6, 7, -1, -1, -1, -1, 8, 9, 10, 11);
        const __m256i lo = _mm256_shuffle_epi8(s, lo_idx), hi = _mm256_shuffle_epi8(s, hi_idx);
        // Low bits: & 63 for j < 4; for j ≥ 4 the scale's low nibble, the min's high nibble.
        const __m256i keep = _mm256_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0,
                                              63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0);
        const __m256i min_hi = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 15, 15, 15,
                                                0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 15, 15, 15);
        const __m256i low = _mm256_or_si256(_mm256_and_si256(lo, keep), _mm256_and_si256(_mm256_srli_epi16(lo, 4), min_hi));
        // (byte >> 6) << 4 is (byte >> 2) & 0x30; the 16-bit shift's spill from the next byte is masked off.
        const __m256i top = _mm256_and_si256(_mm256_srli_epi16(hi, 2), _mm256_set1_epi8(0x30));
        // qwords [sc0, m0, sc1, m1] -> [sc0, sc1, m0, m1]
        const __m256i f = _mm256_permute4x64_epi64(_mm256_or_si256(low, top), 0xD8);
        const __m512 sc = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm256_castsi256_si128(f)));
        const __m512 mn = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm256_extracti128_si256(f, 1)));
        // Halves 0, 1 are d0, dmin0; 8, 9 d1, dmin1 (0 for one super-block): each broadcast over its 8 lanes.
        const __m512 h = _mm512_cvtph_ps(s);
        const __m512 d = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 8, 8, 8, 8, 8, 8, 8, 8), h);
        const __m512 dmin = _mm512_permutexvar_ps(_mm512_setr_epi32(1, 1, 1, 1, 1, 1, 1, 1, 9, 9, 9, 9, 9, 9, 9, 9), h);
        *a = _mm512_mul_ps(d, sc);
        *b = _mm512_mul_ps(dmin, mn);
    }

    // Integer path (canonical.h, 2b). A register holds two units (64 bytes); u8 × s8 products summed in
    // groups of four into 16 i32 lanes, lanes 0..7 the first unit, 8..15 the second. Without VNNI:
    // vpmaddubsw (pairs to i16, at most 2·128·127 = 32512: no saturation) and vpmaddwd with ones.
    static __m512i dot_u8s8(__m512i u, __m512i s) {
        if constexpr (kVnni) return _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, s);
        else return _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1));
    }
    static __m256i load256(const void* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
    // The weight side of a chunk for the generic matmul (generic::qdot_vectors), as the unsigned operand of
    // the u8 × s8 products: q8_0 with VNNI w + 128 (w xor 0x80; the −128·Σx is applied per unit afterwards),
    // without VNNI |w| (−128 gives 0x80 = 128) with w's negative bytes in neg; q4_0 the nibbles (−8·Σx
    // afterwards); q4_K the codes. Zeros past nb.
    // q8_0: four units per register pair, so that a chunk's 16 unit sums take half the reduction. p[2i] = A
    // holds the first 16 values of blocks 4i..4i + 3, p[2i + 1] = B their last 16, in the same 128-bit
    // positions, so one accumulator takes both products of a unit (four i32 lanes per unit).
    // q4_K (codes interleaved, blocks::q4_k_code_byte): p[4s + 2i + h] the low (h = 0) or high nibbles of the
    // 64 code bytes 64i.. of super-block s; lanes j and 8 + j hold codes of sub-block j, and the activations
    // they multiply are at 64·m in canonical::q4_k_activations' order, so no reduction per unit is needed.
    // q4_0: units 2m and 2m + 1 in p[m] (two per register).
    // q5_K, q6_K and mxfp4: units 2m and 2m + 1 in p[m] as q4_0 (q5_K its 5-bit codes, q6_K its 6-bit codes
    // with its scales as i16 in s[m], mxfp4 its values + 12).
    struct Chunk {
        __m512i p[8];
        __mmask64 neg[8];
        __m512i s[8];
    };
    // q8_0 and q4_0 units g and (if two) g + 1 in one register, lanes 0..7 and 8..15.
    template <WeightType T>
    static __m512i pair(const uint8_t* row, size_t g, bool two, __mmask64* neg) {
        if constexpr (T == WeightType::Q8_0) {
            const __m256i lo = load256(row + g * blocks::kQ8_0Bytes + 2);
            const __m256i hi = two ? load256(row + (g + 1) * blocks::kQ8_0Bytes + 2) : _mm256_setzero_si256();
            return q8_operand(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), neg);
        } else {
            static_assert(T == WeightType::Q4_0 || T == WeightType::MXFP4);
            constexpr size_t bytes = generic::block_bytes(T), skip = T == WeightType::Q4_0 ? 2 : 1;
            const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + g * bytes + skip));
            const __m128i b = two ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + (g + 1) * bytes + skip))
                                  : _mm_setzero_si128();
            const __m512i ab = _mm512_castsi256_si512(_mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1));
            // [a, a, b, b], then the high nibbles of the 2nd and 4th quarter.
            __m512i z = _mm512_shuffle_i64x2(ab, ab, 0x50);
            z = _mm512_srlv_epi16(z, _mm512_set_epi32(0x40004, 0x40004, 0x40004, 0x40004, 0, 0, 0, 0, 0x40004, 0x40004,
                                                      0x40004, 0x40004, 0, 0, 0, 0));
            z = _mm512_and_si512(z, _mm512_set1_epi8(0x0F));
            // mxfp4: each nibble's doubled e2m1 value + 12 (unsigned; −12·Σx afterwards), looked up per 128 bits.
            if constexpr (T == WeightType::MXFP4) z = _mm512_shuffle_epi8(mxfp4_table(), z);
            if (!two && T == WeightType::MXFP4) z = _mm512_maskz_mov_epi64(0x0F, z);  // the absent unit stays 0
            return z;
        }
    }
    static __m512i mxfp4_table() {
        return _mm512_broadcast_i32x4(_mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));
    }
    // q5_K units 2i and 2i + 1 of super-block b (i = 0..3): the low and high nibbles of code bytes 32i .., with
    // bits 2i and 2i + 1 of the high-bit bytes as their fifth bits.
    static __m512i q5_k_pair(const uint8_t* b, size_t i) {
        const __m256i v = load256(b + blocks::kQ5_KCodes + 32 * i);
        __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(v), _mm256_srli_epi16(v, 4), 1);
        z = _mm512_and_si512(z, _mm512_set1_epi8(0x0F));
        const __m256i h = load256(b + blocks::kQ5_KHighBits);
        const __m512i hh = _mm512_inserti64x4(_mm512_castsi256_si512(h), h, 1);
        const __m512i bit = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi8(char(1 << (2 * i)))),
                                               _mm256_set1_epi8(char(2 << (2 * i))), 1);
        return _mm512_mask_add_epi8(z, _mm512_test_epi8_mask(hh, bit), z, _mm512_set1_epi8(16));
    }
    // q6_K units 2p and 2p + 1 of super-block b (p = 0..3; half n = p / 2, unit numbers 2·(p % 2) and + 1 within
    // it): their low nibbles are the 64 bytes 64n .. (nibble p % 2), their high bits pairs 4·(p % 2) .. of the
    // high-bit bytes 32n ..; `scales` gets the four int8 scales 4p .. 4p + 3 as i16, each over the 8 pair sums
    // of its 16 values.
    static __m512i q6_k_pair(const uint8_t* b, size_t p, __m512i* scales) {
        const size_t n = p / 2, q = 2 * (p % 2);
        __m512i lo = _mm512_loadu_si512(b + 64 * n);
        if (p % 2) lo = _mm512_srli_epi16(lo, 4);
        lo = _mm512_and_si512(lo, _mm512_set1_epi8(0x0F));
        const __m256i h = load256(b + blocks::kQ6_KHighBits + 32 * n);
        __m512i hh = _mm512_inserti64x4(_mm512_castsi256_si512(h), h, 1);
        hh = _mm512_srlv_epi16(hh, _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(short(2 * q))),
                                                       _mm256_set1_epi16(short(2 * q + 2)), 1));
        hh = _mm512_and_si512(hh, _mm512_set1_epi8(3));
        const __m512i sc16 = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + blocks::kQ6_KScales))));
        // i16 lane L takes scale 4p + L / 8.
        const __m512i idx = _mm512_add_epi16(_mm512_set1_epi16(short(4 * p)),
                                             _mm512_srli_epi16(_mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16,
                                                                                15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), 3));
        *scales = _mm512_permutexvar_epi16(idx, sc16);
        return _mm512_or_si512(lo, _mm512_slli_epi16(hh, 4));
    }
    // The 2^(e − 128) of nb mxfp4 blocks at p (stride 17 bytes), lanes ≥ nb zero: the scale bytes gathered as
    // dwords (each block's 16 bytes of nibbles follow, so the reads stay inside the row) and made f32 bits:
    // (e − 1) << 23, or the denormal 0x00200000 << e for e < 2.
    static V mxfp4_scales(const uint8_t* p, size_t nb) {
        const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                               _mm512_set1_epi32(int(blocks::kMxfp4Bytes)));
        const __mmask16 m = __mmask16((1u << nb) - 1);
        const __m512i e = _mm512_and_si512(_mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, idx, p, 1), _mm512_set1_epi32(0xFF));
        const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
        const __m512i tiny = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
        const __mmask16 small = _mm512_mask_cmplt_epu32_mask(m, e, _mm512_set1_epi32(2));
        return _mm512_castsi512_ps(_mm512_maskz_mov_epi32(m, _mm512_mask_blend_epi32(small, normal, tiny)));
    }
    static __m512i q8_operand(__m512i w, __mmask64* neg) {
        if constexpr (kVnni) return _mm512_xor_si512(w, _mm512_set1_epi8(char(0x80)));
        *neg = _mm512_movepi8_mask(w);
        return _mm512_abs_epi8(w);
    }
    // Half `half` (16 bytes) of q8_0 blocks g .. g + 3 in the four 128-bit parts; zeros for blocks ≥ nb.
    static __m512i q8_halves(const uint8_t* row, size_t g, size_t nb, size_t half) {
        __m512i z = _mm512_setzero_si512();
        const auto piece = [&](size_t k) {
            return g + k < nb ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + (g + k) * blocks::kQ8_0Bytes + 2 + 16 * half))
                              : _mm_setzero_si128();
        };
        z = _mm512_inserti32x4(z, piece(0), 0);
        z = _mm512_inserti32x4(z, piece(1), 1);
        z = _mm512_inserti32x4(z, piece(2), 2);
        return _mm512_inserti32x4(z, piece(3), 3);
    }
    template <WeightType T>
    static void prepare(const uint8_t* row, size_t g0, size_t nb, Chunk& c) {
        if constexpr (T == WeightType::Q8_0) {
            const uint8_t* r = row + g0 * blocks::kQ8_0Bytes;
            #pragma GCC unroll 4
            for (size_t i = 0; i < 4; ++i) {
                c.neg[2 * i] = c.neg[2 * i + 1] = 0;
                c.p[2 * i] = q8_operand(q8_halves(r, 4 * i, nb, 0), &c.neg[2 * i]);
                c.p[2 * i + 1] = q8_operand(q8_halves(r, 4 * i, nb, 1), &c.neg[2 * i + 1]);
            }
        } else if constexpr (T == WeightType::Q4_K) {
            const uint8_t* q = row + (g0 / 8) * blocks::kQ4_KBytes + 4 + blocks::kQ4_KScaleBytes;
            #pragma GCC unroll 4
            for (size_t i = 0; i < 4; ++i) {
                if (i >= 2 && nb <= 8) {
                    c.p[2 * i] = c.p[2 * i + 1] = _mm512_setzero_si512();
                    continue;
                }
                q4_k_codes(q + (i / 2) * blocks::kQ4_KBytes + (i % 2) * 64, &c.p[2 * i]);
            }
        } else if constexpr (T == WeightType::Q5_K || T == WeightType::Q6_K) {
            // nb is 8 or 16 (rows of whole super-blocks): registers 4..7 are the second super-block's.
            #pragma GCC unroll 8
            for (size_t m = 0; m < 8; ++m) {
                if (m >= 4 && nb <= 8) {
                    c.p[m] = c.s[m] = _mm512_setzero_si512();
                    continue;
                }
                const uint8_t* b = row + (g0 / 8 + m / 4) * generic::block_bytes(T);
                if constexpr (T == WeightType::Q5_K) c.p[m] = q5_k_pair(b, m % 4);
                else c.p[m] = q6_k_pair(b, m % 4, &c.s[m]);
            }
        } else if (nb == 16) {
            #pragma GCC unroll 8
            for (size_t m = 0; m < 8; ++m) c.p[m] = pair<T>(row, g0 + 2 * m, true, &c.neg[m]);
        } else {
            for (size_t m = 0; m < 8; ++m) {
                c.neg[m] = 0;
                c.p[m] = 2 * m < nb ? pair<T>(row, g0 + 2 * m, 2 * m + 1 < nb, &c.neg[m]) : _mm512_setzero_si512();
            }
        }
    }
    // The activations in prepare's order, once per call: q8_0 every 4 units [u0 u1 u2 u3] as the first 16
    // bytes of each, then their last 16; q4_K canonical::q4_k_activations; q4_0 reads qa.q as it is.
    template <WeightType T>
    static const int8_t* matmul_activations(const canonical::QuantizedActivations& qa, size_t n) {
        if constexpr (T == WeightType::Q8_0) return permute_halves(qa, n);
        else if constexpr (T == WeightType::Q4_K) return canonical::q4_k_activations(qa, n);
        else return qa.q;
    }
    // q4_K: the 64 code bytes at q as their low and high nibbles (out[0], out[1]).
    static void q4_k_codes(const uint8_t* q, __m512i* out) {
        const __m512i lo4 = _mm512_set1_epi8(0x0F), z = _mm512_loadu_si512(q);
        out[0] = _mm512_and_si512(z, lo4);
        out[1] = _mm512_and_si512(_mm512_srli_epi16(z, 4), lo4);
    }
    // q4_K: one super-block's four code registers against their activations (x, 256 bytes in
    // canonical::q4_k_activations' order): lanes j and 8 + j are partial sums of sub-block j. Two chains (one
    // chain measured no faster in the matvec).
    static __m512i q4_k_super_block(const __m512i* c, const int8_t* x) {
        const auto xl = [&](size_t m) { return _mm512_loadu_si512(x + 64 * m); };
        if constexpr (kVnni) {
            const __m512i a = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), c[0], xl(0)), c[2], xl(2));
            const __m512i b = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), c[1], xl(1)), c[3], xl(3));
            return _mm512_add_epi32(a, b);
        } else {
            // The pair sums added as i16 (at most 4·2·15·127 = 15240: no overflow), then once to i32.
            const __m512i a = _mm512_add_epi16(_mm512_maddubs_epi16(c[0], xl(0)), _mm512_maddubs_epi16(c[2], xl(2)));
            const __m512i b = _mm512_add_epi16(_mm512_maddubs_epi16(c[1], xl(1)), _mm512_maddubs_epi16(c[3], xl(3)));
            return _mm512_madd_epi16(_mm512_add_epi16(a, b), _mm512_set1_epi16(1));
        }
    }
    // Two super-blocks' partial sums (s0, s1 as q4_k_super_block gives them) → lane k the sum of unit k:
    // [s0 low half, s1 high half] + [s0 high half, s1 low half], a blend and one cross-lane shuffle.
    static __m512i q4_k_units(__m512i s0, __m512i s1) {
        return _mm512_add_epi32(_mm512_mask_blend_epi32(0xFF00, s0, s1), _mm512_shuffle_i64x2(s0, s1, 0x4E));
    }
    template <WeightType T>
    static V isums(const Chunk& c, size_t nb, const int8_t* qx, const int32_t* sx) {
        __m512i s;
        if constexpr (T == WeightType::Q4_K) {
            const __m512i s0 = q4_k_super_block(c.p, qx);
            s = q4_k_units(s0, nb > 8 ? q4_k_super_block(c.p + 4, qx + 256) : _mm512_setzero_si512());
        } else if constexpr (T == WeightType::Q4_0 || T == WeightType::Q5_K || T == WeightType::MXFP4) {
            __m512i p[8];
            #pragma GCC unroll 8
            for (size_t m = 0; m < 8; ++m) p[m] = dot_u8s8(c.p[m], _mm512_loadu_si512(qx + 64 * m));
            s = reduce(p);  // lane k: unit g0 + k
            const __m512i sv = _mm512_loadu_si512(sx);
            if constexpr (T == WeightType::Q4_0) s = _mm512_sub_epi32(s, _mm512_slli_epi32(sv, 3));  // −8·Σx
            if constexpr (T == WeightType::MXFP4)  // −12·Σx
                s = _mm512_sub_epi32(s, _mm512_add_epi32(_mm512_slli_epi32(sv, 3), _mm512_slli_epi32(sv, 2)));
        } else if constexpr (T == WeightType::Q6_K) {
            // Pairs of (code − 32)·x as i16 (no saturation: at most 16002 and 8128 before the subtraction),
            // then vpmaddwd with the scales: 8 partial sums of sc·(code − 32)·x per unit.
            __m512i p[8];
            #pragma GCC unroll 8
            for (size_t m = 0; m < 8; ++m) {
                const __m512i x = _mm512_loadu_si512(qx + 64 * m);
                const __m512i d = _mm512_sub_epi16(_mm512_maddubs_epi16(c.p[m], x), _mm512_maddubs_epi16(_mm512_set1_epi8(32), x));
                p[m] = _mm512_madd_epi16(d, c.s[m]);
            }
            s = reduce(p);
        } else {
            __m512i acc[4];
            #pragma GCC unroll 4
            for (size_t i = 0; i < 4; ++i) {
                __m512i xa = _mm512_loadu_si512(qx + 128 * i), xb = _mm512_loadu_si512(qx + 128 * i + 64);
                if constexpr (T == WeightType::Q8_0 && !kVnni) {
                    xa = _mm512_mask_sub_epi8(xa, c.neg[2 * i], _mm512_setzero_si512(), xa);
                    xb = _mm512_mask_sub_epi8(xb, c.neg[2 * i + 1], _mm512_setzero_si512(), xb);
                }
                if constexpr (kVnni) acc[i] = _mm512_dpbusd_epi32(dot_u8s8(c.p[2 * i], xa), c.p[2 * i + 1], xb);
                else acc[i] = _mm512_add_epi32(dot_u8s8(c.p[2 * i], xa), dot_u8s8(c.p[2 * i + 1], xb));
            }
            // Register i's lanes 4k..4k+3 hold unit 4i + k; after the pairwise fold, unit u's two partial sums
            // are at i1[u] and i1[u] + 2 of (e, f).
            const __m512i e = fold<1>(acc[0], acc[1]), f = fold<1>(acc[2], acc[3]);
            const __m512i i1 = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 16, 20, 24, 28, 17, 21, 25, 29);
            const __m512i i2 = _mm512_add_epi32(i1, _mm512_set1_epi32(2));
            s = _mm512_add_epi32(_mm512_permutex2var_epi32(e, i1, f), _mm512_permutex2var_epi32(e, i2, f));
            if constexpr (T == WeightType::Q8_0 && kVnni) s = _mm512_sub_epi32(s, _mm512_slli_epi32(_mm512_loadu_si512(sx), 7));
        }
        return _mm512_cvtepi32_ps(s);
    }

    // ---- matvec (one vector) for the block types ----
    // The 16 unit sums of a chunk come from 8 registers p[m] of 16 i32 partial sums each, register m's
    // halves holding units order[m] (8 partial sums per unit). The reduction keeps the adds of the original
    // pairwise tree's count (7) but needs one vpermt2d per addition instead of two in its first two levels:
    // out[k] = (k & dist ? b[k] : a[k]) + (k & dist ? b[k − dist] : a[k + dist]), a masked blend and one
    // two-source permute. The last level is two permutes whose indices also put unit g0 + k into lane k, for
    // any order of the units over the registers (the indices below are worked out for the two orders used).
    // The integers are the same, so are the bits.
    template <int kDist>
    static __m512i fold(__m512i a, __m512i b) {
        constexpr __mmask16 m = kDist == 1 ? 0xAAAA : 0xCCCC;
        const __m512i idx = kDist == 1 ? _mm512_setr_epi32(1, 16, 3, 18, 5, 20, 7, 22, 9, 24, 11, 26, 13, 28, 15, 30)
                                       : _mm512_setr_epi32(2, 3, 16, 17, 6, 7, 20, 21, 10, 11, 24, 25, 14, 15, 28, 29);
        return _mm512_add_epi32(_mm512_mask_blend_epi32(m, a, b), _mm512_permutex2var_epi32(a, idx, b));
    }
    // Register m holds units 2m and 2m + 1.
    static __m512i reduce(const __m512i* p) {
        const __m512i e = fold<2>(fold<1>(p[0], p[1]), fold<1>(p[2], p[3]));
        const __m512i f = fold<2>(fold<1>(p[4], p[5]), fold<1>(p[6], p[7]));
        const __m512i i1 = _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 16, 24, 17, 25, 18, 26, 19, 27);
        const __m512i i2 = _mm512_setr_epi32(4, 12, 5, 13, 6, 14, 7, 15, 20, 28, 21, 29, 22, 30, 23, 31);
        return _mm512_add_epi32(_mm512_permutex2var_epi32(e, i1, f), _mm512_permutex2var_epi32(e, i2, f));
    }
    // float(isum) of units g0 .. g0 + nb − 1 of a row (lanes ≥ nb +0). qx: the activations from unit g0 on, for
    // q4_K in canonical::q4_k_activations' order.
    template <WeightType T>
    static V isums_mv(const uint8_t* row, size_t g0, size_t nb, const int8_t* qx, const int32_t* sx) {
        if constexpr (T == WeightType::Q4_K) {
            const uint8_t* q = row + (g0 / 8) * blocks::kQ4_KBytes + 4 + blocks::kQ4_KScaleBytes;
            __m512i c[4];
            q4_k_codes(q, c);
            q4_k_codes(q + 64, c + 2);
            const __m512i s0 = q4_k_super_block(c, qx);
            if (nb <= 8) return _mm512_cvtepi32_ps(q4_k_units(s0, _mm512_setzero_si512()));
            q4_k_codes(q + blocks::kQ4_KBytes, c);
            q4_k_codes(q + blocks::kQ4_KBytes + 64, c + 2);
            return _mm512_cvtepi32_ps(q4_k_units(s0, q4_k_super_block(c, qx + 256)));
        } else if constexpr (T == WeightType::Q4_0 || T == WeightType::MXFP4) {
            // Four blocks' 16 bytes in the four 128-bit lanes: the low nibbles are the first 16 values of each
            // unit, the high nibbles the last 16, so both products go into one accumulator whose lane L holds
            // unit 4i + L (4 partial sums each); qx holds each 4 units as their first halves, then second halves.
            // mxfp4 looks each nibble up in its table of values + 12 (vpshufb, per 128-bit lane).
            constexpr size_t bytes = generic::block_bytes(T), skip = T == WeightType::Q4_0 ? 2 : 1;
            const __m512i lo4 = _mm512_set1_epi8(0x0F);
            __m512i acc[4];
            #pragma GCC unroll 4
            for (size_t i = 0; i < 4; ++i) {
                const uint8_t* b = row + (g0 + 4 * i) * bytes + skip;
                __m512i z;
                if (4 * i + 4 <= nb) {
                    z = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b)));
                    z = _mm512_inserti32x4(z, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + bytes)), 1);
                    z = _mm512_inserti32x4(z, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2 * bytes)), 2);
                    z = _mm512_inserti32x4(z, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 3 * bytes)), 3);
                } else {
                    alignas(64) uint8_t tmp[64] = {};  // units past nb meet zero activations
                    for (size_t u = 0; u < 4 && 4 * i + u < nb; ++u) std::memcpy(tmp + 16 * u, b + u * bytes, 16);
                    z = _mm512_load_si512(tmp);
                }
                __m512i wl = _mm512_and_si512(z, lo4);
                __m512i h = _mm512_and_si512(_mm512_srli_epi16(z, 4), lo4);
                if constexpr (T == WeightType::MXFP4) {
                    wl = _mm512_shuffle_epi8(mxfp4_table(), wl);
                    h = _mm512_shuffle_epi8(mxfp4_table(), h);
                }
                const __m512i l = dot_u8s8(wl, _mm512_loadu_si512(qx + 128 * i));
                if constexpr (kVnni) acc[i] = _mm512_dpbusd_epi32(l, h, _mm512_loadu_si512(qx + 128 * i + 64));
                else acc[i] = _mm512_add_epi32(l, dot_u8s8(h, _mm512_loadu_si512(qx + 128 * i + 64)));
            }
            const __m512i e = fold<1>(acc[0], acc[1]), f = fold<1>(acc[2], acc[3]);
            const __m512i i1 = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 16, 20, 24, 28, 17, 21, 25, 29);
            const __m512i i2 = _mm512_setr_epi32(2, 6, 10, 14, 3, 7, 11, 15, 18, 22, 26, 30, 19, 23, 27, 31);
            __m512i s = _mm512_add_epi32(_mm512_permutex2var_epi32(e, i1, f), _mm512_permutex2var_epi32(e, i2, f));
            const __m512i sv = _mm512_loadu_si512(sx);
            if constexpr (T == WeightType::Q4_0) s = _mm512_sub_epi32(s, _mm512_slli_epi32(sv, 3));  // −8·Σx
            else s = _mm512_sub_epi32(s, _mm512_add_epi32(_mm512_slli_epi32(sv, 3), _mm512_slli_epi32(sv, 2)));  // −12·Σx
            return _mm512_cvtepi32_ps(s);
        } else {
            __m512i p[8];
            #pragma GCC unroll 8
            for (size_t m = 0; m < 8; ++m) {
                __mmask64 neg = 0;
                const __m512i w = nb == 16 ? pair<T>(row, g0 + 2 * m, true, &neg)
                                  : 2 * m < nb ? pair<T>(row, g0 + 2 * m, 2 * m + 1 < nb, &neg)
                                               : _mm512_setzero_si512();
                __m512i x = _mm512_loadu_si512(qx + 64 * m);
                if constexpr (T == WeightType::Q8_0 && !kVnni) x = _mm512_mask_sub_epi8(x, neg, _mm512_setzero_si512(), x);
                p[m] = dot_u8s8(w, x);
            }
            __m512i s = reduce(p);
            if constexpr (T == WeightType::Q8_0 && kVnni) s = _mm512_sub_epi32(s, _mm512_slli_epi32(_mm512_loadu_si512(sx), 7));
            if constexpr (T == WeightType::Q4_0) s = _mm512_sub_epi32(s, _mm512_slli_epi32(_mm512_loadu_si512(sx), 3));
            return _mm512_cvtepi32_ps(s);
        }
    }
    // R rows side by side (independent chains), row0 + k·stride, y[k·ystride]; each row's float operations
    // are qdot_vectors<…, 1>'s. pf: where each row's stream is kPrefetchRows rows on (none near the end), with
    // the locality `Locality` (qmatvec says which).
    static constexpr size_t kPrefetchRows = 4;
    template <WeightType T, size_t R, int Locality>
    static void qdot_rows(const uint8_t* row0, size_t stride, const canonical::QuantizedActivations& qa,
                          const int8_t* qx, float* y, size_t ystride, const uint8_t* pf) {
        V acc[R];
        #pragma GCC unroll 4
        for (size_t r = 0; r < R; ++r) acc[r] = zero();
        // Whole chunks with nb = 16 known at compile time (no tests of nb per row, a fixed prefetch count),
        // then the partial one.
        size_t g0 = 0;
        for (; g0 + 16 <= qa.blocks; g0 += 16) qdot_chunk<T, R, Locality>(row0, stride, qa, qx, g0, 16, pf, acc);
        if (g0 < qa.blocks) qdot_chunk<T, R, Locality>(row0, stride, qa, qx, g0, qa.blocks - g0, pf, acc);
        #pragma GCC unroll 4
        for (size_t r = 0; r < R; ++r) y[r * ystride] = sum_lanes(acc[r]);
    }
    template <WeightType T, size_t R, int Locality>
    [[gnu::always_inline]] static inline void qdot_chunk(const uint8_t* row0, size_t stride, const canonical::QuantizedActivations& qa,
                                                         const int8_t* qx, size_t g0, size_t nb, const uint8_t* pf, V* acc) {
        const V dx = load(qa.d + g0);
        if (pf) {
            // The same chunk kPrefetchRows rows on in each stream, into L1 (memory-bound shapes: 32000x1024
            // q8_0 measured about 1.5x faster on a Sapphire Rapids guest, q4_K 1.25x; 1.1-1.3x on Zen 4).
            // 3 or 8 rows ahead instead of 4: x0.970 / x0.960 (q4_k decode, Zen 5).
            constexpr size_t unit = T == WeightType::Q4_K ? blocks::kQ4_KBytes / 8 : generic::block_bytes(T);
            const uint8_t* p = pf + g0 * unit;
            const size_t bytes = nb * unit;
            for (size_t r = 0; r < R; ++r)
                for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch(p + r * stride + o, 0, Locality);
        }
        #pragma GCC unroll 4
        for (size_t r = 0; r < R; ++r) {
            const uint8_t* row = row0 + r * stride;
            V a, b;
            generic::chunk_scales<Avx512Isa, T>(row, g0, nb, &a, &b);
            const V is = isums_mv<T>(row, g0, nb, qx + g0 * 32, qa.sum + g0);
            acc[r] = fma(is, mul(a, dx), acc[r]);
            if constexpr (generic::has_min(T)) acc[r] = fma(load(qa.nsum + g0), mul(b, dx), acc[r]);
        }
    }
    // Every 4 units [u0 u1 u2 u3] of the activations as the first 16 bytes of each, then the last 16.
    static const int8_t* permute_halves(const canonical::QuantizedActivations& qa, size_t n) {
        thread_local std::vector<int8_t> perm;
        thread_local canonical::QuantizedKey made_from{};
        if (canonical::permuted_copy_current(made_from, qa, n)) return perm.data();
        const size_t units = n * qa.stride;  // each vector's stride a multiple of 16 units
        if (perm.size() < units * 32) perm.resize(units * 32);
        for (size_t u = 0; u < units; u += 4) {
            const int8_t* s = qa.q + u * 32;
            int8_t* d = perm.data() + u * 32;
            for (size_t k = 0; k < 4; ++k) {
                const __m128i* src = reinterpret_cast<const __m128i*>(s + 32 * k);
                _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 16 * k), _mm_loadu_si128(src));
                _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 64 + 16 * k), _mm_loadu_si128(src + 1));
            }
        }
        return perm.data();
    }

    // Locality: __builtin_prefetch's, 3 (prefetcht0) or 0 (prefetchnta), for the prefetch kPrefetchRows rows
    // ahead (make_avx512_set says which CPU gets which).
    template <WeightType T, int Locality = 3>
    static void qmatvec(const void* w, size_t cols, const float* x, float* y, size_t row_begin, size_t row_end) {
        // Rows side by side, each its own stream: four for q4_K, two for q8_0 and q4_0 (decode on a Zen 5 guest,
        // paired runs: q4_K x1.055 with four against two and x0.88 with one; q8_0 x1.05 with two against one,
        // x1.03 with four).
        constexpr size_t R = T == WeightType::Q4_K ? 4 : 2;
        const canonical::QuantizedActivations qa = canonical::quantize_activations(x, cols, 1, quantize_blocks);
        const int8_t* qx = qa.q;
        if constexpr (T == WeightType::Q4_K) qx = canonical::q4_k_activations(qa, 1);  // once per call
        if constexpr (T == WeightType::Q4_0 || T == WeightType::MXFP4) {
            // Each 4 units as their first 16 values, then their last 16 (isums_mv's q4_0 layout), once per call.
            qx = permute_halves(qa, 1);
        }
        const size_t stride = row_bytes(T, cols);
        const auto* base = static_cast<const uint8_t*>(w);
        // R long streams side by side, as generic::matvec: rows row_begin + i + k·q.
        const size_t q = (row_end - row_begin) / R;
        for (size_t i = 0; i < q; ++i) {
            const uint8_t* row = base + (row_begin + i) * stride;
            qdot_rows<T, R, Locality>(row, q * stride, qa, qx, y + i, q, i + kPrefetchRows < q ? row + kPrefetchRows * stride : nullptr);
        }
        for (size_t r = row_begin + q * R; r < row_end; ++r)
            qdot_rows<T, 1, Locality>(base + r * stride, stride, qa, qx, y + (r - row_begin), 1,
                            r + kPrefetchRows < row_end ? base + (r + kPrefetchRows) * stride : nullptr);
    }
};

// kNtQ4K: q4_K's matvec prefetches with the non-temporal hint rather than T0. Which one is fast depends on the
// cache design, by a wide margin: on a Zen 5 guest NTA made q4_k decode x1.026 / x1.030 / x1.044 in three sets
// of paired runs (a cpu-clock profile had had 15 % of the kernel's samples on the T0 prefetch loop; q8_0 was
// x0.986 / x1.009 with it, so it kept T0); on an Intel Xeon guest with AMX (family 6 model 167) NTA made the
// same kernel 3.4x slower (bench_kernels matvec_dram/q4_K/avx512/t2 10.1 against 34.4 GB/s; decode 94 against
// 311 tok/s): there a non-temporal prefetch fills L1 only, past the L2 and its streamer. So AMD CPUs get NTA,
// every other CPU T0 (the bits are the same either way: test_kernels checks both).
template <bool kVnni, bool kNtQ4K>
constexpr KernelSet make_avx512_set() {
    using Isa = Avx512Isa<kVnni>;
    KernelSet s = generic::make_kernel_set<Isa>();
    s.matvec[size_t(WeightType::Q8_0)] = Isa::template qmatvec<WeightType::Q8_0>;
    s.matvec[size_t(WeightType::Q4_K)] = Isa::template qmatvec<WeightType::Q4_K, kNtQ4K ? 0 : 3>;
    s.matvec[size_t(WeightType::Q4_0)] = Isa::template qmatvec<WeightType::Q4_0>;
    s.matvec[size_t(WeightType::MXFP4)] = Isa::template qmatvec<WeightType::MXFP4>;
    return s;
}

constexpr KernelSet kAvx512Vnni = make_avx512_set<true, false>();
constexpr KernelSet kAvx512VnniNt = make_avx512_set<true, true>();
constexpr KernelSet kAvx512NoVnni = make_avx512_set<false, false>();
constexpr KernelSet kAvx512NoVnniNt = make_avx512_set<false, true>();

// The set for a CPU with or without VNNI whose q4_K prefetch is non-temporal or not.
const KernelSet& avx512_set(bool vnni, bool non_temporal) {
    if (vnni) return non_temporal ? kAvx512VnniNt : kAvx512Vnni;
    return non_temporal ? kAvx512NoVnniNt : kAvx512NoVnni;
}

}  // namespace

const KernelSet& avx512_kernel_set() { return avx512_set(cpu_features().avx512vnni, cpu_features().amd); }
const KernelSet& avx512_no_vnni_kernel_set() { return avx512_set(false, cpu_features().amd); }
const KernelSet& avx512_other_prefetch_kernel_set() { return avx512_set(cpu_features().avx512vnni, !cpu_features().amd); }

}  // namespace colibri::kernels
