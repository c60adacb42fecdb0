// What a model of a family needs, tensor by tensor, for the checker: the engine's schema (engine/file/schema.h) with
// its hyper-parameter problems reported rather than returned as a first error, and a bound on the list's size.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/file/format.h"
#include "engine/file/schema.h"

namespace colibri::tools {

// Appends the hyper-parameter problems the engine would refuse ("hyper-parameters: ..."), then returns every
// tensor the model needs, or nothing when the hyper-parameters are unusable or would need more than
// max_tensors tensors (a damaged count must not make the checker allocate without bound).
std::vector<schema::TensorSpec> expected_tensors(uint32_t family, const format::HyperParams& hp,
                                                 const std::vector<bool>& layer_is_moe, uint64_t max_tensors,
                                                 std::vector<std::string>* problems);

}  // namespace colibri::tools
