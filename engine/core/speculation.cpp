#include "engine/core/speculation.h"

#include <algorithm>
#include <cstdio>

#include "engine/core/lookup_drafter.h"
#include "engine/core/mtp_drafter.h"

namespace colibri {

const char* speculate_mode_name(SpeculateMode mode) {
    switch (mode) {
        case SpeculateMode::Lookup: return "lookup";
        case SpeculateMode::Mtp: return "mtp";
        case SpeculateMode::Off: break;
    }
    return "off";
}

Result<SpeculateMode> parse_speculate_mode(std::string_view text) {
    for (SpeculateMode m : {SpeculateMode::Off, SpeculateMode::Lookup, SpeculateMode::Mtp})
        if (text == speculate_mode_name(m)) return m;
    return error("speculate: '" + std::string(text) + "' is not one of lookup, mtp, off");
}

Result<std::unique_ptr<Drafter>> make_drafter(SpeculateMode mode, const Model& model) {
    switch (mode) {
        case SpeculateMode::Off: return std::unique_ptr<Drafter>();
        case SpeculateMode::Lookup: return std::unique_ptr<Drafter>(std::make_unique<LookupDrafter>());
        case SpeculateMode::Mtp:
            // The one place a multi-token-prediction drafter is made, for a model that carries its head (its
            // sessions run the head: SessionOptions::mtp).
            if (model.mtp_layers().empty()) return error("speculate mtp: this model has no multi-token-prediction head");
            return std::unique_ptr<Drafter>(std::make_unique<MtpDrafter>());
    }
    return error("speculate: unknown mode");
}

SpeculationStats& SpeculationStats::operator+=(const SpeculationStats& o) {
    passes += o.passes, checks += o.checks, drafted += o.drafted, accepted += o.accepted;
    check_experts += o.check_experts, check_layers += o.check_layers;
    single_experts += o.single_experts, single_layers += o.single_layers;
    return *this;
}

std::string speculation_summary(SpeculateMode mode, const SpeculationStats& s, uint32_t experts_active) {
    char line[512];
    int n = std::snprintf(line, sizeof line, "speculation (%s): %llu drafted, %llu accepted (%.1f %%), %.2f tokens per pass, %.2f per check",
                          speculate_mode_name(mode), static_cast<unsigned long long>(s.drafted),
                          static_cast<unsigned long long>(s.accepted), 100.0 * s.acceptance(), s.tokens_per_pass(), s.tokens_per_check());
    if (s.check_layers > 0 && n > 0 && static_cast<size_t>(n) < sizeof line)
        std::snprintf(line + n, sizeof line - size_t(n), "; experts read per MoE layer: %.1f per check, %u per token", s.experts_per_check_layer(),
                      experts_active);
    return line;
}

TokenFeeder::TokenFeeder(Session& session, Drafter* drafter, uint32_t max_drafts)
    : session_(session), drafter_(drafter), max_drafts_(std::min(max_drafts, kMaxDrafts)) {
    if (drafter_ == nullptr) max_drafts_ = 0;
    step_.resize(max_drafts_ + 1);
    if (max_drafts_ > 0) session_.reserve_verify(max_drafts_ + 1);
}

uint32_t TokenFeeder::position() const { return drafts_ > 0 ? from_ + row_ + 1 : session_.position(); }

void TokenFeeder::count_experts(Session::ExpertReads before, bool check) {
    const Session::ExpertReads after = session_.expert_reads();
    (check ? stats_.check_experts : stats_.single_experts) += after.experts - before.experts;
    (check ? stats_.check_layers : stats_.single_layers) += after.layer_passes - before.layer_passes;
}

void TokenFeeder::settle() {
    if (drafts_ == 0) return;
    session_.keep_verified(row_ + 1);
    if (drafter_) drafter_->on_verified(drafts_, row_);
    drafts_ = 0;
}

void TokenFeeder::finish() { settle(); }

Result<std::span<const float>> TokenFeeder::feed(std::span<const int32_t> history, uint32_t budget) {
    const int32_t token = history.back();
    const size_t V = session_.model().hparams().vocab_size;
    if (ready(token)) {  // the draft was right: its row is ready
        ++row_;
        ++stats_.accepted;
        evaluated_ = {};
        return rows_.subspan(size_t(row_) * V, V);
    }
    settle();
    const Session::ExpertReads before = session_.expert_reads();
    uint32_t k = std::min(max_drafts_, budget);
    const uint32_t room = session_.verify_room();
    k = room > 1 ? std::min(k, room - 1) : 0;
    const uint32_t drafted = k > 0 ? std::min(k, drafter_->propose(session_, history, std::span<int32_t>(step_).subspan(1, k))) : 0;
    ++stats_.passes;
    step_[0] = token;
    evaluated_ = std::span<const int32_t>(step_.data(), drafted + 1);
    if (hook_ != nullptr) hook_(hook_context_, session_.position(), evaluated_);
    if (drafted == 0) {
        auto logits = session_.eval(token);
        if (logits) count_experts(before, false);
        return logits;
    }
    from_ = session_.position();
    auto rows = session_.verify(evaluated_);
    if (!rows) return rows.status();
    count_experts(before, true);
    ++stats_.checks;
    stats_.drafted += drafted;
    rows_ = rows.value();
    drafts_ = drafted;
    row_ = 0;
    return rows_.first(V);
}

}  // namespace colibri
