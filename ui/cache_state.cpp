#include "ui/cache_state.h"

#include <algorithm>

#include "engine/core/model.h"

namespace colibri::studio {

const char* cache_cell_name(CacheCell c) {
    switch (c) {
    case CacheCell::Never: return "never loaded";
    case CacheCell::Out: return "evicted earlier";
    case CacheCell::Resident: return "resident";
    case CacheCell::Loaded: return "read on a miss";
    case CacheCell::ReadAhead: return "read ahead";
    case CacheCell::Evicted: return "evicted";
    case CacheCell::Loading: return "loading (read ahead)";
    }
    return "";
}

float CacheSnapshot::max_heat(int layer_index) const {
    const auto from = heat.begin() + static_cast<std::ptrdiff_t>(index(layer_index, 0));
    return n_experts > 0 ? *std::max_element(from, from + n_experts) : 0.0f;
}

int CacheSnapshot::count(int layer_index, CacheCell c) const {
    const auto from = cell.begin() + static_cast<std::ptrdiff_t>(index(layer_index, 0));
    return static_cast<int>(std::count(from, from + n_experts, c));
}

std::shared_ptr<const CacheSnapshot> CacheStateTracker::take(const Model& model, ExpertCache& cache) {
    auto s = std::make_shared<CacheSnapshot>();
    const uint32_t n = model.hparams().n_experts;
    s->n_experts = static_cast<int>(n);
    s->slot_count = static_cast<int>(cache.slots_per_layer());
    for (uint32_t l = 0; l < model.hparams().n_layers; ++l)
        if (model.layers()[l].is_moe) s->layers.push_back(static_cast<int>(l));
    const size_t cells = s->layers.size() * n;
    s->cell.resize(cells);
    s->pinned.resize(cells);
    s->heat.resize(cells);
    s->loads.resize(cells);
    if (previous_.size() != cells) previous_.assign(cells, ExpertSlotState{});
    std::vector<ExpertSlotState> now(n);
    for (size_t li = 0; li < s->layers.size(); ++li) {
        {
            auto lock = cache.lock(static_cast<uint32_t>(s->layers[li]));
            cache.layer_state(static_cast<uint32_t>(s->layers[li]), now);
        }
        for (uint32_t e = 0; e < n; ++e) {
            const size_t i = li * n + e;
            const ExpertSlotState& was = previous_[i];
            const ExpertSlotState& is = now[e];
            CacheCell c = CacheCell::Never;
            if (is.loading) c = CacheCell::Loading;
            else if (is.resident) c = is.read_ahead > was.read_ahead ? CacheCell::ReadAhead
                                      : is.loads > was.loads         ? CacheCell::Loaded
                                                                     : CacheCell::Resident;
            else if (is.evictions > was.evictions) c = CacheCell::Evicted;
            else if (is.loads > 0) c = CacheCell::Out;
            s->cell[i] = c;
            s->pinned[i] = is.pinned ? 1 : 0;
            s->heat[i] = static_cast<float>(is.heat);
            s->loads[i] = is.loads;
            previous_[i] = is;
        }
    }
    return s;
}

}  // namespace colibri::studio
