#include "ui/trace_collector.h"

namespace colibri::studio {

void TraceCollector::begin(int position, int32_t token, const QString& text, bool generated) {
    trace_ = TokenTrace{};
    trace_.position = position;
    trace_.token = token;
    trace_.text = text;
    trace_.generated = generated;
}

void TraceCollector::on_routing(const RoutingRecord& r) {
    LayerRouting out;
    out.layer = static_cast<int>(r.layer);
    out.experts.assign(r.experts.begin(), r.experts.end());
    out.weights.assign(r.weights.begin(), r.weights.end());
    out.probs.assign(r.router_probs.begin(), r.router_probs.end());
    out.selection.assign(r.selection.begin(), r.selection.end());
    out.groups.assign(r.groups.begin(), r.groups.end());
    trace_.routing.push_back(std::move(out));
}

LayerProfile& TraceCollector::profile(int layer) {
    // Layers arrive in order; the record of the current layer is the last one or a new one.
    if (trace_.layers.empty() || trace_.layers.back().layer != layer) {
        trace_.layers.emplace_back();
        trace_.layers.back().layer = layer;
    }
    return trace_.layers.back();
}

void TraceCollector::on_layer_timing(const LayerTiming& t) {
    LayerProfile& p = profile(static_cast<int>(t.layer));
    p.attention_ns = t.attention_ns;
    p.router_ns = t.router_ns;
    p.experts_ns = t.experts_ns;
}

void TraceCollector::on_counters(const CounterRecord& c) {
    if (c.expert < 0) {
        profile(static_cast<int>(c.layer)).counters.assign(c.values.begin(), c.values.end());
        return;
    }
    trace_.experts.push_back(ExpertCounters{static_cast<int>(c.layer), c.expert, {c.values.begin(), c.values.end()}});
}

}  // namespace colibri::studio
