// Small helpers the forward pass's files share (session.cpp, session_attention.cpp, session_moe.cpp); not
// part of the engine's interface.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "engine/file/model_file.h"

namespace colibri::session_internal {

inline uint64_t now_ns() {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

// A bound f32 vector's values (norm weights, biases, sinks).
inline const float* f32(const TensorView* t) { return static_cast<const float*>(t->data); }

// v[i] += bias[i] for i in [a, b); nothing without a bias.
inline void add_bias(float* v, const TensorView* bias, size_t a, size_t b) {
    if (bias == nullptr) return;
    for (size_t i = a; i < b; ++i) v[i] += f32(bias)[i];
}

}  // namespace colibri::session_internal
