// How many drafts a drafter offers per check, from what the checks kept: a check costs one row per draft (and a
// drafter its own work per draft: the MTP head runs a layer and the lm head for each), so the length follows the
// acceptance and a drafter whose guesses keep failing rests. Shared by the lookup and MTP drafters.
#pragma once
#include <algorithm>
#include <cstdint>

namespace colibri {

// The settings (an aggregate, so a drafter's can be written as constants).
struct DraftPacing {
    uint32_t max_drafts = 8;  // per check, at most
    uint32_t first = 8;       // the first check's length (and after reset)
    // After a check whose drafts were all wrong, no drafts for the next 2, then 4, 8 ... up to max_rest
    // proposals (until a check keeps one); 0: never rest.
    uint32_t max_rest = 64;
    // false: every check offers max_drafts, whatever was kept (tests that step a drafter by hand).
    bool adapt = true;
};

// The state that follows the checks.
class DraftPacer {
public:
    explicit DraftPacer(DraftPacing settings) : s_(settings) { reset(); }
    // Drafts the next proposal may offer: 0 while resting (each call counts one proposal of the rest).
    uint32_t next() {
        if (rest_ > 0) {
            --rest_;
            return 0;
        }
        return s_.adapt ? length_ : std::max(s_.max_drafts, 1u);
    }
    // Of `proposed` drafts the first `accepted` were kept: all of them doubles the length (up to max_drafts), a
    // rejection brings it to one more than were kept (the rejected row cost as much as a kept one).
    void on_verified(uint32_t proposed, uint32_t accepted) {
        if (!s_.adapt) return;
        misses_ = accepted == 0 ? misses_ + 1 : 0;
        if (misses_ > 0 && s_.max_rest > 0) rest_ = std::min(s_.max_rest, 1u << std::min(misses_, 16u));
        length_ = accepted == proposed ? std::min(std::max(s_.max_drafts, 1u), std::max(2 * proposed, length_)) : std::max(accepted + 1, 1u);
    }
    void reset() {
        length_ = std::clamp(s_.first, 1u, std::max(s_.max_drafts, 1u));
        rest_ = misses_ = 0;
    }

private:
    DraftPacing s_;
    uint32_t length_ = 1, rest_ = 0, misses_ = 0;
};

}  // namespace colibri
