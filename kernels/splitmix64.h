// splitmix64 (Steele, Lea and Flood, 2014): the tree's one small deterministic generator, the same numbers on
// every platform for a seed. The sampler seeds xoshiro256** with it; test models, random blocks, compare's
// random tokens and test sampling draw from it. Changing it changes every generated model and seed's output.
#pragma once
#include <cmath>
#include <cstdint>

namespace colibri {

inline constexpr uint64_t kSplitMix64Increment = 0x9E3779B97F4A7C15ull;  // 2^64 / golden ratio

// The generator's output function: a bijective 64-bit mix.
constexpr uint64_t splitmix64_mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Advances `state` and returns the next number of its stream.
constexpr uint64_t splitmix64(uint64_t& state) { return splitmix64_mix(state += kSplitMix64Increment); }

class SplitMix64 {
public:
    explicit constexpr SplitMix64(uint64_t state) : state_(state) {}
    constexpr uint64_t next() { return splitmix64(state_); }
    // A normal deviate (Box-Muller from two draws, 53 bits each; the first never 0).
    float gaussian() {
        const double u1 = (static_cast<double>(next() >> 11) + 1.0) * 0x1.0p-53;
        const double u2 = static_cast<double>(next() >> 11) * 0x1.0p-53;
        return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
    }

private:
    uint64_t state_;
};

}  // namespace colibri
