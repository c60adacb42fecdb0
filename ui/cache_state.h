// The expert cache as the Studio shows it (a RAM budget): per MoE layer, each expert's place after an
// evaluation — resident, read during it, evicted during it, read ahead and still loading, or out of the cache —
// with its heat. CacheStateTracker takes these snapshots on the engine thread; they are immutable afterwards
// and travel to the UI thread inside TokenTraces.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/cache/expert_cache.h"

namespace colibri {
class Model;
}

namespace colibri::studio {

enum class CacheCell : uint8_t {
    Never,     // never read into a slot
    Out,       // read once, evicted before this evaluation
    Resident,  // in a slot before this evaluation and still there
    Loaded,    // read into a slot during this evaluation on a miss (the computation waited for it)
    ReadAhead, // read into a slot during this evaluation ahead of use, on a prediction (prefetch)
    Evicted,   // left its slot during this evaluation
    Loading,   // read ahead and still being read when the evaluation ended
};
const char* cache_cell_name(CacheCell c);

struct CacheSnapshot {
    int n_experts = 0;
    int slot_count = 0;          // per layer
    std::vector<int> layers;     // the MoE layers, ascending
    std::vector<CacheCell> cell; // [layer index * n_experts + expert]
    std::vector<uint8_t> pinned; // same shape: 1 for a pinned expert
    std::vector<float> heat;     // same shape: the policy's use score
    std::vector<uint32_t> loads; // same shape: reads into a slot since load
    CacheCell at(int layer_index, int expert) const { return cell[static_cast<size_t>(layer_index * n_experts + expert)]; }
    size_t index(int layer_index, int expert) const { return static_cast<size_t>(layer_index * n_experts + expert); }
    // The largest heat at a layer (for brightness relative to the layer's hottest expert).
    float max_heat(int layer_index) const;
    int count(int layer_index, CacheCell c) const;
};

class CacheStateTracker {
public:
    // The state of every MoE layer's slots now, against the previous call's (the first call: against an empty
    // cache). No session may be evaluating on another thread; prefetches may still be reading.
    std::shared_ptr<const CacheSnapshot> take(const Model& model, ExpertCache& cache);

private:
    std::vector<ExpertSlotState> previous_;  // [layer index * n_experts + expert]
};

}  // namespace colibri::studio
