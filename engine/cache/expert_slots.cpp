#include "engine/cache/expert_slots.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace colibri {

std::optional<CachePolicy> parse_cache_policy(std::string_view name) {
    if (name == "lru") return CachePolicy::Lru;
    if (name == "lfru") return CachePolicy::Lfru;
    if (name == "pinned") return CachePolicy::Pinned;
    return std::nullopt;
}

const char* cache_policy_name(CachePolicy policy) {
    switch (policy) {
        case CachePolicy::Lru: return "lru";
        case CachePolicy::Lfru: return "lfru";
        case CachePolicy::Pinned: return "pinned";
    }
    return "?";
}

std::vector<uint32_t> hot_set(std::span<const uint64_t> counts, uint32_t count) {
    std::vector<uint32_t> ids(counts.size());
    std::iota(ids.begin(), ids.end(), 0u);
    std::stable_sort(ids.begin(), ids.end(), [&](uint32_t a, uint32_t b) { return counts[a] > counts[b]; });
    size_t used = 0;
    while (used < ids.size() && counts[ids[used]] > 0) ++used;
    ids.resize(std::min<size_t>({used, count, ids.size()}));
    return ids;
}

ExpertSlots::ExpertSlots(CachePolicy policy, uint32_t n_experts, uint32_t n_slots, std::span<const uint32_t> pinned,
                         double decay)
    : policy_(policy),
      decay_(decay),
      slot_of_(n_experts, kNone),
      expert_in_(n_slots, kNone),
      pinned_slot_(n_experts, kNone),
      last_use_(n_experts, 0),
      group_of_(n_experts, 0),
      score_(n_experts, 0.0) {
    if (policy != CachePolicy::Pinned) return;
    for (uint32_t e : pinned) {
        if (first_free_slot_ + 1 >= n_slots) break;  // one slot always stays free for the rest
        if (e >= n_experts || pinned_slot_[e] != kNone) continue;
        pinned_slot_[e] = static_cast<int32_t>(first_free_slot_++);
    }
}

void ExpertSlots::advance(uint32_t tokens) {
    if (policy_ != CachePolicy::Lfru || tokens == 0) return;
    const double f = std::pow(decay_, static_cast<double>(tokens));
    for (double& s : score_) s *= f;
}

int32_t ExpertSlots::victim() const {
    int32_t best = kNone;
    for (uint32_t s = first_free_slot_; s < expert_in_.size(); ++s) {
        const int32_t e = expert_in_[s];
        if (e == kNone) return static_cast<int32_t>(s);
        if (group_of_[e] == group_) continue;  // in use by the open group
        if (best == kNone) {
            best = static_cast<int32_t>(s);
            continue;
        }
        const int32_t b = expert_in_[best];
        const bool older = last_use_[e] < last_use_[b];
        if (policy_ == CachePolicy::Lfru) {
            if (score_[e] < score_[b] || (score_[e] == score_[b] && older)) best = static_cast<int32_t>(s);
        } else if (older) {
            best = static_cast<int32_t>(s);
        }
    }
    return best;
}

void ExpertSlots::forget(uint32_t expert) {
    const int32_t slot = slot_of_[expert];
    if (slot == kNone) return;
    expert_in_[slot] = kNone;
    slot_of_[expert] = kNone;
}

std::optional<ExpertSlots::Access> ExpertSlots::access(uint32_t expert) {
    Access a;
    if (slot_of_[expert] != kNone) {
        a.hit = true;
        a.slot = static_cast<uint32_t>(slot_of_[expert]);
    } else {
        const int32_t slot = pinned_slot_[expert] != kNone ? pinned_slot_[expert] : victim();
        if (slot == kNone) return std::nullopt;
        a.slot = static_cast<uint32_t>(slot);
        a.evicted = expert_in_[slot];
        if (a.evicted != kNone) slot_of_[a.evicted] = kNone;
        expert_in_[slot] = static_cast<int32_t>(expert);
        slot_of_[expert] = slot;
    }
    last_use_[expert] = ++clock_;
    group_of_[expert] = group_;
    score_[expert] += 1.0;
    return a;
}

}  // namespace colibri
