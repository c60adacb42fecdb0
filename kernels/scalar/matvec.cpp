// Portable reference kernels. Eight partial sums in a fixed pattern, combined in a fixed order.
#include <cstdint>
#include <cstring>

#include "kernels/half.h"
#include "kernels/matvec.h"

namespace colibri::kernels {
namespace {

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

}  // namespace

size_t row_bytes(WeightType type, size_t cols) {
    switch (type) {
        case WeightType::F32: return cols * 4;
        case WeightType::F16:
        case WeightType::BF16: return cols * 2;
        case WeightType::Q8_0: return cols / 32 * 34;
        case WeightType::Q4_K: return 0;
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
            case WeightType::Q8_0: {
                float block_sum = 0.0f;
                for (size_t b = 0; b < cols / 32; ++b) {
                    const uint8_t* blk = row + b * 34;
                    uint16_t scale_bits;
                    std::memcpy(&scale_bits, blk, 2);
                    const auto* q = reinterpret_cast<const int8_t*>(blk + 2);
                    float s = 0.0f;
                    for (int i = 0; i < 32; ++i) s += float(q[i]) * x[b * 32 + i];
                    block_sum += s * f16_to_f32(scale_bits);
                }
                sum = block_sum;
                break;
            }
            case WeightType::Q4_K: sum = 0.0f; break;  // rejected by the loader before it gets here
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
        case WeightType::Q8_0:
            for (size_t b = 0; b < cols / 32; ++b) {
                const uint8_t* blk = base + b * 34;
                uint16_t scale_bits;
                std::memcpy(&scale_bits, blk, 2);
                const float s = f16_to_f32(scale_bits);
                const auto* q = reinterpret_cast<const int8_t*>(blk + 2);
                for (int i = 0; i < 32; ++i) out[b * 32 + i] = s * float(q[i]);
            }
            break;
        case WeightType::Q4_K:
            for (size_t i = 0; i < cols; ++i) out[i] = 0.0f;
            break;
    }
}

}  // namespace colibri::kernels
