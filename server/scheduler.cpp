#include "server/scheduler.h"

#include <algorithm>

#include "engine/core/session.h"
#include "engine/core/session_follow.h"
#include "engine/core/speculation.h"

namespace colibri::server {

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }
double seconds_now() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }
constexpr double kRateWindow = 10.0;  // seconds colibri_decode_tokens_per_second looks back

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
    size_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
    return n;
}

}  // namespace

// One sequence's place in the engine: its session (KV cache), what the cache holds, and the job it serves.
// As the session's observer it counts expert activations and, when the job asks, keeps each position's trace.
struct Scheduler::Slot final : TraceObserver {
    Scheduler& owner;
    uint32_t index;  // its place in slots_, and in the other ranks' slots (SessionMirror)
    std::unique_ptr<Session> session;
    std::vector<int32_t> cached;  // tokens the session holds
    uint32_t scope = 0;           // the cache_scope of the job that filled it

    std::shared_ptr<Job> job;
    std::unique_ptr<Sampler> sampler;
    std::unique_ptr<ReplyStream> reply;
    size_t next_prompt = 0;  // first prompt token not evaluated yet
    uint32_t reused = 0;
    std::span<const float> logits;
    Clock::time_point admitted, first_token;
    std::vector<PositionTrace> traces;  // positions evaluated since the last event
    // Speculative decoding: the drafter, its view (the prompt and the reply so far), the running check's tokens
    // (the sampled one, then the drafts) and the row whose logits are sampled from.
    std::unique_ptr<Drafter> drafter;
    std::vector<int32_t> fed, check = std::vector<int32_t>(kMaxDrafts + 1);
    uint32_t drafts = 0, row = 0;  // drafts == 0: no check running

    // Keeps the check's rows up to the one sampled from (the tokens plain decoding evaluated) and drops the rest.
    void settle() {
        if (drafts == 0) return;
        session->keep_verified(row + 1);
        drafter->on_verified(drafts, row);
        drafts = 0;
    }

    Slot(Scheduler& s, uint32_t i, std::unique_ptr<Session> sess) : owner(s), index(i), session(std::move(sess)) { session->set_observer(this); }

    bool busy() const { return job != nullptr; }
    bool prefilling() const { return busy() && next_prompt < job->spec().prompt.size(); }

    PositionTrace& trace_at(uint32_t position) {
        for (auto it = traces.rbegin(); it != traces.rend(); ++it)
            if (it->position == position) return *it;
        PositionTrace& t = traces.emplace_back();
        t.position = position;
        const std::vector<int32_t>& prompt = job->spec().prompt;
        t.token = position < prompt.size() ? prompt[position]
                                           : reply->tokens()[std::min<size_t>(position - prompt.size(), reply->tokens().size() - 1)];
        return t;
    }
    bool tracing() const { return job && job->spec().trace; }

    void on_routing(const RoutingRecord& r) override {
        const uint32_t n_exp = owner.model_.hparams().n_experts;
        for (int32_t e : r.experts)
            owner.expert_counts_[size_t(r.layer) * n_exp + static_cast<uint32_t>(e)].fetch_add(1, std::memory_order_relaxed);
        if (!tracing()) return;
        trace_at(r.position).routing.push_back({r.layer, {r.experts.begin(), r.experts.end()}, {r.weights.begin(), r.weights.end()},
                                                {r.router_probs.begin(), r.router_probs.end()}});
    }
    void on_layer_timing(const LayerTiming& t) override {
        if (tracing()) trace_at(t.position).timings.push_back({t.layer, t.attention_ns, t.router_ns, t.experts_ns});
    }
    void on_rank_timing(const RankTiming& t) override {
        if (tracing())
            trace_at(t.position).ranks.push_back({t.layer, {t.experts_ns.begin(), t.experts_ns.end()}, t.exchange_ns, t.bytes, t.bytes_sent, t.bytes_received});
    }
};

