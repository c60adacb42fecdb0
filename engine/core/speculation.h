// Speculative decoding's step, shared by generate() and the chat service's turn loop: feeds each generated token
// to the session, and when a drafter guesses the tokens after it, evaluates them with it in one batched check
// (Session::verify). The caller samples from each row's logits exactly as plain decoding would, in the same
// order with the same draws; a sampled token equal to the next draft costs no evaluation, the first one that
// differs ends the step and the drafts after it are dropped. So the output is plain decoding's, for greedy and
// seeded sampling alike; only the number of passes over the weights changes.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/base/status.h"
#include "engine/core/drafter.h"
#include "engine/core/session.h"

namespace colibri {

// "lookup", "mtp", "off".
const char* speculate_mode_name(SpeculateMode mode);
// The one spelling of --speculate and the server's "speculate": an error names the accepted values.
Result<SpeculateMode> parse_speculate_mode(std::string_view text);
// The drafter of a mode for a model (nullptr for Off): an error when the model cannot draft that way (mtp without
// a multi-token-prediction head).
Result<std::unique_ptr<Drafter>> make_drafter(SpeculateMode mode, const Model& model);

// Drafts per check at most (the check's rows are one more).
inline constexpr uint32_t kMaxDrafts = 15;

struct SpeculationStats {
    uint64_t passes = 0;         // decode evaluations: single tokens and checks
    uint64_t checks = 0;         // passes that checked drafts
    uint64_t drafted = 0, accepted = 0;
    uint64_t check_experts = 0, check_layers = 0;    // distinct experts run per MoE layer in checks, summed
    uint64_t single_experts = 0, single_layers = 0;  // the same in single-token passes
    uint64_t tokens() const { return passes + accepted; }  // tokens the passes produced logits for
    double acceptance() const { return drafted ? double(accepted) / double(drafted) : 0.0; }
    double tokens_per_pass() const { return passes ? double(tokens()) / double(passes) : 0.0; }
    double tokens_per_check() const { return checks ? double(checks + accepted) / double(checks) : 0.0; }
    // Experts a MoE layer reads per check (the union of its rows' choices) and per single token.
    double experts_per_check_layer() const { return check_layers ? double(check_experts) / double(check_layers) : 0.0; }
    double experts_per_single_layer() const { return single_layers ? double(single_experts) / double(single_layers) : 0.0; }
    SpeculationStats& operator+=(const SpeculationStats& o);
};

// One line for the CLI: "speculation (lookup): 120 drafted, 80 accepted (66.7 %), ...".
std::string speculation_summary(SpeculateMode mode, const SpeculationStats& stats, uint32_t experts_active);

class TokenFeeder {
public:
    // drafter nullptr: every token is evaluated alone, as plain decoding does.
    TokenFeeder(Session& session, Drafter* drafter, uint32_t max_drafts = kMaxDrafts);
    // history.back() was just sampled: returns the logits after it. Evaluates it (with up to `budget` drafts after
    // it, the tokens plain decoding would still evaluate), or takes them from the check that drafted it.
    Result<std::span<const float>> feed(std::span<const int32_t> history, uint32_t budget);
    // Called right before each evaluation feed makes, with the position of its first row and its rows (the fed
    // token, then its drafts): a front end that traces every position (the Studio) begins its records there.
    using EvalHook = void (*)(void* context, uint32_t position, std::span<const int32_t> rows);
    void set_eval_hook(EvalHook hook, void* context) { hook_ = hook, hook_context_ = context; }
    // Whether the running check drafted `token` next (feeding it evaluates nothing).
    bool ready(int32_t token) const { return drafts_ > 0 && row_ < drafts_ && step_[row_ + 1] == token; }
    // Where history.back() goes: the session's position as plain decoding would have it.
    uint32_t position() const;
    // Generation ended: the session keeps exactly what plain decoding's would (the check's later rows dropped).
    void finish();
    // Tokens the last feed evaluated (1, or a check's rows; 0 when it took its logits from a check).
    std::span<const int32_t> evaluated() const { return evaluated_; }
    const SpeculationStats& stats() const { return stats_; }

private:
    void settle();
    void count_experts(Session::ExpertReads before, bool check);
    Session& session_;
    EvalHook hook_ = nullptr;
    void* hook_context_ = nullptr;
    Drafter* drafter_;
    uint32_t max_drafts_;
    std::vector<int32_t> step_;  // the check's tokens: the fed one, then the drafts
    uint32_t drafts_ = 0;        // drafts in the current check (0: none running)
    uint32_t row_ = 0;           // the row whose logits the caller samples from
    uint32_t from_ = 0;          // the check's first position
    std::span<const float> rows_;
    std::span<const int32_t> evaluated_;
    SpeculationStats stats_;
};

}  // namespace colibri
