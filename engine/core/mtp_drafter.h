// Drafts from the model's own multi-token-prediction head (Session::mtp_draft): the session must run the head
// (SessionOptions::mtp on a model whose file has one; `colibri info` says). The head's KV cache lives in the
// session and follows its evals and truncates, so the drafter itself keeps only counts.
#pragma once
#include "engine/base/status.h"
#include "engine/core/draft_pacing.h"
#include "engine/core/drafter.h"

namespace colibri {

// Each draft runs the head's layer and the whole lm head (at real size as much as a sixth of a token's reads), and a
// chained draft is a guess from a guess, which the head was not trained for (Qwen's and DeepSeek's heads predict one
// token ahead): so a check starts with one draft, grows to at most three while all are kept, and rests after checks
// that keep nothing (DraftPacing). A head that guesses badly then costs its layer per token and little else.
inline constexpr DraftPacing kMtpPacing{.max_drafts = 3, .first = 1, .max_rest = 64};

class MtpDrafter final : public Drafter {
public:
    explicit MtpDrafter(DraftPacing pacing = kMtpPacing);
    // Whether `session` runs a head this drafter can draft from.
    static bool available(const Session& session);

    uint32_t propose(Session& session, std::span<const int32_t> history, std::span<int32_t> drafts) override;
    void on_verified(uint32_t proposed, uint32_t accepted) override;
    void reset() override;

    // The error that made the last propose return no drafts (an expert the session could not read); ok otherwise.
    const Status& status() const { return status_; }
    // Drafts checked and kept since the last reset: the acceptance rate.
    uint64_t proposed() const { return proposed_; }
    uint64_t accepted() const { return accepted_; }

private:
    DraftPacer pacing_;
    Status status_;
    uint64_t proposed_ = 0, accepted_ = 0;
};

}  // namespace colibri
