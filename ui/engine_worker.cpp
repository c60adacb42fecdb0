#include "ui/engine_worker.h"

#include <QDateTime>
#include <algorithm>
#include <chrono>
#include <random>
#include <set>

#include "engine/core/chat_prompt.h"
#include "engine/core/chat_service.h"
#include "engine/core/fast_exp.h"
#include "engine/core/generate.h"
#include "engine/core/model.h"
#include "engine/core/open_model.h"
#include "engine/core/speculation.h"
#include "engine/core/perf_counters.h"
#include "engine/core/session.h"
#include "engine/core/thread_pool.h"
#include "engine/text/utf8.h"
#include "kernels/cpu_info.h"
#include "tools/bench.h"
#include "tools/cache_sim.h"
#include "kernels/registry.h"

namespace colibri::studio {

namespace {

void register_metatypes() {
    qRegisterMetaType<TokenTrace>();
    qRegisterMetaType<CounterSet>();
    qRegisterMetaType<ModelSummary>();
    qRegisterMetaType<GenerationStats>();
    qRegisterMetaType<KernelComparison>();
    qRegisterMetaType<KernelComparisonRequest>();
    qRegisterMetaType<LoadFailure>();
}

uint64_t now_ns() {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

// The variant of every op and type as selected now, to put back after a session's own choice.
struct KernelSelection {
    kernels::Variant variant[kernels::kOpCount][kernels::kWeightTypeCount];
    static KernelSelection current() {
        KernelSelection s;
        for (size_t op = 0; op < kernels::kOpCount; ++op)
            for (size_t t = 0; t < kernels::kWeightTypeCount; ++t) s.variant[op][t] = kernels::selected_variant(kernels::Op(op), WeightType(t));
        return s;
    }
    void apply() const {
        for (size_t op = 0; op < kernels::kOpCount; ++op)
            for (size_t t = 0; t < kernels::kWeightTypeCount; ++t) kernels::select_variant(kernels::Op(op), WeightType(t), variant[op][t]);
    }
};

// Taken when the first worker is made: the startup choice (COLIBRI_KERNEL, tune cache or CPUID).
const KernelSelection& startup_selection() {
    static const KernelSelection s = KernelSelection::current();
    return s;
}

// The display name of the variant that runs the model's weights, "mixed" when types differ.
QString running_kernel(const Model& model) {
    std::set<kernels::Variant> used;
    for (const TensorView& t : model.file().tensors()) used.insert(kernels::selected_variant(kernels::Op::Matvec, t.type));
    if (used.size() == 1) return QString::fromLatin1(kernels::variant_display_name(*used.begin()));
    return used.empty() ? QString() : QObject::tr("mixed");
}

}  // namespace

std::vector<std::pair<int32_t, float>> top_probabilities(std::span<const float> logits, size_t n, int32_t also, float* also_probability) {
    std::vector<std::pair<int32_t, float>> top;
    if (logits.empty()) return top;
    const float max = *std::max_element(logits.begin(), logits.end());
    double sum = 0.0;
    for (float l : logits) sum += fast_exp(l - max);
    if (also_probability != nullptr)
        *also_probability = also >= 0 && static_cast<size_t>(also) < logits.size()
                                ? static_cast<float>(fast_exp(logits[static_cast<size_t>(also)] - max) / sum) : -1.0f;
    if (n == 0) return top;
    std::vector<int32_t> ids(logits.size());
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
    n = std::min(n, ids.size());
    std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(), [&](int32_t a, int32_t b) {
        return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)] || (logits[static_cast<size_t>(a)] == logits[static_cast<size_t>(b)] && a < b);
    });
    for (size_t i = 0; i < n; ++i)
        top.emplace_back(ids[i], static_cast<float>(fast_exp(logits[static_cast<size_t>(ids[i])] - max) / sum));
    return top;
}

CounterSet counter_set(const PerfCounters& c) {
    CounterSet set;
    for (const CounterEvent& e : c.events()) {
        set.names << QString::fromStdString(e.name);
        if (e.hardware) set.hardware_names << QString::fromStdString(e.name);
    }
    set.hardware_status = QString::fromStdString(c.hardware_status());
    set.software_status = QString::fromStdString(c.software_status());
    return set;
}

EngineWorker::EngineWorker() {
    register_metatypes();
    startup_selection();
}

EngineWorker::~EngineWorker() { do_unload(); }

