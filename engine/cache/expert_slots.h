// Which routed experts of one layer occupy that layer's cache slots, and which one leaves when another must
// come in. The same bookkeeping drives the budgeted expert cache (engine/cache/expert_cache.h) and the offline
// replay of routing traces (tools/cache_sim.h), so a replay's hit rates are what the engine would see.
//
// Time has two units. advance(tokens) moves the clock by tokens (LFRU's decay is per token); begin_group()
// opens a group of experts that must be resident together (one token's choice in a replay, a batch of the
// experts a chunk computes at once in the engine): an expert used in the open group is never evicted.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace colibri {

enum class CachePolicy : uint8_t {
    Lru,     // evict the least recently used
    Lfru,    // evict the lowest use count decayed per token (LFU with decay); ties: least recently used
    Pinned,  // a hot set learned from a trace keeps reserved slots; the other slots are LRU
};

std::optional<CachePolicy> parse_cache_policy(std::string_view name);  // "lru", "lfru", "pinned"
const char* cache_policy_name(CachePolicy policy);

// Per-token decay of LFRU's use counts: a use 14 tokens ago weighs half of one now.
inline constexpr double kLfruDecay = 0.95;

// The `count` most used experts of counts (uses per expert), most used first; ties go to the lower id.
// Experts never used are not chosen.
std::vector<uint32_t> hot_set(std::span<const uint64_t> counts, uint32_t count);

class ExpertSlots {
public:
    static constexpr int32_t kNone = -1;

    // pinned (Pinned policy only; ignored otherwise): experts that keep reserved slots, at most slots - 1 of
    // them, ids below n_experts, distinct. Nothing is resident at first.
    ExpertSlots(CachePolicy policy, uint32_t n_experts, uint32_t n_slots, std::span<const uint32_t> pinned = {},
                double decay = kLfruDecay);

    struct Access {
        bool hit = false;
        uint32_t slot = 0;
        int32_t evicted = kNone;  // the expert that left the slot on a miss, kNone when the slot was empty
    };
    // Uses an expert within the open group. Empty when it is not resident and every slot it could take holds
    // an expert of the open group: the caller computes the group, calls begin_group() and asks again.
    std::optional<Access> access(uint32_t expert);
    void begin_group() { ++group_; }
    // Empties the expert's slot (its load failed); nothing when it is not resident.
    void forget(uint32_t expert);
    void advance(uint32_t tokens);

    int32_t slot_of(uint32_t expert) const { return slot_of_[expert]; }
    int32_t expert_in(uint32_t slot) const { return expert_in_[slot]; }
    uint32_t slot_count() const { return static_cast<uint32_t>(expert_in_.size()); }
    uint32_t n_experts() const { return static_cast<uint32_t>(slot_of_.size()); }
    CachePolicy policy() const { return policy_; }
    bool pinned(uint32_t expert) const { return pinned_slot_[expert] != kNone; }
    // LFRU's decayed use count of an expert (for a heat display); the plain use count under the other policies.
    double heat(uint32_t expert) const { return score_[expert]; }

private:
    // The slot a miss of a non-pinned expert takes: an empty one, else the policy's choice among the slots
    // not used by the open group; kNone when there is none.
    int32_t victim() const;

    CachePolicy policy_;
    double decay_;
    uint32_t first_free_slot_ = 0;       // slots [0, first_free_slot_) are reserved for the pinned experts
    std::vector<int32_t> slot_of_;       // per expert: its slot or kNone
    std::vector<int32_t> expert_in_;     // per slot: its expert or kNone
    std::vector<int32_t> pinned_slot_;   // per expert: its reserved slot or kNone
    std::vector<uint64_t> last_use_;     // per expert: clock of its last use
    std::vector<uint64_t> group_of_;     // per expert: the group of its last use
    std::vector<double> score_;          // per expert (resident or not): LFRU's decayed count, else the count
    uint64_t clock_ = 0;
    uint64_t group_ = 1;
};

}  // namespace colibri
