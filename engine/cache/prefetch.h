// Expert prefetch: asks the kernel (madvise MADV_WILLNEED) to read an expert's weight pages ahead of use, so a
// cold expert's page faults overlap with the computation of the current layer. Each expert is one run of
// pages in the file (one section per expert), so one call covers its three projections. Advice never
// changes results and its failure is ignored.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/cache/expert_source.h"

namespace colibri {

class ExpertPrefetcher {
public:
    explicit ExpertPrefetcher(const ExpertSource& model);
    // Advises the pages of these experts of `layer`; ids out of range (or -1) are skipped.
    void prefetch(uint32_t layer, std::span<const int32_t> experts) const;
    uint64_t calls() const { return calls_; }

private:
    struct PageRun {
        const void* begin = nullptr;  // page-aligned
        size_t bytes = 0;
    };
    std::vector<std::vector<PageRun>> runs_;  // [layer][expert]; empty for dense layers
    mutable uint64_t calls_ = 0;
};

}  // namespace colibri
