#include "ggml_dequant.h"

#include <cstring>

#include "kernels/half.h"
#include "kernels/weight_types.h"

namespace colibri::tools {

namespace {

// Every engine weight type names a ggml type of the same block geometry: import carries its blocks, export writes
// them, with nothing but q4_K's nibble order to change (kernels/types.h).
// (No pointer comparisons: GCC cannot evaluate them in a constant expression under -fsanitize=undefined.)
constexpr bool weight_types_match_ggml() {
    for (const WeightTypeInfo& w : kWeightTypeTable) {
        bool match = false;
        for (const gguf::GgmlTypeInfo& g : gguf::kGgmlTypes)
            if (uint32_t(g.type) == w.ggml_type) match = g.block == w.block_values && g.bytes == w.block_bytes;
        if (!match) return false;
    }
    return true;
}
static_assert(weight_types_match_ggml(), "a weight type's ggml_type has other block geometry than ggml's");

constexpr uint32_t kQ4_KBytes = blocks::kQ4_KBytes;  // ggml's Q4_K block too (the assertion above)

float half_at(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return kernels::f16_to_f32(h);
}

void q8_0_block(const uint8_t* b, float* y) {
    const float d = half_at(b);
    const auto* q = reinterpret_cast<const int8_t*>(b + 2);
    for (int i = 0; i < 32; ++i) y[i] = static_cast<float>(q[i]) * d;
}

void q4_0_block(const uint8_t* b, float* y) {
    const float d = half_at(b);
    const uint8_t* q = b + 2;
    for (int j = 0; j < 16; ++j) {
        y[j] = d * static_cast<float>((q[j] & 0x0F) - 8);
        y[j + 16] = d * static_cast<float>((q[j] >> 4) - 8);
    }
}

// Sub-block j's 6-bit scale and min, packed into 12 bytes: bytes 0-3 hold scales 0-3 (low 6 bits) and the top
// two bits of scales 4-7; bytes 4-7 the same for the mins; bytes 8-11 the low 4 bits of scales 4-7 (low nibble)
// and of mins 4-7 (high nibble).
void q4_k_scale_min(const uint8_t* s, int j, uint8_t* scale, uint8_t* min) {
    if (j < 4) {
        *scale = s[j] & 63;
        *min = s[j + 4] & 63;
    } else {
        *scale = static_cast<uint8_t>((s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4));
        *min = static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

void q4_k_block(const uint8_t* b, float* y) {
    const float d = half_at(b), dmin = half_at(b + 2);
    const uint8_t* scales = b + 4;
    const uint8_t* q = b + 16;
    for (int chunk = 0; chunk < 4; ++chunk) {  // 64 values from 32 bytes
        uint8_t sc0, m0, sc1, m1;
        q4_k_scale_min(scales, 2 * chunk, &sc0, &m0);
        q4_k_scale_min(scales, 2 * chunk + 1, &sc1, &m1);
        const float d0 = d * static_cast<float>(sc0), min0 = dmin * static_cast<float>(m0);
        const float d1 = d * static_cast<float>(sc1), min1 = dmin * static_cast<float>(m1);
        for (int l = 0; l < 32; ++l) {
            const float lo = d0 * static_cast<float>(q[l] & 0x0F), hi = d1 * static_cast<float>(q[l] >> 4);
            y[l] = lo - min0;
            y[l + 32] = hi - min1;
        }
        q += 32;
        y += 64;
    }
}

void q5_k_block(const uint8_t* b, float* y) {
    const float d = half_at(b), dmin = half_at(b + 2);
    const uint8_t* scales = b + 4;
    const uint8_t* qh = b + 16;
    const uint8_t* q = b + 48;
    for (int chunk = 0; chunk < 4; ++chunk) {  // 64 values from 32 bytes of nibbles and bits 2·chunk, 2·chunk + 1
        uint8_t sc0, m0, sc1, m1;
        q4_k_scale_min(scales, 2 * chunk, &sc0, &m0);
        q4_k_scale_min(scales, 2 * chunk + 1, &sc1, &m1);
        const float d0 = d * static_cast<float>(sc0), min0 = dmin * static_cast<float>(m0);
        const float d1 = d * static_cast<float>(sc1), min1 = dmin * static_cast<float>(m1);
        const uint8_t lo_bit = static_cast<uint8_t>(1u << (2 * chunk)), hi_bit = static_cast<uint8_t>(2u << (2 * chunk));
        for (int l = 0; l < 32; ++l) {
            y[l] = d0 * static_cast<float>((q[l] & 0x0F) + (qh[l] & lo_bit ? 16 : 0)) - min0;
            y[l + 32] = d1 * static_cast<float>((q[l] >> 4) + (qh[l] & hi_bit ? 16 : 0)) - min1;
        }
        q += 32;
        y += 64;
    }
}

// ggml's kvalues_mxfp4: the e2m1 values doubled. The scale 2^(e − 128) as f32 bits, denormal for e < 2.
constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

float e8m0_half(uint8_t e) {
    const uint32_t bits = e < 2 ? uint32_t(0x00200000u) << e : uint32_t(e - 1) << 23;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

void mxfp4_block(const uint8_t* b, float* y) {
    const float d = e8m0_half(b[0]);
    for (int j = 0; j < 16; ++j) {
        y[j] = static_cast<float>(kMxfp4Values[b[1 + j] & 0x0F]) * d;
        y[j + 16] = static_cast<float>(kMxfp4Values[b[1 + j] >> 4]) * d;
    }
}

void q6_k_block(const uint8_t* b, float* y) {
    const uint8_t* ql = b;
    const uint8_t* qh = b + 128;
    const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
    const float d = half_at(b + 208);
    for (int half = 0; half < 2; ++half) {  // 128 values from 64 low-nibble bytes and 32 high-bit bytes
        for (int l = 0; l < 32; ++l) {
            const int q0 = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
            const int q1 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
            const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            const int s = l / 16;  // one scale per 16 values
            y[l] = (d * static_cast<float>(sc[s])) * static_cast<float>(q0);
            y[l + 32] = (d * static_cast<float>(sc[s + 2])) * static_cast<float>(q1);
            y[l + 64] = (d * static_cast<float>(sc[s + 4])) * static_cast<float>(q2);
            y[l + 96] = (d * static_cast<float>(sc[s + 6])) * static_cast<float>(q3);
        }
        ql += 64;
        qh += 32;
        sc += 8;
        y += 128;
    }
}

// The block types dequantize_row handles, each with its block dequantiser (the layouts: ggml_dequant.h).
struct Dequantiser {
    GgmlType type;
    void (*block)(const uint8_t*, float*);
};
constexpr Dequantiser kDequantisers[] = {
    {GgmlType::Q8_0, q8_0_block}, {GgmlType::Q4_0, q4_0_block}, {GgmlType::Q4_K, q4_k_block},
    {GgmlType::Q5_K, q5_k_block}, {GgmlType::Q6_K, q6_k_block}, {GgmlType::MXFP4, mxfp4_block},
};
const Dequantiser* dequantiser(uint32_t type) {
    for (const Dequantiser& d : kDequantisers)
        if (uint32_t(d.type) == type) return &d;
    return nullptr;
}
}  // namespace

bool ggml_is_dequantizable(uint32_t type) { return dequantiser(type) != nullptr; }

uint32_t ggml_block_values(uint32_t type) { return dequantiser(type) ? gguf::ggml_type_info(type)->block : 0; }

uint32_t ggml_block_bytes(uint32_t type) { return dequantiser(type) ? gguf::ggml_type_info(type)->bytes : 0; }

void ggml_dequantize_row(uint32_t type, const uint8_t* src, float* dst, uint64_t n) {
    const Dequantiser* d = dequantiser(type);
    if (d == nullptr) return;
    const uint32_t values = ggml_block_values(type), bytes = ggml_block_bytes(type);
    for (uint64_t i = 0; i < n / values; ++i) d->block(src + i * bytes, dst + i * values);
}

std::optional<WeightType> ggml_carried_type(uint32_t type) {
    for (const WeightTypeInfo& w : weight_types())
        if (w.ggml_type == type && w.block_values > 1) return w.type;
    return std::nullopt;
}

namespace {
// Q4_K's codes between ggml's order (code e of sub-block j in byte 32·(j / 2) + e, nibble j % 2) and the engine's
// interleaved one; d, dmin and the scales stay as they are. to_engine picks the direction (import or export).
void relayout_q4_k(const uint8_t* src, uint8_t* dst, uint64_t bytes, bool to_engine) {
    for (uint64_t b = 0; b < bytes; b += kQ4_KBytes) {
        const uint8_t* s = src + b + 16;
        uint8_t* d = dst + b + 16;
        std::memcpy(dst + b, src + b, 16);
        std::memset(d, 0, 128);
        for (size_t j = 0; j < 8; ++j)
            for (size_t e = 0; e < 32; ++e) {
                const size_t ggml_byte = 32 * (j / 2) + e, ggml_shift = 4 * (j % 2);
                const size_t our_byte = blocks::q4_k_code_byte(j, e), our_shift = blocks::q4_k_code_shift(e);
                if (to_engine)
                    d[our_byte] |= static_cast<uint8_t>(((s[ggml_byte] >> ggml_shift) & 0x0F) << our_shift);
                else
                    d[ggml_byte] |= static_cast<uint8_t>(((s[our_byte] >> our_shift) & 0x0F) << ggml_shift);
            }
    }
}
}  // namespace

void ggml_carry_row(uint32_t type, const uint8_t* src, uint8_t* dst, uint64_t n) {
    const uint64_t bytes = n / ggml_block_values(type) * ggml_block_bytes(type);
    if (static_cast<GgmlType>(type) != GgmlType::Q4_K) {
        std::memcpy(dst, src, bytes);
        return;
    }
    relayout_q4_k(src, dst, bytes, true);
}

uint32_t ggml_type_of(WeightType type) { return weight_type_info(type).ggml_type; }

void ggml_export_row(WeightType type, const uint8_t* src, uint8_t* dst, uint64_t n) {
    const uint64_t bytes = weight_row_bytes(type, n);
    if (type != WeightType::Q4_K) {
        std::memcpy(dst, src, bytes);
        return;
    }
    relayout_q4_k(src, dst, bytes, false);
}

}  // namespace colibri::tools