namespace {

// The slots' sessions, made alike on every rank (Scheduler and follow_scheduler).
std::vector<std::unique_ptr<Session>> slot_sessions(const Model& model, ThreadPool& pool, const SchedulerOptions& options) {
    std::vector<std::unique_ptr<Session>> sessions;
    for (uint32_t i = 0; i < std::max(options.slots, 1u); ++i) sessions.push_back(std::make_unique<Session>(model, pool, options.context));
    return sessions;
}

}  // namespace

Scheduler::Scheduler(const Model& model, const SchedulerOptions& options)
    : model_(model), options_(options), mirror_(options.ranks),
      expert_counts_(size_t(model.hparams().n_layers) * std::max(model.hparams().n_experts, 1u)) {
    options_.slots = std::max(options_.slots, 1u);
    options_.prefill_chunk = std::max(options_.prefill_chunk, 1u);
    pool_ = std::make_unique<ThreadPool>(options_.threads);
    for (auto& session : slot_sessions(model_, *pool_, options_))
        slots_.push_back(std::make_unique<Slot>(*this, static_cast<uint32_t>(slots_.size()), std::move(session)));
    if (mirror_.active())
        for (auto& slot : slots_) slot->session->set_mirror(&mirror_, slot->index);
    context_ = slots_.front()->session->context();
    stats_.slots = options_.slots;
    stats_.ranks = mirror_.ranks();
    stats_.layers = model.hparams().n_layers;
    stats_.experts = model.hparams().n_experts;
    thread_ = std::thread([this] { run(); });
}

Scheduler::~Scheduler() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
}

bool Scheduler::submit(std::shared_ptr<Job> job) {
    {
        std::lock_guard lock(mutex_);
        if (stopping_ || queue_.size() >= options_.max_queue) return false;
        queue_.push_back(std::move(job));
        stats_.queued = static_cast<uint32_t>(queue_.size());
    }
    wake_.notify_one();
    return true;
}

SchedulerStats Scheduler::stats() const {
    std::lock_guard lock(mutex_);
    SchedulerStats s = stats_;
    // The tokens of the steps in the window that ends now (not at the last step: an idle server reports 0),
    // counted after the first of them, over the time since it.
    const double now = seconds_now();
    auto first = std::find_if(recent_.begin(), recent_.end(), [&](const auto& r) { return now - r.first <= kRateWindow; });
    if (first != recent_.end() && now > first->first) {
        uint64_t tokens = 0;
        for (auto it = first + 1; it != recent_.end(); ++it) tokens += it->second;
        s.decode_tokens_per_second = double(tokens) / (now - first->first);
    }
    s.expert_activations.resize(expert_counts_.size());
    for (size_t i = 0; i < expert_counts_.size(); ++i) s.expert_activations[i] = expert_counts_[i].load(std::memory_order_relaxed);
    return s;
}

void Scheduler::finish(Slot& slot, FinishReason reason, const std::string& error) {
    const auto now = Clock::now();
    slot.settle();
    JobOutcome out;
    out.finish = reason;
    out.error = error;
    out.prompt_tokens = static_cast<uint32_t>(slot.job->spec().prompt.size());
    out.cached_tokens = slot.reused;
    out.completion_tokens = slot.reply ? static_cast<uint32_t>(slot.reply->tokens().size()) : 0;
    out.queued_ms = ms_between(slot.job->submitted, slot.admitted);
    const bool sampled = out.completion_tokens > 0;
    out.prompt_ms = ms_between(slot.admitted, sampled ? slot.first_token : now);
    out.decode_ms = sampled ? ms_between(slot.first_token, now) : 0.0;
    out.traces = std::move(slot.traces);
    slot.job->sink().on_finish(std::move(out));
    {
        std::lock_guard lock(mutex_);
        if (!error.empty()) ++stats_.failed;
        else if (reason == FinishReason::Cancelled) ++stats_.cancelled;
        else ++stats_.completed;
    }
    if (!error.empty()) {
        // The session may hold part of an evaluation: start its next job from nothing.
        slot.session->reset();
        slot.cached.clear();
    } else {
        // The session holds the prompt and the generated tokens it evaluated (all but the last sampled one).
        slot.cached = slot.job->spec().prompt;
        if (slot.reply) slot.cached.insert(slot.cached.end(), slot.reply->tokens().begin(), slot.reply->tokens().end());
        slot.cached.resize(std::min<size_t>(slot.cached.size(), slot.session->position()));
    }
    slot.job.reset();
    slot.reply.reset();
    slot.sampler.reset();
    slot.drafter.reset();
    slot.traces.clear();
    slot.logits = {};
}

