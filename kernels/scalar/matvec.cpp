// Portable reference kernels. Every output element is reduced by one thread in one fixed order:
// - f32/f16/bf16: eight partial sums in a fixed pattern, combined in a fixed order;
// - block types: per block (q4_K: per sub-block of 32) one float sum over the values in element order, scaled
//   by the block's scale and added to the row's sum in block order.
#include <cstdint>
#include <cstring>

#include "kernels/half.h"
#include "kernels/matvec.h"

namespace colibri::kernels {
namespace {

using namespace blocks;

template <typename Load>
float dot_row(const Load& load, const float* x, size_t cols) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    size_t c = 0;
    for (; c + 8 <= cols; c += 8) {
        for (int k = 0; k < 8; ++k) acc[k] += load(c + k) * x[c + k];
    }
    for (; c < cols; ++c) acc[c % 8] += load(c) * x[c];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

float load_f16(const uint8_t* p) {
    uint16_t bits;
    std::memcpy(&bits, p, 2);
    return f16_to_f32(bits);
}

// q8_0 block: f16 d, then 32 × i8 q; value i = d·q[i].
float dot_q8_0(const uint8_t* row, const float* x, size_t cols) {
    float sum = 0.0f;
    for (size_t b = 0; b < cols / kQ8_0Values; ++b) {
        const uint8_t* blk = row + b * kQ8_0Bytes;
        const auto* q = reinterpret_cast<const int8_t*>(blk + 2);
        const float* xb = x + b * kQ8_0Values;
        float s = 0.0f;
        for (size_t i = 0; i < kQ8_0Values; ++i) s += float(q[i]) * xb[i];
        sum += s * load_f16(blk);
    }
    return sum;
}

// q4_0 block: f16 d, then 16 bytes; byte i holds value i in its low nibble and value i + 16 in its high one;
// value = d·(nibble − 8).
float dot_q4_0(const uint8_t* row, const float* x, size_t cols) {
    float sum = 0.0f;
    for (size_t b = 0; b < cols / kQ4_0Values; ++b) {
        const uint8_t* blk = row + b * kQ4_0Bytes;
        const uint8_t* qs = blk + 2;
        const float* xb = x + b * kQ4_0Values;
        float s = 0.0f;
        for (size_t i = 0; i < 16; ++i) s += float(int(qs[i] & 0x0F) - 8) * xb[i];
        for (size_t i = 0; i < 16; ++i) s += float(int(qs[i] >> 4) - 8) * xb[16 + i];
        sum += s * load_f16(blk);
    }
    return sum;
}

// q4_K super-block: f16 d, f16 dmin, 12 scale bytes, 128 quant bytes. Sub-blocks 2k and 2k + 1 share quant
// bytes [32k, 32k + 32): low nibbles are sub-block 2k, high nibbles 2k + 1. value = d·sc·q − dmin·mn, so a
// sub-block contributes d·sc·Σq·x − dmin·mn·Σx.
float dot_q4_k(const uint8_t* row, const float* x, size_t cols) {
    float sum = 0.0f;
    for (size_t b = 0; b < cols / kQ4_KValues; ++b) {
        const uint8_t* blk = row + b * kQ4_KBytes;
        const float d = load_f16(blk), dmin = load_f16(blk + 2);
        const uint8_t* scales = blk + 4;
        const uint8_t* qs = scales + kQ4_KScaleBytes;
        for (size_t j = 0; j < kQ4_KValues / kQ4_KSubBlock; ++j) {
            uint8_t sc, mn;
            q4_k_scale_min(scales, j, &sc, &mn);
            const uint8_t* q = qs + (j / 2) * kQ4_KSubBlock;
            const int shift = (j % 2) * 4;
            const float* xs = x + b * kQ4_KValues + j * kQ4_KSubBlock;
            float qx = 0.0f, sx = 0.0f;
            for (size_t i = 0; i < kQ4_KSubBlock; ++i) {
                qx += float((q[i] >> shift) & 0x0F) * xs[i];
                sx += xs[i];
            }
            sum += (d * float(sc)) * qx - (dmin * float(mn)) * sx;
        }
    }
    return sum;
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
            const uint8_t* q = qs + (j / 2) * kQ4_KSubBlock;
            const int shift = (j % 2) * 4;
            float* o = out + b * kQ4_KValues + j * kQ4_KSubBlock;
            for (size_t i = 0; i < kQ4_KSubBlock; ++i) o[i] = step * float((q[i] >> shift) & 0x0F) - offset;
        }
    }
}

}  // namespace

size_t row_bytes(WeightType type, size_t cols) {
    switch (type) {
        case WeightType::F32: return cols * 4;
        case WeightType::F16:
        case WeightType::BF16: return cols * 2;
        case WeightType::Q8_0: return cols / kQ8_0Values * kQ8_0Bytes;
        case WeightType::Q4_0: return cols / kQ4_0Values * kQ4_0Bytes;
        case WeightType::Q4_K: return cols / kQ4_KValues * kQ4_KBytes;
    }
    return 0;
}

void matvec_rows(WeightType type, const void* w, size_t cols, const float* x, float* y,
                 size_t row_begin, size_t row_end) {
    const size_t stride = row_bytes(type, cols);
    for (size_t r = row_begin; r < row_end; ++r) {
        const auto* row = static_cast<const uint8_t*>(w) + r * stride;
        float sum = 0.0f;
        switch (type) {
            case WeightType::F32: {
                const auto* p = reinterpret_cast<const float*>(row);
                sum = dot_row([p](size_t i) { return p[i]; }, x, cols);
                break;
            }
            case WeightType::F16: {
                const auto* p = reinterpret_cast<const uint16_t*>(row);
                sum = dot_row([p](size_t i) { return f16_to_f32(p[i]); }, x, cols);
                break;
            }
            case WeightType::BF16: {
                const auto* p = reinterpret_cast<const uint16_t*>(row);
                sum = dot_row([p](size_t i) { return bf16_to_f32(p[i]); }, x, cols);
                break;
            }
            case WeightType::Q8_0: sum = dot_q8_0(row, x, cols); break;
            case WeightType::Q4_0: sum = dot_q4_0(row, x, cols); break;
            case WeightType::Q4_K: sum = dot_q4_k(row, x, cols); break;
        }
        y[r - row_begin] = sum;
    }
}

void dequantize_row(WeightType type, const void* w, size_t cols, size_t row, float* out) {
    const auto* base = static_cast<const uint8_t*>(w) + row * row_bytes(type, cols);
    switch (type) {
        case WeightType::F32: std::memcpy(out, base, cols * 4); break;
        case WeightType::F16: {
            const auto* p = reinterpret_cast<const uint16_t*>(base);
            for (size_t i = 0; i < cols; ++i) out[i] = f16_to_f32(p[i]);
            break;
        }
        case WeightType::BF16: {
            const auto* p = reinterpret_cast<const uint16_t*>(base);
            for (size_t i = 0; i < cols; ++i) out[i] = bf16_to_f32(p[i]);
            break;
        }
        case WeightType::Q8_0: dequantize_q8_0(base, cols, out); break;
        case WeightType::Q4_0: dequantize_q4_0(base, cols, out); break;
        case WeightType::Q4_K: dequantize_q4_k(base, cols, out); break;
    }
}

}  // namespace colibri::kernels
