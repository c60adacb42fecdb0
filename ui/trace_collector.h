// The Studio's TraceObserver: gathers everything the Session reports about one position into a TokenTrace.
// Lives on the engine thread with the Session; the finished trace is copied out with take().
#pragma once
#include "engine/perf_counters.h"
#include "engine/trace.h"
#include "ui/token_trace.h"

namespace colibri::studio {

class TraceCollector final : public TraceObserver {
public:
    // counters may be null; sampling also stops while set_counting(false).
    explicit TraceCollector(PerfCounters* counters) : counters_(counters) {}
    void set_counting(bool on) { counting_ = on; }
    bool counting() const { return counting_ && counters_ != nullptr && counters_->size() > 0; }

    // Starts the record of the position about to be evaluated.
    void begin(int position, int32_t token, const QString& text, bool generated);
    TokenTrace take() { return std::move(trace_); }

    void on_routing(const RoutingRecord& r) override;
    void on_layer_timing(const LayerTiming& t) override;
    CounterSource* counters() override { return counting() ? counters_ : nullptr; }
    void on_counters(const CounterRecord& c) override;

private:
    LayerProfile& profile(int layer);
    PerfCounters* counters_;
    bool counting_ = true;
    TokenTrace trace_;
};

}  // namespace colibri::studio
