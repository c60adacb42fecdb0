// The matvec/matmul algorithm shared by every variant, written once over an ISA backend `Isa` that holds the
// 16 canonical lanes (kernels/canonical.h) in its vector type `Isa::V`. A variant's .cpp defines its Isa and
// calls make_kernel_set<Isa>(); everything here has internal linkage, so code compiled with one variant's
// flags (-mavx512f, ...) is never picked by the linker for another variant's callers.
//
// Isa provides: V, kMatvecRows (rows reduced side by side in matvec, for independent FMA chains),
// kMatmulVectors (input vectors per pass over a row in matmul), zero(), load(const float*), fma(a, b, c)
// = a·b + c fused, store(float*, V), half(const uint8_t*) (one f16 as float), f16(p), bf16(p) (16 values),
// q8_0(block, V[2]), q4_0(block, V[2]) and q4_k(32 quant bytes, shift, step, offset, V[2]) (32 dequantised
// values; q4_k computes step·q − offset with one rounding).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

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

// A Decoder turns group g of a row (kGroup consecutive columns) into kGroup / 16 vectors of weights, visiting
// the groups of a row in order with one State per row (q4_K keeps its super-block's scales there). Float types
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

template <class Isa>
struct Decoder<Isa, WeightType::Q8_0> {
    static constexpr size_t kGroup = blocks::kQ8_0Values;
    using State = NoState;
    static void decode(NoState&, const uint8_t* row, size_t g, typename Isa::V* out) { Isa::q8_0(row + g * blocks::kQ8_0Bytes, out); }
    static float value(const uint8_t*, size_t) { return 0.0f; }  // rows hold whole blocks: never called
};

template <class Isa>
struct Decoder<Isa, WeightType::Q4_0> {
    static constexpr size_t kGroup = blocks::kQ4_0Values;
    using State = NoState;
    static void decode(NoState&, const uint8_t* row, size_t g, typename Isa::V* out) { Isa::q4_0(row + g * blocks::kQ4_0Bytes, out); }
    static float value(const uint8_t*, size_t) { return 0.0f; }
};

// One group is one 32-value sub-block j of super-block b: value = (d·sc)·q − dmin·mn. The eight steps d·sc
// and offsets dmin·mn are worked out once per super-block, at its first sub-block.
template <class Isa>
struct Decoder<Isa, WeightType::Q4_K> {
    static constexpr size_t kGroup = blocks::kQ4_KSubBlock;
    static constexpr size_t kPerBlock = blocks::kQ4_KValues / blocks::kQ4_KSubBlock;
    struct State {
        float step[kPerBlock], offset[kPerBlock];
    };
    static void decode(State& st, const uint8_t* row, size_t g, typename Isa::V* out) {
        const size_t j = g % kPerBlock;
        const uint8_t* blk = row + (g / kPerBlock) * blocks::kQ4_KBytes;
        const uint8_t* scales = blk + 4;
        if (j == 0) {
            const float d = Isa::half(blk), dmin = Isa::half(blk + 2);
            for (size_t k = 0; k < kPerBlock; ++k) {
                uint8_t sc, mn;
                q4_k_scale_min(scales, k, &sc, &mn);
                st.step[k] = d * float(sc);
                st.offset[k] = dmin * float(mn);
            }
        }
        Isa::q4_k(scales + blocks::kQ4_KScaleBytes + (j / 2) * blocks::kQ4_KSubBlock, int(j % 2) * 4, st.step[j],
                  st.offset[j], out);
    }
    static float value(const uint8_t*, size_t) { return 0.0f; }
};

// The canonical finish: lanes out of the register, the ragged tail (float types only) into lane c mod 16,
// then the fixed pairwise sum.
template <class Isa, class D>
inline float finish(typename Isa::V acc, const uint8_t* row, size_t cols, const float* x) {
    float lane[kLanes];
    Isa::store(lane, acc);
    for (size_t c = cols / D::kGroup * D::kGroup; c < cols; ++c) {
        lane[c % kLanes] = std::fma(D::value(row, c), x[c], lane[c % kLanes]);
    }
    return canonical::sum_lanes(lane);
}

// The loops over rows, vectors and registers have compile-time bounds and are unrolled (#pragma GCC unroll)
// so that the accumulators live in registers rather than in an indexed array on the stack.

