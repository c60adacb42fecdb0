// The RAM budget that gives every MoE layer of a model a given number of expert slots: what the expert-cache
// suites (engine and Studio) open models with.
#pragma once
#include <QtGlobal>
#include <cstdint>
#include <string>

#include "engine/core/model.h"

namespace colibri::test {

inline uint64_t budget_for(const std::string& path, uint32_t n_slots) {  // (not `slots`: a Qt macro)
    auto m = Model::load(path);
    if (!m) qFatal("%s", m.message().c_str());
    ExpertCacheConfig c;
    c.ram_budget = uint64_t(1) << 50;
    if (Status s = m.value()->use_expert_cache(c); !s) qFatal("%s", s.message().c_str());
    const ExpertCache& cache = *m.value()->expert_cache();
    return cache.resident_bytes() + uint64_t(n_slots) * cache.slot_bytes() * m.value()->moe_layer_count();
}

}  // namespace colibri::test
