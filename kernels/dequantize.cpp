// Row sizes and dequantisation to f32 (embedding lookups, tests, tools), exact. The float types' dot products
// are defined on the rows as these functions give them; the block types' integer path reads the same codes
// and scales (kernels/canonical.h).
#include <cstdint>
#include <cstring>

#include "kernels/half.h"
#include "kernels/matvec.h"
#include "kernels/weight_types.h"

namespace colibri::kernels {

using namespace blocks;

namespace {
float load_f16(const uint8_t* p) {
    uint16_t bits;
    std::memcpy(&bits, p, 2);
    return f16_to_f32(bits);
}
}  // namespace

// The entry points of kernels/weight_types.h's rows.
void dequantize_f32(const uint8_t* row, size_t cols, float* out) { std::memcpy(out, row, cols * 4); }

void dequantize_f16(const uint8_t* row, size_t cols, float* out) {
    for (size_t i = 0; i < cols; ++i) out[i] = load_f16(row + 2 * i);
}

void dequantize_bf16(const uint8_t* row, size_t cols, float* out) {
    for (size_t i = 0; i < cols; ++i) {
        uint16_t bits;
        std::memcpy(&bits, row + 2 * i, 2);
        out[i] = bf16_to_f32(bits);
    }
}

void dequantize_q8_0(const uint8_t* row, size_t cols, float* out) {
    for (size_t b = 0; b < cols / kQ8_0Values; ++b) {
        const uint8_t* blk = row + b * kQ8_0Bytes;
        const float d = load_f16(blk);
        const auto* q = reinterpret_cast<const int8_t*>(blk + 2);
        for (size_t i = 0; i < kQ8_0Values; ++i) out[b * kQ8_0Values + i] = d * float(q[i]);
    }
}

void dequantize_q4_0(const uint8_t* row, size_t cols, float* out) {
    for (size_t b = 0; b < cols / kQ4_0Values; ++b) {
        const uint8_t* blk = row + b * kQ4_0Bytes;
        const float d = load_f16(blk);
        const uint8_t* qs = blk + 2;
        float* o = out + b * kQ4_0Values;
        for (size_t i = 0; i < 16; ++i) {
            o[i] = d * float(int(qs[i] & 0x0F) - 8);
            o[16 + i] = d * float(int(qs[i] >> 4) - 8);
        }
    }
}

void dequantize_q4_k(const uint8_t* row, size_t cols, float* out) {
    for (size_t b = 0; b < cols / kQ4_KValues; ++b) {
        const uint8_t* blk = row + b * kQ4_KBytes;
        const float d = load_f16(blk), dmin = load_f16(blk + 2);
        const uint8_t* scales = blk + 4;
        const uint8_t* qs = scales + kQ4_KScaleBytes;
        for (size_t j = 0; j < kQ4_KValues / kQ4_KSubBlock; ++j) {
            uint8_t sc, mn;
            q4_k_scale_min(scales, j, &sc, &mn);
            const float step = d * float(sc), offset = dmin * float(mn);
            float* o = out + b * kQ4_KValues + j * kQ4_KSubBlock;
            for (size_t e = 0; e < kQ4_KSubBlock; ++e) o[e] = step * float(q4_k_code(qs, j, e)) - offset;
        }
    }
}

// The float operations of ggml's dequantize_row_q5_K, in its order: (d·sc)·q − dmin·m.
void dequantize_q5_k(const uint8_t* row, size_t cols, float* out) {
    for (size_t b = 0; b < cols / kQ5_KValues; ++b) {
        const uint8_t* blk = row + b * kQ5_KBytes;
        const float d = load_f16(blk), dmin = load_f16(blk + 2);
        for (size_t j = 0; j < kQ5_KValues / 32; ++j) {
            uint8_t sc, mn;
            q4_k_scale_min(blk + 4, j, &sc, &mn);
            const float step = d * float(sc), offset = dmin * float(mn);
            float* o = out + b * kQ5_KValues + j * 32;
            for (size_t e = 0; e < 32; ++e) o[e] = step * float(q5_k_code(blk, j, e)) - offset;
        }
    }
}

// ggml's dequantize_row_q6_K: (d·sc)·(q − 32).
void dequantize_q6_k(const uint8_t* row, size_t cols, float* out) {
    for (size_t b = 0; b < cols / kQ6_KValues; ++b) {
        const uint8_t* blk = row + b * kQ6_KBytes;
        const float d = load_f16(blk + kQ6_KScale);
        for (size_t u = 0; u < kQ6_KValues / 32; ++u) {
            float* o = out + b * kQ6_KValues + u * 32;
            for (size_t e = 0; e < 32; ++e)
                o[e] = (d * float(q6_k_scale(blk, u, e))) * float(int(q6_k_code(blk, u, e)) - 32);
        }
    }
}

// ggml's dequantize_row_mxfp4: the doubled e2m1 value times 2^(e − 128), exact.
void dequantize_mxfp4(const uint8_t* row, size_t cols, float* out) {
    for (size_t b = 0; b < cols / kMxfp4Values; ++b) {
        const uint8_t* blk = row + b * kMxfp4Bytes;
        const float d = mxfp4_scale(blk[0]);
        float* o = out + b * kMxfp4Values;
        for (size_t i = 0; i < 16; ++i) {
            o[i] = float(kMxfp4Doubled[blk[1 + i] & 0x0F]) * d;
            o[16 + i] = float(kMxfp4Doubled[blk[1 + i] >> 4]) * d;
        }
    }
}

size_t row_bytes(WeightType type, size_t cols) { return weight_row_bytes(type, cols); }

void dequantize_row(WeightType type, const void* w, size_t cols, size_t row, float* out) {
    const auto* base = static_cast<const uint8_t*>(w) + row * row_bytes(type, cols);
    weight_type_info(type).dequantize(base, cols, out);
}

}  // namespace colibri::kernels
