// What the EngineWorker is asked and what it answers about a chat turn and a load: plain values, copied
// between the UI thread and the engine's in queued signals.
#pragma once
#include <QMetaType>
#include <QString>
#include <QVector>
#include <algorithm>
#include <cstdint>
#include <vector>

#include "engine/base/token_rate.h"
#include "engine/cache/expert_slots.h"
#include "engine/cache/ram_budget.h"
#include "engine/core/drafter.h"
#include "engine/core/sampler.h"
#include "tools/measurement.h"

namespace colibri::studio {

struct ChatTurn {
    QString role;  // "system", "user", "assistant"
    QString content;
};

struct GenerationRequest {
    QVector<ChatTurn> messages;       // rendered with the model's chat template ...
    std::vector<int32_t> token_ids;   // ... or, when not empty, exactly these tokens (no tokenizer, replays)
    SamplerConfig sampling;
    int max_tokens = 256;             // 0 evaluates the prompt only
    SpeculateMode speculate = SpeculateMode::Off;  // drafts checked in one evaluation; the reply is the same
};

struct GenerationStats {
    int reused_tokens = 0;    // prompt prefix already in the KV cache
    int prompt_tokens = 0;    // evaluated this time
    int generated = 0;
    int decode_evaluated = 0;  // generated tokens evaluated within decode_seconds (TurnResult's; a server's: generated - 1)
    double prompt_seconds = 0.0;
    double decode_seconds = 0.0;
    int context_used = 0;     // positions of the conversation after it; -1: unknown (a server stopped before it said)
    int context_size = 0;
    bool stopped = false;     // by requestStop()
    QString reply;            // generated text without end-of-turn tokens
    QString kernel;           // the kernel variant the model's weights ran on ("AVX-512"; "mixed" when several)
    // Speculative decoding (Off: not used, or not while counting): checks made, tokens drafted and accepted.
    SpeculateMode speculate = SpeculateMode::Off;
    uint64_t checks = 0, drafted = 0, accepted = 0;
    tools::MachineLoad load;  // other processes' load on the machine during the turn (a local model's; the profiler flags a busy one)
    // TokenRate's (engine/base/token_rate.h), as `colibri chat` and the server report them.
    double decode_tokens_per_second() const { return TokenRate{static_cast<uint64_t>(std::max(decode_evaluated, 0)), decode_seconds}.per_second(); }
    double prompt_tokens_per_second() const { return TokenRate{static_cast<uint64_t>(std::max(prompt_tokens, 0)), prompt_seconds}.per_second(); }
};

// Why a load or a connection failed: the file itself (missing, unreadable, damaged, not a model), what was asked
// of it (a RAM budget too small, a context beyond the model's), or the server. The model in use stays either way.
enum class LoadFailure { File, Options, Server };

struct LoadOptions {
    unsigned threads = 0;   // 0: all cores
    uint32_t context = 0;   // 0: min(model, 4096)
    // Models larger than RAM (engine/cache/expert_cache.h): with a budget (bytes, or a share of the model file as
    // --ram-budget 50% gives it) the routed experts live in slots within it. Pinned learns its hot set from
    // hot_trace (colibri route --json). With a budget the session also predicts each MoE layer's experts one layer
    // ahead, so the cache view can replay LRU with prediction.
    RamBudget ram_budget;  // none: zero bytes and no share (is_set)
    CachePolicy cache_policy = CachePolicy::Lru;
    QString hot_trace;
    bool cache_prefetch = false;
};

}  // namespace colibri::studio

Q_DECLARE_METATYPE(colibri::studio::GenerationStats)
Q_DECLARE_METATYPE(colibri::studio::LoadFailure)
