// Rewinding a session. A KV cache is cut back by its position alone; a Gated DeltaNet hybrid's recurrent and conv
// states hold every token they have seen, so the session keeps the tokens it evaluated and snapshots of the states
// (at the end of each prompt and every checkpoint_interval positions), restores the nearest one at or before the
// rewind point and evaluates the tokens after it again. Evaluation is deterministic, so the rewound session's
// states and logits are bit for bit those of a fresh session fed the same tokens.
#include <algorithm>

#include "engine/core/session.h"
#include "engine/core/session_mirror.h"

namespace colibri {

void Session::reset() {
    if (mirror_) (void)mirror_->reset(mirror_slot_);  // a loss shows at the next evaluation
    clear();
}

void Session::clear() {
    position_ = 0;
    history_.clear();
    checkpoints_.clear();
    mtp_ = options_.mtp && !model_.mtp_layers().empty();  // a batched eval may have turned the head off
    mtp_position_ = 0;
    mtp_row_drafted_ = false;
}

std::vector<uint32_t> Session::checkpoint_positions() const {
    std::vector<uint32_t> out;
    for (const StateCheckpoint& c : checkpoints_) out.push_back(c.position);
    return out;
}

uint32_t Session::chunk_limit(uint32_t n) const {
    if (!recurrent_ || options_.checkpoint_interval == 0) return n;
    const uint32_t to_next = options_.checkpoint_interval - position_ % options_.checkpoint_interval;
    return std::min(n, to_next);
}

void Session::after_chunk(const int32_t* tokens, uint32_t n, bool prompt_end) {
    if (!recurrent_) return;
    // Re-evaluation (truncate) feeds tokens the history already holds.
    if (history_.size() < position_) history_.insert(history_.end(), tokens + (n - (position_ - history_.size())), tokens + n);
    const bool on_interval = options_.checkpoint_interval != 0 && position_ % options_.checkpoint_interval == 0;
    if (prompt_end || on_interval) save_checkpoint();
}

void Session::save_checkpoint() {
    if (options_.state_checkpoints == 0) return;
    if (!checkpoints_.empty() && checkpoints_.back().position == position_) {
        checkpoints_.back().state = linear_state_;
        return;
    }
    StateCheckpoint c{position_, {}};
    if (checkpoints_.size() >= options_.state_checkpoints) {  // the oldest makes room, and lends its storage
        c.state = std::move(checkpoints_.front().state);
        checkpoints_.erase(checkpoints_.begin());
    }
    c.state = linear_state_;
    checkpoints_.push_back(std::move(c));
}

Status Session::truncate(uint32_t n) {
    if (n >= position_) return Status::ok();
    std::unique_lock<std::recursive_mutex> held;  // a hybrid's re-evaluation exchanges too
    if (mirror_) {
        held = mirror_->hold();
        if (Status s = mirror_->truncate(mirror_slot_, n); !s) {
            clear();
            return s;
        }
    }
    // The MTP head's row n - 1 needs the token at n, which goes.
    mtp_position_ = std::min(mtp_position_, n == 0 ? 0 : n - 1);
    mtp_row_drafted_ = false;
    if (!recurrent_) {
        position_ = n;
        return Status::ok();
    }
    while (!checkpoints_.empty() && checkpoints_.back().position > n) checkpoints_.pop_back();
    uint32_t from = 0;
    if (!checkpoints_.empty()) {
        from = checkpoints_.back().position;
        std::copy(checkpoints_.back().state.begin(), checkpoints_.back().state.end(), linear_state_.begin());
    }
    position_ = from;  // from 0, the first chunk zeroes the states
    history_.resize(n);
    if (from == n) return Status::ok();
    // The re-evaluation is not the observer's: it saw these positions when they were first evaluated.
    TraceObserver* observer = observer_;
    observer_ = nullptr;
    auto replay = evaluate(std::span<const int32_t>(history_.data() + from, n - from));
    observer_ = observer;
    if (!replay) {
        clear();
        return replay.status();
    }
    return Status::ok();
}

}  // namespace colibri
