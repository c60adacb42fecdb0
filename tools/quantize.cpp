#include "quantize.h"

#include "kernels/weight_types.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>

#include "kernels/half.h"

namespace colibri::tools {
namespace {

using namespace blocks;

std::string number(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

// Quantisers need finite input: a NaN or an infinity has no scale and would poison its whole block.
Status check_finite(const float* x, size_t n) {
    for (size_t i = 0; i < n; ++i)
        if (!std::isfinite(x[i])) return error("value " + number(x[i]) + " at column " + std::to_string(i) + " is not finite");
    return Status::ok();
}

Status beyond_range(const char* type, size_t first, size_t count, double amax) {
    return error("columns " + std::to_string(first) + ".." + std::to_string(first + count - 1) + " reach |x| = " +
                 number(amax) + ", beyond what " + type + "'s f16 scales can represent");
}

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

constexpr size_t kSub = kQ4_KSubBlock;
constexpr size_t kSubs = kQ4_KValues / kQ4_KSubBlock;
constexpr float kStarts[] = {15.0f, 14.5f, 15.5f, 14.0f, 16.0f};
constexpr int kRefinements = 2;

struct SubFit {
    float step = 0.0f;    // S
    float offset = 0.0f;  // M
};

double assign_affine(const float* x, float step, float offset, uint8_t* q) {
    const float inv = step > 0.0f ? 1.0f / step : 0.0f;
    float acc[4] = {0, 0, 0, 0};
    for (size_t i = 0; i < kSub; i += 4) {
        for (size_t k = 0; k < 4; ++k) {
            const float l = round_level((x[i + k] + offset) * inv, 0.0f, 15.0f);
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

SubFit fit_sub_block(const float* x) {
    float lo = 0.0f, hi = x[0];
    for (size_t i = 0; i < kSub; ++i) {
        lo = std::min(lo, x[i]);
        hi = std::max(hi, x[i]);
    }
    if (hi <= lo) return SubFit{0.0f, -lo};  // constant block at or below zero: exact with S = 0
    SubFit best;
    double best_err = INFINITY;
    uint8_t q[kSub], next_q[kSub];
    for (float t : kStarts) {
        SubFit fit{(hi - lo) / t, -lo};
        double err = assign_affine(x, fit.step, fit.offset, q);
        for (int round = 0; round < kRefinements; ++round) {
            const SubFit next = solve_affine(x, q);
            const double next_err = assign_affine(x, next.step, next.offset, next_q);
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
bool pack_super_block(const float* x, const SubFit* fits, SuperBlock& sb) {
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
                const double err = assign_affine(x + j * kSub, step, offset, q);
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

void write_super_block(const SuperBlock& sb, uint8_t* out) {
    std::memcpy(out, &sb.d_bits, 2);
    std::memcpy(out + 2, &sb.dmin_bits, 2);
    uint8_t* s = out + 4;
    for (size_t j = 0; j < 4; ++j) {
        s[j] = static_cast<uint8_t>(sb.sc[j] | ((sb.sc[j + 4] >> 4) << 6));
        s[j + 4] = static_cast<uint8_t>(sb.mn[j] | ((sb.mn[j + 4] >> 4) << 6));
        s[j + 8] = static_cast<uint8_t>((sb.sc[j + 4] & 0x0F) | ((sb.mn[j + 4] & 0x0F) << 4));
    }
    uint8_t* qs = s + kQ4_KScaleBytes;  // the interleaved code order (blocks::q4_k_code_byte)
    std::memset(qs, 0, kQ4_KValues / 2);
    for (size_t j = 0; j < kSubs; ++j)
        for (size_t e = 0; e < kSub; ++e)
            qs[q4_k_code_byte(j, e)] |= static_cast<uint8_t>(sb.q[j * kSub + e] << q4_k_code_shift(e));
}

}  // namespace

WeightType storage_type(WeightType requested, uint64_t cols) {
    // Down the table's fallbacks until a type holds whole blocks of the row (the float types always do).
    WeightType t = requested;
    while (cols % weight_type_info(t).block_values != 0) t = weight_type_info(t).fallback;
    return t;
}

Status quantize_row(WeightType type, const float* values, size_t n, uint8_t* out) {
    switch (type) {
        case WeightType::Q8_0: return quantize_q8_0(values, n, out);
        case WeightType::Q4_0: return quantize_q4_0(values, n, out);
        case WeightType::Q4_K: return quantize_q4_k(values, n, out);
        default: return error(std::string("weight type is not a block type"));
    }
}

Status quantize_q8_0(const float* values, size_t n, uint8_t* out) {
    COLIBRI_TRY(check_finite(values, n));
    SymmetricFit fit;
    for (size_t b = 0; b < n / kQ8_0Values; ++b) {
        const float* x = values + b * kQ8_0Values;
        if (!fit_symmetric(x, -127, 127, kQ8Targets, fit)) {
            float amax = 0.0f;
            for (size_t i = 0; i < kQ8_0Values; ++i) amax = std::max(amax, std::fabs(x[i]));
            return beyond_range("q8_0", b * kQ8_0Values, kQ8_0Values, amax);
        }
        uint8_t* blk = out + b * kQ8_0Bytes;
        std::memcpy(blk, &fit.d_bits, 2);
        std::memcpy(blk + 2, fit.levels, kQ8_0Values);
    }
    return Status::ok();
}

Status quantize_q4_0(const float* values, size_t n, uint8_t* out) {
    COLIBRI_TRY(check_finite(values, n));
    SymmetricFit fit;
    for (size_t b = 0; b < n / kQ4_0Values; ++b) {
        const float* x = values + b * kQ4_0Values;
        if (!fit_symmetric(x, -8, 7, kQ4Targets, fit)) {
            float amax = 0.0f;
            for (size_t i = 0; i < kQ4_0Values; ++i) amax = std::max(amax, std::fabs(x[i]));
            return beyond_range("q4_0", b * kQ4_0Values, kQ4_0Values, amax);
        }
        uint8_t* blk = out + b * kQ4_0Bytes;
        std::memcpy(blk, &fit.d_bits, 2);
        for (size_t i = 0; i < 16; ++i)
            blk[2 + i] = static_cast<uint8_t>((fit.levels[i] + 8) | ((fit.levels[i + 16] + 8) << 4));
    }
    return Status::ok();
}

Status quantize_q4_k(const float* values, size_t n, uint8_t* out) {
    COLIBRI_TRY(check_finite(values, n));
    for (size_t b = 0; b < n / kQ4_KValues; ++b) {
        const float* x = values + b * kQ4_KValues;
        SubFit searched[kSubs], min_max[kSubs];
        for (size_t j = 0; j < kSubs; ++j) {
            const float* xs = x + j * kSub;
            searched[j] = fit_sub_block(xs);
            float lo = 0.0f, hi = xs[0];
            for (size_t i = 0; i < kSub; ++i) {
                lo = std::min(lo, xs[i]);
                hi = std::max(hi, xs[i]);
            }
            min_max[j] = SubFit{std::max(hi - lo, 0.0f) / 15.0f, -lo};
        }
        SuperBlock fitted, plain;
        const bool fitted_ok = pack_super_block(x, searched, fitted);
        const bool plain_ok = pack_super_block(x, min_max, plain);
        if (!fitted_ok && !plain_ok) {
            float amax = 0.0f;
            for (size_t i = 0; i < kQ4_KValues; ++i) amax = std::max(amax, std::fabs(x[i]));
            return beyond_range("q4_k", b * kQ4_KValues, kQ4_KValues, amax);
        }
        const SuperBlock& chosen = !plain_ok || (fitted_ok && fitted.err <= plain.err) ? fitted : plain;
        write_super_block(chosen, out + b * kQ4_KBytes);
    }
    return Status::ok();
}

}  // namespace colibri::tools
