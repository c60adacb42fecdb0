#include "kernels/random_blocks.h"

#include "kernels/half.h"
#include "kernels/weight_types.h"

namespace colibri::kernels {
namespace {

using namespace blocks;

void put_f16(uint8_t* p, float v) {
    const uint16_t h = f32_to_f16(v);
    std::memcpy(p, &h, 2);
}

// Standard deviations of uniformly random codes: int8 in [−127, 127] 73.6; 4-bit (0..15) 4.61; 5-bit 9.23;
// q6_K's q − 32 18.5; e2m1 over all 16 codes (the rms of ±0, 0.5, ..., 6) 2.93.
constexpr float kSdInt8 = 73.6f, kSd4 = 4.61f, kSd5 = 9.23f, kSd6 = 18.5f, kRmsE2m1 = 2.93f;

// q4_K/q5_K scales: sc_j in [32, 63] and mn_j = sc_j with dmin = d·mean code, so each sub-block is centred.
void k_scales(uint8_t* blk, float sd, float code_sd, float code_mean, RandomStream& r) {
    uint8_t sc[8];
    for (uint8_t& v : sc) v = uint8_t(32 + r.below(32));
    const float d = sd / (code_sd * 47.5f);
    put_f16(blk, d);
    put_f16(blk + 2, d * code_mean);
    uint8_t* s = blk + 4;
    for (size_t j = 0; j < 4; ++j) {
        s[j] = uint8_t(sc[j] | ((sc[j + 4] >> 4) << 6));
        s[j + 4] = uint8_t(sc[j] | ((sc[j + 4] >> 4) << 6));  // mins equal to the scales
        s[j + 8] = uint8_t((sc[j + 4] & 0x0F) | ((sc[j + 4] & 0x0F) << 4));
    }
}

template <uint16_t (*kToHalf)(float)>
void random_half(size_t cols, float sd, RandomStream& r, uint8_t* out) {
    for (size_t c = 0; c < cols; ++c) {
        const uint16_t h = kToHalf(r.gaussian() * sd);
        std::memcpy(out + 2 * c, &h, 2);
    }
}

// q4_K and q5_K: the scales, then random codes (and q5_K's fifth bits).
void random_k(size_t cols, float sd, RandomStream& r, uint8_t* out, size_t bytes, float code_sd, float code_mean) {
    for (size_t b = 0; b < cols / kQ4_KValues; ++b) {
        uint8_t* blk = out + b * bytes;
        k_scales(blk, sd, code_sd, code_mean, r);
        r.bytes(blk + 16, bytes - 16);
    }
}

}  // namespace

// The entry points of kernels/weight_types.h's rows.
void random_f32(size_t cols, float sd, RandomStream& r, uint8_t* out) {
    for (size_t c = 0; c < cols; ++c) {
        const float v = r.gaussian() * sd;
        std::memcpy(out + 4 * c, &v, 4);
    }
}

void random_f16(size_t cols, float sd, RandomStream& r, uint8_t* out) { random_half<f32_to_f16>(cols, sd, r, out); }

void random_bf16(size_t cols, float sd, RandomStream& r, uint8_t* out) { random_half<f32_to_bf16>(cols, sd, r, out); }

void random_q8_0(size_t cols, float sd, RandomStream& r, uint8_t* out) {
    for (size_t b = 0; b < cols / kQ8_0Values; ++b) {
        uint8_t* blk = out + b * kQ8_0Bytes;
        put_f16(blk, sd / kSdInt8);
        for (size_t i = 0; i < kQ8_0Values; ++i) blk[2 + i] = uint8_t(int8_t(int(r.below(255)) - 127));
    }
}

void random_q4_0(size_t cols, float sd, RandomStream& r, uint8_t* out) {
    for (size_t b = 0; b < cols / kQ4_0Values; ++b) {
        // q − 8 has mean −0.5: a random sign of d per block centres the values.
        put_f16(out + b * kQ4_0Bytes, (r.next() & 1 ? -sd : sd) / kSd4);
        r.bytes(out + b * kQ4_0Bytes + 2, 16);
    }
}

void random_q4_k(size_t cols, float sd, RandomStream& r, uint8_t* out) { random_k(cols, sd, r, out, kQ4_KBytes, kSd4, 7.5f); }

void random_q5_k(size_t cols, float sd, RandomStream& r, uint8_t* out) { random_k(cols, sd, r, out, kQ5_KBytes, kSd5, 15.5f); }

void random_q6_k(size_t cols, float sd, RandomStream& r, uint8_t* out) {
    for (size_t b = 0; b < cols / kQ6_KValues; ++b) {
        uint8_t* blk = out + b * kQ6_KBytes;
        r.bytes(blk, kQ6_KScales);  // codes
        for (size_t g = 0; g < 16; ++g) blk[kQ6_KScales + g] = uint8_t(int8_t(int(r.below(255)) - 127));
        put_f16(blk + kQ6_KScale, sd / (kSd6 * kSdInt8));
    }
}

void random_mxfp4(size_t cols, float sd, RandomStream& r, uint8_t* out) {
    const int e = std::clamp(127 + int(std::lround(std::log2(sd / kRmsE2m1))), 0, 254);
    for (size_t b = 0; b < cols / kMxfp4Values; ++b) {
        out[b * kMxfp4Bytes] = uint8_t(e);
        r.bytes(out + b * kMxfp4Bytes + 1, 16);
    }
}

void random_row(WeightType type, size_t cols, float sd, uint64_t seed, uint64_t stream, uint8_t* out) {
    RandomStream r(seed, stream);
    weight_type_info(type).random(cols, sd, r, out);
}

void random_matrix(WeightType type, size_t rows, size_t cols, float sd, uint64_t seed, uint8_t* out) {
    const size_t stride = weight_row_bytes(type, cols);
    for (size_t r = 0; r < rows; ++r) random_row(type, cols, sd, seed, r, out + r * stride);
}

}  // namespace colibri::kernels
