// `colibri compare`'s measure: a model's next-token distributions against a baseline's, teacher-forced over the
// same tokens: top-1 agreement, KL(baseline || model), the largest logit difference, and where the top choices
// differ how near a tie each side was.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "engine/base/status.h"

namespace colibri {
class Model;
}

namespace colibri::tools {

class LogitComparison {
public:
    // One position's logits (the same vocabulary on both sides).
    void add(std::span<const float> baseline, std::span<const float> model);
    // {"positions", "top1_agree", "top1_rate", "mean_kl", "max_kl", "max_abs_dlogit", "disagreements": [{"position",
    // "baseline_top", "model_top", "baseline_margin", "model_margin"}]}.
    nlohmann::json to_json() const;

private:
    size_t positions_ = 0, agree_ = 0;
    double kl_sum_ = 0.0, max_kl_ = 0.0, max_abs_dlogit_ = 0.0;
    nlohmann::json disagreements_ = nlohmann::json::array();
};

// n token ids uniform over a vocabulary of vocab_size (splitmix64 from `seed`: the same ids everywhere), after
// bos_id when it is >= 0 (compare --random N --seed S).
std::vector<int32_t> random_token_ids(size_t n, uint32_t vocab_size, int32_t bos_id, uint64_t seed);

// compare --baseline-logits: raw float32 [positions x vocab], exactly that size; errors name the file.
Result<std::vector<float>> read_logits_file(const std::string& path, size_t positions, size_t vocab);

}  // namespace colibri::tools