void EngineWorker::load(const QString& path, const LoadOptions& options) {
    QMetaObject::invokeMethod(this, [this, path, options] { do_load(path, options); }, Qt::QueuedConnection);
}

void EngineWorker::unload() {
    QMetaObject::invokeMethod(this, [this] {
        do_unload();
        emit unloaded();
    }, Qt::QueuedConnection);
}

void EngineWorker::generate(const GenerationRequest& request) {
    const uint64_t id = ++posted_;
    QMetaObject::invokeMethod(this, [this, request, id] { do_generate(request, id); }, Qt::QueuedConnection);
}

void EngineWorker::connectRemote(const QString& url, const QString& api_key) {
    QMetaObject::invokeMethod(this, [this, url, api_key] { do_connect(url, api_key); }, Qt::QueuedConnection);
}

void EngineWorker::compareKernels(const KernelComparisonRequest& request) {
    const uint64_t id = ++posted_;
    QMetaObject::invokeMethod(this, [this, request, id] { do_compare(request, id); }, Qt::QueuedConnection);
}

void EngineWorker::resetConversation() {
    QMetaObject::invokeMethod(this, [this] {
        if (chat_) chat_->reset();
    }, Qt::QueuedConnection);
}

void EngineWorker::setCounting(Counting mode) {
    QMetaObject::invokeMethod(this, [this, mode] {
        counting_ = mode;
        if (collector_) collector_->set_counting(mode);
    }, Qt::QueuedConnection);
}

void EngineWorker::setKernel(const QString& variant) {
    QMetaObject::invokeMethod(this, [this, variant] { kernel_ = variant; }, Qt::QueuedConnection);
}

void EngineWorker::requestStop() { cancelled_.store(posted_.load()); }

Status EngineWorker::apply_kernel() {
    if (kernel_.isEmpty()) {
        startup_selection().apply();
        return Status::ok();
    }
    kernels::Variant v{};
    if (!kernels::variant_from_name(kernel_.toStdString(), &v)) return error("unknown kernel variant '" + kernel_.toStdString() + "'");
    if (!kernels::select_variant(v)) return error(std::string(kernels::variant_display_name(v)) + " kernels do not run on this CPU");
    return Status::ok();
}

void EngineWorker::do_unload() {
    // The session refers to the model and the pool; the pool's threads carry the inherited counters.
    remote_.reset();
    chat_.reset();
    session_.reset();
    collector_.reset();
    pool_.reset();
    model_.reset();
    counters_.reset();
    stop_ids_.clear();
}

void EngineWorker::do_load(const QString& path, const LoadOptions& options) {
    // Counters first: the pool's threads, started by open_model, inherit them, so per-layer counts include their
    // work. The model in use stays until the new one is ready: a failed load (a refused pool's threads included)
    // leaves the chat where it was.
    auto counters = PerfCounters::open_default();
    OpenOptions open;
    open.path = path.toStdString();
    open.context = options.context;
    open.threads = options.threads;
    if (options.ram_budget.is_set()) {
        ExpertCacheRequest cache;
        cache.budget = options.ram_budget;
        cache.policy = options.cache_policy;
        cache.prefetch = options.cache_prefetch;
        if (!options.hot_trace.isEmpty()) cache.hot_experts = tools::hot_experts_from_trace(options.hot_trace.toStdString());
        open.cache = std::move(cache);
    }
    // With a budget the session predicts each MoE layer's experts, so the cache view can replay LRU with prediction.
    open.session.predict_experts = options.ram_budget.is_set();
    // A model with a multi-token-prediction head runs it beside every eval (one more layer), so that a reply can
    // draft with it (Chat settings, speculative decoding); without a head this asks nothing.
    open.session.mtp = true;
    OpenFailure failure = OpenFailure::File;
    auto opened = open_model(open, &failure);
    if (!opened) {
        emit loadFailed(path, QString::fromStdString(opened.message()),
                        failure == OpenFailure::File ? LoadFailure::File : LoadFailure::Options);
        return;
    }
    do_unload();
    model_ = std::move(opened->model);
    cache_tracker_ = CacheStateTracker{};
    counters_ = std::move(counters);
    pool_ = std::move(opened->pool);
    session_ = std::move(opened->session);
    collector_ = std::make_unique<TraceCollector>(counters_.get());
    collector_->set_counting(counting_);
    session_->set_observer(collector_.get());
    chat_ = std::make_unique<ChatService>(*model_, *session_);
    stop_ids_ = default_stop_ids(*model_);

    ModelSummary summary = summarize(*model_, path);
    summary.context = static_cast<int>(session_->context());
    summary.threads = static_cast<int>(pool_->size());
    emit loaded(summary, counter_set(*counters_));
}

