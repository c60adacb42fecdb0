// The quantisers of the block types (kernels/weight_types.h's `quantize` entry points) and the float types'
// conversions. Choices and measurements: docs/QUANTIZATION.md; layouts: docs/FORMAT.md, "Weight types". The
// input is finite (tools::quantize_row checks it and words the errors).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>

#include "kernels/half.h"
#include "kernels/weight_types.h"

namespace colibri::kernels {
namespace {

using namespace blocks;

// The integer nearest to v (ties to even) within [lo, hi]. Clamping first keeps |v| small enough for the
// 1.5·2^23 trick, which rounds in the FPU's default mode without a libm call (nearbyint is one on baseline
// x86-64, and it dominated the quantisers' run time).
inline float round_level(float v, float lo, float hi) {
    constexpr float kMagic = 12582912.0f;  // 1.5 · 2^23
    const float c = std::clamp(v, lo, hi);
    return (c + kMagic) - kMagic;
}

float stored_f16(float v, uint16_t* bits) {
    *bits = kernels::f32_to_f16(v);
    return kernels::f16_to_f32(*bits);
}

// ---------------------------------------------------------------------------------------------------------
// Symmetric blocks (q8_0, q4_0): x ≈ d·l with one f16 scale d per block and integer levels l ∈ [lo, hi].
//
// For a given stored scale the best levels are the nearest ones, so the search is over d only. Candidates:
// the block's largest-magnitude value xm mapped onto each of a few target levels (d = xm / t; the first
// target is the plain max scaling ggml uses), and for each candidate's levels the least-squares scale
// Σx·l / Σl², which re-centres the grid on the block's values. Every candidate is evaluated with its scale
// rounded to f16, as the kernel sees it; the smallest squared error wins, ties going to the earlier one, and
// "all levels zero" is the fallback, so the result is never worse than max scaling.

constexpr size_t kSymBlock = 32;  // both q8_0 and q4_0

struct SymmetricFit {
    uint16_t d_bits = 0;
    int8_t levels[kSymBlock] = {};
    double sse = 0.0;
};

// Squared errors are summed in four interleaved float lanes: independent chains keep the loop fast, and
// the order is fixed, so the choice among candidates is deterministic.
double assign_levels(const float* x, float d, int lo, int hi, int8_t* levels) {
    const float inv = 1.0f / d;
    float acc[4] = {0, 0, 0, 0};
    for (size_t i = 0; i < kSymBlock; i += 4) {
        for (size_t k = 0; k < 4; ++k) {
            const float q = round_level(x[i + k] * inv, float(lo), float(hi));
            levels[i + k] = static_cast<int8_t>(q);
            const float e = x[i + k] - d * q;
            acc[k] += e * e;
        }
    }
    return double((acc[0] + acc[1]) + (acc[2] + acc[3]));
}

// Tries scale d as stored; returns false when it rounds to zero or overflows f16.
bool try_scale(const float* x, float d, int lo, int hi, SymmetricFit& trial) {
    const float stored = stored_f16(d, &trial.d_bits);
    if (stored == 0.0f || !std::isfinite(stored)) return false;
    trial.sse = assign_levels(x, stored, lo, hi, trial.levels);
    return true;
}

float least_squares_scale(const float* x, const int8_t* levels) {
    double xl = 0.0, ll = 0.0;
    for (size_t i = 0; i < kSymBlock; ++i) {
        xl += double(x[i]) * levels[i];
        ll += double(levels[i]) * levels[i];
    }
    return ll > 0.0 ? static_cast<float>(xl / ll) : 0.0f;
}

// False when even the plain max scaling overflows f16.
bool fit_symmetric(const float* x, int lo, int hi, std::span<const float> targets, SymmetricFit& best) {
    float xm = 0.0f;
    for (size_t i = 0; i < kSymBlock; ++i)
        if (std::fabs(x[i]) > std::fabs(xm)) xm = x[i];
    best = SymmetricFit{};
    for (size_t i = 0; i < kSymBlock; ++i) best.sse += double(x[i]) * x[i];
    if (xm == 0.0f) return true;
    // With levels symmetric about zero the sign of d is free; keep it positive, as ggml does.
    const float anchor = lo == -hi ? std::fabs(xm) : xm;
    SymmetricFit trial;
    for (size_t k = 0; k < targets.size(); ++k) {
        const bool ok = try_scale(x, anchor / targets[k], lo, hi, trial);
        if (k == 0 && !ok && std::isinf(kernels::f16_to_f32(trial.d_bits))) return false;
        if (!ok) continue;
        if (trial.sse < best.sse) best = trial;
        const float refit = least_squares_scale(x, trial.levels);
        if (refit != 0.0f && try_scale(x, refit, lo, hi, trial) && trial.sse < best.sse) best = trial;
    }
    return true;
}

// q8_0 maps xm to ±127 or a little below (a coarser step that may fit the other values better).
constexpr float kQ8Targets[] = {127.0f, 126.0f, 125.0f, 124.0f, 122.0f, 120.0f};
// q4_0 has levels −8..7: xm goes to −8 (ggml's choice: the extra level serves the extreme side), a little
// beyond (clipping it slightly), a little within, or to +7 (d of the other sign).
constexpr float kQ4Targets[] = {-8.0f, -8.5f, -7.5f, -7.0f, 7.0f};

// ---------------------------------------------------------------------------------------------------------
// q4_K: x ≈ S·q − M per sub-block of 32, q ∈ [0, 15], S = d·sc and M = dmin·mn with 6-bit sc, mn and f16
// d, dmin shared by the super-block of 256.
//
// 1. Each sub-block's real-valued (S, M), S ≥ 0, M ≥ 0 (the grid starts at or below zero, as in ggml), is
//    fitted to minimise Σ (S·q − M − x)²: for each of 5 initial steps (max − min) / t, t ∈ {14, 14.5, 15,
//    15.5, 16} (t > 15 clips the ends a little), levels are assigned by rounding, then (S, M) and the levels
//    are alternately re-solved, at most twice: least squares for (S, M) given the levels (a 2×2 system,
//    falling back to M = 0 when its optimum has M < 0), nearest levels given (S, M). A step is kept only when
//    it lowers the error; the best fit over all starts wins.
// 2. d = max S / 63 and dmin = max M / 63 are rounded to f16; each sub-block then takes, among sc ∈ {⌊S/d⌋,
//    ⌈S/d⌉} and mn ∈ {⌊M/dmin⌋, ⌈M/dmin⌉}, the pair whose nearest levels give the least error, computed
//    exactly as the kernel dequantises.
// 3. The same packing is done from plain min/max scaling; the super-block keeps whichever of the two has the
//    smaller total error, so the result is never worse than min/max.
// The error is unweighted: without activation statistics every column matters alike to the product W·x.
// More starts buy little: 17 starts with 3 refinements lowered the RMS error by 0.3–0.6% (Gaussian,
// heavy-tailed and outlier data) at about three times the cost.

// q5_K is the same with a fifth bit, q ∈ [0, 31]: the steps below take the top level `top` (15 or 31), the
// initial steps (max − min) / t for t ∈ top + {0, −0.5, +0.5, −1, +1}.

constexpr size_t kSub = kQ4_KSubBlock;
constexpr size_t kSubs = kQ4_KValues / kQ4_KSubBlock;
constexpr float kStartOffsets[] = {0.0f, -0.5f, 0.5f, -1.0f, 1.0f};
constexpr int kRefinements = 2;

struct SubFit {
    float step = 0.0f;    // S
    float offset = 0.0f;  // M
};

double assign_affine(const float* x, float step, float offset, float top, uint8_t* q) {
    const float inv = step > 0.0f ? 1.0f / step : 0.0f;
    float acc[4] = {0, 0, 0, 0};
    for (size_t i = 0; i < kSub; i += 4) {
        for (size_t k = 0; k < 4; ++k) {
            const float l = round_level((x[i + k] + offset) * inv, 0.0f, top);
            q[i + k] = static_cast<uint8_t>(l);
            const float e = x[i + k] - (step * l - offset);  // as the kernel dequantises
            acc[k] += e * e;
        }
    }
    return double((acc[0] + acc[1]) + (acc[2] + acc[3]));
}

// Least-squares (S, M) for fixed levels: minimise Σ (S·q − M − x)² subject to M ≥ 0, S ≥ 0.
SubFit solve_affine(const float* x, const uint8_t* q) {
    double sq = 0, sqq = 0, sx = 0, sqx = 0;
    for (size_t i = 0; i < kSub; ++i) {
        sq += q[i];
        sqq += double(q[i]) * q[i];
        sx += x[i];
        sqx += double(q[i]) * x[i];
    }
    const double n = double(kSub), det = n * sqq - sq * sq;
    if (det > 0.0) {
        const double step = (n * sqx - sq * sx) / det;
        const double base = (sqq * sx - sq * sqx) / det;  // the value of level 0, = −M
        if (base <= 0.0 && step >= 0.0) return SubFit{float(step), float(-base)};
    }
    // The constrained optimum lies on M = 0.
    if (sqq > 0.0 && sqx > 0.0) return SubFit{float(sqx / sqq), 0.0f};
    return SubFit{0.0f, 0.0f};
}

SubFit fit_sub_block(const float* x, float top) {
    float lo = 0.0f, hi = x[0];
    for (size_t i = 0; i < kSub; ++i) {
        lo = std::min(lo, x[i]);
        hi = std::max(hi, x[i]);
    }
    if (hi <= lo) return SubFit{0.0f, -lo};  // constant block at or below zero: exact with S = 0
    SubFit best;
    double best_err = INFINITY;
    uint8_t q[kSub], next_q[kSub];
    for (float dt : kStartOffsets) {
        SubFit fit{(hi - lo) / (top + dt), -lo};
        double err = assign_affine(x, fit.step, fit.offset, top, q);
        for (int round = 0; round < kRefinements; ++round) {
            const SubFit next = solve_affine(x, q);
            const double next_err = assign_affine(x, next.step, next.offset, top, next_q);
            if (!(next_err < err)) break;
            fit = next;
            err = next_err;
            std::memcpy(q, next_q, kSub);
        }
        if (err < best_err) {
            best = fit;
            best_err = err;
        }
    }
    return best;
}

struct SuperBlock {
    uint16_t d_bits = 0, dmin_bits = 0;
    uint8_t sc[kSubs] = {}, mn[kSubs] = {};
    uint8_t q[kQ4_KValues] = {};
    double err = 0.0;
};

// Candidate 6-bit codes around v / unit.
void codes_around(float v, float unit, uint8_t out[2], int* count) {
    if (unit <= 0.0f) {
        out[0] = 0;
        *count = 1;
        return;
    }
    const float r = std::floor(v / unit);
    const int a = static_cast<int>(std::clamp(r, 0.0f, 63.0f)), b = static_cast<int>(std::clamp(r + 1.0f, 0.0f, 63.0f));
    out[0] = static_cast<uint8_t>(a);
    out[1] = static_cast<uint8_t>(b);
    *count = a == b ? 1 : 2;
}

// Packs real-valued sub-block fits into the super-block's codes; false when d or dmin overflows f16.
bool pack_super_block(const float* x, const SubFit* fits, float top, SuperBlock& sb) {
    float max_step = 0.0f, max_offset = 0.0f;
    for (size_t j = 0; j < kSubs; ++j) {
        max_step = std::max(max_step, fits[j].step);
        max_offset = std::max(max_offset, fits[j].offset);
    }
    const float d = stored_f16(max_step / 63.0f, &sb.d_bits);
    const float dmin = stored_f16(max_offset / 63.0f, &sb.dmin_bits);
    if (!std::isfinite(d) || !std::isfinite(dmin)) return false;
    sb.err = 0.0;
    uint8_t q[kSub];
    for (size_t j = 0; j < kSubs; ++j) {
        uint8_t scs[2], mns[2];
        int n_sc, n_mn;
        codes_around(fits[j].step, d, scs, &n_sc);
        codes_around(fits[j].offset, dmin, mns, &n_mn);
        double best = INFINITY;
        for (int a = 0; a < n_sc; ++a) {
            for (int b = 0; b < n_mn; ++b) {
                // Step and offset exactly as the kernel forms them.
                const float step = d * float(scs[a]), offset = dmin * float(mns[b]);
                const double err = assign_affine(x + j * kSub, step, offset, top, q);
                if (err < best) {
                    best = err;
                    sb.sc[j] = scs[a];
                    sb.mn[j] = mns[b];
                    std::memcpy(sb.q + j * kSub, q, kSub);
                }
            }
        }
        sb.err += best;
    }
    return true;
}

// d, dmin and the 12 scale bytes (blocks::q4_k_scale_min's packing), shared by q4_K and q5_K.
void write_k_scales(const SuperBlock& sb, uint8_t* out) {
    std::memcpy(out, &sb.d_bits, 2);
    std::memcpy(out + 2, &sb.dmin_bits, 2);
    uint8_t* s = out + 4;
    for (size_t j = 0; j < 4; ++j) {
        s[j] = static_cast<uint8_t>(sb.sc[j] | ((sb.sc[j + 4] >> 4) << 6));
        s[j + 4] = static_cast<uint8_t>(sb.mn[j] | ((sb.mn[j + 4] >> 4) << 6));
        s[j + 8] = static_cast<uint8_t>((sb.sc[j + 4] & 0x0F) | ((sb.mn[j + 4] & 0x0F) << 4));
    }
}

void write_q4_k_block(const SuperBlock& sb, uint8_t* out) {
    write_k_scales(sb, out);
    uint8_t* qs = out + 4 + kQ4_KScaleBytes;  // the interleaved code order (blocks::q4_k_code_byte)
    std::memset(qs, 0, kQ4_KValues / 2);
    for (size_t j = 0; j < kSubs; ++j)
        for (size_t e = 0; e < kSub; ++e)
            qs[q4_k_code_byte(j, e)] |= static_cast<uint8_t>(sb.q[j * kSub + e] << q4_k_code_shift(e));
}

// q5_K in ggml's order (blocks::q5_k_code): sub-blocks 2i and 2i + 1 as the low and high nibbles of code bytes
// 32i .., their fifth bits as bits 2i and 2i + 1 of the high-bit bytes.
void write_q5_k_block(const SuperBlock& sb, uint8_t* out) {
    write_k_scales(sb, out);
    uint8_t* qh = out + kQ5_KHighBits;
    uint8_t* qs = out + kQ5_KCodes;
    std::memset(qh, 0, 32);
    std::memset(qs, 0, 128);
    for (size_t j = 0; j < kSubs; ++j)
        for (size_t e = 0; e < kSub; ++e) {
            const uint8_t q = sb.q[j * kSub + e];
            qs[32 * (j / 2) + e] |= static_cast<uint8_t>((q & 0x0F) << (4 * (j % 2)));
            qh[e] |= static_cast<uint8_t>((q >> 4) << j);
        }
}

// One q4_K or q5_K super-block (top 15 or 31): the searched fits and plain min/max scaling, the better kept.
bool quantize_k_super_block(const float* x, float top, SuperBlock& chosen) {
    SubFit searched[kSubs], min_max[kSubs];
    for (size_t j = 0; j < kSubs; ++j) {
        const float* xs = x + j * kSub;
        searched[j] = fit_sub_block(xs, top);
        float lo = 0.0f, hi = xs[0];
        for (size_t i = 0; i < kSub; ++i) {
            lo = std::min(lo, xs[i]);
            hi = std::max(hi, xs[i]);
        }
        min_max[j] = SubFit{std::max(hi - lo, 0.0f) / top, -lo};
    }
    SuperBlock fitted, plain;
    const bool fitted_ok = pack_super_block(x, searched, top, fitted);
    const bool plain_ok = pack_super_block(x, min_max, top, plain);
    if (!fitted_ok && !plain_ok) return false;
    chosen = !plain_ok || (fitted_ok && fitted.err <= plain.err) ? fitted : plain;
    return true;
}

// ---------------------------------------------------------------------------------------------------------
// q6_K: x ≈ d·sc_g·(q − 32) per group g of 16 values, q ∈ [0, 63], int8 sc_g and one f16 d per 256.
// 1. Each group's real-valued step s_g is searched as the symmetric types' (the largest-magnitude value onto
//    level −32, a little beyond or within, or +31; each with its least-squares refit), unrounded.
// 2. d = max |s_g| / 127 is rounded to f16; each group then takes, among sc ∈ {⌊s_g/d⌋, ⌈s_g/d⌉} (within
//    −128..127), the one whose nearest levels give the least error, computed as the kernel dequantises:
//    (d·sc)·(q − 32).

constexpr size_t kQ6Group = 16;
constexpr float kQ6Targets[] = {-32.0f, -32.5f, -31.5f, -31.0f, 31.0f};

// Nearest levels in [−32, 31] for step `step`; the squared error.
double assign_q6(const float* x, float step, int8_t* l) {
    const float inv = step != 0.0f ? 1.0f / step : 0.0f;
    double sse = 0.0;
    for (size_t i = 0; i < kQ6Group; ++i) {
        const float q = round_level(x[i] * inv, -32.0f, 31.0f);
        l[i] = static_cast<int8_t>(q);
        const float e = x[i] - step * q;
        sse += double(e) * e;
    }
    return sse;
}

float fit_q6_group(const float* x) {
    float xm = 0.0f;
    for (size_t i = 0; i < kQ6Group; ++i)
        if (std::fabs(x[i]) > std::fabs(xm)) xm = x[i];
    if (xm == 0.0f) return 0.0f;
    float best_step = 0.0f;
    double best = 0.0;
    for (size_t i = 0; i < kQ6Group; ++i) best += double(x[i]) * x[i];
    int8_t l[kQ6Group];
    for (float t : kQ6Targets) {
        float step = xm / t;
        for (int round = 0; round < 2; ++round) {
            const double err = assign_q6(x, step, l);
            if (err < best) best = err, best_step = step;
            double xl = 0.0, ll = 0.0;  // least-squares step for these levels
            for (size_t i = 0; i < kQ6Group; ++i) xl += double(x[i]) * l[i], ll += double(l[i]) * l[i];
            if (ll == 0.0) break;
            step = static_cast<float>(xl / ll);
        }
    }
    return best_step;
}

bool quantize_q6_k_block(const float* x, uint8_t* out) {
    constexpr size_t groups = kQ6_KValues / kQ6Group;
    float steps[groups];
    float amax = 0.0f;
    for (size_t g = 0; g < groups; ++g) {
        steps[g] = fit_q6_group(x + g * kQ6Group);
        amax = std::max(amax, std::fabs(steps[g]));
    }
    uint16_t d_bits;
    const float d = stored_f16(amax / 127.0f, &d_bits);
    if (!std::isfinite(d)) return false;
    int8_t sc[groups] = {};
    int8_t levels[kQ6_KValues] = {};
    for (size_t g = 0; g < groups; ++g) {
        const float* xg = x + g * kQ6Group;
        double best = INFINITY;
        const float r = d > 0.0f ? std::floor(steps[g] / d) : 0.0f;
        for (float c : {r, r + 1.0f}) {
            const float code = std::clamp(c, -128.0f, 127.0f);
            int8_t l[kQ6Group];
            const double err = assign_q6(xg, d * code, l);  // the step as the kernel forms it: d·sc
            if (err < best) {
                best = err;
                sc[g] = static_cast<int8_t>(code);
                std::memcpy(levels + g * kQ6Group, l, kQ6Group);
            }
        }
    }
    // ggml's Q6_K order (blocks::q6_k_code): unit u = 4n + k, value e: nibble k / 2 of low byte 64n + 32·(k % 2) + e,
    // bits 2k, 2k + 1 of high byte 32n + e.
    std::memset(out, 0, kQ6_KBytes);
    for (size_t u = 0; u < 8; ++u) {
        const size_t n = u / 4, k = u % 4;
        for (size_t e = 0; e < 32; ++e) {
            const uint8_t q = static_cast<uint8_t>(levels[u * 32 + e] + 32);
            out[64 * n + 32 * (k % 2) + e] |= static_cast<uint8_t>((q & 0x0F) << (4 * (k / 2)));
            out[kQ6_KHighBits + 32 * n + e] |= static_cast<uint8_t>((q >> 4) << (2 * k));
        }
    }
    std::memcpy(out + kQ6_KScales, sc, groups);
    std::memcpy(out + kQ6_KScale, &d_bits, 2);
    return true;
}

// ---------------------------------------------------------------------------------------------------------
// mxfp4: x ≈ 2^(e − 127)·v per block of 32, v an e2m1 value (±0, 0.5, 1, 1.5, 2, 3, 4, 6) and e the block's
// e8m0 byte. The smallest exponent that holds max|x| without clipping (6·2^(e − 127) ≥ max|x|), one below
// (clipping the largest values) and one above are tried; each value takes its nearest grid point, and the
// exponent with the least squared error is kept. e = 255 is NaN in e8m0: a block that needs it is refused.

// The doubled e2m1 magnitudes 0..12 as codes 0..7.
constexpr float kFp4Magnitudes[8] = {0.0f, 1.0f, 2.0f, 3.0f, 4.0f, 6.0f, 8.0f, 12.0f};

// The code (sign bit 3, magnitude 0..7) of the grid point nearest to v (in doubled units), ties to the lower magnitude.
uint8_t fp4_code(float v) {
    const float a = std::fabs(v);
    uint8_t best = 0;
    for (uint8_t m = 1; m < 8; ++m)
        if (std::fabs(a - kFp4Magnitudes[m]) < std::fabs(a - kFp4Magnitudes[best])) best = m;
    return static_cast<uint8_t>(best | (v < 0.0f && best != 0 ? 8 : 0));
}

bool quantize_mxfp4_block(const float* x, uint8_t* out) {
    float amax = 0.0f;
    for (size_t i = 0; i < kMxfp4Values; ++i) amax = std::max(amax, std::fabs(x[i]));
    // The exponent whose doubled grid (12·2^(e − 128) = 6·2^(e − 127)) first reaches amax.
    int e0 = 0;
    if (amax > 0.0f) {
        e0 = static_cast<int>(std::ceil(std::log2(double(amax) / 6.0))) + 127;
        while (e0 > 0 && 12.0 * std::ldexp(1.0, e0 - 1 - 128) >= amax) --e0;
        while (12.0 * std::ldexp(1.0, e0 - 128) < amax) ++e0;
        e0 = std::max(e0, 0);
    }
    if (e0 > 254) return false;
    double best = INFINITY;
    uint8_t codes[kMxfp4Values] = {};  // always set: e0 is in range and x is finite
    for (int e : {e0, e0 - 1, e0 + 1}) {
        if (e < 0 || e > 254) continue;
        const float d = mxfp4_scale(static_cast<uint8_t>(e));
        uint8_t c[kMxfp4Values];
        double sse = 0.0;
        for (size_t i = 0; i < kMxfp4Values; ++i) {
            c[i] = fp4_code(x[i] / d);
            const float back = float(kMxfp4Doubled[c[i]]) * d;  // as the kernel dequantises
            sse += (double(x[i]) - back) * (double(x[i]) - back);
        }
        if (sse < best) {
            best = sse;
            out[0] = static_cast<uint8_t>(e);
            std::memcpy(codes, c, kMxfp4Values);
        }
    }
    for (size_t i = 0; i < 16; ++i) out[1 + i] = static_cast<uint8_t>(codes[i] | (codes[16 + i] << 4));
    return true;
}

}  // namespace

// ---- The entry points -------------------------------------------------------------------------------------

size_t quantize_f32(const float* values, size_t n, uint8_t* out) {
    std::memcpy(out, values, n * 4);
    return n;
}

namespace {
// The half types: a value beyond the largest finite one would be stored as an infinity (all exponent bits set):
// refused, as the block types refuse theirs.
template <uint16_t (*kToHalf)(float), uint16_t kExponent>
size_t quantize_half(const float* values, size_t n, uint8_t* out) {
    for (size_t i = 0; i < n; ++i) {
        const uint16_t h = kToHalf(values[i]);
        if ((h & kExponent) == kExponent) return i;
        std::memcpy(out + 2 * i, &h, 2);
    }
    return n;
}

}  // namespace

size_t quantize_f16(const float* values, size_t n, uint8_t* out) { return quantize_half<f32_to_f16, 0x7C00>(values, n, out); }

size_t quantize_bf16(const float* values, size_t n, uint8_t* out) { return quantize_half<f32_to_bf16, 0x7F80>(values, n, out); }

namespace {
// q8_0 and q4_0: the symmetric search over levels [kLo, kHi], the f16 scale and the levels packed in the layout.
template <int kLo, int kHi, size_t kBytes, void (*kPack)(const int8_t*, uint8_t*)>
size_t quantize_symmetric(const float* values, size_t n, uint8_t* out, std::span<const float> targets) {
    SymmetricFit fit;
    for (size_t b = 0; b < n / kSymBlock; ++b) {
        if (!fit_symmetric(values + b * kSymBlock, kLo, kHi, targets, fit)) return b * kSymBlock;
        uint8_t* blk = out + b * kBytes;
        std::memcpy(blk, &fit.d_bits, 2);
        kPack(fit.levels, blk + 2);
    }
    return n;
}

void pack_q8_0(const int8_t* levels, uint8_t* out) { std::memcpy(out, levels, kQ8_0Values); }

void pack_q4_0(const int8_t* levels, uint8_t* out) {
    for (size_t i = 0; i < 16; ++i) out[i] = static_cast<uint8_t>((levels[i] + 8) | ((levels[i + 16] + 8) << 4));
}

}  // namespace

size_t quantize_q8_0(const float* values, size_t n, uint8_t* out) {
    return quantize_symmetric<-127, 127, kQ8_0Bytes, pack_q8_0>(values, n, out, kQ8Targets);
}

size_t quantize_q4_0(const float* values, size_t n, uint8_t* out) {
    return quantize_symmetric<-8, 7, kQ4_0Bytes, pack_q4_0>(values, n, out, kQ4Targets);
}

namespace {
// q4_K and q5_K: the same search, codes up to `top`, each written in its layout.
template <void (*kWrite)(const SuperBlock&, uint8_t*), size_t kBytes>
size_t quantize_k(const float* values, size_t n, uint8_t* out, float top) {
    for (size_t b = 0; b < n / kQ4_KValues; ++b) {
        SuperBlock sb;
        if (!quantize_k_super_block(values + b * kQ4_KValues, top, sb)) return b * kQ4_KValues;
        kWrite(sb, out + b * kBytes);
    }
    return n;
}

}  // namespace

size_t quantize_q4_k(const float* values, size_t n, uint8_t* out) { return quantize_k<write_q4_k_block, kQ4_KBytes>(values, n, out, 15.0f); }

size_t quantize_q5_k(const float* values, size_t n, uint8_t* out) { return quantize_k<write_q5_k_block, kQ5_KBytes>(values, n, out, 31.0f); }

size_t quantize_q6_k(const float* values, size_t n, uint8_t* out) {
    for (size_t b = 0; b < n / kQ6_KValues; ++b)
        if (!quantize_q6_k_block(values + b * kQ6_KValues, out + b * kQ6_KBytes)) return b * kQ6_KValues;
    return n;
}

size_t quantize_mxfp4(const float* values, size_t n, uint8_t* out) {
    for (size_t b = 0; b < n / kMxfp4Values; ++b)
        if (!quantize_mxfp4_block(values + b * kMxfp4Values, out + b * kMxfp4Bytes)) return b * kMxfp4Values;
    return n;
}

}  // namespace colibri::kernels
