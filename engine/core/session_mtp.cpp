// The multi-token-prediction head (DeepSeek-V3, GLM-4.5, Qwen3-Next / Qwen3.5: HyperParams::mtp_layers). Its row q
// reads the model's final hidden state at position q (after the output norm, as the lm head reads it) and the token
// at q + 1:
//     x = eh_proj · [enorm(embed(token q+1)); hnorm(hidden q)]
// runs x through one more decoder layer at position q (its own KV cache, the session's attention/MLA and MoE code),
// and its lm head logits, lm_head(norm(x)), guess the token at q + 2. A chained draft feeds the layer's output back as
// the hidden state: after the head's norm for Qwen3-Next / Qwen3.5 (where the norm belongs to the head's layer),
// before it for DeepSeek-V3 / GLM (where shared_head.norm belongs to the lm head), as vLLM runs them.
//
// The head's cache needs every row, prompt included, so each eval completes the rows its tokens allow (one behind
// the model) and keeps the model's hidden states so that a truncate can cut the head back with the KV cache.
// Only the first MTP layer drafts (the released models ship one).
#include <algorithm>
#include <shared_mutex>

#include "engine/core/elementwise.h"
#include "engine/core/session.h"
#include "engine/core/session_internal.h"
#include "kernels/matvec.h"

namespace colibri {

using namespace format;
using namespace session_internal;

void Session::size_mtp_buffers() {
    const HyperParams& hp = model_.hparams();
    const size_t H = hp.hidden_size;
    const ActivationAllocator<float> alloc(options_.huge_pages);
    mtp_hidden_ = ZeroPageBuffer<float>(size_t(context_) * H, options_.huge_pages);
    mtp_in_ = ActivationBuffer<float>(alloc);
    mtp_in_.resize(size_t(capacity_) * 2 * H);
    mtp_chain_ = ActivationBuffer<float>(alloc);
    mtp_chain_.resize(H);
    mtp_logits_.resize(hp.vocab_size);
}

std::span<const float> Session::final_hidden(uint32_t position) const {
    if (!mtp_ || position >= position_) return {};
    const size_t H = model_.hparams().hidden_size;
    return std::span<const float>(mtp_hidden_.data() + size_t(position) * H, H);
}

void Session::mtp_input(uint32_t row, int32_t token, const float* hidden) {
    const HyperParams& hp = model_.hparams();
    const size_t H = hp.hidden_size;
    const LayerWeights& w = model_.mtp_layers()[0];
    const TensorView& embed = model_.embedding();
    float* in = mtp_in_.data() + size_t(row) * 2 * H;
    // The embedding row goes through the second half first (free until hnorm writes it).
    kernels::dequantize_row(embed.type, embed.data, H, static_cast<size_t>(token), in + H);
    rmsnorm(in + H, f32(w.mtp_enorm), hp.rms_eps, H, in);
    rmsnorm(hidden, f32(w.mtp_hnorm), hp.rms_eps, H, in + H);
}

Status Session::mtp_layer(uint32_t first, uint32_t m) {
    const uint32_t layer = model_.hparams().n_layers;
    const LayerWeights& w = model_.mtp_layers()[0];
    COLIBRI_TRY(populate_kv(first + m));
    matmul(*w.mtp_eh_proj, mtp_in_.data(), m, x_.data());
    // The layer runs at the head's own positions, unobserved: the profiler and the routing views see the model.
    const uint32_t position = position_;
    TraceObserver* observer = observer_;
    position_ = first;
    observer_ = nullptr;
    observed_ = false;
    for (uint32_t i = 0; i < m; ++i) rows_[i] = {nullptr, first + i};
    rope_rows(m);
    const Part self{this, 0, m};
    uint64_t t1 = 0;
    Status s = decoder_layer(std::span<const Part>(&self, 1), layer, w, m, &t1);
    position_ = position;
    observer_ = observer;
    if (!s) return s;
    mtp_position_ = first + m;
    return Status::ok();
}

Status Session::mtp_follow(const int32_t* tokens, uint32_t first, uint32_t n) {
    const HyperParams& hp = model_.hparams();
    const size_t H = hp.hidden_size;
    for (uint32_t i = 0; i < n; ++i)
        rmsnorm(x_.data() + size_t(i) * H, f32(&model_.output_norm()), hp.rms_eps, H, mtp_hidden_.data() + size_t(first + i) * H);
    // A draft computed row first - 1 with the token it expected here; any other token makes that row wrong.
    if (mtp_row_drafted_ && mtp_position_ == first && tokens[0] != mtp_next_) mtp_position_ = first - 1;
    mtp_row_drafted_ = false;
    // Row q joins hidden q and token q + 1: the chunk completes rows [mtp_position_, first + n - 1).
    const uint32_t q0 = mtp_position_, q1 = first + n - 1;
    if (q0 + 1 < first || q0 >= q1) return Status::ok();  // nothing a gap before the chunk would allow, or nothing new
    for (uint32_t q = q0; q < q1; ++q) mtp_input(q - q0, tokens[q + 1 - first], mtp_hidden_.data() + size_t(q) * H);
    return mtp_layer(q0, q1 - q0);
}

Result<uint32_t> Session::mtp_draft(int32_t next, std::span<int32_t> drafts) {
    if (!mtp_ || position_ == 0 || drafts.empty()) return 0u;
    COLIBRI_TRY(check_token_ids(model_, std::span<const int32_t>(&next, 1)));
    const HyperParams& hp = model_.hparams();
    const size_t H = hp.hidden_size;
    const uint32_t P = position_;
    if (mtp_position_ > P - 1) mtp_position_ = P - 1;  // an earlier draft's rows
    if (mtp_position_ < P - 1) return 0u;              // rows missing (cannot happen through eval)
    // The model checks next and the drafts at positions P.. P + k: all must fit the context.
    const uint32_t k = static_cast<uint32_t>(std::min<size_t>(drafts.size(), context_ - std::min(context_, P + 1)));
    if (k == 0) return 0u;
    std::shared_lock weights(model_.swap_lock());  // an expert hot-swap waits for the drafts
    const LayerWeights& w = model_.mtp_layers()[0];
    const bool chain_normed = model_.rules().mtp_chain_normed;
    int32_t token = next;
    const float* hidden = mtp_hidden_.data() + size_t(P - 1) * H;
    for (uint32_t i = 0; i < k; ++i) {
        mtp_input(0, token, hidden);
        COLIBRI_TRY(mtp_layer(P - 1 + i, 1));
        rmsnorm(x_.data(), f32(w.mtp_norm), hp.rms_eps, H, h_.data());
        matmul(model_.lm_head(), h_.data(), 1, mtp_logits_.data());
        // Greedy, the lowest id on a tie: a draft is only a guess, the sampler decides.
        token = static_cast<int32_t>(std::max_element(mtp_logits_.begin(), mtp_logits_.end()) - mtp_logits_.begin());
        drafts[i] = token;
        std::copy_n(chain_normed ? h_.data() : x_.data(), H, mtp_chain_.data());
        hidden = mtp_chain_.data();
    }
    // The first row is the real row P - 1 (the model's hidden state, the token fed next); the chained ones were guesses.
    mtp_position_ = P;
    mtp_row_drafted_ = true;
    mtp_next_ = next;
    return k;
}

}  // namespace colibri
