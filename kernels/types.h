// Weight storage types known to the kernels. The numeric values are part of the .bin format.
#pragma once
#include <cstdint>

namespace colibri {

enum class WeightType : uint32_t { F32 = 0, F16 = 1, BF16 = 2, Q8_0 = 3, Q4_K = 4 };

}  // namespace colibri
