// Trace records a Session emits to an observer while it computes. With no observer attached the cost is a
// branch per stage.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

namespace colibri {

// What the router did for one token at one MoE layer, as the family does it (engine/core/router.h): for a softmax
// router the weights are probabilities; for a sigmoid router (deepseek_v3, glm4_moe) they sum to the scaling
// factor and the experts were chosen by biased scores, within the groups listed.
struct RoutingRecord {
    uint32_t layer;
    uint32_t position;                    // position of the token in the sequence
    std::span<const int32_t> experts;     // selected experts, descending weight
    std::span<const float> weights;       // what each expert's output is multiplied by (normalisation and scaling done)
    std::span<const float> router_logits; // raw logits over all experts (with gpt_oss's router bias)
    std::span<const float> router_probs;  // the scores over all experts: softmax probabilities, sigmoids or logits
    std::span<const float> selection;     // per selected expert, the value it was selected by (score + selection bias)
    std::span<const uint32_t> groups;     // the expert groups selection was limited to (ascending); empty without groups
};

// A Gated DeltaNet layer's token mixer in its steps, in the order they run (LayerTiming::deltanet_ns).
enum class DeltaNetStep : uint8_t { InProjections, Conv, Gates, DeltaRule, GatedNorm, OutProjection };
constexpr size_t kDeltaNetSteps = 6;

struct LayerTiming {
    uint32_t layer;
    uint32_t position;
    uint64_t attention_ns;  // the token mixer: softmax attention, MLA or Gated DeltaNet
    uint64_t router_ns;
    uint64_t experts_ns;    // routed experts, shared expert or dense MLP
    // Gated DeltaNet layers: attention_ns in its steps (by DeltaNetStep; the rest of attention_ns is bookkeeping);
    // zeros for every other layer.
    uint64_t deltanet_ns[kDeltaNetSteps] = {};
};

// The whole of one token's evaluation, so that nothing is left unaccounted: total_ns is the token's share of
// its eval() call (a batched chunk's wall time split evenly, the logits' work charged to the last token),
// lm_head_ns the final norm and the lm head (0 for a token whose logits were not computed). Whatever total_ns
// holds beyond its layers' LayerTiming and lm_head_ns is embedding, rotary angles and observer calls.
struct TokenTiming {
    uint32_t position;
    uint64_t lm_head_ns;
    uint64_t total_ns;
};

// Counter deltas over one stage of one token: a whole layer (expert = -1: attention, router and experts) or
// one routed expert's FFN inside it. values are in the order of the observer's CounterSource.
struct CounterRecord {
    uint32_t layer;
    uint32_t position;
    int32_t expert;
    std::span<const uint64_t> values;
};

// Cumulative counters the Session samples around stages (perf_event, see engine/core/perf_counters.h). Stages nest
// at most two deep, so there are two slots: 0 for the layer, 1 for an expert inside it. stop() returns the
// deltas since start() of the same slot, valid until the next stop(); neither may allocate.
class CounterSource {
public:
    virtual ~CounterSource() = default;
    virtual void start(unsigned slot) = 0;
    virtual std::span<const uint64_t> stop(unsigned slot) = 0;
};

// The expert cache (--ram-budget) at one MoE layer over one evaluated chunk of `tokens` tokens from `position`.
struct CacheRecord {
    uint32_t layer;
    uint32_t position;
    uint32_t tokens;
    uint64_t hits;
    uint64_t misses;
    uint64_t bytes_read;
    uint64_t stall_ns;  // waiting for expert reads
    uint64_t prefetched = 0;       // experts read ahead for the next MoE layer (--cache-prefetch)
    uint64_t predicted = 0;        // this layer's experts, when a prediction had been made for it
    uint64_t predicted_right = 0;  // of those, the ones predicted
};

// The experts predicted for a token at a MoE layer, made at the MoE layer before it (the next layer's router on
// that layer's hidden state): what the expert cache's prefetch reads ahead.
struct PredictionRecord {
    uint32_t layer;                    // the layer predicted
    uint32_t position;
    std::span<const int32_t> experts;  // top-k, by descending weight
};

// A Gated DeltaNet layer after one token: per value head the Frobenius norm of its recurrent state matrix (dk × dv)
// once the token is written, the write strength β = σ(b) and the decay g = exp(A·softplus(a + dt_bias)) applied to
// the state before the write. Spans are valid during the call only.
struct LinearStateRecord {
    uint32_t layer;
    uint32_t position;
    std::span<const float> state_norms;  // per value head
    std::span<const float> betas;        // per value head, in (0, 1)
    std::span<const float> decays;       // per value head, in (0, 1]
};

// An expert-parallel run (more than one rank) at one MoE layer for one token: how long each rank ran its share of the
// layer's experts (Session::run_experts: its routed experts' rows, and the shared expert, which every rank computes),
// how long this rank then spent in the exchange (waiting for the slowest rank, and the transfer), and the expert
// output rows the exchange moved. Each rank sends its own time behind its rows, so every rank learns every rank's
// without another collective. A chunk of tokens shares these as LayerTiming does: times split evenly, bytes too with
// the remainder on the chunk's last token, so that a chunk's tokens add up to its exchange. Spans are valid during
// the call only.
struct RankTiming {
    uint32_t layer;
    uint32_t position;
    std::span<const uint64_t> experts_ns;  // per rank, in rank order
    uint64_t exchange_ns;                  // this rank's time in the exchange
    uint64_t bytes;                        // every rank's rows together (bytes_sent + bytes_received: an allgather)
    uint64_t bytes_sent;                   // this rank's rows, out
    uint64_t bytes_received;               // the other ranks' rows, in
};

class TraceObserver {
public:
    virtual ~TraceObserver() = default;
    virtual void on_routing(const RoutingRecord&) {}
    virtual void on_layer_timing(const LayerTiming&) {}
    virtual void on_cache(const CacheRecord&) {}
    virtual void on_prediction(const PredictionRecord&) {}
    virtual void on_linear_state(const LinearStateRecord&) {}
    // Non-null asks for on_counters() per layer and per routed expert; null (the default) costs nothing.
    virtual CounterSource* counters() { return nullptr; }
    // With counters(): whether each routed expert is also counted on its own (one expert at a time instead of
    // all of a layer's experts in two hand-offs, which is slower); false counts whole layers only.
    virtual bool count_experts() { return true; }
    virtual void on_counters(const CounterRecord&) {}
    virtual void on_token_timing(const TokenTiming&) {}
    // Only in an expert-parallel run, per token and MoE layer (none in one process).
    virtual void on_rank_timing(const RankTiming&) {}
};

}  // namespace colibri