// R rows against one vector, side by side so their FMA chains overlap; y[k] for row0 + k·stride.
template <class Isa, WeightType T, size_t R>
inline void dot_rows(const uint8_t* row0, size_t stride, size_t cols, const float* x, float* y) {
    using D = Decoder<Isa, T>;
    using V = typename Isa::V;
    constexpr size_t kV = D::kGroup / kLanes;
    V acc[R];
    typename D::State st[R];
    for (size_t r = 0; r < R; ++r) acc[r] = Isa::zero();
    const size_t groups = cols / D::kGroup;
    for (size_t g = 0; g < groups; ++g) {
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
    for (size_t r = 0; r < R; ++r) y[r] = finish<Isa, D>(acc[r], row0 + r * stride, cols, x);
}

// RB rows against N vectors (x + i·cols): y[i·ldy + r] for row0 + r·stride. Each group of a row is decoded
// once for all N vectors and each group of a vector is loaded once for all RB rows, so one pass does RB·N
// FMAs per RB decodes and N loads (a 1-row block is load-bound: one load per FMA). Every element keeps its
// own accumulator and the canonical order, so the blocking never changes a result.
template <class Isa, WeightType T, size_t RB, size_t N>
inline void dot_block(const uint8_t* row0, size_t stride, size_t cols, const float* x, float* y, size_t ldy) {
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
                           size_t ldy) {
    if constexpr (N > 0) {
        if (n == N) return dot_block<Isa, T, RB, N>(row0, stride, cols, x, y, ldy);
        dot_block_rest<Isa, T, RB, N - 1>(n, row0, stride, cols, x, y, ldy);
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
    size_t r = row_begin;
    for (; r + R <= row_end; r += R) dot_rows<Isa, T, R>(base + r * stride, stride, cols, x, y + (r - row_begin));
    for (; r < row_end; ++r) dot_rows<Isa, T, 1>(base + r * stride, stride, cols, x, y + (r - row_begin));
}

template <class Isa, WeightType T, size_t RB>
void matmul_rows_block(const uint8_t* row0, size_t stride, size_t cols, const float* x, size_t n, float* yr,
                       size_t ldy) {
    constexpr size_t N = Isa::kMatmulVectors;
    size_t i = 0;
    for (; i + N <= n; i += N) dot_block<Isa, T, RB, N>(row0, stride, cols, x + i * cols, yr + i * ldy, ldy);
    dot_block_rest<Isa, T, RB, N - 1>(n - i, row0, stride, cols, x + i * cols, yr + i * ldy, ldy);
}

template <class Isa, WeightType T>
void matmul(const void* w, size_t cols, const float* x, size_t n, float* y, size_t ldy, size_t row_begin,
            size_t row_end) {
    constexpr size_t RB = matmul_block_rows<Isa>();
    const size_t stride = row_bytes(T, cols);
    const auto* base = static_cast<const uint8_t*>(w);
    size_t r = row_begin;
    for (; r + RB <= row_end; r += RB)
        matmul_rows_block<Isa, T, RB>(base + r * stride, stride, cols, x, n, y + (r - row_begin), ldy);
    for (; r < row_end; ++r) matmul_rows_block<Isa, T, 1>(base + r * stride, stride, cols, x, n, y + (r - row_begin), ldy);
}

template <class Isa>
constexpr KernelSet make_kernel_set() {
    KernelSet s{};
    s.matvec[size_t(WeightType::F32)] = matvec<Isa, WeightType::F32>;
    s.matvec[size_t(WeightType::F16)] = matvec<Isa, WeightType::F16>;
    s.matvec[size_t(WeightType::BF16)] = matvec<Isa, WeightType::BF16>;
    s.matvec[size_t(WeightType::Q8_0)] = matvec<Isa, WeightType::Q8_0>;
    s.matvec[size_t(WeightType::Q4_K)] = matvec<Isa, WeightType::Q4_K>;
    s.matvec[size_t(WeightType::Q4_0)] = matvec<Isa, WeightType::Q4_0>;
    s.matmul[size_t(WeightType::F32)] = matmul<Isa, WeightType::F32>;
    s.matmul[size_t(WeightType::F16)] = matmul<Isa, WeightType::F16>;
    s.matmul[size_t(WeightType::BF16)] = matmul<Isa, WeightType::BF16>;
    s.matmul[size_t(WeightType::Q8_0)] = matmul<Isa, WeightType::Q8_0>;
    s.matmul[size_t(WeightType::Q4_K)] = matmul<Isa, WeightType::Q4_K>;
    s.matmul[size_t(WeightType::Q4_0)] = matmul<Isa, WeightType::Q4_0>;
    return s;
}

}  // namespace
}  // namespace colibri::kernels::generic
