#include "ui/cache_replay.h"

#include <algorithm>

#include "ui/conversation.h"

namespace colibri::studio {

tools::RoutingTrace conversation_routing(const Conversation& conversation, int n_experts, int top_k) {
    tools::RoutingTrace t;
    t.n_experts = static_cast<uint32_t>(std::max(n_experts, 0));
    t.top_k = static_cast<uint32_t>(std::max(top_k, 0));
    // The MoE layers: those of the first routed position.
    for (const ConversationToken& c : conversation.tokens())
        if (c.evaluated && !c.trace.routing.empty()) {
            for (const LayerRouting& r : c.trace.routing) t.layers.push_back(static_cast<uint32_t>(r.layer));
            break;
        }
    t.choices.resize(t.layers.size());
    t.predicted.resize(t.layers.size());
    std::vector<std::vector<std::vector<uint32_t>>> predicted(t.layers.size());
    std::vector<bool> every_predicted(t.layers.size(), true);
    for (const ConversationToken& c : conversation.tokens()) {
        if (!c.evaluated) continue;
        bool complete = c.trace.routing.size() == t.layers.size();
        for (size_t li = 0; complete && li < t.layers.size(); ++li) {
            const LayerRouting& r = c.trace.routing[li];
            complete = r.layer == static_cast<int>(t.layers[li]) && r.experts.size() == t.top_k &&
                       std::all_of(r.experts.begin(), r.experts.end(), [&](int32_t e) { return e >= 0 && static_cast<uint32_t>(e) < t.n_experts; });
        }
        if (!complete) continue;
        for (size_t li = 0; li < t.layers.size(); ++li) {
            const LayerRouting& r = c.trace.routing[li];
            t.choices[li].emplace_back(r.experts.begin(), r.experts.end());
            std::vector<uint32_t> p;
            for (const LayerPrediction& lp : c.trace.predictions)
                if (lp.layer == r.layer) {
                    for (int32_t e : lp.experts)
                        if (e >= 0 && static_cast<uint32_t>(e) < t.n_experts) p.push_back(static_cast<uint32_t>(e));
                    break;
                }
            if (p.empty()) every_predicted[li] = false;
            predicted[li].push_back(std::move(p));
        }
    }
    // A layer's predictions are replayed only when every kept position has one.
    for (size_t li = 0; li < t.layers.size(); ++li)
        if (every_predicted[li] && !predicted[li].empty()) t.predicted[li] = std::move(predicted[li]);
    return t;
}

std::vector<uint32_t> curve_slot_counts(uint32_t top_k, uint32_t n_experts, uint32_t also, uint32_t max_points) {
    std::vector<uint32_t> counts;
    if (top_k == 0 || n_experts < top_k) return counts;
    const uint32_t span = n_experts - top_k;
    const uint32_t points = std::max<uint32_t>(2, std::min(max_points, span + 1));
    for (uint32_t i = 0; i < points; ++i) counts.push_back(top_k + static_cast<uint32_t>((uint64_t(span) * i + (points - 1) / 2) / (points - 1)));
    if (also >= top_k && also <= n_experts) counts.push_back(also);
    std::sort(counts.begin(), counts.end());
    counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
    return counts;
}

const CacheCurve* CacheCurves::curve(const QString& policy) const {
    for (const CacheCurve& c : curves)
        if (c.policy == policy) return &c;
    return nullptr;
}

CacheCurves replay_curves(const tools::RoutingTrace& trace, const std::vector<uint32_t>& slot_counts, const std::atomic<bool>& cancel) {
    CacheCurves out;
    out.slot_counts = slot_counts;
    out.positions = trace.choices.empty() ? 0 : static_cast<int>(trace.choices.front().size());
    if (out.positions == 0 || slot_counts.empty()) return out;
    const bool predictions = trace.has_predictions();
    out.curves = {{QStringLiteral("LRU"), {}}, {QStringLiteral("LFRU"), {}}, {QStringLiteral("pinned"), {}}, {QStringLiteral("Belady"), {}}};
    if (predictions) out.curves.push_back({QStringLiteral("LRU + prediction"), {}});
    for (uint32_t n : slot_counts) {
        if (cancel.load()) {
            out.cancelled = true;
            return out;
        }
        out.curves[0].rate.push_back(tools::replay(trace, CachePolicy::Lru, n, trace).rate());
        out.curves[1].rate.push_back(tools::replay(trace, CachePolicy::Lfru, n, trace).rate());
        out.curves[2].rate.push_back(tools::replay(trace, CachePolicy::Pinned, n, trace).rate());  // hot set in-sample
        out.curves[3].rate.push_back(tools::replay_belady(trace, n).rate());
        if (predictions) out.curves[4].rate.push_back(tools::replay(trace, CachePolicy::Lru, n, trace, true).rate());
    }
    if (predictions) {
        uint64_t right = 0, chosen = 0;
        for (const tools::PredictionAccuracy& a : tools::prediction_accuracy(trace)) {
            right += a.right;
            chosen += a.chosen;
        }
        if (chosen > 0) out.prediction_accuracy = double(right) / double(chosen);
    }
    return out;
}

}  // namespace colibri::studio
