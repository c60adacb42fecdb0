// Deterministic random models written straight into a .bin in their storage types: the blocks of a quantised
// type are drawn directly (random codes under scales sized for a given standard deviation), never through an
// f32 or bf16 intermediate, so a model of 30 B parameters needs only its own file's disk space and one tensor
// of memory. For benchmarks at real size (colibri-make-model's presets): the values are random, the shapes,
// types and bytes are those of the real model.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "tools/convert.h"

namespace colibri::tools {

struct RandomModelOptions {
    WeightType matrix_type = WeightType::Q4_K;       // matrices (rows that are not whole blocks: the type's fallback)
    std::optional<WeightType> expert_type;           // routed experts' matrices, when they differ (gpt-oss: mxfp4)
    float init = 0.02f;                              // standard deviation of the matrices' values
    uint64_t seed = 1;
    // Called after each tensor with bytes written so far and the total; return false to cancel.
    std::function<bool(uint64_t done, uint64_t total)> progress;
};

// Writes the model an HF config.json describes (any family plan_model() knows) to out_path. Norm weights are
// 1, biases and sinks N(0, init²), routers f32 N(0, (10·init)²) (some preference among the experts); every
// other matrix has values of standard deviation about `init` in its storage type. The same seed gives the same
// bytes for any thread count. Nothing is left at out_path on failure or cancellation.
Result<ConvertSummary> write_random_model(const nlohmann::json& config, const std::string& out_path,
                                          const RandomModelOptions& options);

// One row of `cols` random values of standard deviation about `sd` in `type` (kernels::row_bytes(type, cols)
// bytes), drawn from the stream `stream` of `seed`.
void random_row(WeightType type, size_t cols, float sd, uint64_t seed, uint64_t stream, uint8_t* out);

}  // namespace colibri::tools
