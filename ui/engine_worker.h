// EngineWorker: the engine (Model, ThreadPool, Session, perf counters) on its own QThread. Callers on any
// thread use the public functions, which only post work to the worker's thread and return at once; results
// come back as signals (queued to the receiver's thread). A generation streams token by token, each
// evaluated position with its trace, and requestStop() ends it within one token (one prompt chunk while the
// prompt is evaluated). The same worker runs a kernel comparison: one prompt and decode per kernel variant.
#pragma once
#include <QObject>
#include <QString>
#include <QVector>
#include <atomic>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "engine/cache/expert_slots.h"
#include "engine/base/status.h"
#include "ui/cache_state.h"
#include "ui/data/generation.h"
#include "ui/data/kernel_comparison.h"
#include "ui/data/model_summary.h"
#include "ui/data/token_trace.h"
#include "ui/trace_collector.h"

namespace colibri {
class ChatService;
class Model;
class PerfCounters;
class Session;
class ThreadPool;
}  // namespace colibri

namespace colibri::studio {

// The events `counters` offers and what it says about those it could not open, as the profiler shows them.
CounterSet counter_set(const PerfCounters& counters);

// The top `n` tokens of softmax(logits), most likely first; also_probability (when not null) gets the
// probability of token `also` (-1 when it is out of range).
std::vector<std::pair<int32_t, float>> top_probabilities(std::span<const float> logits, size_t n, int32_t also = -1,
                                                         float* also_probability = nullptr);

class EngineWorker : public QObject {
    Q_OBJECT
public:
    EngineWorker();
    ~EngineWorker() override;

    // Posted to the worker thread.
    void load(const QString& path, const LoadOptions& options = {});
    void unload();
    void generate(const GenerationRequest& request);
    // Attaches to a `colibri serve` elsewhere (http://HOST:PORT) instead of a local model: loaded() describes
    // its model, and generations run there, their traces (routing and per-layer times of every evaluated
    // position) coming back through the server's trace extension (docs/SERVER.md). Counters, kernel choices
    // and comparisons stay local-only.
    void connectRemote(const QString& url, const QString& api_key = {});
    void resetConversation();       // forget the KV cache; the next generation evaluates from scratch
    void setCounting(Counting mode);  // perf counters per layer or per layer and expert (off by default)
    // The kernel variant this session's generations run on (kernels::variant_name; empty: the startup choice,
    // COLIBRI_KERNEL or the tune cache or CPUID). A variant this CPU cannot run fails the next generation.
    void setKernel(const QString& variant);
    // The same prompt and greedy decode once per variant (interleaved repetitions); results as
    // kernelComparisonFinished, partial when stopped. The chat's cache is forgotten afterwards.
    void compareKernels(const KernelComparisonRequest& request);

    // Thread-safe and immediate: cancels the running generation or comparison and any already posted.
    void requestStop();

signals:
    void loaded(const colibri::studio::ModelSummary& summary, const colibri::studio::CounterSet& counters);
    // Nothing changed: the model in use before the attempt (if any) is still loaded.
    void loadFailed(const QString& path, const QString& error, colibri::studio::LoadFailure failure);
    void unloaded();
    void generationStarted(int reused_tokens);
    // A token sampled by the model, before it is evaluated; end_of_turn for the model's stop tokens.
    void tokenGenerated(int position, int token, const QString& text, bool end_of_turn);
    // A position after its evaluation, prompt or generated, with routing, timings and counters.
    void tokenEvaluated(const colibri::studio::TokenTrace& trace);
    void generationFinished(const colibri::studio::GenerationStats& stats);
    void generationFailed(const QString& error);
    void kernelComparisonProgress(int done, int total, const QString& what);
    void kernelComparisonFinished(const colibri::studio::KernelComparison& result);

private:
    void do_load(const QString& path, const LoadOptions& options);
    void do_unload();
    void do_generate(const GenerationRequest& request, uint64_t id);
    void do_compare(const KernelComparisonRequest& request, uint64_t id);
    // ui/remote_engine.cpp
    void do_connect(const QString& url, const QString& api_key);
    void do_generate_remote(const GenerationRequest& request, uint64_t id);
    // A token's text, a character split across tokens shown with the token that completes it (`pending`
    // carries the unfinished bytes).
    QString token_text(int32_t token, std::string& pending) const;
    Status apply_kernel();

    std::unique_ptr<PerfCounters> counters_;
    std::unique_ptr<ThreadPool> pool_;
    std::unique_ptr<Model> model_;
    std::unique_ptr<Session> session_;
    std::unique_ptr<TraceCollector> collector_;
    CacheStateTracker cache_tracker_;  // with a RAM budget: the slots' state after each evaluation
    // The turn loop every front end shares (engine/core/chat_service.h): prefix reuse, sampling, stop ids, UTF-8.
    std::unique_ptr<ChatService> chat_;
    std::vector<int32_t> stop_ids_;
    struct Remote {
        std::string host;
        int port = 0;
        std::string api_key, model;
        int context = 0;
        int ranks = 1;        // the processes its experts are spread over
        int moe_layers = 0;   // bounds a position's rank timings
    };
    std::optional<Remote> remote_;    // attached to a server instead of a local model
    Counting counting_ = Counting::Off;
    QString kernel_;                  // setKernel's choice

    std::atomic<uint64_t> posted_{0};     // requests posted so far
    std::atomic<uint64_t> cancelled_{0};  // requests with an id up to this are cancelled
};

}  // namespace colibri::studio