void Scheduler::admit_locked() {
    // Jobs cancelled while they waited leave the queue without touching any slot.
    std::vector<std::shared_ptr<Job>> dropped;
    std::erase_if(queue_, [&](const std::shared_ptr<Job>& j) {
        if (!j->cancelled()) return false;
        dropped.push_back(j);
        return true;
    });
    for (const auto& j : dropped) {
        JobOutcome out;
        out.finish = FinishReason::Cancelled;
        out.prompt_tokens = static_cast<uint32_t>(j->spec().prompt.size());
        j->sink().on_finish(std::move(out));
        ++stats_.cancelled;
    }
    while (!queue_.empty()) {
        // The free slot whose cache shares the longest prefix with the prompt (a conversation's next turn
        // usually finds its own).
        std::shared_ptr<Job>& job = queue_.front();
        Slot* best = nullptr;
        size_t best_common = 0;
        for (auto& s : slots_) {
            if (s->busy()) continue;
            const bool same_scope = options_.share_cache_across_scopes || s->scope == job->spec().cache_scope;
            const size_t common = same_scope ? common_prefix(s->cached, job->spec().prompt) : 0;
            if (best == nullptr || common > best_common) best = s.get(), best_common = common;
        }
        if (best == nullptr) break;
        Slot& slot = *best;
        slot.job = std::move(job);
        queue_.pop_front();
        const JobSpec& spec = slot.job->spec();
        size_t common = std::min(best_common, spec.prompt.size() - 1);  // at least one token is evaluated
        if (!slot.session->truncate(static_cast<uint32_t>(common))) common = 0;  // a failed re-evaluation reset it
        slot.cached.resize(common);
        slot.scope = spec.cache_scope;
        slot.reused = static_cast<uint32_t>(common);
        slot.next_prompt = common;
        slot.sampler = std::make_unique<Sampler>(spec.sampling);
        slot.reply = std::make_unique<ReplyStream>(model_, *slot.sampler, spec.reply, spec.prompt);
        slot.admitted = Clock::now();
        slot.traces.clear();
        // A traced job is not speculative: its trace is of the positions plain decoding evaluates.
        slot.drafter.reset();
        if (spec.speculate != SpeculateMode::Off && !spec.trace) {
            if (auto d = make_drafter(spec.speculate, model_); d && d.value()) {
                slot.drafter = std::move(d.value());
                slot.session->reserve_verify(kMaxDrafts + 1);
                slot.fed = spec.prompt;
            }
        }
        ++stats_.admitted;
        stats_.prompt_tokens += spec.prompt.size();
        stats_.cached_tokens += common;
    }
    stats_.queued = static_cast<uint32_t>(queue_.size());
}

Status Scheduler::lost() const {
    std::lock_guard lock(mutex_);
    return lost_;
}

