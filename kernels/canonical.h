// The canonical numerics every kernel variant follows, so that scalar, AVX2, AVX-512 and NEON give
// bit-identical dot products (and the tuner's choice of variant can never change logits).
//
// 1. Float types (f32, f16, bf16): dot(w, x) over `cols` columns, with w the row as dequantize_row gives it
//    (exact in f32):
//      lane k (0..15) starts at +0 and takes, for c = k, k + 16, k + 32, ... in increasing c,
//      lane[k] = fma(w[c], x[c], lane[k]);
//      the 16 lanes are then summed pairwise by halving: lane[k] += lane[k + 8], then + 4, + 2, + 1
//      (sum_lanes below).
//    A 512-bit register, two 256-bit or four 128-bit ones hold the 16 lanes; a scalar loop with std::fma
//    emulates them.
//
// 2. Block types (q8_0, q4_0, q4_K, q5_K, q6_K, mxfp4): the activation vector is quantised to 8 bits per block of 32 values
//    (as llama.cpp's q8 activation blocks do), then every block's dot product is an exact integer.
//    a) Activation quantisation of block b (x[32b .. 32b + 31]), quantize_block below (kernels/activations.cpp,
//       the reference; a variant may supply its own vector version of exactly these operations, the
//       KernelSet's `quantize`, checked byte for byte against it by test_kernels):
//         amax  = max |x[i]| (f32; a NaN is skipped by the comparison `|x| > amax`);
//         d_x   = amax / 127            (f32 division);
//         inv   = amax > 0 ? 127 / amax : 0   (f32 division);
//         v     = x[i] · inv            (f32 product);
//         v     = min(max(v, −127), 127), NaN → 0;
//         q[i]  = v rounded to the nearest integer, ties to even (as std::nearbyint in the default
//                 rounding mode; computed as (v + 1.5·2^23) − 1.5·2^23);
//         s_x   = Σ q[i] (exact int32), and −float(s_x) (exact).
//       amax = 0 gives q = 0, d_x = 0. NaN/Inf in x never trap or reach an undefined conversion, but the
//       result is garbage (Inf makes inv = 0, d_x = Inf; denormal amax can make inv = Inf). The
//       quantisation of the vector's other blocks is unaffected.
//    b) Per 32-column unit g of a row (a q8_0/q4_0/mxfp4 block, a q4_K/q5_K sub-block, 32 values of a q6_K
//       super-block), an exact int32 sum
//         isum_g = Σ_i wq[i] · q[i]  with  q8_0: wq = the stored i8;  q4_0: wq = nibble − 8;
//                                          q4_K, q5_K: wq = the 4- or 5-bit code of value i (the min is
//                                          applied below; blocks::q4_k_code / q5_k_code say where it is);
//                                          mxfp4: wq = the doubled e2m1 value (blocks::kMxfp4Doubled);
//                                          q6_K: wq = sc_i · (code_i − 32), sc_i the int8 scale of value
//                                          i's 16 (blocks::q6_k_code, q6_k_scale), so the scales are inside
//                                          the integer sum, as ggml's kernels do;
//       any ISA may compute it any way it likes (VNNI with an offset and −128·s_x, pmaddubsw, a table
//       lookup, ...): it is an integer, |isum| ≤ 32·128·32·127 < 2^24 (q6_K; < 2^20 for the others), so
//       float(isum) is exact.
//    c) The float combination, 16 lanes, lane = g mod 16, units in increasing g:
//         q8_0, q4_0,  lane[g % 16] = fma(float(isum_g), d_w_g · d_x_g, lane[g % 16])
//         q6_K, mxfp4: (d_w_g the block's f16 scale; q6_K: its super-block's f16 d; mxfp4: 2^(e − 128) from
//                      the block's e8m0 byte, blocks::mxfp4_scale; the product d_w·d_x rounded once, in f32);
//         q4_K, q5_K:  lane[g % 16] = fma(float(isum_g), (d·sc_j) · d_x_g, lane[g % 16]);
//                      lane[g % 16] = fma(−float(s_x,g), (dmin·m_j) · d_x_g, lane[g % 16]);
//                      (j = g mod 8 the sub-block; d·sc_j and dmin·m_j are exact f32 products, the
//                      products with d_x are rounded once; the scale term first, then the min term);
//       then sum_lanes. Units past the last one count as isum = 0 with scale 0, so an ISA may pad the last
//       group of 16 with zeros (a lane never holds −0, so adding +0·0 changes nothing).
//    Hence results are identical for every variant, thread split and batch (matmul_rows per vector equals
//    matvec_rows), but differ from the f32 dot product by the activation rounding (|x − d_x·q| ≤ d_x/2).
//
// 3. The transposed product (f32, weighted_rows in matvec.h): out[i][c] = Σ_r a[i][r] · m[r][c] is, for each
//    output element, one chain acc = fma(a[i][r], m[r][c], acc) over r in increasing order from acc = +0.
//    The elements are independent, so a vector lane per column needs no reduction and every ISA (and the
//    scalar std::fma loop) gives the same bits.
#pragma once
#include <cstddef>
#include <cstdint>

