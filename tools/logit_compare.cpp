#include "tools/logit_compare.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include "kernels/splitmix64.h"
#include "engine/core/sampler.h"

namespace colibri::tools {

using nlohmann::json;

namespace {
double log_sum_exp(std::span<const float> v) {
    const double mx = *std::max_element(v.begin(), v.end());
    double sum = 0.0;
    for (float x : v) sum += std::exp(double(x) - mx);
    return mx + std::log(sum);
}
}  // namespace

void LogitComparison::add(std::span<const float> baseline, std::span<const float> model) {
    const size_t vocab = baseline.size();
    const auto top_b = static_cast<size_t>(colibri::argmax(baseline)), top_m = static_cast<size_t>(colibri::argmax(model));
    const double lse_b = log_sum_exp(baseline), lse_m = log_sum_exp(model);
    double kl = 0.0;
    for (size_t i = 0; i < vocab; ++i) {
        const double lb = baseline[i] - lse_b, lm = model[i] - lse_m;
        kl += std::exp(lb) * (lb - lm);
        max_abs_dlogit_ = std::max(max_abs_dlogit_, std::fabs(double(baseline[i]) - double(model[i])));
    }
    kl = std::max(kl, 0.0);  // rounding can leave a tiny negative for identical distributions
    kl_sum_ += kl;
    max_kl_ = std::max(max_kl_, kl);
    if (top_b == top_m) {
        ++agree_;
    } else {
        // How near a tie the baseline was: its top logit minus its logit for the model's choice.
        disagreements_.push_back({{"position", positions_}, {"baseline_top", top_b}, {"model_top", top_m},
                                  {"baseline_margin", baseline[top_b] - baseline[top_m]},
                                  {"model_margin", model[top_m] - model[top_b]}});
    }
    ++positions_;
}

json LogitComparison::to_json() const {
    return {{"positions", positions_}, {"top1_agree", agree_},
            {"top1_rate", positions_ ? double(agree_) / double(positions_) : 0.0},
            {"mean_kl", positions_ ? kl_sum_ / double(positions_) : 0.0}, {"max_kl", max_kl_},
            {"max_abs_dlogit", max_abs_dlogit_}, {"disagreements", disagreements_}};
}

std::vector<int32_t> random_token_ids(size_t n, uint32_t vocab_size, int32_t bos_id, uint64_t seed) {
    std::vector<int32_t> ids;
    if (bos_id >= 0 && n > 0) ids.push_back(bos_id);
    uint64_t state = seed;
    while (ids.size() < n) ids.push_back(static_cast<int32_t>(splitmix64(state) % vocab_size));
    return ids;
}

Result<std::vector<float>> read_logits_file(const std::string& path, size_t positions, size_t vocab) {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) return error(path + ": cannot read");
    const auto bytes = static_cast<uint64_t>(in.tellg());
    if (bytes != uint64_t(positions) * vocab * sizeof(float))
        return error(path + ": " + std::to_string(bytes) + " bytes, expected " + std::to_string(positions) + " positions x " +
                     std::to_string(vocab) + " float32 logits");
    std::vector<float> logits(positions * vocab);
    in.seekg(0);
    if (!in.read(reinterpret_cast<char*>(logits.data()), static_cast<std::streamsize>(bytes))) return error(path + ": read failed");
    return logits;
}

}  // namespace colibri::tools
