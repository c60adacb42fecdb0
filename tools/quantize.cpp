#include "quantize.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "kernels/weight_types.h"

namespace colibri::tools {
namespace {

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

}  // namespace

WeightType storage_type(WeightType requested, uint64_t cols) {
    // Down the table's fallbacks until a type holds whole blocks of the row (the float types always do).
    WeightType t = requested;
    while (cols % weight_type_info(t).block_values != 0) t = weight_type_info(t).fallback;
    return t;
}

Status quantize_row(WeightType type, const float* values, size_t n, uint8_t* out) {
    COLIBRI_TRY(check_finite(values, n));
    const WeightTypeInfo& w = weight_type_info(type);
    const size_t first = w.quantize(values, n, out);
    if (first >= n) return Status::ok();
    const size_t count = std::min<size_t>(w.block_values, n - first);
    float amax = 0.0f;
    for (size_t i = first; i < first + count; ++i) amax = std::max(amax, std::fabs(values[i]));
    const std::string columns = count == 1 ? "column " + std::to_string(first) + " reaches"
                                           : "columns " + std::to_string(first) + ".." + std::to_string(first + count - 1) + " reach";
    return error(columns + " |x| = " + number(amax) + ", beyond what " + w.name + "'s " + w.range + " can represent");
}

}  // namespace colibri::tools
