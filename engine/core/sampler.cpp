#include "engine/core/sampler.h"

#include "kernels/splitmix64.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace colibri {

namespace {
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

int32_t argmax(std::span<const float> logits) {
    const size_t n = logits.size();
    const float* v = logits.data();
    // The plain definition: the first index whose value no later value exceeds (NaN never does, and a NaN
    // first element is never exceeded). The vector path finds the largest value first, then its first index:
    // the same answer, about 6x faster on a 32000-entry vocabulary (greedy decoding calls it every token).
    auto plain = [&] {
        int32_t best = 0;
        for (size_t i = 1; i < n; ++i)
            if (v[i] > v[best]) best = static_cast<int32_t>(i);
        return best;
    };
#if defined(__SSE2__)
    if (n < 64 || std::isnan(v[0])) return n == 0 ? 0 : plain();
    // maxps(x, m) is x > m ? x : m, so a NaN x leaves m as it was: NaNs are skipped, as by `>` above.
    __m128 m0 = _mm_set1_ps(v[0]), m1 = m0, m2 = m0, m3 = m0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        m0 = _mm_max_ps(_mm_loadu_ps(v + i), m0);
        m1 = _mm_max_ps(_mm_loadu_ps(v + i + 4), m1);
        m2 = _mm_max_ps(_mm_loadu_ps(v + i + 8), m2);
        m3 = _mm_max_ps(_mm_loadu_ps(v + i + 12), m3);
    }
    alignas(16) float lanes[16];
    _mm_store_ps(lanes, m0);
    _mm_store_ps(lanes + 4, m1);
    _mm_store_ps(lanes + 8, m2);
    _mm_store_ps(lanes + 12, m3);
    float best = v[0];
    for (float x : lanes) best = x > best ? x : best;
    for (; i < n; ++i) best = v[i] > best ? v[i] : best;
    // The first index holding that value (−0 and +0 compare equal, as they do for `>`).
    const __m128 b = _mm_set1_ps(best);
    size_t k = 0;
    for (; k + 4 <= n; k += 4)
        if (const int hit = _mm_movemask_ps(_mm_cmpeq_ps(_mm_loadu_ps(v + k), b)); hit != 0)
            return static_cast<int32_t>(k + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(hit))));
    for (; k < n; ++k)
        if (v[k] == best) return static_cast<int32_t>(k);
    return 0;  // not reached: best is one of the values
#else
    return n == 0 ? 0 : plain();
#endif
}

Sampler::Sampler(const SamplerConfig& config) : config_(config) { reseed(config.seed); }

void Sampler::reseed(uint64_t seed) {
    uint64_t x = seed;
    for (uint64_t& s : state_) s = splitmix64(x);
}

double Sampler::next_uniform() {  // xoshiro256**
    const uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return static_cast<double>(result >> 11) * 0x1.0p-53;
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
    const size_t n = logits.size();
    work_.assign(logits.begin(), logits.end());
    if (config_.repetition_penalty != 1.0f && config_.repetition_penalty > 0.0f) {
        const size_t window = config_.repetition_window > 0 ? static_cast<size_t>(config_.repetition_window) : history.size();
        const size_t start = history.size() > window ? history.size() - window : 0;
        // Each distinct token is penalised once, as transformers does.
        ids_.assign(history.begin() + static_cast<std::ptrdiff_t>(start), history.end());
        std::sort(ids_.begin(), ids_.end());
        ids_.erase(std::unique(ids_.begin(), ids_.end()), ids_.end());
        for (int32_t id : ids_) {
            if (id < 0 || static_cast<size_t>(id) >= n) continue;
            float& l = work_[id];
            l = l > 0.0f ? l / config_.repetition_penalty : l * config_.repetition_penalty;
        }
    }
    if (config_.greedy || !(config_.temperature >= kGreedyBelowTemperature)) return argmax(work_);

    // A NaN logit (a broken model) is never chosen, as by argmax, and must not reach the sort's comparisons.
    for (float& l : work_) l = std::isnan(l) ? -INFINITY : l / config_.temperature;
    // Candidates sorted by logit, ties by id, so the order never depends on the sort implementation.
    ids_.resize(n);
    std::iota(ids_.begin(), ids_.end(), 0);
    auto better = [this](int32_t a, int32_t b) { return work_[a] > work_[b] || (work_[a] == work_[b] && a < b); };
    size_t keep = n;
    if (config_.top_k > 0 && static_cast<size_t>(config_.top_k) < n) {
        keep = static_cast<size_t>(config_.top_k);
        std::partial_sort(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(keep), ids_.end(), better);
    } else {
        std::sort(ids_.begin(), ids_.end(), better);
    }
    // Softmax over the kept candidates.
    const float mx = work_[ids_[0]];
    std::vector<float>& probs = work_;  // reuse: probabilities overwrite the logits of kept ids
    double sum = 0.0;
    for (size_t i = 0; i < keep; ++i) {
        // Equal to the maximum is 1 even where that is infinite (huge logits over the temperature): never inf - inf.
        const float p = work_[ids_[i]] == mx ? 1.0f : std::exp(work_[ids_[i]] - mx);
        probs[ids_[i]] = p;
        sum += p;
    }
    for (size_t i = 0; i < keep; ++i) probs[ids_[i]] = static_cast<float>(probs[ids_[i]] / sum);
    if (config_.top_p < 1.0f && config_.top_p > 0.0f) {
        double cum = 0.0;
        size_t k = 0;
        while (k < keep) {
            cum += probs[ids_[k]];
            ++k;
            if (cum >= config_.top_p) break;
        }
        keep = std::max<size_t>(1, k);
    }
    if (config_.min_p > 0.0f) {
        const float threshold = config_.min_p * probs[ids_[0]];
        size_t k = 1;
        while (k < keep && probs[ids_[k]] >= threshold) ++k;
        keep = k;
    }
    double total = 0.0;
    for (size_t i = 0; i < keep; ++i) total += probs[ids_[i]];
    const double r = next_uniform() * total;
    double acc = 0.0;
    for (size_t i = 0; i < keep; ++i) {
        acc += probs[ids_[i]];
        if (r < acc) return ids_[i];
    }
    return ids_[keep - 1];
}

std::string sampler_config_problem(const SamplerConfig& c) {
    auto show = [](double v) { return std::to_string(v); };
    if (!(std::isfinite(c.temperature) && c.temperature >= 0.0f)) return "--temperature " + show(c.temperature) + " must be a finite number >= 0";
    if (c.top_k < 0) return "--top-k " + std::to_string(c.top_k) + " must be >= 0";
    if (!(c.top_p >= 0.0f && c.top_p <= 1.0f)) return "--top-p " + show(c.top_p) + " must be between 0 and 1";
    if (!(c.min_p >= 0.0f && c.min_p <= 1.0f)) return "--min-p " + show(c.min_p) + " must be between 0 and 1";
    if (!(std::isfinite(c.repetition_penalty) && c.repetition_penalty > 0.0f))
        return "--repeat-penalty " + show(c.repetition_penalty) + " must be a finite number > 0";
    if (c.repetition_window < 0) return "--repeat-last-n " + std::to_string(c.repetition_window) + " must be >= 0";
    return {};
}

}  // namespace colibri
