#include "check_damage.h"

#include <cmath>
#include <cstdio>
#include <cinttypes>
#include <optional>

#include "engine/file/format.h"
#include "kernels/matvec.h"

namespace colibri::tools {

std::string hex_offset(uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%" PRIx64, v);
    return buf;
}

namespace {

// A value at least this many times the RMS of its tensor's other values is taken for damage (trained and random
// weights stay within ~10 RMS; a flipped exponent bit moves a value by 2^16 or more).
constexpr double kOutlierRatio = 1000.0;

struct Suspect {
    const TensorCheck* tensor = nullptr;
    uint64_t row = 0, col = 0;
    double value = 0.0;
    double ratio = 0.0;  // |value| / RMS of the others; infinite for NaN and ±Inf
};

// The tensor's worst value: its first non-finite one, else its largest if it is an outlier.
std::optional<Suspect> worst_value(const TensorCheck& t, const uint8_t* data) {
    WeightType type{};
    if (!t.shape_ok || !format::weight_type_from_name(t.type, &type) || t.shape.empty()) return std::nullopt;
    const uint64_t rows = t.shape.size() == 1 ? 1 : t.shape[0], cols = t.shape.size() == 1 ? t.shape[0] : t.shape[1];
    std::vector<float> row(cols);
    double sum2 = 0.0, top = -1.0;
    uint64_t top_row = 0, top_col = 0;
    for (uint64_t r = 0; r < rows; ++r) {
        kernels::dequantize_row(type, data, cols, r, row.data());
        for (uint64_t c = 0; c < cols; ++c) {
            const double v = row[c];
            if (!std::isfinite(v)) return Suspect{&t, r, c, v, INFINITY};
            sum2 += v * v;
            if (std::fabs(v) > top) {
                top = std::fabs(v);
                top_row = r;
                top_col = c;
            }
        }
    }
    const uint64_t n = rows * cols;
    if (n < 16 || top <= 0.0) return std::nullopt;
    const double others = std::sqrt(std::max(0.0, sum2 - top * top) / static_cast<double>(n - 1));
    const double ratio = others > 0.0 ? top / others : INFINITY;
    if (ratio < kOutlierRatio) return std::nullopt;
    kernels::dequantize_row(type, data, cols, top_row, row.data());
    return Suspect{&t, top_row, top_col, row[top_col], ratio};
}

// The byte the value is stored at (float types), or the start of its block (block types).
std::string value_place(const TensorCheck& t, uint64_t r, uint64_t c) {
    WeightType type{};
    format::weight_type_from_name(t.type, &type);
    const WeightTypeInfo& w = weight_type_info(type);
    const uint64_t cols = t.shape.size() == 1 ? t.shape[0] : t.shape[1];
    const uint64_t row_start = t.offset + r * weight_row_bytes(type, cols);
    if (w.block_values == 1) return "at byte " + hex_offset(row_start + c * w.block_bytes);
    return "in the block at byte " + hex_offset(row_start + c / w.block_values * w.block_bytes);
}

}  // namespace

std::string locate_damage(const std::vector<const TensorCheck*>& tensors, uint64_t section_offset, std::span<const uint8_t> bytes) {
    std::optional<Suspect> worst;
    for (const TensorCheck* t : tensors) {
        if (bytes.empty() || t->offset < section_offset || t->offset - section_offset > bytes.size() ||
            t->size > bytes.size() - (t->offset - section_offset))
            continue;
        const std::optional<Suspect> s = worst_value(*t, bytes.data() + (t->offset - section_offset));
        if (s && (!worst || s->ratio > worst->ratio)) worst = s;
        if (worst && std::isinf(worst->ratio)) break;  // a NaN or infinity: nothing is more certain
    }
    if (worst) {
        const TensorCheck& t = *worst->tensor;
        char value[64];
        if (std::isnan(worst->value)) std::snprintf(value, sizeof value, "a NaN");
        else if (std::isinf(worst->value)) std::snprintf(value, sizeof value, "an infinity");
        else std::snprintf(value, sizeof value, "an outlier (%.3g, %.0f× its other values' RMS)", worst->value, worst->ratio);
        return "; tensor " + t.name + " holds " + value + " " + value_place(t, worst->row, worst->col) + " (row " +
               std::to_string(worst->row) + ", column " + std::to_string(worst->col) + ")";
    }
    std::string list;
    for (const TensorCheck* t : tensors) list += (list.empty() ? "" : ", ") + t->name + " at " + hex_offset(t->offset);
    return "; no value is out of line, so any of its tensors may be damaged: " + list;
}

}  // namespace colibri::tools