void Scheduler::run() {
    for (;;) {
        bool idle = false;
        {
            std::unique_lock lock(mutex_);
            const auto ready = [&] {
                return stopping_ || !queue_.empty() || std::any_of(slots_.begin(), slots_.end(), [](const auto& s) { return s->busy(); });
            };
            // The other ranks wait for rank 0's next operation within their wait limit: an idle engine keeps them waiting.
            if (mirror_.active()) idle = !wake_.wait_for(lock, mirror_.heartbeat(), ready);
            else wake_.wait(lock, ready);
            if (stopping_) break;
            if (!idle) {
                admit_locked();
                stats_.active = static_cast<uint32_t>(std::count_if(slots_.begin(), slots_.end(), [](const auto& s) { return s->busy(); }));
            }
        }
        if (idle) {
            mirror_.idle();
        } else {
            try {
                step();
            } catch (const std::exception& e) {
                // Out of memory in the middle of a step: those jobs fail, the server goes on.
                for (auto& s : slots_)
                    if (s->busy()) finish(*s, FinishReason::None, std::string("engine error: ") + e.what());
                std::lock_guard lock(mutex_);
                stats_.active = 0;
            }
        }
        if (Status gone = mirror_.lost(); !gone) {
            // A rank stopped answering: no evaluation can succeed any more, so every job fails and nothing is taken.
            {
                std::lock_guard lock(mutex_);
                lost_ = gone;
                stopping_ = true;
            }
            fail_all(gone.message());
            if (options_.on_ranks_lost) options_.on_ranks_lost();
            return;
        }
    }
    // Shutting down: every job gets an answer, and the other ranks stop.
    fail_all("the server is shutting down");
    mirror_.stop();
}

void Scheduler::fail_all(const std::string& why) {
    for (auto& s : slots_)
        if (s->busy()) finish(*s, FinishReason::None, why);
    std::lock_guard lock(mutex_);
    for (auto& j : queue_) {
        JobOutcome out;
        out.error = why;
        j->sink().on_finish(std::move(out));
    }
    queue_.clear();
    stats_.queued = 0;
    stats_.active = 0;
}

struct Scheduler::Input {
    Slot* slot;
    std::span<const int32_t> tokens;
    bool verify = false;  // a speculative check: the token and its drafts
};

bool Scheduler::decode(Slot& s, std::vector<Input>& inputs, uint32_t& sampled, uint32_t& accepted) {
    const size_t V = model_.hparams().vocab_size;
    for (;;) {
        JobEvent event;
        event.token = s.reply->next(s.logits);
        event.traces = std::move(s.traces);
        s.traces.clear();
        ++sampled;
        s.job->sink().on_event(std::move(event));
        if (s.reply->done()) return false;
        const int32_t token = s.reply->tokens().back();
        if (!s.drafter) {
            inputs.push_back({&s, std::span<const int32_t>(&s.reply->tokens().back(), 1)});
            return true;
        }
        s.fed.push_back(token);
        if (s.drafts > 0 && s.row < s.drafts && s.check[s.row + 1] == token) {  // the draft was right: its row is ready
            ++s.row, ++accepted;
            s.logits = s.session->verify_logits().subspan(size_t(s.row) * V, V);
            continue;
        }
        s.settle();
        // Drafts only for tokens plain decoding would evaluate too: not past max_tokens' last, nor the context.
        const int32_t left = s.job->spec().reply.max_tokens - static_cast<int32_t>(s.reply->tokens().size()) - 1;
        const uint32_t room = s.session->verify_room();
        const uint32_t k = std::min({kMaxDrafts, static_cast<uint32_t>(std::max(left, 0)), room > 0 ? room - 1 : 0u});
        s.check[0] = token;
        const uint32_t n = k > 0 ? s.drafter->propose(*s.session, s.fed, std::span<int32_t>(s.check).subspan(1, k)) : 0;
        inputs.push_back({&s, std::span<const int32_t>(s.check.data(), std::min(n, k) + 1), n > 0});
        return true;
    }
}

