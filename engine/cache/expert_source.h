// What the cache wing reads of a loaded model: the file its experts are in and, per layer, the routed experts'
// weights. core's Model is an ExpertSource; the expert cache and the prefetcher know nothing else of it, so the
// cache does not depend on the core.
#pragma once
#include <cstdint>
#include <span>

#include "engine/file/model_file.h"

namespace colibri {

struct FfnWeights {  // SwiGLU: down(silu(gate x) * up x)
    const TensorView* gate = nullptr;
    const TensorView* up = nullptr;
    const TensorView* down = nullptr;
    const TensorView* gate_bias = nullptr;  // gpt_oss
    const TensorView* up_bias = nullptr;
    const TensorView* down_bias = nullptr;
};

class ExpertSource {
public:
    virtual const ModelFile& file() const = 0;
    // The routed experts of a layer (layer < the file's n_layers) by expert id; empty for a dense layer.
    virtual std::span<const FfnWeights> routed_experts(uint32_t layer) const = 0;

protected:
    ~ExpertSource() = default;
};

}  // namespace colibri
