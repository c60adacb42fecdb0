// The matvec/matmul algorithm shared by every variant, written once over an ISA backend `Isa` that holds the
// 16 canonical lanes (kernels/canonical.h) in its vector type `Isa::V`. A variant's .cpp defines its Isa and
// calls make_kernel_set<Isa>(); everything here has internal linkage, so code compiled with one variant's
// flags (-mavx512f, ...) is never picked by the linker for another variant's callers.
//
// Isa provides: V, kMatvecRows (rows reduced side by side in matvec, for independent FMA chains),
// kMatmulVectors (input vectors per pass over a row in matmul), zero(), load(const float*), fma(a, b, c)
// = a·b + c fused, mul(a, b), sum_lanes(V) (canonical::sum_lanes in registers: the same additions), halves(a, b) (lanes 0..7 a, 8..15 b), u8_16(lo, hi) (the 16 bytes of two
// little-endian words as floats), f16_strided(p, stride, nb) (the f16 at p + k·stride for k < nb, then
// zeros), store(float*, V), half(const uint8_t*) (one f16 as float), f16(p), bf16(p)
// (16 values), and for the block types' integer path (canonical.h, 2b) a Chunk type, prepare<T>(row, g0, nb,
// Chunk&) (units g0 .. g0 + nb − 1 of a row, nb ≤ 16, decoded once into a form ready for the integer dot
// product) and isums<T>(const Chunk&, nb, qx, sx): the 16 lanes float(isum_g) of those units (lanes ≥ nb
// are +0), qx the quantised activations from unit g0 on, sx their block sums (both zero-padded to 16 units).
// Optional: kMatmulRows (float matmul register block), quantize_blocks (canonical::quantize_blocks in vector
// code, the same bytes), k_scales<kBlockBytes> (chunk_scales for q4_K and q5_K in vector code), q8_0_scales(p)
// (the 16 scales of a whole q8_0 chunk at p), mxfp4_scales(p, nb) (the 2^(e − 128) of nb mxfp4 blocks at p) and
// matmul_activations<T>(qa, n) (the activations permuted to the unit order of the ISA's Chunk, once per call).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>

#include "kernels/canonical.h"
#include "kernels/half.h"
#include "kernels/kernel_set.h"
#include "kernels/matvec.h"
#include "kernels/types.h"

