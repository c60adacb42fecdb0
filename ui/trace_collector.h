// The Studio's TraceObserver: gathers everything the Session reports about the positions of one eval() call
// (one token, or a batched chunk of a prompt) into TokenTraces. Lives on the engine thread with the Session;
// the finished traces are moved out with take().
//
// Counters are read only when asked (Counting::Layers, or ::Experts for every routed expert too, which makes
// the session compute one expert at a time). The time spent reading them is measured here and reported as its
// own stage (LayerProfile::counter_ns), taken out of the experts' time it would otherwise inflate.
#pragma once
#include <vector>

#include "engine/core/perf_counters.h"
#include "engine/core/trace.h"
#include "ui/data/token_trace.h"

namespace colibri::studio {

enum class Counting { Off, Layers, Experts };

class TraceCollector final : public TraceObserver, private CounterSource {
public:
    // counters may be null (then nothing is counted whatever set_counting says).
    explicit TraceCollector(PerfCounters* counters) : counters_(counters) {}
    void set_counting(Counting c) { counting_ = c; }
    Counting counting_mode() const { return counting_; }
    bool counting() const { return counting_ != Counting::Off && counters_ != nullptr && counters_->size() > 0; }

    // Starts the records of the positions first .. first + tokens.size() - 1 about to be evaluated.
    void begin(int first_position, const std::vector<int32_t>& tokens, const std::vector<QString>& texts, bool generated);
    std::vector<TokenTrace> take() { return std::move(traces_); }

    void on_routing(const RoutingRecord& r) override;
    void on_layer_timing(const LayerTiming& t) override;
    CounterSource* counters() override { return counting() ? this : nullptr; }
    bool count_experts() override { return counting_ == Counting::Experts; }
    void on_counters(const CounterRecord& c) override;
    void on_token_timing(const TokenTiming& t) override;
    void on_cache(const CacheRecord& c) override;
    void on_prediction(const PredictionRecord& p) override;
    void on_linear_state(const LinearStateRecord& s) override;

private:
    // CounterSource: the PerfCounters, timed.
    void start(unsigned slot) override;
    std::span<const uint64_t> stop(unsigned slot) override;

    TokenTrace* trace(uint32_t position);
    LayerProfile& profile(TokenTrace& t, int layer);
    PerfCounters* counters_;
    Counting counting_ = Counting::Off;
    int first_ = 0;
    std::vector<TokenTrace> traces_;
    // Time spent reading counters since the last layer timing: inside the expert stage (slot 1), and around
    // the whole layer (slot 0, outside every stage).
    uint64_t expert_read_ns_ = 0, layer_read_ns_ = 0;
};

}  // namespace colibri::studio
