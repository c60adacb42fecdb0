#include "engine/core/lookup_drafter.h"

#include <algorithm>

namespace colibri {

LookupDrafter::LookupDrafter(LookupOptions options)
    : options_(options), pacing_(DraftPacing{.max_drafts = options.max_drafts, .first = options.max_drafts, .max_rest = options.max_rest}) {
    options_.min_ngram = std::max(options_.min_ngram, 1u);
    options_.max_ngram = std::max(options_.max_ngram, options_.min_ngram);
}

uint32_t LookupDrafter::lookup(std::span<const int32_t> history, uint32_t max_ngram, uint32_t min_ngram, std::span<int32_t> drafts) {
    const size_t size = history.size();
    if (drafts.empty()) return 0;
    for (size_t n = std::min<size_t>(max_ngram, size > 0 ? size - 1 : 0); n >= std::max(min_ngram, 1u); --n) {
        const int32_t* suffix = history.data() + size - n;
        // The most recent earlier start: positions size - n - 1 down to 0 (the suffix itself excluded).
        for (size_t start = size - n; start-- > 0;) {
            if (history[start] != suffix[0] || !std::equal(suffix, suffix + n, history.data() + start)) continue;
            const size_t from = start + n;  // < size: the match ends before the suffix does
            const size_t count = std::min(drafts.size(), size - from);
            std::copy_n(history.data() + from, count, drafts.data());
            return static_cast<uint32_t>(count);
        }
    }
    return 0;
}

uint32_t LookupDrafter::propose(Session&, std::span<const int32_t> history, std::span<int32_t> drafts) {
    const uint32_t length = pacing_.next();
    if (length == 0) return 0;
    return lookup(history, options_.max_ngram, options_.min_ngram, drafts.first(std::min<size_t>(drafts.size(), length)));
}

void LookupDrafter::on_verified(uint32_t proposed, uint32_t accepted) { pacing_.on_verified(proposed, accepted); }

void LookupDrafter::reset() { pacing_.reset(); }

}  // namespace colibri
