// Trace records a Session emits to an observer while it computes. With no observer attached the cost is a
// branch per stage.
#pragma once
#include <cstdint>
#include <span>

namespace colibri {

struct RoutingRecord {
    uint32_t layer;
    uint32_t position;                    // position of the token in the sequence
    std::span<const int32_t> experts;     // selected experts, descending weight
    std::span<const float> weights;       // their routing weights after the family's normalisation
    std::span<const float> router_logits; // raw logits over all experts
    std::span<const float> router_probs;  // softmax over all experts
};

struct LayerTiming {
    uint32_t layer;
    uint32_t position;
    uint64_t attention_ns;
    uint64_t router_ns;
    uint64_t experts_ns;    // routed experts, shared expert or dense MLP
};

class TraceObserver {
public:
    virtual ~TraceObserver() = default;
    virtual void on_routing(const RoutingRecord&) {}
    virtual void on_layer_timing(const LayerTiming&) {}
};

}  // namespace colibri