QString EngineWorker::token_text(int32_t token, std::string& pending) const {
    const Tokenizer* tok = model_->tokenizer();
    if (tok == nullptr) return QStringLiteral("[%1] ").arg(token);
    // A character split across tokens is shown with the token that completes it.
    Utf8Stream stream;
    stream.push(pending);
    const std::string ready = stream.push(tok->decode_token_bytes(token));
    pending = stream.flush();
    return QString::fromUtf8(ready.data(), static_cast<qsizetype>(ready.size()));
}

void EngineWorker::do_generate(const GenerationRequest& request, uint64_t id) {
    if (remote_) return do_generate_remote(request, id);
    if (!session_) {
        emit generationFailed(tr("no model is loaded"));
        return;
    }
    if (Status s = apply_kernel(); !s) {
        emit generationFailed(QString::fromStdString(s.message()));
        return;
    }
    std::vector<int32_t> ids = request.token_ids;
    if (ids.empty()) {
        std::vector<ChatMessage> messages;
        for (const ChatTurn& t : request.messages) messages.push_back({t.role.toStdString(), t.content.toStdString()});
        auto rendered = chat_prompt_ids(*model_, messages);
        if (!rendered) {
            emit generationFailed(QString::fromStdString(rendered.message()));
            return;
        }
        ids = std::move(rendered.value());
    }
    for (int32_t t : ids)
        if (t < 0 || static_cast<uint32_t>(t) >= model_->hparams().vocab_size) {
            emit generationFailed(tr("token id %1 out of range (vocabulary %2)").arg(t).arg(model_->hparams().vocab_size));
            return;
        }
    const int max_tokens = std::max(0, request.max_tokens);
    if (ids.size() + static_cast<size_t>(max_tokens) > session_->context()) {
        emit generationFailed(tr("the conversation (%1 tokens) and a reply of up to %2 would exceed the context of %3 tokens; "
                                 "start a new conversation or lower the maximum reply length")
                                  .arg(ids.size()).arg(max_tokens).arg(session_->context()));
        return;
    }

    // The turn through the chat service, as `colibri chat` runs it: the KV cache's common prefix is kept and the
    // rest of the prompt evaluated in chunks (one token at a time while counting, so that the counters stay per
    // token), then the reply sampled and every generated token evaluated, the last one too, so that each has
    // its routing and the cache holds the whole reply for the next turn. The observer turns each evaluation
    // into traces and each token into the signals the views take. With speculative decoding a check evaluates
    // the sampled token and its drafts together: their traces wait until the sampler accepts each draft (a
    // rejected row's trace is dropped with the row), so the views see the same tokens in the same order, with
    // the same routing (the engine's rows are plain decoding's bit for bit), as without it.
    struct StudioTurn final : TurnObserver {
        EngineWorker& w;
        uint64_t id;
        GenerationStats& stats;
        std::string pending;              // a prompt character split across tokens
        std::vector<QString> texts;       // of the positions being evaluated
        std::span<const float> logits;    // the row the next token is sampled from
        TokenTrace step;                  // the generated token's sampling time and alternatives
        bool generated = false;           // the evaluation in progress is of generated tokens
        int next_position = -1;           // where the next generated token goes (-1: the session's position)
        std::vector<TokenTrace> drafted;  // a check's later rows, shown once the sampler takes their tokens
        StudioTurn(EngineWorker& worker, uint64_t request, GenerationStats& s) : w(worker), id(request), stats(s) {}

        void on_started(uint32_t reused) override {
            stats.reused_tokens = static_cast<int>(reused);
            emit w.generationStarted(static_cast<int>(reused));
        }
        void before_eval(uint32_t position, std::span<const int32_t> tokens, bool is_generated) override {
            generated = is_generated;
            drafted.clear();  // rows of an earlier check that were not taken
            const std::vector<int32_t> ids(tokens.begin(), tokens.end());
            if (!generated) {
                texts.clear();
                for (int32_t t : ids) texts.push_back(w.token_text(t, pending));
            } else {
                // The first row's text came with its token (on_token); a draft's is its piece.
                texts.resize(1);
                std::string split;
                for (size_t i = 1; i < ids.size(); ++i) texts.push_back(w.token_text(ids[i], split));
            }
            w.collector_->begin(static_cast<int>(position), ids, texts, generated);
        }
        void emit_trace(TokenTrace& t) {
            if (generated) {
                // The sampler's time and the alternatives belong to the step that produced this token.
                t.sampling_ns = step.sampling_ns;
                t.step_ns = now_ns() - step.step_ns;
                t.probability = step.probability;
                t.alternatives = std::move(step.alternatives);
            }
            emit w.tokenEvaluated(t);
        }
        void next_step(std::span<const float> l) {
            logits = l;
            step = TokenTrace{};
            step.step_ns = now_ns();  // the next token's step starts with sampling from these logits
        }
        void after_eval(std::span<const float> l) override {
            std::vector<TokenTrace> traces = w.collector_->take();
            // The cache as the evaluation left it, on the last trace shown now (a check's first row).
            if (ExpertCache* cache = w.model_->expert_cache(); cache != nullptr && !traces.empty())
                (generated ? traces.front() : traces.back()).cache_state = w.cache_tracker_.take(*w.model_, *cache);
            if (generated && traces.size() > 1) {
                drafted.assign(std::make_move_iterator(traces.begin() + 1), std::make_move_iterator(traces.end()));
                traces.resize(1);
            }
            for (TokenTrace& t : traces) emit_trace(t);
            next_step(l);
        }
        void after_checked_row(std::span<const float> l) override {
            // The token just taken was a check's row: its trace, kept since the check, shows now.
            auto it = std::find_if(drafted.begin(), drafted.end(), [&](const TokenTrace& t) { return t.position == next_position - 1; });
            if (it != drafted.end()) emit_trace(*it);
            next_step(l);
        }
        bool on_token(const TokenEvent& e) override {
            step.sampling_ns = now_ns() - step.step_ns;
            // What else the model considered here: its own distribution, before the sampling settings.
            const Tokenizer* tok = w.model_->tokenizer();
            step.alternatives.clear();
            for (const auto& [token, p] : top_probabilities(logits, 5, e.id, &step.probability)) {
                const std::string bytes = tok ? tok->decode_token_bytes(token) : std::string();
                step.alternatives.push_back({token, QString::fromUtf8(bytes.data(), static_cast<qsizetype>(bytes.size())), p});
            }
            // An end-of-turn token is shown as its piece in the routing views; the reply's text never has it.
            std::string none;
            const QString text = tok == nullptr ? QStringLiteral("[%1] ").arg(e.id)
                                 : e.end_of_turn ? w.token_text(e.id, none)
                                                 : QString::fromUtf8(e.text.data(), static_cast<qsizetype>(e.text.size()));
            texts = {text};
            // Generated tokens take consecutive positions; the session's own position runs ahead during a check.
            if (next_position < 0) next_position = static_cast<int>(w.session_->position());
            emit w.tokenGenerated(next_position++, e.id, text, e.end_of_turn);
            ++stats.generated;
            return true;
        }
        bool cancelled() override { return id <= w.cancelled_.load(); }
    };

    GenerationStats stats;
    stats.context_size = static_cast<int>(session_->context());
    stats.kernel = running_kernel(*model_);
    TurnOptions turn;
    turn.reply.max_tokens = max_tokens;
    // With explicit ids the caller decides when to stop, as `colibri generate --tokens` does.
    if (request.token_ids.empty()) turn.reply.stop_ids = stop_ids_;
    turn.prompt_step = collector_->counting() ? 1 : session_->options().chunk;
    turn.evaluate_last = true;
    // Speculative decoding, not while counting: a check's rows share one evaluation, and the counters one read.
    std::unique_ptr<Drafter> drafter;
    if (request.speculate != SpeculateMode::Off && !collector_->counting()) {
        auto made = make_drafter(request.speculate, *model_);
        if (!made) {
            emit generationFailed(QString::fromStdString(made.message()));
            return;
        }
        drafter = std::move(made.value());
        turn.drafter = drafter.get();
        stats.speculate = request.speculate;
    }
    Sampler sampler(request.sampling);
    StudioTurn observer(*this, id, stats);
    tools::LoadWatch load;  // the profiler's timings of this turn are flagged when others loaded the machine
    auto result = chat_->run(ids, sampler, turn, &observer);
    stats.load = load.stop();
    if (!result) {
        emit generationFailed(QString::fromStdString(result.message()));
        return;
    }
    stats.prompt_tokens = static_cast<int>(result->prompt_evaluated);
    stats.prompt_seconds = result->prompt_seconds;
    stats.decode_seconds = result->decode_seconds;
    stats.decode_evaluated = static_cast<int>(result->decode_evaluated);
    stats.stopped = result->finish == FinishReason::Cancelled;
    stats.context_used = static_cast<int>(session_->position());
    stats.drafted = result->speculation.drafted;
    stats.accepted = result->speculation.accepted;
    stats.checks = result->speculation.checks;
    if (model_->tokenizer()) stats.reply = QString::fromStdString(result->reply);
    emit generationFinished(stats);
}

