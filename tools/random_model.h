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

#include "kernels/random_blocks.h"
#include "tools/convert.h"

namespace colibri::tools {

struct RandomModelOptions {
    WeightType matrix_type = WeightType::Q4_K;       // matrices (rows that are not whole blocks: the type's fallback)
    std::optional<WeightType> expert_type;           // routed experts' matrices, when they differ (gpt-oss: mxfp4)
    float init = 0.02f;                              // standard deviation of the matrices' values
    // The token embedding's standard deviation; unset: init. At init (0.02) a sequence's tokens route alike: the
    // attention of random weights is near uniform, so every position receives about the mean of its context's
    // values, shared with its neighbours and many times the token's own 0.02, and the routers see nearly one vector
    // (the qwen3-30b-a3b preset: a median of 24 of 128 experts per layer over 64 tokens). 4 lets each token's
    // identity dominate the residual stream (110 of 128) while layer L's hidden state predicts layer L+1's experts
    // 88 % of the time, not trivially (16: 97 %). docs/PERFORMANCE.md, "Diverse routing".
    std::optional<float> embedding_init;
    uint64_t seed = 1;
    // Called after each tensor with bytes written so far and the total; return false to cancel.
    std::function<bool(uint64_t done, uint64_t total)> progress;
};

// Writes the model an HF config.json describes (any family plan_model() knows) to out_path. Norm weights are
// 1, biases and sinks N(0, init²), routers f32 N(0, (10·init)²) (some preference among the experts); the token
// embedding has values of standard deviation about `embedding_init` (default `init`), every other matrix about
// `init`, in its storage type. The same seed gives the same
// bytes for any thread count. Nothing is left at out_path on failure or cancellation.
Result<ConvertSummary> write_random_model(const nlohmann::json& config, const std::string& out_path,
                                          const RandomModelOptions& options);

// One row of random values in its storage type, drawn from a stream of a seed: the one filler of random weights.
using kernels::random_row;

}  // namespace colibri::tools
