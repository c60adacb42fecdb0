// Random rows drawn straight in a weight type: the one filler of random weights. Quantised types get random
// codes under scales sized for a given standard deviation, never an f32 intermediate, so a model of 30 B
// parameters is written at disk speed (tools/random_model.h), and the kernel tests, the benchmarks and the tuner
// measure on the same realistic blocks. The entry points per type are kernels/weight_types.h's `random` column.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/types.h"

namespace colibri::kernels {

// splitmix64: a counter-based stream, the same numbers on every platform for a (seed, stream).
class RandomStream {
public:
    RandomStream(uint64_t seed, uint64_t stream) : state_(seed * 0x9E3779B97F4A7C15ull ^ (stream + 0x632BE59BD9B4E019ull)) { next(); }
    uint64_t next() {
        uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    uint32_t below(uint32_t n) { return uint32_t((next() >> 32) * n >> 32); }
    float uniform() { return float(next() >> 40) * 0x1.0p-24f; }  // [0, 1)
    float gaussian() {
        const double u1 = (double(next() >> 11) + 1.0) * 0x1.0p-53, u2 = double(next() >> 11) * 0x1.0p-53;
        return float(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
    }
    void bytes(uint8_t* p, size_t n) {
        for (size_t i = 0; i < n; i += 8) {
            const uint64_t v = next();
            std::memcpy(p + i, &v, std::min<size_t>(8, n - i));
        }
    }

private:
    uint64_t state_;
};

// One row of `cols` random values of standard deviation about `sd` in `type` (row_bytes(type, cols) bytes),
// drawn from stream `stream` of `seed`.
void random_row(WeightType type, size_t cols, float sd, uint64_t seed, uint64_t stream, uint8_t* out);

// `rows` such rows, row r from stream r: a matrix for kernel tests, benchmarks and the tuner.
void random_matrix(WeightType type, size_t rows, size_t cols, float sd, uint64_t seed, uint8_t* out);

}  // namespace colibri::kernels
