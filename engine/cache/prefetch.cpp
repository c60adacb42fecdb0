#include "engine/cache/prefetch.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

namespace colibri {

ExpertPrefetcher::ExpertPrefetcher(const ExpertSource& model) {
    const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    runs_.resize(model.file().hparams().n_layers);
    for (uint32_t l = 0; l < runs_.size(); ++l) {
        for (const FfnWeights& e : model.routed_experts(l)) {
            uintptr_t lo = UINTPTR_MAX, hi = 0;
            for (const TensorView* t : {e.gate, e.up, e.down}) {
                if (t == nullptr) continue;
                const auto p = reinterpret_cast<uintptr_t>(t->data);
                lo = std::min(lo, p);
                hi = std::max(hi, p + t->size);
            }
            PageRun run;
            if (hi > lo) {
                lo &= ~(page - 1);
                run.begin = reinterpret_cast<const void*>(lo);
                run.bytes = hi - lo;
            }
            runs_[l].push_back(run);
        }
    }
}

void ExpertPrefetcher::prefetch(uint32_t layer, std::span<const int32_t> experts) const {
    if (layer >= runs_.size()) return;
    const std::vector<PageRun>& runs = runs_[layer];
    for (int32_t e : experts) {
        if (e < 0 || static_cast<size_t>(e) >= runs.size() || runs[e].bytes == 0) continue;
        madvise(const_cast<void*>(runs[e].begin), runs[e].bytes, MADV_WILLNEED);
        ++calls_;
    }
}

}  // namespace colibri
