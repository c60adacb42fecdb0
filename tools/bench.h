// `colibri bench`: prompt and decode throughput of a model, the bytes of weights one decoded token reads, the
// machine's memory bandwidth measured in the same run, and the fraction of the bandwidth roofline
// (bandwidth / bytes per token) that decode reaches.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <iterator>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/base/status.h"
#include "engine/base/token_rate.h"
#include "engine/core/model.h"
#include "engine/core/open_model.h"
#include "engine/core/session.h"
#include "engine/core/thread_pool.h"
#include "kernels/registry.h"
#include "tools/measurement.h"

namespace colibri::tools {

struct BenchConfig {
    uint32_t prompt_tokens = 128;
    uint32_t decode_tokens = 128;
    // Prompt and decode are timed as llama-bench's pp and tg tests, each from a fresh session: the prompt's
    // `prompt_tokens` random ids in chunks, and `decode_tokens` single steps whose first token is BOS (or id 1)
    // and each next the previous step's argmax. depth D (llama-bench -d D) puts D untimed tokens of context
    // before each: -p 128 -n 128 -d 128 decodes positions 128..255.
    uint32_t depth = 0;
    uint32_t reps = 5;
    // Cold start: before each of cold_reps loads, the model file's pages are dropped from the page cache
    // (posix_fadvise DONTNEED) and the first cold_tokens decode steps after loading are timed. 0 = skip.
    uint32_t cold_reps = 0;
    uint32_t cold_tokens = 16;
    uint64_t seed = 1;  // of the prompt's random token ids
    // KV cache size of the session (-c); 0 = what the test needs (depth + max(prompt, decode) + 1). Smaller
    // than that is an error.
    uint32_t context = 0;
    // After the timed repetitions, one more decode of decode_tokens steps with a timing observer attached, for
    // the time per layer and stage (the timed runs have none, so they stay undisturbed). Off: no layer times.
    bool layer_times = true;
    size_t bandwidth_buffer = 0;  // bytes read by the bandwidth benchmark; 0 = bandwidth_buffer_bytes()
    SessionOptions session;
    std::optional<ExpertCacheRequest> cache;  // --ram-budget: the routed experts in a cache of slots
    // Under mpirun: the experts spread over the ranks of ranks->comm (which the caller keeps for the whole bench).
    std::optional<RankRequest> ranks;
};


// Bytes of weights one decoded token reads, from the model's tensor sizes and weight types. Routed experts
// count k (active) experts of average size per MoE layer.
struct TokenBytes {
    uint64_t attention = 0;      // the token mixer: q, k, v, o, their biases and norms; MLA's; Gated DeltaNet's
    uint64_t router = 0;
    uint64_t experts = 0;        // routed experts
    uint64_t shared_expert = 0;  // with its gate
    uint64_t dense_ffn = 0;      // non-MoE layers
    uint64_t norms = 0;          // layer norms and the final norm
    uint64_t lm_head = 0;
    uint64_t embedding = 0;      // one row
    uint64_t total() const { return attention + router + experts + shared_expert + dense_ffn + norms + lm_head + embedding; }
};
TokenBytes decode_token_bytes(const Model& model);

// The machine's read bandwidth: a buffer of buffer_bytes read by the pool's threads (each its own part) in each
// of the patterns kReadPatterns (each part as 1, 2 or 4 sequential streams side by side, with the kernels' widest
// loads, with or without software prefetch: kernels::stream_sum). GB/s (1e9 bytes) per pass; `best` is the
// pattern with the highest median, the figure the roofline uses. (On a Zen 5 guest one stream per thread read
// 45 GB/s, two 56-65 and four with prefetch 80-85: a single pattern would overstate the fraction of the
// roofline the kernels reach.)
struct ReadPattern {
    unsigned streams;  // per thread
    bool prefetch;     // software prefetch kernels::kStreamPrefetch bytes ahead in each stream
    std::string name() const { return std::to_string(streams) + (prefetch ? "+prefetch" : ""); }
};
inline constexpr ReadPattern kReadPatterns[] = {{1, false}, {2, false}, {4, false}, {2, true}, {4, true}};
struct Bandwidth {
    Spread best;
    ReadPattern best_pattern{1, false};
    std::vector<std::pair<ReadPattern, Spread>> by_pattern;
};
// The buffer is paged in once; each pass() reads it in every pattern (alternating, so drift in the machine's
// load hits them alike). run_bench interleaves the passes with the repetitions, so the bandwidth is measured
// in the same stretch of time as the tokens/s it is compared with.
class BandwidthProbe {
public:
    BandwidthProbe(ThreadPool& pool, size_t buffer_bytes);
    void pass();
    size_t passes() const { return gbs_[0].size(); }
    Bandwidth result() const;

private:
    ThreadPool& pool_;
    size_t bytes_;
    std::unique_ptr<uint8_t[]> buffer_;
    std::vector<uint64_t> sums_;
    std::vector<double> gbs_[std::size(kReadPatterns)];
};
// A buffer well beyond the last-level cache: max(1 GiB, 4 x LLC), at most a quarter of free memory.
size_t bandwidth_buffer_bytes();
// Repetition i's tokens/s (decode_tps[i]) against the mean of the bandwidth passes just before and just after
// it (pass_gbs[i] and pass_gbs[i + 1], GB/s) as a fraction of that roofline: decode_tps[i] · bytes / bandwidth.
// Repetitions without a pass on both sides get none.
std::vector<double> paired_roofline_fractions(const std::vector<double>& decode_tps, const std::vector<double>& pass_gbs,
                                              uint64_t bytes);

// Mean time per decoded token, per layer and stage, from the observed decode after the timed repetitions.
struct LayerTimes {
    uint32_t layer = 0;
    double attention_us = 0, router_us = 0, experts_us = 0;
    double unattributed_us = 0;  // time known only as the layer's total (a Studio store of version 1 kept no stages)
    double total_us() const { return attention_us + router_us + experts_us + unattributed_us; }
};

// ---- The measurement `colibri bench` and the Studio's kernel comparison share ----

// One repetition: from `start` (the session reset, then its untimed context), the prompt evaluated at once,
// timed; from `start` again, `decode_tokens` greedy single steps, the first feeding `first`, each next the
// previous step's argmax, timed. The rates are TokenRate's (engine/base/token_rate.h): prompt tokens, and one
// decode step per forward pass, over their seconds.
struct Repetition {
    TokenRate prompt, decode;
    uint32_t prompt_first_position = 0, decode_first_position = 0;  // the session's positions when each began
    std::vector<int32_t> decoded;  // the ids the decode fed, `first` first
    ExchangeStats prompt_exchange, decode_exchange;  // expert parallelism: what each part's MoE exchanges cost
};
using BenchStart = std::function<Status()>;
Result<Repetition> measure_repetition(Session& session, std::span<const int32_t> prompt, int32_t first,
                                      uint32_t decode_tokens, const BenchStart& start);
// The decode once more, from `start`, with a timing observer attached (the timed repetitions have none, so they
// stay undisturbed): the mean time per token of each layer and stage, of the lm head and of the whole step.
struct DecodeProfile {
    std::vector<LayerTimes> layers;
    double lm_head_us = 0, token_us = 0;
};
Result<DecodeProfile> profile_decode(Session& session, int32_t first, uint32_t decode_tokens, const BenchStart& start);
// The decode's first token: the model's BOS, else id 1 (or 0 in a one-token vocabulary).
int32_t decode_start_token(const Model& model);
// Positions a test of `prompt` and `decode` tokens after `depth` of context needs: depth + max(prompt, decode) + 1.
uint32_t bench_context_needed(uint32_t depth, uint32_t prompt, uint32_t decode);

struct BenchReport {
    std::string model_path;
    uint32_t context = 0;  // of the session
    unsigned threads = 0;
    BenchConfig config;
    Spread prompt_tps, decode_tps;
    uint32_t prompt_first_position = 0;  // the session's positions when the timed prompt and decode began
    uint32_t decode_first_position = 0;
    Bandwidth bandwidth;  // bandwidth.best is the figure the roofline uses
    std::vector<double> cold_tps;  // per cold rep: tokens/s of the first cold_tokens decode steps
    size_t bandwidth_buffer = 0;
    TokenBytes bytes;
    // Per weight type of the model's tensors: the kernel variant of matvec and of matmul (kernels/registry.h).
    std::vector<std::pair<std::string, std::pair<std::string, std::string>>> kernels;
    // Empty unless config.layer_times: per layer, then the lm head (final norm included) and the whole token.
    std::vector<LayerTimes> decode_layers;
    double decode_lm_head_us = 0, decode_token_us = 0;
    // The ids the warm-up's decode fed (the start token, then each step's argmax): the same with and without a RAM budget.
    std::vector<int32_t> decoded;
    // With config.cache: the cache's policy, budget in bytes, slots per layer and counters over the whole bench.
    struct CacheUse {
        CachePolicy policy = CachePolicy::Lru;
        uint64_t ram_budget = 0;
        uint32_t slots_per_layer = 0;
        ExpertCacheStats totals;
    };
    std::optional<CacheUse> expert_cache;
    // Other load on the machine while the timed repetitions ran (tools/measurement.h).
    MachineLoad load;
    // Why these figures should not be trusted (a busy machine, repetitions far apart), or "".
    std::string unreliable() const;
    // Expert parallelism: the ranks, and the timed repetitions' MoE exchanges (prompt and decode apart) of this rank.
    uint32_t ranks = 1;
    uint32_t moe_layers = 0;
    uint32_t hidden = 0, experts_per_token = 0;  // the exchanged rows' width and count per token (the cost model's units)
    ExchangeStats prompt_exchange, decode_exchange;
    double roofline_tps() const { return bandwidth.best.median * 1e9 / double(bytes.total()); }
    // Each decode repetition against the bandwidth measured on either side of it (paired_roofline_fractions),
    // in order; the headline fraction is their median. On a host whose bandwidth moves between repetitions,
    // pooling first (median tokens/s over median bandwidth) would set tokens measured in a fast stretch
    // against bandwidth measured in a slow one, or the other way round.
    std::vector<double> roofline_fraction_samples() const {
        return paired_roofline_fractions(decode_tps.samples, bandwidth.best.samples, bytes.total());
    }
    double roofline_fraction() const {
        const std::vector<double> paired = roofline_fraction_samples();
        return paired.empty() ? roofline_fraction_of_medians() : Spread::of(paired).median;
    }
    double roofline_fraction_of_medians() const { return decode_tps.median / roofline_tps(); }
};

// model_path is loaded once for the warm runs (and again per cold rep).
Result<BenchReport> run_bench(const std::string& model_path, unsigned threads, const BenchConfig& config);
nlohmann::json bench_json(const BenchReport& report);
std::string bench_text(const BenchReport& report);

// `colibri bench --kernel LIST`, `colibri tune --variants LIST`: "all" (every variant this CPU runs) or names
// separated by commas (kernels::variant_from_name); an error, prefixed with the option's name, names a variant
// that is unknown or that this CPU cannot run.
Result<std::vector<kernels::Variant>> parse_kernel_list(const std::string& list, const std::string& option = "--kernel");
// The same bench run once per kernel variant (selected for every op and type), side by side: `colibri bench
// --kernel LIST` (a full run_bench each) and the Studio's kernel comparison (compare_kernels).
struct KernelRun {
    kernels::Variant variant;
    BenchReport report;
    std::vector<int32_t> decoded;  // compare_kernels: the ids the first repetition's decode fed
};

// The kernel comparison on a model already open (the Studio's): per repetition, measure_repetition once per
// variant in turn (interleaved, so drift in the machine's load hits every variant alike), each variant's first
// turn followed by its profile_decode (untimed and warm, as run_bench's: the layer times). `progress` is asked
// before each turn (turns done, turns in all, the variant, the repetition); false stops the comparison there.
// Only repetitions every variant finished count. The variant selection is left at the last variant run.
struct KernelComparisonConfig {
    std::vector<int32_t> prompt;  // token ids
    uint32_t decode_tokens = 32;
    uint32_t reps = 3;
    std::vector<kernels::Variant> variants;  // each one this CPU runs
    LoadReader load_reader = read_machine_load;  // the machine's load over the whole comparison
};
struct KernelComparisonRuns {
    std::vector<KernelRun> runs;  // one per variant in order; empty when no repetition was finished by all
    bool stopped = false;         // by `progress`
    MachineLoad load;             // also in each run's report
};
// Why a comparison's figures should not be trusted (the machine busy, a variant's repetitions far apart), or "".
std::string comparison_unreliable(const std::vector<KernelRun>& runs);
// What "NEON (translated)" is, for every report that shows it.
inline constexpr const char* kNeonTranslatedNote =
    "NEON (translated): its speed says nothing about an ARM CPU. It is the ARM NEON code compiled for this x86 CPU "
    "through SIMDe, which proves that code path decodes bit-identical tokens.";
using ComparisonProgress = std::function<bool(int done, int total, kernels::Variant variant, int rep)>;
Result<KernelComparisonRuns> compare_kernels(const Model& model, Session& session, const KernelComparisonConfig& config,
                                             const ComparisonProgress& progress);
// One row per variant: prompt and decode tok/s (median), each against the first variant's, and the decode
// time per layer; then each run's full report.
std::string kernel_comparison_text(const std::vector<KernelRun>& runs);
nlohmann::json kernel_comparison_json(const std::vector<KernelRun>& runs);

}  // namespace colibri::tools