namespace colibri::kernels::generic {
namespace {

using canonical::kLanes;

inline float load_f32(const uint8_t* p) {
    float v;
    std::memcpy(&v, p, 4);
    return v;
}

inline uint16_t load_u16(const uint8_t* p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
}

// blocks::q4_k_scale_min, repeated here with internal linkage (see the top of the file).
inline void q4_k_scale_min(const uint8_t* s, size_t j, uint8_t* sc, uint8_t* mn) {
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = static_cast<uint8_t>((s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4));
        *mn = static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

// blocks::mxfp4_scale, repeated here with internal linkage: 2^(e − 128), exact.
inline float mxfp4_scale(uint8_t e) {
    const uint32_t bits = e < 2 ? uint32_t(0x00200000u) << e : uint32_t(e - 1) << 23;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

// The block types whose units have a scale and a min (x = (d·sc)·q − dmin·m): a second fma per unit.
constexpr bool has_min(WeightType t) { return t == WeightType::Q4_K || t == WeightType::Q5_K; }

// Bytes of one block of a block type (a super-block for the K types), from the weight-type table.
constexpr size_t block_bytes(WeightType t) { return weight_type_info(t).block_bytes; }

// The float types' path (canonical.h, 1). A Decoder turns group g of a row (kGroup consecutive columns) into
// kGroup / 16 vectors of weights, visiting the groups of a row in order with one State per row. Float types
// decode 16 columns at a time and allow a ragged tail, read one value at a time by value().
struct NoState {};

template <class Isa, WeightType T>
struct Decoder;

template <class Isa>
struct Decoder<Isa, WeightType::F32> {
    static constexpr size_t kGroup = 16;
    using State = NoState;
    static void decode(NoState&, const uint8_t* row, size_t g, typename Isa::V* out) {
        out[0] = Isa::load(reinterpret_cast<const float*>(row) + g * kGroup);
    }
    static float value(const uint8_t* row, size_t c) { return load_f32(row + 4 * c); }
};

template <class Isa>
struct Decoder<Isa, WeightType::F16> {
    static constexpr size_t kGroup = 16;
    using State = NoState;
    static void decode(NoState&, const uint8_t* row, size_t g, typename Isa::V* out) { out[0] = Isa::f16(row + 2 * g * kGroup); }
    static float value(const uint8_t* row, size_t c) { return Isa::half(row + 2 * c); }
};

template <class Isa>
struct Decoder<Isa, WeightType::BF16> {
    static constexpr size_t kGroup = 16;
    using State = NoState;
    static void decode(NoState&, const uint8_t* row, size_t g, typename Isa::V* out) { out[0] = Isa::bf16(row + 2 * g * kGroup); }
    static float value(const uint8_t* row, size_t c) {
        const uint32_t bits = uint32_t(load_u16(row + 2 * c)) << 16;
        float v;
        std::memcpy(&v, &bits, 4);
        return v;
    }
};

// The canonical finish: lanes out of the register, the ragged tail (float types only) into lane c mod 16,
// then the fixed pairwise sum. Without a tail the sum stays in registers (Isa::sum_lanes, the same additions):
// a matmul block of 4 rows and 6 vectors finishes 24 sums per 64 groups of 1024 columns, and with the store,
// the reload and the scalar additions the f16 matmul (2816x1024 against 16 vectors, one core of an Intel Xeon
// guest) ran at 93 GFLOP/s against 116 with the sums in registers.
template <class Isa, class D>
inline float finish(typename Isa::V acc, const uint8_t* row, size_t cols, const float* x) {
    if (cols % D::kGroup == 0) return Isa::sum_lanes(acc);
    float lane[kLanes];
    Isa::store(lane, acc);
    for (size_t c = cols / D::kGroup * D::kGroup; c < cols; ++c) {
        lane[c % kLanes] = std::fma(D::value(row, c), x[c], lane[c % kLanes]);
    }
    return canonical::sum_lanes(lane);
}

// The loops over rows, vectors and registers have compile-time bounds and are unrolled (#pragma GCC unroll)
// so that the accumulators live in registers rather than in an indexed array on the stack.

// Bytes ahead of the read position that the float matvec prefetches in each of its streams (0: none); an ISA
// sets kMatvecPrefetch.
template <class Isa>
constexpr size_t matvec_prefetch() {
    if constexpr (requires { Isa::kMatvecPrefetch; })
        return Isa::kMatvecPrefetch;
    else
        return 0;
}

// R rows against one vector, side by side so their FMA chains overlap; y[k·ystride] for row0 + k·stride.
template <class Isa, WeightType T, size_t R>
inline void dot_rows(const uint8_t* row0, size_t stride, size_t cols, const float* x, float* y, size_t ystride = 1) {
    using D = Decoder<Isa, T>;
    using V = typename Isa::V;
    constexpr size_t kV = D::kGroup / kLanes;
    constexpr size_t kPrefetch = matvec_prefetch<Isa>();
    constexpr size_t kGroupBytes = T == WeightType::F32 ? 4 * D::kGroup : 2 * D::kGroup;
    V acc[R];
    typename D::State st[R];
    for (size_t r = 0; r < R; ++r) acc[r] = Isa::zero();
    const size_t groups = cols / D::kGroup;
    for (size_t g = 0; g < groups; ++g) {
        if constexpr (kPrefetch > 0) {
            // One prefetch per 64-byte line of each stream; past a row's end it reaches the stream's next row.
            if (kGroupBytes >= 64 || (g * kGroupBytes) % 64 == 0)
                #pragma GCC unroll 16
                for (size_t r = 0; r < R; ++r) __builtin_prefetch(row0 + r * stride + g * kGroupBytes + kPrefetch, 0, 3);
        }
        V xv[kV];
        #pragma GCC unroll 16
        for (size_t v = 0; v < kV; ++v) xv[v] = Isa::load(x + g * D::kGroup + v * kLanes);
        #pragma GCC unroll 16
        for (size_t r = 0; r < R; ++r) {
            V w[kV];
            D::decode(st[r], row0 + r * stride, g, w);
            #pragma GCC unroll 16
            for (size_t v = 0; v < kV; ++v) acc[r] = Isa::fma(w[v], xv[v], acc[r]);
        }
    }
    for (size_t r = 0; r < R; ++r) y[r * ystride] = finish<Isa, D>(acc[r], row0 + r * stride, cols, x);
}

// RB rows against N vectors (x + i·cols): y[i·ldy + r] for row0 + r·stride. Each group of a row is decoded
// once for all N vectors and each group of a vector is loaded once for all RB rows, so one pass does RB·N
// FMAs per RB decodes and N loads (a 1-row block is load-bound: one load per FMA). Every element keeps its
// own accumulator and the canonical order, so the blocking never changes a result.
template <class Isa, WeightType T, size_t RB, size_t N>
inline void dot_block(const uint8_t* row0, size_t stride, size_t cols, const float* x, float* y, size_t ldy,
                      const uint8_t* pf = nullptr, size_t pf_lines = 0, const uint8_t* pf_end = nullptr) {
    using D = Decoder<Isa, T>;
    using V = typename Isa::V;
    constexpr size_t kV = D::kGroup / kLanes;
    V acc[RB][N];
    typename D::State st[RB];
    #pragma GCC unroll 16
    for (size_t r = 0; r < RB; ++r)
        #pragma GCC unroll 16
        for (size_t i = 0; i < N; ++i) acc[r][i] = Isa::zero();
    const size_t groups = cols / D::kGroup;
    for (size_t g = 0; g < groups; ++g) {
        if (pf) {
            for (size_t k = 0; k < pf_lines; ++k, pf += 64)
                if (pf < pf_end) __builtin_prefetch(pf, 0, 3);
        }
        V w[RB][kV];
        #pragma GCC unroll 16
        for (size_t r = 0; r < RB; ++r) D::decode(st[r], row0 + r * stride, g, w[r]);
        #pragma GCC unroll 16
        for (size_t i = 0; i < N; ++i) {
            const float* xi = x + i * cols + g * D::kGroup;
            #pragma GCC unroll 16
            for (size_t v = 0; v < kV; ++v) {
                const V xv = Isa::load(xi + v * kLanes);
                #pragma GCC unroll 16
                for (size_t r = 0; r < RB; ++r) acc[r][i] = Isa::fma(w[r][v], xv, acc[r][i]);
            }
        }
    }
    for (size_t r = 0; r < RB; ++r)
        for (size_t i = 0; i < N; ++i)
            y[i * ldy + r] = finish<Isa, D>(acc[r][i], row0 + r * stride, cols, x + i * cols);
}

// The last n < N vectors of a block: a compile-time count for each keeps the accumulators in registers.
template <class Isa, WeightType T, size_t RB, size_t N>
inline void dot_block_rest(size_t n, const uint8_t* row0, size_t stride, size_t cols, const float* x, float* y,
                           size_t ldy, const uint8_t* pf, size_t pf_lines, const uint8_t* pf_end) {
    if constexpr (N > 0) {
        if (n == N) return dot_block<Isa, T, RB, N>(row0, stride, cols, x, y, ldy, pf, pf_lines, pf_end);
        dot_block_rest<Isa, T, RB, N - 1>(n, row0, stride, cols, x, y, ldy, pf, pf_lines, pf_end);
    }
}

// Rows per matmul block: an ISA with registers to spare for RB·N accumulators sets kMatmulRows.
template <class Isa>
constexpr size_t matmul_block_rows() {
    if constexpr (requires { Isa::kMatmulRows; })
        return Isa::kMatmulRows;
    else
        return 1;
}

template <class Isa, WeightType T>
void matvec(const void* w, size_t cols, const float* x, float* y, size_t row_begin, size_t row_end) {
    constexpr size_t R = Isa::kMatvecRows;
    const size_t stride = row_bytes(T, cols);
    const auto* base = static_cast<const uint8_t*>(w);
    // The R rows side by side are R long sequential streams, rows row_begin + i + k·q for k < R (q = the
    // range's rows / R), not R adjacent rows: a hardware prefetcher trains on each stream once and follows
    // it from row to row, where R interleaved 2 KB rows looked like many short streams (32000 x 1024 f16 on
    // a Zen 4 guest: 9.8 GB/s single-threaded with adjacent rows and software prefetch, 15-19 GB/s as streams
    // without). Which rows go together changes no value.
    const size_t q = (row_end - row_begin) / R;
    for (size_t i = 0; i < q; ++i)
        dot_rows<Isa, T, R>(base + (row_begin + i) * stride, q * stride, cols, x, y + i, q);
    for (size_t r = row_begin + q * R; r < row_end; ++r)
        dot_rows<Isa, T, 1>(base + r * stride, stride, cols, x, y + (r - row_begin));
}

// Bytes of weight rows that one group of the float matmul covers (matmul below), and the most bytes of one
// pass's vectors for which the rows are grouped at all.
inline constexpr size_t kMatmulGroupBytes = size_t(128) << 10;
inline constexpr size_t kMatmulPassBytes = size_t(32) << 10;

// Float matmul, loop order. When one pass's N vectors fit in L1 beside the weights (N·cols floats ≤
// kMatmulPassBytes: 24 KB for six vectors of 1024 columns), the rows go in groups of about kMatmulGroupBytes
// and each pass of N vectors goes over all of a group's blocks of RB rows: the pass's vectors stay in L1
// across the group, and the group's weights, read from memory by the first pass, come from L2 for the others.
// Otherwise (longer rows, such as a down projection's 2816 columns) each block of RB rows meets every pass in
// turn, so that at least the block's weights stay in L1. f16 against 16 and 64 vectors, one core of an Intel
// Xeon guest with AMX: 2816x1024 and 1024x1024 x1.10 grouped against block by block, 1024x2816 no gain (x0.98
// and x0.75 grouped). During the first pass the next block's rows are prefetched a few lines per group of
// columns (they come from memory; the other passes are compute-bound). Every y element is one dot_block
// chain whichever the order, so the order changes no result.
template <class Isa, WeightType T>
void matmul(const void* w, size_t cols, const float* x, size_t n, float* y, size_t ldy, size_t row_begin,
            size_t row_end) {
    constexpr size_t RB = matmul_block_rows<Isa>();
    constexpr size_t N = Isa::kMatmulVectors;
    using D = Decoder<Isa, T>;
    const size_t stride = row_bytes(T, cols);
    const auto* base = static_cast<const uint8_t*>(w);
    const size_t groups = cols / D::kGroup;
    const size_t lines = (RB * stride + 63) / 64;
    const size_t per_group = groups ? (lines + groups - 1) / groups : 0;  // prefetch lines per column group
    const size_t group_rows =
        N * cols * sizeof(float) <= kMatmulPassBytes ? std::max<size_t>(1, kMatmulGroupBytes / (stride * RB)) * RB : RB;
    for (size_t r0 = row_begin; r0 < row_end; r0 += group_rows) {
        const size_t r1 = std::min(row_end, r0 + group_rows);
        for (size_t i = 0; i < n; i += N) {
            const size_t nn = std::min(N, n - i);
            const float* xi = x + i * cols;
            float* yi = y + i * ldy;
            size_t r = r0;
            for (; r + RB <= r1; r += RB) {
                const uint8_t* next = i == 0 && r + 2 * RB <= row_end ? base + (r + RB) * stride : nullptr;
                const uint8_t* next_end = next ? next + RB * stride : nullptr;
                dot_block_rest<Isa, T, RB, N>(nn, base + r * stride, stride, cols, xi, yi + (r - row_begin), ldy,
                                              next, next ? per_group : 0, next_end);
            }
            for (; r < r1; ++r)
                dot_block_rest<Isa, T, 1, N>(nn, base + r * stride, stride, cols, xi, yi + (r - row_begin), ldy,
                                             nullptr, 0, nullptr);
        }
    }
}

// ---- Block types: the integer path (kernels/canonical.h, 2) ----

inline constexpr size_t kUnit = canonical::kActBlock;  // columns per unit (block / sub-block)
inline constexpr size_t kChunk = kLanes;                // units per pass: one per lane

// The weight scales of units g0 .. g0 + nb − 1 (lanes ≥ nb are 0): q8_0/q4_0/mxfp4 put d_w in a, q6_K its
// super-block's d; q4_K/q5_K put d·sc_j in a and dmin·m_j in b (exact products). Always inlined: for a row's partial last chunk GCC called it out of
// line, its two results passed through memory (0.7 % of a q4_k decode's cpu-clock samples in that copy).
template <class Isa, WeightType T>
[[gnu::always_inline]] inline void chunk_scales(const uint8_t* row, size_t g0, size_t nb, typename Isa::V* a, typename Isa::V* b) {
    if constexpr (has_min(T) && requires { Isa::template k_scales<block_bytes(T)>(row, g0, nb, a, b); }) {
        // An ISA with a vector unpacking of the scales (the same exact products).
        Isa::template k_scales<block_bytes(T)>(row, g0, nb, a, b);
    } else if constexpr (T == WeightType::Q6_K) {
        // One f16 d per super-block: units of the first in lanes 0..7, of the second (if any) in 8..15.
        const uint8_t* blk = row + (g0 / 8) * blocks::kQ6_KBytes;
        *a = Isa::halves(Isa::half(blk + blocks::kQ6_KScale), nb > 8 ? Isa::half(blk + blocks::kQ6_KBytes + blocks::kQ6_KScale) : 0.0f);
        *b = Isa::zero();
    } else if constexpr (T == WeightType::MXFP4 && requires { Isa::mxfp4_scales(row, nb); }) {
        *a = Isa::mxfp4_scales(row + g0 * blocks::kMxfp4Bytes, nb);
        *b = Isa::zero();
    } else if constexpr (T == WeightType::MXFP4) {
        alignas(64) float sc[kLanes] = {};
        for (size_t k = 0; k < nb; ++k) sc[k] = mxfp4_scale(row[(g0 + k) * blocks::kMxfp4Bytes]);
        *a = Isa::load(sc);
        *b = Isa::zero();
    } else if constexpr (has_min(T)) {
        // The eight 6-bit scales and mins of a super-block (blocks::q4_k_scale_min) as bytes, four at a time
        // from the 12 scale bytes read as little-endian words; then d·sc and dmin·m, exact products.
        constexpr size_t kPer = blocks::kQ4_KValues / kUnit;
        // Plain variables, not arrays: two 8-byte stores read back as one 16-byte load would stall.
        auto unpack = [](const uint8_t* blk, uint64_t* sc, uint64_t* mn, float* d, float* dmin) {
            uint32_t w0, w1, w2;
            std::memcpy(&w0, blk + 4, 4);
            std::memcpy(&w1, blk + 8, 4);
            std::memcpy(&w2, blk + 12, 4);
            const uint32_t sc_lo = w0 & 0x3F3F3F3Fu, mn_lo = w1 & 0x3F3F3F3Fu;
            const uint32_t sc_hi = (w2 & 0x0F0F0F0Fu) | ((w0 >> 2) & 0x30303030u);
            const uint32_t mn_hi = ((w2 >> 4) & 0x0F0F0F0Fu) | ((w1 >> 2) & 0x30303030u);
            *sc = uint64_t(sc_lo) | uint64_t(sc_hi) << 32;
            *mn = uint64_t(mn_lo) | uint64_t(mn_hi) << 32;
            *d = Isa::half(blk);
            *dmin = Isa::half(blk + 2);
        };
        uint64_t sc0, mn0, sc1 = 0, mn1 = 0;
        float d0, dmin0, d1 = 0.0f, dmin1 = 0.0f;
        const uint8_t* blk = row + (g0 / kPer) * block_bytes(T);  // q5_K keeps q4_K's d, dmin and scales
        unpack(blk, &sc0, &mn0, &d0, &dmin0);  // nb is 8 or 16: one or two super-blocks
        if (nb > kPer) unpack(blk + block_bytes(T), &sc1, &mn1, &d1, &dmin1);
        *a = Isa::mul(Isa::halves(d0, d1), Isa::u8_16(sc0, sc1));
        *b = Isa::mul(Isa::halves(dmin0, dmin1), Isa::u8_16(mn0, mn1));
    } else {
        constexpr size_t bytes = block_bytes(T);
        if constexpr (T == WeightType::Q8_0 && requires { Isa::q8_0_scales(row); }) {
            // An ISA with a whole-chunk way to the 16 q8_0 scales (the same values as f16_strided).
            *a = nb == kChunk ? Isa::q8_0_scales(row + g0 * bytes) : Isa::f16_strided(row + g0 * bytes, bytes, nb);
        } else {
            *a = Isa::f16_strided(row + g0 * bytes, bytes, nb);
        }
        *b = Isa::zero();
    }
}

// One row against vectors v0 .. v0 + N − 1 of qa; y[i·ldy]. qx: qa.q in the order the ISA's isums reads
// (matmul_activations). The weight scales of a chunk are worked out once for all N vectors; every vector's
// arithmetic is exactly what it would be alone.
template <class Isa, WeightType T, size_t N>
inline void qdot_vectors(const uint8_t* row, const canonical::QuantizedActivations& qa, const int8_t* qx, size_t v0,
                         float* y, size_t ldy) {
    using V = typename Isa::V;
    V acc[N];
    #pragma GCC unroll 8
    for (size_t i = 0; i < N; ++i) acc[i] = Isa::zero();
    for (size_t g0 = 0; g0 < qa.blocks; g0 += kChunk) {
        const size_t nb = qa.blocks - g0 < kChunk ? qa.blocks - g0 : kChunk;
        V a, b;
        chunk_scales<Isa, T>(row, g0, nb, &a, &b);
        typename Isa::Chunk wc;
        Isa::template prepare<T>(row, g0, nb, wc);
        #pragma GCC unroll 8
        for (size_t i = 0; i < N; ++i) {
            const size_t at = (v0 + i) * qa.stride + g0;
            const V is = Isa::template isums<T>(wc, nb, qx + at * kUnit, qa.sum + at);
            const V dx = Isa::load(qa.d + at);
            acc[i] = Isa::fma(is, Isa::mul(a, dx), acc[i]);
            if constexpr (has_min(T)) acc[i] = Isa::fma(Isa::load(qa.nsum + at), Isa::mul(b, dx), acc[i]);
        }
    }
    #pragma GCC unroll 8
    for (size_t i = 0; i < N; ++i) y[i * ldy] = Isa::sum_lanes(acc[i]);
}

// The ISA's activation quantiser: its vector version when it has one, else the reference.
template <class Isa>
constexpr canonical::QuantizeBlocksFn quantizer() {
    if constexpr (requires { Isa::quantize_blocks; })
        return Isa::quantize_blocks;
    else
        return canonical::quantize_blocks;
}

// The quantised activations as the ISA's prepare/isums pair reads them: an ISA whose weight registers hold
// units in another order permutes the activations to match, once per call (matmul_activations<T>(qa, n));
// otherwise qa.q as it is.
template <class Isa, WeightType T>
inline const int8_t* matmul_activations(const canonical::QuantizedActivations& qa, size_t n) {
    if constexpr (requires { Isa::template matmul_activations<T>(qa, n); })
        return Isa::template matmul_activations<T>(qa, n);
    else
        return qa.q;
}

template <class Isa, WeightType T>
void qmatvec(const void* w, size_t cols, const float* x, float* y, size_t row_begin, size_t row_end) {
    const canonical::QuantizedActivations qa = canonical::quantize_activations(x, cols, 1, quantizer<Isa>());
    const size_t stride = row_bytes(T, cols);
    const auto* base = static_cast<const uint8_t*>(w);
    const int8_t* qx = matmul_activations<Isa, T>(qa, 1);
    for (size_t r = row_begin; r < row_end; ++r) qdot_vectors<Isa, T, 1>(base + r * stride, qa, qx, 0, y + (r - row_begin), 1);
}

// The last n < kMatmulVectors vectors with a compile-time count.
template <class Isa, WeightType T, size_t N>
inline void qdot_vectors_rest(size_t n, const uint8_t* row, const canonical::QuantizedActivations& qa,
                              const int8_t* qx, size_t v0, float* y, size_t ldy) {
    if constexpr (N > 0) {
        if (n == N) return qdot_vectors<Isa, T, N>(row, qa, qx, v0, y, ldy);
        qdot_vectors_rest<Isa, T, N - 1>(n, row, qa, qx, v0, y, ldy);
    }
}

template <class Isa, WeightType T>
void qmatmul(const void* w, size_t cols, const float* x, size_t n, float* y, size_t ldy, size_t row_begin,
             size_t row_end) {
    constexpr size_t N = Isa::kMatmulVectors;
    const canonical::QuantizedActivations qa = canonical::quantize_activations(x, cols, n, quantizer<Isa>());  // once per call
    const int8_t* qx = matmul_activations<Isa, T>(qa, n);
    const size_t stride = row_bytes(T, cols);
    const auto* base = static_cast<const uint8_t*>(w);
    for (size_t r = row_begin; r < row_end; ++r) {
        float* yr = y + (r - row_begin);
        const uint8_t* row = base + r * stride;
        size_t i = 0;
        for (; i + N <= n; i += N) qdot_vectors<Isa, T, N>(row, qa, qx, i, yr + i * ldy, ldy);
        qdot_vectors_rest<Isa, T, N - 1>(n - i, row, qa, qx, i, yr + i * ldy, ldy);
    }
}

// ---- The transposed product (canonical.h, 3): out[i·ldo + c] = Σ_r a[i·lda + r] · m[r·ld + c] ----

// N vectors of a against G groups of 16 columns: N·G accumulators, each row of m loaded once for all N.
template <class Isa, size_t N, size_t G>
inline void weighted_panel(const float* m, size_t ld, size_t rows, const float* a, size_t lda, float* out, size_t ldo) {
    using V = typename Isa::V;
    V acc[N][G];
    #pragma GCC unroll 8
    for (size_t i = 0; i < N; ++i)
        #pragma GCC unroll 8
        for (size_t g = 0; g < G; ++g) acc[i][g] = Isa::zero();
    for (size_t r = 0; r < rows; ++r) {
        V mv[G];
        #pragma GCC unroll 8
        for (size_t g = 0; g < G; ++g) mv[g] = Isa::load(m + r * ld + g * kLanes);
        #pragma GCC unroll 8
        for (size_t i = 0; i < N; ++i) {
            const float s = a[i * lda + r];
            const V av = Isa::halves(s, s);
            #pragma GCC unroll 8
            for (size_t g = 0; g < G; ++g) acc[i][g] = Isa::fma(av, mv[g], acc[i][g]);
        }
    }
    #pragma GCC unroll 8
    for (size_t i = 0; i < N; ++i)
        #pragma GCC unroll 8
        for (size_t g = 0; g < G; ++g) Isa::store(out + i * ldo + g * kLanes, acc[i][g]);
}

// N vectors, all columns: panels of 4 groups, then the remaining groups, then a ragged tail in scalar fma.
template <class Isa, size_t N>
inline void weighted_vectors(const float* m, size_t ld, size_t rows, size_t cols, const float* a, size_t lda, float* out,
                             size_t ldo) {
    constexpr size_t kPanel = 4 * kLanes;
    size_t c = 0;
    for (; c + kPanel <= cols; c += kPanel) weighted_panel<Isa, N, 4>(m + c, ld, rows, a, lda, out + c, ldo);
    switch ((cols - c) / kLanes) {
        case 3: weighted_panel<Isa, N, 3>(m + c, ld, rows, a, lda, out + c, ldo); c += 3 * kLanes; break;
        case 2: weighted_panel<Isa, N, 2>(m + c, ld, rows, a, lda, out + c, ldo); c += 2 * kLanes; break;
        case 1: weighted_panel<Isa, N, 1>(m + c, ld, rows, a, lda, out + c, ldo); c += kLanes; break;
        default: break;
    }
    for (; c < cols; ++c)
        for (size_t i = 0; i < N; ++i) {
            float acc = 0.0f;
            for (size_t r = 0; r < rows; ++r) acc = std::fma(a[i * lda + r], m[r * ld + c], acc);
            out[i * ldo + c] = acc;
        }
}

// Vectors per pass: an ISA with registers to spare sets kWeightedVectors (its N·4 accumulators must fit).
template <class Isa>
constexpr size_t weighted_vectors_per_pass() {
    if constexpr (requires { Isa::kWeightedVectors; })
        return Isa::kWeightedVectors;
    else
        return 1;
}

template <class Isa, size_t N>
inline void weighted_rest(size_t n, const float* m, size_t ld, size_t rows, size_t cols, const float* a, size_t lda,
                          float* out, size_t ldo) {
    if constexpr (N > 0) {
        if (n == N) return weighted_vectors<Isa, N>(m, ld, rows, cols, a, lda, out, ldo);
        weighted_rest<Isa, N - 1>(n, m, ld, rows, cols, a, lda, out, ldo);
    }
}

template <class Isa>
void weighted_rows(const float* m, size_t ld, size_t rows, size_t cols, const float* a, size_t lda, size_t n, float* out,
                   size_t ldo) {
    constexpr size_t N = weighted_vectors_per_pass<Isa>();
    size_t i = 0;
    for (; i + N <= n; i += N) weighted_vectors<Isa, N>(m, ld, rows, cols, a + i * lda, lda, out + i * ldo, ldo);
    weighted_rest<Isa, N - 1>(n - i, m, ld, rows, cols, a + i * lda, lda, out + i * ldo, ldo);
}

// ---- Memory-read probe: S sequential streams side by side, each 64-byte line summed as two 32-byte vectors ----
// GCC vector types rather than intrinsics: 256-bit loads in the AVX2 and AVX-512 files, two 128-bit ones in the
// baseline and NEON files. 256-bit loads read faster here than one 64-byte load per line (on a Zen 5 guest one
// stream per thread 67 against 53 GB/s, four with prefetch 83-87 against 79-83), and than what the compiler
// makes of a plain word loop with AVX-512 flags (four streams 38 GB/s).
template <size_t S, bool kPrefetch>
uint64_t stream_sum_lines(const uint8_t* p, size_t lines) {
    typedef uint64_t U64x4 __attribute__((vector_size(32)));
    U64x4 acc[S][2] = {};
    for (size_t l = 0; l < lines; ++l)
        #pragma GCC unroll 4
        for (size_t s = 0; s < S; ++s) {
            const uint8_t* line = p + (s * lines + l) * 64;
            if constexpr (kPrefetch) __builtin_prefetch(line + kStreamPrefetch, 0, 3);
            U64x4 a, b;
            std::memcpy(&a, line, 32);
            std::memcpy(&b, line + 32, 32);
            acc[s][0] += a;
            acc[s][1] += b;
        }
    uint64_t t = 0;
    for (size_t s = 0; s < S; ++s)
        for (size_t k = 0; k < 4; ++k) t += acc[s][0][k] + acc[s][1][k];
    return t;
}

// (A prefetch past the end of the buffer is harmless: prefetches never fault.)
template <class Isa>
uint64_t stream_sum(const uint8_t* p, size_t bytes, size_t streams, bool prefetch) {
    const size_t lines = bytes / 64 / streams;
    auto with = [&]<bool kPrefetch>() {
        return streams >= 4    ? stream_sum_lines<4, kPrefetch>(p, lines)
               : streams == 2 ? stream_sum_lines<2, kPrefetch>(p, lines)
                              : stream_sum_lines<1, kPrefetch>(p, lines);
    };
    uint64_t t = prefetch ? with.template operator()<true>() : with.template operator()<false>();
    const size_t done = lines * streams * 64;
    if (done < bytes) t += stream_sum_lines<1, false>(p + done, (bytes - done) / 64);
    return t;
}

// Every row of the weight-type table gets its kernels: the float path for types of one value per block, the
// block path for the others. A float row without a Decoder fails to compile here; a block row needs its scales in
// chunk_scales and its codes in each ISA's unpacking (tests/tools/test_table_rows.cpp checks the results).
template <class Isa, size_t... I>
constexpr void set_type_kernels(KernelSet& s, std::index_sequence<I...>) {
    constexpr auto pick_matvec = []<WeightType T>() -> MatvecFn {
        if constexpr (weight_type_info(T).block_values == 1) return matvec<Isa, T>;
        else return qmatvec<Isa, T>;
    };
    constexpr auto pick_matmul = []<WeightType T>() -> MatmulFn {
        if constexpr (weight_type_info(T).block_values == 1) return matmul<Isa, T>;
        else return qmatmul<Isa, T>;
    };
    ((s.matvec[I] = pick_matvec.template operator()<WeightType(I)>()), ...);
    ((s.matmul[I] = pick_matmul.template operator()<WeightType(I)>()), ...);
}

template <class Isa>
constexpr KernelSet make_kernel_set() {
    KernelSet s{};
    set_type_kernels<Isa>(s, std::make_index_sequence<kWeightTypeCount>{});
    s.quantize = quantizer<Isa>();
    s.weighted_rows = weighted_rows<Isa>;
    s.stream_sum = stream_sum<Isa>;
    return s;
}

}  // namespace
}  // namespace colibri::kernels::generic
