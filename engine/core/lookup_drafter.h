// Prompt-lookup drafts (speculative decoding without a second model): the continuation of the most recent earlier
// occurrence of the last n tokens, trying n from max_ngram down to min_ngram. Replies that quote or edit their
// context (summaries, code edits, extraction) repeat long runs of it; elsewhere it finds no match and drafts
// nothing, so the step decodes one token as usual.
#pragma once
#include <cstdint>
#include <span>

#include "engine/core/draft_pacing.h"
#include "engine/core/drafter.h"

namespace colibri {

struct LookupOptions {
    uint32_t max_ngram = 4;  // the longest suffix looked up
    uint32_t min_ngram = 2;  // shorter matches are too often chance (one token repeats everywhere)
    // Drafts per step: the step's length adapts between 1 and max_drafts, doubling after a fully accepted step and
    // falling to one more than the accepted count after a rejection (a rejected draft costs its row in the check).
    uint32_t max_drafts = 8;
    // After a check whose drafts were all wrong, no drafts for the next 2, then 4, 8 ... up to max_rest tokens
    // (until a check keeps one): where the reply does not quote its context, checks stop costing anything.
    uint32_t max_rest = 64;
};

class LookupDrafter final : public Drafter {
public:
    explicit LookupDrafter(LookupOptions options = {});
    uint32_t propose(Session& session, std::span<const int32_t> history, std::span<int32_t> drafts) override;
    void on_verified(uint32_t proposed, uint32_t accepted) override;
    void reset() override;
    // The continuation after the most recent earlier occurrence of history's last n tokens (n from max_ngram down
    // to min_ngram) into drafts; how many were written. Allocates nothing.
    static uint32_t lookup(std::span<const int32_t> history, uint32_t max_ngram, uint32_t min_ngram, std::span<int32_t> drafts);

private:
    LookupOptions options_;
    DraftPacer pacing_;  // drafts the next step may take, and the rest after misses
};

}  // namespace colibri
