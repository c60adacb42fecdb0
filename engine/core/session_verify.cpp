// Speculative decoding's check: the sampled token and the drafts after it evaluated in one chunk, with the logits
// after every row, then all but the kept tokens dropped. The engine is batch-invariant (a chunk's rows are bit for
// bit token-by-token evaluation's), so each row's logits are plain decoding's and the output cannot change.
//
// Dropping rejected tokens: a KV cache is cut back by its position. A Gated DeltaNet layer's recurrent state has
// absorbed every row and cannot be cut back; restoring a checkpoint (truncate) would re-read the prompt. Instead the
// states are copied before the step, and each layer keeps the step's inputs to its recurrence (conv window, conv
// outputs, β, decays: a few rows per layer). Keeping k of the rows restores the copy and replays the delta rule over
// those k rows: no weight is read again, the cost is one copy of the states each way and k rows of the recurrence.
// Per-row copies of the states during the step would cost a copy per row; re-evaluating the kept tokens a second
// pass over the weights.
#include <algorithm>

#include "engine/core/session.h"
#include "engine/core/elementwise.h"
#include "engine/core/session_internal.h"
#include "engine/core/session_mirror.h"

namespace colibri {

using namespace format;
using namespace session_internal;

void Session::reserve_verify(uint32_t rows) {
    rows = std::clamp<uint32_t>(rows, 1, capacity_);
    if (rows <= verify_rows_) return;
    if (mirror_) (void)mirror_->reserve_verify(mirror_slot_, rows);  // a loss shows at the next evaluation
    verify_rows_ = rows;
    const HyperParams& hp = model_.hparams();
    verify_logits_.resize(size_t(rows) * hp.vocab_size);
    if (!recurrent_) return;
    verify_state_.resize(linear_state_.size());
    verify_slot_.assign(hp.n_layers, 0);
    uint32_t slots = 0;
    for (uint32_t l = 0; l < hp.n_layers; ++l)
        if (model_.layers()[l].mixer == TokenMixer::GatedDeltaNet) verify_slot_[l] = slots++;
    const size_t channels = schema::linear_conv_channels(hp), K = hp.linear_conv_kernel, nv = hp.linear_value_heads;
    verify_window_.resize(size_t(slots) * (K - 1 + rows) * channels);
    verify_conv_.resize(size_t(slots) * rows * channels);
    verify_beta_.resize(size_t(slots) * rows * nv);
    verify_decay_.resize(verify_beta_.size());
}

uint32_t Session::verify_room() const {
    return std::min(chunk_limit(verify_rows_), context_ - position_);
}

void Session::logits_rows(uint32_t row, uint32_t n, Session& owner) {
    // The final norm of each row, then one read of the lm head for all of them.
    const HyperParams& hp = model_.hparams();
    const size_t H = hp.hidden_size;
    for (uint32_t i = 0; i < n; ++i)
        rmsnorm(x_.data() + (row + i) * H, f32(&model_.output_norm()), hp.rms_eps, H, h_.data() + i * H);
    matmul(model_.lm_head(), h_.data(), n, owner.verify_logits_.data());
}

Status Session::check_verify(std::span<const int32_t> tokens) const {
    if (tokens.empty()) return error("no tokens to verify");
    if (tokens.size() > verify_room())
        return error("a verify step of " + std::to_string(tokens.size()) + " tokens exceeds the " + std::to_string(verify_room()) + " it has room for");
    return check_input(tokens);
}

void Session::begin_verify(uint32_t n) {
    verify_from_ = position_;
    verify_count_ = n;
    if (recurrent_) {
        if (position_ == 0) std::fill(linear_state_.begin(), linear_state_.end(), 0.0f);
        std::copy(linear_state_.begin(), linear_state_.end(), verify_state_.begin());
    }
    verifying_ = recurrent_;
}

void Session::end_verify(std::span<const int32_t> tokens, bool ok) {
    verifying_ = false;
    if (!ok) {  // back to before the step (a hybrid's states may hold part of it)
        position_ = verify_from_;
        verify_count_ = 0;
        if (recurrent_) std::copy(verify_state_.begin(), verify_state_.end(), linear_state_.begin());
        return;
    }
    // The rows' tokens join a hybrid's history now (no checkpoint: keep_verified knows which stay).
    if (recurrent_) history_.insert(history_.end(), tokens.begin(), tokens.end());
}

Result<std::span<const float>> Session::verify(std::span<const int32_t> tokens) {
    COLIBRI_TRY(check_verify(tokens));
    std::unique_lock<std::recursive_mutex> held;  // from telling the other ranks to the last exchange
    if (mirror_) {
        held = mirror_->hold();
        COLIBRI_TRY(mirror_->eval(mirror_slot_, tokens, true));
    }
    const auto n = static_cast<uint32_t>(tokens.size());
    const size_t V = model_.hparams().vocab_size;
    begin_verify(n);
    Status s = Status::ok();
    if (observer_ && observer_->counters()) {  // counters are per token (see eval): rows one at a time
        for (uint32_t i = 0; i < n && s; ++i) {
            s = eval_chunk(tokens.data() + i, 1, true);
            if (s) std::copy(logits_.begin(), logits_.end(), verify_logits_.begin() + ptrdiff_t(i * V));
        }
    } else {
        s = eval_chunk(tokens.data(), n, false, true);
    }
    end_verify(tokens, s.is_ok());
    if (!s) return s;
    return verify_logits();
}

void Session::keep_deltanet_inputs(uint32_t layer, uint32_t n) {
    // At row r of the step (r > 0 when rows are evaluated one at a time): the window's state rows once, then the
    // rows' projections, conv outputs, β and decays.
    const HyperParams& hp = model_.hparams();
    const size_t channels = schema::linear_conv_channels(hp), K = hp.linear_conv_kernel, nv = hp.linear_value_heads;
    const size_t slot = verify_slot_[layer], R = verify_rows_, r = position_ - verify_from_;
    float* window = verify_window_.data() + slot * (K - 1 + R) * channels;
    if (r == 0) std::copy_n(lin_window_.data(), (K - 1) * channels, window);
    std::copy_n(lin_window_.data() + (K - 1) * channels, size_t(n) * channels, window + (K - 1 + r) * channels);
    std::copy_n(lin_conv_.data(), size_t(n) * channels, verify_conv_.data() + (slot * R + r) * channels);
    std::copy_n(lin_b_.data(), size_t(n) * nv, verify_beta_.data() + (slot * R + r) * nv);
    std::copy_n(lin_a_.data(), size_t(n) * nv, verify_decay_.data() + (slot * R + r) * nv);
}

void Session::replay_deltanet(uint32_t layer, uint32_t keep) {
    const HyperParams& hp = model_.hparams();
    const size_t channels = schema::linear_conv_channels(hp), K = hp.linear_conv_kernel, nv = hp.linear_value_heads;
    const size_t slot = verify_slot_[layer], R = verify_rows_;
    float* conv_state = linear_state_.data() + caches_[layer].state_offset;
    // The conv state: the last K - 1 inputs up to the kept rows (the window's rows [keep, keep + K - 1)).
    std::copy_n(verify_window_.data() + slot * (K - 1 + R) * channels + size_t(keep) * channels, (K - 1) * channels, conv_state);
    float* recurrent = conv_state + (K - 1) * channels;
    const float* saved = verify_state_.data() + caches_[layer].state_offset + (K - 1) * channels;
    std::copy_n(saved, size_t(nv) * hp.linear_key_dim * hp.linear_value_dim, recurrent);
    // The outputs are not needed: att_ is scratch between steps.
    delta_recurrence(recurrent, verify_conv_.data() + slot * R * channels, verify_beta_.data() + slot * R * nv,
                     verify_decay_.data() + slot * R * nv, keep, att_.data(), nullptr);
}

void Session::keep_verified(uint32_t keep) {
    if (mirror_) (void)mirror_->keep_verified(mirror_slot_, keep);
    keep = std::clamp<uint32_t>(keep, 1, verify_count_);
    const uint32_t end = verify_from_ + keep;
    if (recurrent_) {
        history_.resize(end);
        if (end < position_)
            for (uint32_t l = 0; l < model_.hparams().n_layers; ++l)
                if (model_.layers()[l].mixer == TokenMixer::GatedDeltaNet) replay_deltanet(l, keep);
        // A checkpoint where plain decoding makes one (verify_room keeps the step within the interval).
        if (options_.checkpoint_interval != 0 && end % options_.checkpoint_interval == 0) {
            position_ = end;
            save_checkpoint();
        }
    }
    // The MTP head's row end - 1 needs the token at end, which was not kept (as truncate cuts it).
    mtp_position_ = std::min(mtp_position_, end - 1);
    mtp_row_drafted_ = false;
    position_ = end;
    verify_count_ = 0;
}

}  // namespace colibri
