#include "check_shapes.h"

namespace colibri::tools {

std::vector<schema::TensorSpec> expected_tensors(uint32_t family, const format::HyperParams& hp,
                                                 const std::vector<bool>& layer_is_moe, uint64_t max_tensors,
                                                 std::vector<std::string>* problems) {
    const std::vector<std::string> bad = schema::hyperparam_problems(family, hp, layer_is_moe);
    for (const std::string& p : bad) problems->push_back("hyper-parameters: " + p);
    if (!bad.empty()) return {};
    // Count first; the list is then at most about twice the fewest tensors the file holds.
    const uint64_t needed = schema::minimum_tensor_count(hp, layer_is_moe);
    if (needed > max_tensors) {
        problems->push_back("hyper-parameters: " + std::to_string(hp.n_layers) + " layers of " + std::to_string(hp.n_experts) +
                            " experts need at least " + std::to_string(needed) + " tensors, the file has " + std::to_string(max_tensors));
        return {};
    }
    return schema::tensors(static_cast<format::Family>(family), hp, layer_is_moe);
}

}  // namespace colibri::tools