void EngineWorker::do_compare(const KernelComparisonRequest& request, uint64_t id) {
    auto cancelled = [this, id] { return id <= cancelled_.load(); };
    KernelComparison result;
    result.cpu = QString::fromStdString(kernels::cpu_model());
    result.reps = std::max(1, request.reps);
    result.decode_tokens = std::max(1, request.decode_tokens);
    if (!session_) {
        result.error = remote_ ? tr("kernels are compared on a local model, not on a server") : tr("no model is loaded");
        emit kernelComparisonFinished(result);
        return;
    }
    result.model = QString::fromStdString(model_->file().path());
    result.threads = static_cast<int>(pool_->size());
    std::vector<kernels::Variant> variants;
    for (const QString& name : request.variants) {
        kernels::Variant v{};
        if (!kernels::variant_from_name(name.toStdString(), &v) || !kernels::variant_supported(v)) {
            result.error = tr("%1: this CPU cannot run it").arg(name);
            emit kernelComparisonFinished(result);
            return;
        }
        variants.push_back(v);
    }
    if (variants.empty()) variants = kernels::supported_variants();

    // The prompt: the caller's ids, else seeded random ones as `colibri bench` uses; both cut to length.
    std::vector<int32_t> prompt = request.prompt;
    const uint32_t vocab = model_->hparams().vocab_size;
    if (prompt.empty()) {
        std::mt19937_64 rng(1);
        prompt.resize(static_cast<size_t>(std::max(1, request.prompt_tokens)));
        for (int32_t& t : prompt) t = static_cast<int32_t>(rng() % vocab);
    }
    if (request.prompt_tokens > 0 && prompt.size() > static_cast<size_t>(request.prompt_tokens)) prompt.resize(static_cast<size_t>(request.prompt_tokens));
    result.prompt_tokens = static_cast<int>(prompt.size());

    // The measurement of `colibri bench` (tools::compare_kernels) on this session, with no observer: the timed
    // runs stay undisturbed whatever the profiler is set to, and the chat's traces see none of them.
    const KernelSelection before = KernelSelection::current();
    const Counting counting = collector_->counting_mode();
    collector_->set_counting(Counting::Off);
    session_->set_observer(nullptr);
    chat_->reset();  // the session will hold the comparison's tokens, not the chat's
    tools::KernelComparisonConfig config;
    config.prompt = std::move(prompt);
    config.decode_tokens = static_cast<uint32_t>(result.decode_tokens);
    config.reps = static_cast<uint32_t>(result.reps);
    config.variants = variants;
    int done = 0, total = 0;
    auto compared = tools::compare_kernels(*model_, *session_, config, [&](int d, int t, kernels::Variant v, int rep) {
        done = d;
        total = t;
        if (cancelled()) return false;
        emit kernelComparisonProgress(d, t, tr("%1, repetition %2 of %3").arg(QLatin1String(kernels::variant_display_name(v))).arg(rep + 1).arg(result.reps));
        return true;
    });
    before.apply();
    session_->set_observer(collector_.get());
    collector_->set_counting(counting);
    chat_->reset();
    // The comparison's reads are not the next token's: the cache view's next state is taken against this one.
    if (ExpertCache* cache = model_->expert_cache()) cache_tracker_.take(*model_, *cache);
    bool stopped = true;
    if (!compared) {
        result.error = QString::fromStdString(compared.message());
    } else {
        stopped = compared->stopped;
        if (!stopped) done = total;
        result.runs = std::move(compared->runs);
    }
    result.complete = !stopped && result.error.isEmpty();
    result.when = QDateTime::currentDateTime().toString(Qt::ISODate);
    emit kernelComparisonProgress(done, total, QString());
    emit kernelComparisonFinished(result);
}

}  // namespace colibri::studio
