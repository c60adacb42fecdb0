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

#include "kernels/splitmix64.h"
#include "kernels/types.h"

namespace colibri::kernels {

// A counter-based stream, the same numbers on every platform for a (seed, stream).
class RandomStream {
public:
    // splitmix64 (kernels/splitmix64.h) from a state that mixes the seed and the stream.
    RandomStream(uint64_t seed, uint64_t stream) : rng_(seed * kSplitMix64Increment ^ (stream + 0x632BE59BD9B4E019ull)) { next(); }
    uint64_t next() { return rng_.next(); }
    uint32_t below(uint32_t n) { return uint32_t((next() >> 32) * n >> 32); }
    float uniform() { return float(next() >> 40) * 0x1.0p-24f; }  // [0, 1)
    float gaussian() { return rng_.gaussian(); }
    void bytes(uint8_t* p, size_t n) {
        for (size_t i = 0; i < n; i += 8) {
            const uint64_t v = next();
            std::memcpy(p + i, &v, std::min<size_t>(8, n - i));
        }
    }

private:
    SplitMix64 rng_;
};

// One row of `cols` random values of standard deviation about `sd` in `type` (row_bytes(type, cols) bytes),
// drawn from stream `stream` of `seed`.
void random_row(WeightType type, size_t cols, float sd, uint64_t seed, uint64_t stream, uint8_t* out);

// `rows` such rows, row r from stream r: a matrix for kernel tests, benchmarks and the tuner.
void random_matrix(WeightType type, size_t rows, size_t cols, float sd, uint64_t seed, uint8_t* out);

}  // namespace colibri::kernels