namespace colibri::kernels::canonical {

inline constexpr size_t kLanes = 16;
inline constexpr size_t kActBlock = 32;  // activation block: 32 values share one d_x

// n quantised activation vectors of `blocks` blocks each. Vector i's blocks are at q + i·stride·32,
// d + i·stride, sum + i·stride, nsum + i·stride; stride = blocks rounded up to a multiple of 16, and the
// padding blocks are zero (q = 0, d = 0, sums 0), so a variant may read 16 units from any unit g0 < blocks.
struct QuantizedActivations {
    const int8_t* q;
    const float* d;       // d_x per block
    const int32_t* sum;   // s_x = Σ q per block
    const float* nsum;    // −float(s_x) per block
    size_t blocks, stride;
};

// Quantises one block of 32 values as described in 2a.
void quantize_block(const float* x, int8_t* q, float* d, int32_t* sum);

// Quantises `blocks` consecutive blocks of 32 values: q[32b ..], d[b], sum[b] and nsum[b] = −float(sum[b]).
// quantize_blocks is the reference (quantize_block per block); a variant's vector version must give the
// same bytes.
using QuantizeBlocksFn = void (*)(const float* x, size_t blocks, int8_t* q, float* d, int32_t* sum, float* nsum);
void quantize_blocks(const float* x, size_t blocks, int8_t* q, float* d, int32_t* sum, float* nsum);

// x as the block types' kernels see it: xq[c] = d_x·q[c] per block of 32 and dx[c] = that block's d_x, for the
// whole blocks of `cols` (a ragged tail is left as it is). For checking kernels against a reference.
void dequantize_activations(const float* x, size_t cols, float* xq, float* dx);

// Quantises n vectors of `cols` values (cols a multiple of 32) with `quantize` into a buffer owned by the
// calling thread; valid until the thread's next call. The buffer only grows (no allocation once it is large
// enough).
QuantizedActivations quantize_activations(const float* x, size_t cols, size_t n, QuantizeBlocksFn quantize = quantize_blocks);

// q4_K's activation order for the SIMD kernels (the codes' order is blocks::q4_k_code_byte, kernels/types.h):
// per 8 units (one super-block, 256 bytes), byte 128·(p / 2) + 64·h + 32·(p % 2) + 4j + b holds value
// 16h + 4p + b of unit j (p = 0..3, h = 0..1, j = 0..7, b = 0..3). The activations that a register of codes
// multiplies (the low or high nibbles of one 32-byte piece, or of two consecutive ones) are then one contiguous
// load, lane j against lane j. Vector i of qa at result + i·stride·32 (its zero padding stays zero); into a
// buffer owned by the calling thread, valid until the thread's next call; grows only.
const int8_t* q4_k_activations(const QuantizedActivations& qa, size_t n);

// What a thread-local permuted copy of quantised activations was made from. quantize_activations hands back the
// same buffer, unchanged, when asked for the same values again, so a copy made from it stays good until it
// quantises anew: permuted_copy_current(made_from, qa, n) says whether the copy made from `made_from` is still
// qa's first n vectors, and if not records qa as what the caller is about to copy.
struct QuantizedKey {
    const int8_t* q = nullptr;
    uint64_t generation = 0;  // 0: nothing, or a buffer that is not quantize_activations' (never reused)
    size_t n = 0;
    bool operator==(const QuantizedKey&) const = default;
};
bool permuted_copy_current(QuantizedKey& made_from, const QuantizedActivations& qa, size_t n);

namespace {  // internal linkage: each ISA's translation unit keeps its own copy (no ODR mixing of flags)

// Within a super-block's 256 activation bytes in q4_k_activations' order: where the 32 bytes that the low
// (h = 0) or high (h = 1) nibbles of code piece p (blocks::q4_k_code_byte) multiply begin; byte 4j + b of them
// is value 16h + 4p + b of unit j.
constexpr size_t q4_k_activation_offset(size_t p, size_t h) { return 128 * (p / 2) + 64 * h + 32 * (p % 2); }

inline float sum_lanes(float* lane) {
    for (size_t half = kLanes / 2; half > 0; half /= 2) {
        for (size_t k = 0; k < half; ++k) lane[k] = lane[k] + lane[k + half];
    }
    return lane[0];
}

}  // namespace
}  // namespace colibri::kernels::canonical
