// What a model of a family needs, tensor by tensor, given its hyper-parameters and which layers are MoE: the
// checker's statement of what engine/model.cpp binds (names, shapes, f32-only vectors) and of which section
// the writer puts each tensor in (docs/FORMAT.md, "Tensor names").
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/format.h"

namespace colibri::tools {

struct ExpectedTensor {
    std::string name;
    uint32_t n_dims = 2;
    uint64_t rows = 0;
    uint64_t cols = 1;       // 1 for 1-d tensors
    bool f32_only = false;   // norms and biases: the engine reads them as f32
    format::SectionKind section = format::SectionKind::Metadata;  // where the tensor belongs
    uint32_t layer = format::kNone;
    uint32_t expert = format::kNone;
};

// Appends the hyper-parameter problems the engine would refuse ("hyper-parameters: ..."), then returns every
// tensor the model needs, or nothing when the hyper-parameters are unusable or would need more than
// max_tensors tensors (a damaged count must not make the checker allocate without bound).
std::vector<ExpectedTensor> expected_tensors(uint32_t family, const format::HyperParams& hp,
                                             const std::vector<bool>& layer_is_moe, uint64_t max_tensors,
                                             std::vector<std::string>* problems);

}  // namespace colibri::tools