void Scheduler::step() {
    // 1. Each slot's input for this step: the next chunk of its prompt, or the token its reply samples now.
    std::vector<Input> inputs;
    uint32_t sampled = 0, passes = 0, accepted = 0;
    uint64_t drafted = 0;
    size_t batched = 0;
    const auto now = Clock::now();
    for (auto& sp : slots_) {
        Slot& s = *sp;
        if (!s.busy()) continue;
        if (s.job->cancelled()) {
            s.reply->cancel();
            finish(s, FinishReason::Cancelled);
            continue;
        }
        const std::vector<int32_t>& prompt = s.job->spec().prompt;
        if (s.prefilling()) {
            const size_t n = std::min<size_t>(options_.prefill_chunk, prompt.size() - s.next_prompt);
            inputs.push_back({&s, std::span<const int32_t>(prompt).subspan(s.next_prompt, n)});
            continue;
        }
        if (s.reply->tokens().empty()) s.first_token = now;
        if (!decode(s, inputs, sampled, accepted)) finish(s, s.reply->finish());
    }
    // 2. Evaluate them together: one forward pass (Session::eval_batch) per capacity's worth of tokens, so that
    // each weight, and each expert's weights, are read once for every token of the step that needs them. A prompt
    // chunk is cut to the room left; what does not fit waits for the next step.
    const size_t capacity = slots_.front()->session->chunk_capacity();
    size_t begin = 0;
    while (begin < inputs.size()) {
        batch_.clear();
        size_t room = capacity, end = begin;
        for (; end < inputs.size() && room > 0; ++end) {
            Input& in = inputs[end];
            if (in.tokens.size() > room) in.tokens = in.tokens.first(room);  // a check loses drafts
            in.verify = in.verify && in.tokens.size() > 1;
            room -= in.tokens.size();
            batch_.push_back({in.slot->session.get(), in.tokens, in.verify});
        }
        ++passes;
        batched += capacity - room;
        if (Status s = Session::eval_batch(batch_); !s) {
            if (!mirror_.lost()) return;  // a rank is gone: run() fails every job
            // Say which job failed: evaluate them one by one (eval_batch checked before evaluating anything).
            for (size_t i = begin; i < end; ++i) {
                Session& session = *inputs[i].slot->session;
                auto r = inputs[i].verify ? session.verify(inputs[i].tokens) : session.eval(inputs[i].tokens);
                if (!r) finish(*inputs[i].slot, FinishReason::None, r.message());
            }
        }
        for (size_t i = begin; i < end; ++i) {
            Slot& slot = *inputs[i].slot;
            if (!slot.busy()) continue;
            slot.logits = slot.session->logits();
            if (inputs[i].verify) {  // sampling starts at the check's first row
                slot.drafts = static_cast<uint32_t>(inputs[i].tokens.size() - 1);
                slot.row = 0;
                drafted += slot.drafts;
                slot.logits = slot.session->verify_logits().first(model_.hparams().vocab_size);
            }
            if (slot.prefilling()) slot.next_prompt += inputs[i].tokens.size();
        }
        begin = end;
    }

    std::lock_guard lock(mutex_);
    // Slots that finished in this step are free now (the gauge must not wait for the next wake-up).
    stats_.active = static_cast<uint32_t>(std::count_if(slots_.begin(), slots_.end(), [](const auto& sp) { return sp->busy(); }));
    ++stats_.steps;
    stats_.forward_passes += passes;
    stats_.batched_tokens += batched;
    stats_.generated_tokens += sampled;
    stats_.drafted += drafted;
    stats_.accepted += accepted;
    if (sampled > 0) {
        const double t = seconds_now();
        recent_.emplace_back(t, sampled);
        while (recent_.size() > 2 && t - recent_.front().first > kRateWindow) recent_.pop_front();
    }
}

Status follow_scheduler(const Model& model, const SchedulerOptions& options) {
    if (options.ranks == nullptr || options.ranks->rank() == 0) return error("follow_scheduler: this is rank 0");
    ThreadPool pool(options.threads);
    std::vector<std::unique_ptr<Session>> sessions = slot_sessions(model, pool, options);
    std::vector<Session*> slots;
    for (auto& s : sessions) slots.push_back(s.get());
    return follow_slots(*options.ranks, slots);
}

}  // namespace colibri::server
