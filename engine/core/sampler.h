// Token sampling: greedy, or repetition penalty → temperature → top-k → top-p → min-p → draw, in the order
// transformers applies its logits processors. Seeded with its own generator, so a seed gives the same tokens
// on every platform.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace colibri {

// Below this temperature sampling is greedy: logits divided by a tinier one overflow to infinity (1e-39, a float
// denormal, made every token +inf), and sampling at one differs from greedy only between logits closer than
// ~1e-3. The server's API takes the same bound (server/openai_api.h).
inline constexpr float kGreedyBelowTemperature = 1e-4f;

struct SamplerConfig {
    bool greedy = false;
    float temperature = 0.8f;   // below kGreedyBelowTemperature (0 included) means greedy
    int32_t top_k = 40;         // <= 0 disables
    float top_p = 0.95f;        // >= 1 disables
    float min_p = 0.05f;        // <= 0 disables
    float repetition_penalty = 1.0f;  // 1 disables; divides positive logits, multiplies negative ones
    int32_t repetition_window = 64;   // most recent tokens the penalty looks at
    uint64_t seed = 0;
};

class Sampler {
public:
    explicit Sampler(const SamplerConfig& config);
    // Picks the next token from logits given the tokens so far (for the repetition penalty).
    int32_t sample(std::span<const float> logits, std::span<const int32_t> history);
    const SamplerConfig& config() const { return config_; }
    void reseed(uint64_t seed);

private:
    double next_uniform();  // [0, 1)
    SamplerConfig config_;
    uint64_t state_[4];
    std::vector<float> work_;
    std::vector<int32_t> ids_;
};

int32_t argmax(std::span<const float> logits);  // lowest index among equal maxima

// Empty when every value is in range (temperature finite and >= 0, top-p and min-p in [0, 1], repetition
// penalty finite and > 0, top-k and the window >= 0), else what is wrong, naming the CLI option.
std::string sampler_config_problem(const SamplerConfig& config);

}  // namespace colibri
