#include "bench.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>

#include "engine/file/format.h"
#include "engine/core/sampler.h"
#include "kernels/matvec.h"
#include "kernels/registry.h"

namespace colibri::tools {

using nlohmann::json;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

uint64_t size_of(const TensorView* t) { return t ? t->size : 0; }
uint64_t size_of(const FfnWeights& f) {
    return size_of(f.gate) + size_of(f.up) + size_of(f.down) + size_of(f.gate_bias) + size_of(f.up_bias) + size_of(f.down_bias);
}

// Drops the file's pages from the page cache (no process may have it mapped for this to take effect).
Status drop_page_cache(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a FIFO must not block this
    if (fd < 0) return error(path + ": cannot open: " + std::strerror(errno));
    const int rc = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
    if (rc != 0) return error(path + ": posix_fadvise failed");
    return Status::ok();
}

struct Loaded {
    std::unique_ptr<ExpertParallel> parallel;  // outlives the model's sessions
    std::unique_ptr<Model> model;
    std::unique_ptr<Session> session;
};

// The model as every front end opens it (engine/core/open_model.h), with the bench's own session on `pool`.
Result<Loaded> open_session(const std::string& path, ThreadPool& pool, uint32_t context, const BenchConfig& config) {
    OpenOptions options;
    options.path = path;
    options.context = context;
    options.cache = config.cache;
    options.with_session = false;
    auto model = load_model(options);
    if (!model) return model.status();
    Loaded l;
    l.model = std::move(model.value());
    if (config.ranks && config.ranks->comm) {
        auto parallel = join_ranks(*l.model, *config.ranks->comm, *config.ranks);
        if (!parallel) return parallel.status();
        l.parallel = std::move(parallel.value());
    }
    l.session = std::make_unique<Session>(*l.model, pool, context, config.session);
    return l;
}

ExchangeStats exchange_since(const ExchangeStats& a, const ExchangeStats& b) {
    return {b.exchanges - a.exchanges, b.bytes_sent - a.bytes_sent, b.bytes_received - a.bytes_received, b.wait_ns - a.wait_ns};
}

ExchangeStats add_exchange(const ExchangeStats& a, const ExchangeStats& b) {
    return {a.exchanges + b.exchanges, a.bytes_sent + b.bytes_sent, a.bytes_received + b.bytes_received, a.wait_ns + b.wait_ns};
}

json spread_json(const Spread& s) {
    return json{{"median", s.median}, {"min", s.min},   {"max", s.max},
                {"q1", s.q1},         {"q3", s.q3},     {"relative_range", s.relative_range()},
                {"large", spread_is_large(s)}, {"samples", s.samples}};
}

json load_json(const MachineLoad& l) {
    json j{{"measured", l.measured}, {"busy", l.busy()}, {"cpus", l.cpus}};
    if (l.measured) {
        j["other_cpus"] = l.other_cpus;
        j["own_cpus"] = l.own_cpus;
        j["busy_threshold_cpus"] = l.busy_threshold();
    } else {
        j["not_measured"] = l.not_measured;
    }
    return j;
}

}  // namespace

TokenBytes decode_token_bytes(const Model& model) {
    const format::HyperParams& hp = model.hparams();
    TokenBytes b;
    for (const LayerWeights& w : model.layers()) {  // the decoder's (a multi-token-prediction head's are apart)
        b.attention += size_of(w.q) + size_of(w.k) + size_of(w.v) + size_of(w.o) + size_of(w.q_bias) +
                       size_of(w.k_bias) + size_of(w.v_bias) + size_of(w.o_bias) + size_of(w.q_norm) + size_of(w.k_norm) +
                       size_of(w.sinks) + size_of(w.q_a) + size_of(w.q_a_norm) + size_of(w.kv_a) + size_of(w.kv_a_norm) +
                       size_of(w.k_b) + size_of(w.v_b) + size_of(w.q_gate);
        // A Gated DeltaNet layer's token mixer (its out_proj is o, above).
        b.attention += size_of(w.lin_qkv) + size_of(w.lin_z) + size_of(w.lin_beta) + size_of(w.lin_alpha) + size_of(w.lin_conv) +
                       size_of(w.lin_dt_bias) + size_of(w.lin_ssm_a) + size_of(w.lin_norm);
        b.norms += size_of(w.attn_norm) + size_of(w.ffn_norm);
        if (w.is_moe) {
            b.router += size_of(w.router) + size_of(w.router_bias) + size_of(w.selection_bias);
            uint64_t all = 0;
            for (const FfnWeights& e : w.experts) all += size_of(e);
            if (!w.experts.empty()) b.experts += all / w.experts.size() * hp.n_experts_active;
            b.shared_expert += size_of(w.shared_expert) + size_of(w.shared_expert_gate);
        } else {
            b.dense_ffn += size_of(w.dense);
        }
    }
    b.norms += model.output_norm().size;
    b.lm_head = model.lm_head().size;
    b.embedding = kernels::row_bytes(model.embedding().type, model.embedding().cols);
    return b;
}

size_t bandwidth_buffer_bytes() {
    const long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
    size_t bytes = std::max<size_t>(size_t(1) << 30, llc > 0 ? 4 * size_t(llc) : 0);
    const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) bytes = std::min(bytes, size_t(pages) * size_t(page) / 4);
    return std::max<size_t>(bytes, size_t(64) << 20) / 4096 * 4096;
}

BandwidthProbe::BandwidthProbe(ThreadPool& pool, size_t buffer_bytes)
    : pool_(pool), bytes_(std::max<size_t>(buffer_bytes / 4096 * 4096, 4096)), buffer_(new uint8_t[bytes_]),
      sums_(pool.size()) {
    // Written by the threads that will read it, so its pages are in place before timing.
    pool_.parallel_for(bytes_ / 4096, 16, [&](size_t b, size_t e) {
        for (size_t page = b; page < e; ++page) std::memset(buffer_.get() + page * 4096, int(page), 4096);
    });
}

void BandwidthProbe::pass() {
    const size_t parts = pool_.size();
    for (size_t k = 0; k < std::size(kReadPatterns); ++k) {
        const auto t0 = std::chrono::steady_clock::now();
        pool_.parallel_for(parts, 1, [&](size_t pb, size_t pe) {
            for (size_t part = pb; part < pe; ++part) {
                const size_t b = bytes_ * part / parts / 64 * 64, e = bytes_ * (part + 1) / parts / 64 * 64;
                sums_[part] += kernels::stream_sum(buffer_.get() + b, e - b, kReadPatterns[k].streams, kReadPatterns[k].prefetch);
            }
        });
        gbs_[k].push_back(double(bytes_) / seconds_since(t0) / 1e9);
    }
    // The sums are data the optimiser cannot prove unused.
    volatile uint64_t sink = 0;
    for (uint64_t s : sums_) sink = sink + s;
}

Bandwidth BandwidthProbe::result() const {
    Bandwidth bw;
    for (size_t k = 0; k < std::size(kReadPatterns); ++k) {
        bw.by_pattern.emplace_back(kReadPatterns[k], Spread::of(gbs_[k]));
        if (k == 0 || bw.by_pattern.back().second.median > bw.best.median) {
            bw.best = bw.by_pattern.back().second;
            bw.best_pattern = kReadPatterns[k];
        }
    }
    return bw;
}

namespace {

// Sums the stage times of a decode, per layer, for BenchReport::decode_layers.
struct StageTimer final : TraceObserver {
    std::map<uint32_t, LayerTimes> layers;
    uint64_t lm_head_ns = 0, token_ns = 0;
    uint32_t tokens = 0;
    void on_layer_timing(const LayerTiming& t) override {
        LayerTimes& l = layers[t.layer];
        l.layer = t.layer;
        l.attention_us += t.attention_ns * 1e-3;
        l.router_us += t.router_ns * 1e-3;
        l.experts_us += t.experts_ns * 1e-3;
    }
    void on_token_timing(const TokenTiming& t) override {
        lm_head_ns += t.lm_head_ns;
        token_ns += t.total_ns;
        ++tokens;
    }
};

// Per weight type of the model's tensors: the variant selected now for matvec and for matmul.
std::vector<std::pair<std::string, std::pair<std::string, std::string>>> kernel_choices(const Model& model) {
    std::map<WeightType, bool> types;
    for (const TensorView& t : model.file().tensors()) types[t.type] = true;
    std::vector<std::pair<std::string, std::pair<std::string, std::string>>> out;
    for (const auto& [type, _] : types)
        out.push_back({format::weight_type_name(type),
                       {kernels::variant_name(kernels::selected_variant(kernels::Op::Matvec, type)),
                        kernels::variant_name(kernels::selected_variant(kernels::Op::Matmul, type))}});
    return out;
}

}  // namespace

int32_t decode_start_token(const Model& model) {
    const int32_t bos = model.tokenizer() ? model.tokenizer()->bos_id() : -1;
    return bos >= 0 ? bos : 1 % static_cast<int32_t>(model.hparams().vocab_size);
}

uint32_t bench_context_needed(uint32_t depth, uint32_t prompt, uint32_t decode) {
    return depth + std::max(prompt, decode) + 1;
}

Result<Repetition> measure_repetition(Session& s, std::span<const int32_t> prompt, int32_t first, uint32_t decode_tokens,
                                      const BenchStart& start) {
    Repetition rep;
    if (Status st = start(); !st) return st;
    rep.prompt_first_position = s.position();
    const ExchangeStats before_prompt = s.exchange_stats();
    auto t0 = std::chrono::steady_clock::now();
    auto logits = s.eval(prompt);
    if (!logits) return logits.status();
    rep.prompt = {prompt.size(), seconds_since(t0)};
    rep.prompt_exchange = exchange_since(before_prompt, s.exchange_stats());

    if (Status st = start(); !st) return st;
    rep.decode_first_position = s.position();
    rep.decoded.reserve(decode_tokens);  // before the clock: the timed loop allocates nothing
    int32_t next = first;
    const ExchangeStats before_decode = s.exchange_stats();
    t0 = std::chrono::steady_clock::now();
    for (uint32_t i = 0; i < decode_tokens; ++i) {
        rep.decoded.push_back(next);
        logits = s.eval(next);
        if (!logits) return logits.status();
        next = argmax(logits.value());
    }
    rep.decode = {decode_tokens, seconds_since(t0)};
    rep.decode_exchange = exchange_since(before_decode, s.exchange_stats());
    return rep;
}

Result<DecodeProfile> profile_decode(Session& s, int32_t first, uint32_t decode_tokens, const BenchStart& start) {
    if (Status st = start(); !st) return st;
    StageTimer timer;
    s.set_observer(&timer);
    int32_t next = first;
    for (uint32_t i = 0; i < decode_tokens; ++i) {
        auto logits = s.eval(next);
        if (!logits) {
            s.set_observer(nullptr);
            return logits.status();
        }
        next = argmax(logits.value());
    }
    s.set_observer(nullptr);
    DecodeProfile profile;
    const double n = std::max(timer.tokens, 1u);
    for (auto& [layer, t] : timer.layers) {
        t.attention_us /= n;
        t.router_us /= n;
        t.experts_us /= n;
        profile.layers.push_back(t);
    }
    profile.lm_head_us = timer.lm_head_ns * 1e-3 / n;
    profile.token_us = timer.token_ns * 1e-3 / n;
    return profile;
}

Result<BenchReport> run_bench(const std::string& model_path, unsigned threads, const BenchConfig& config) {
    if (config.prompt_tokens == 0 || config.decode_tokens == 0) return error("-p and -n must be at least 1");
    if (config.reps == 0) return error("--reps must be at least 1");
    auto started = ThreadPool::create(threads);
    if (!started) return started.status();
    ThreadPool& pool = *started.value();
    BenchReport report;
    report.model_path = model_path;
    report.threads = pool.size();
    report.config = config;
    const uint32_t needed = bench_context_needed(config.depth, config.prompt_tokens, config.decode_tokens);
    if (config.context != 0 && config.context < needed)
        return error("-c " + std::to_string(config.context) + " is less than the " + std::to_string(needed) +
                     " tokens of context the test needs (depth + max(prompt, decode) + 1)");
    const uint32_t context = std::max(needed, config.context);
    report.context = context;

    // Cold starts first: no mapping of the file may be alive when its pages are dropped.
    for (uint32_t r = 0; r < config.cold_reps; ++r) {
        if (Status s = drop_page_cache(model_path); !s) return s;
        auto l = open_session(model_path, pool, std::max(context, config.cold_tokens + 1), config);
        if (!l) return l.status();
        const auto t0 = std::chrono::steady_clock::now();
        int32_t next = 1 % static_cast<int32_t>(l->model->hparams().vocab_size);
        for (uint32_t i = 0; i < config.cold_tokens; ++i) {
            auto logits = l->session->eval(next);
            if (!logits) return logits.status();
            next = argmax(logits.value());
        }
        report.cold_tps.push_back(TokenRate{config.cold_tokens, seconds_since(t0)}.per_second());
    }

    auto l = open_session(model_path, pool, context, config);
    if (!l) return l.status();
    Session& s = *l->session;
    report.bandwidth_buffer = config.bandwidth_buffer ? config.bandwidth_buffer / 4096 * 4096 : bandwidth_buffer_bytes();
    if (report.bandwidth_buffer == 0) return error("bandwidth buffer too small");
    BandwidthProbe probe(pool, report.bandwidth_buffer);
    std::mt19937_64 rng(config.seed);
    std::vector<int32_t> prompt(config.prompt_tokens);
    for (int32_t& id : prompt) id = static_cast<int32_t>(rng() % l->model->hparams().vocab_size);

    // The context before each timed test: `depth` tokens (the prompt's ids repeated), evaluated untimed.
    std::vector<int32_t> context_ids(config.depth);
    for (size_t i = 0; i < context_ids.size(); ++i) context_ids[i] = prompt[i % prompt.size()];
    const BenchStart start = [&]() -> Status {
        s.reset();
        if (context_ids.empty()) return Status::ok();
        auto logits = s.eval(std::span<const int32_t>(context_ids));
        return logits ? Status::ok() : logits.status();
    };
    const int32_t first = decode_start_token(*l->model);

    std::vector<double> prompt_tps, decode_tps;
    std::optional<LoadWatch> watch;
    for (uint32_t r = 0; r <= config.reps; ++r) {  // rep 0 warms the page cache and the caches
        if (r == 1) watch.emplace();  // the machine's load over the timed repetitions
        auto rep = measure_repetition(s, prompt, first, config.decode_tokens, start);
        if (!rep) return rep.status();
        report.prompt_first_position = rep->prompt_first_position;
        report.decode_first_position = rep->decode_first_position;
        if (r == 0) report.decoded = rep->decoded;  // the untimed warm-up's ids
        // A bandwidth pass after every repetition, the warm-up included: timed repetition r lies between
        // passes r - 1 and r, in the same stretch of time as its tokens/s.
        probe.pass();
        if (r == 0) continue;
        report.prompt_exchange = add_exchange(report.prompt_exchange, rep->prompt_exchange);
        report.decode_exchange = add_exchange(report.decode_exchange, rep->decode_exchange);
        prompt_tps.push_back(rep->prompt.per_second());
        decode_tps.push_back(rep->decode.per_second());
    }
    report.prompt_tps = Spread::of(prompt_tps);
    report.decode_tps = Spread::of(decode_tps);
    if (watch) report.load = watch->stop();
    if (config.layer_times) {
        auto profile = profile_decode(s, first, config.decode_tokens, start);
        if (!profile) return profile.status();
        report.decode_layers = std::move(profile->layers);
        report.decode_lm_head_us = profile->lm_head_us;
        report.decode_token_us = profile->token_us;
    }
    report.bytes = decode_token_bytes(*l->model);
    report.ranks = l->parallel ? l->parallel->comm->size() : 1;
    report.moe_layers = l->model->moe_layer_count();
    report.hidden = l->model->hparams().hidden_size;
    report.experts_per_token = l->model->hparams().n_experts_active;
    if (const ExpertCache* c = l->model->expert_cache())
        report.expert_cache = BenchReport::CacheUse{c->policy(), c->budget(), c->slots_per_layer(), c->total_stats()};
    report.kernels = kernel_choices(*l->model);
    l->session.reset();
    l->model.reset();

    constexpr unsigned kMinPasses = 7;
    while (probe.passes() < kMinPasses) probe.pass();
    report.bandwidth = probe.result();
    return report;
}

std::vector<double> paired_roofline_fractions(const std::vector<double>& decode_tps, const std::vector<double>& pass_gbs,
                                              uint64_t bytes) {
    std::vector<double> out;
    for (size_t i = 0; i < decode_tps.size() && i + 1 < pass_gbs.size(); ++i) {
        const double gbs = 0.5 * (pass_gbs[i] + pass_gbs[i + 1]);
        if (gbs > 0) out.push_back(decode_tps[i] * double(bytes) / (gbs * 1e9));
    }
    return out;
}

Result<KernelComparisonRuns> compare_kernels(const Model& model, Session& s, const KernelComparisonConfig& config,
                                             const ComparisonProgress& progress) {
    if (config.prompt.empty() || config.decode_tokens == 0) return error("the prompt and the decode need at least 1 token each");
    if (config.reps == 0) return error("at least 1 repetition");
    if (config.variants.empty()) return error("no kernel variant to compare");
    const uint32_t vocab = model.hparams().vocab_size;
    for (int32_t t : config.prompt)
        if (t < 0 || static_cast<uint32_t>(t) >= vocab)
            return error("token id " + std::to_string(t) + " out of range (vocabulary " + std::to_string(vocab) + ")");
    const uint32_t prompt_tokens = static_cast<uint32_t>(config.prompt.size());
    const uint32_t needed = bench_context_needed(0, prompt_tokens, config.decode_tokens);
    if (needed > s.context())
        return error("the prompt and decode need " + std::to_string(needed) + " tokens of context, the session has " +
                     std::to_string(s.context()));
    for (kernels::Variant v : config.variants)
        if (!kernels::variant_supported(v)) return error(std::string(kernels::variant_name(v)) + ": this CPU or build cannot run it");

    const BenchStart start = [&]() -> Status {
        s.reset();
        return Status::ok();
    };
    const int32_t first = decode_start_token(model);
    KernelComparisonRuns out;
    std::vector<KernelRun> runs(config.variants.size());
    std::vector<std::vector<double>> prompt_tps(runs.size()), decode_tps(runs.size());
    const int total = static_cast<int>(config.reps * runs.size());
    int done = 0;
    LoadWatch watch(config.load_reader);
    for (uint32_t rep = 0; rep < config.reps && !out.stopped; ++rep) {
        for (size_t vi = 0; vi < runs.size(); ++vi) {
            const kernels::Variant v = config.variants[vi];
            if (progress && !progress(done, total, v, static_cast<int>(rep))) {
                out.stopped = true;
                break;
            }
            kernels::select_variant(v);  // every op and type, as COLIBRI_KERNEL=v would
            KernelRun& run = runs[vi];
            auto measured = measure_repetition(s, config.prompt, first, config.decode_tokens, start);
            if (!measured) return measured.status();
            if (rep == 0) {
                run.variant = v;
                run.decoded = measured->decoded;
                auto profile = profile_decode(s, first, config.decode_tokens, start);
                if (!profile) return profile.status();
                run.report.decode_layers = std::move(profile->layers);
                run.report.decode_lm_head_us = profile->lm_head_us;
                run.report.decode_token_us = profile->token_us;
                run.report.kernels = kernel_choices(model);
            }
            run.report.prompt_first_position = measured->prompt_first_position;
            run.report.decode_first_position = measured->decode_first_position;
            prompt_tps[vi].push_back(measured->prompt.per_second());
            decode_tps[vi].push_back(measured->decode.per_second());
            ++done;
        }
    }
    // Only repetitions every variant finished count, so that the variants are compared on equal terms.
    out.load = watch.stop();
    size_t reps_done = decode_tps.front().size();
    for (const auto& d : decode_tps) reps_done = std::min(reps_done, d.size());
    if (reps_done == 0) return out;
    const TokenBytes bytes = decode_token_bytes(model);
    for (size_t vi = 0; vi < runs.size(); ++vi) {
        BenchReport& r = runs[vi].report;
        r.model_path = model.file().path();
        r.context = s.context();
        r.config.prompt_tokens = prompt_tokens;
        r.config.decode_tokens = config.decode_tokens;
        r.config.reps = static_cast<uint32_t>(reps_done);
        r.config.layer_times = true;
        r.bytes = bytes;
        prompt_tps[vi].resize(reps_done);
        decode_tps[vi].resize(reps_done);
        r.prompt_tps = Spread::of(prompt_tps[vi]);
        r.decode_tps = Spread::of(decode_tps[vi]);
        r.load = out.load;
    }
    out.runs = std::move(runs);
    return out;
}

json bench_json(const BenchReport& r) {
    const TokenBytes& b = r.bytes;
    json j{{"model", r.model_path},
           {"threads", r.threads},
           {"context", r.context},
           {"prompt_tokens", r.config.prompt_tokens},
           {"decode_tokens", r.config.decode_tokens},
           {"depth", r.config.depth},
           {"prompt_first_position", r.prompt_first_position},
           {"decode_first_position", r.decode_first_position},
           {"reps", r.config.reps},
           {"router", router_kind_name(r.config.session.router)},
           {"chunk", r.config.session.chunk},
           {"prefetch_experts", r.config.session.prefetch_experts},
           {"huge_pages", r.config.session.huge_pages},
           {"prompt_tokens_per_s", spread_json(r.prompt_tps)},
           {"decode_tokens_per_s", spread_json(r.decode_tps)},
           {"bytes_per_token", b.total()},
           {"bytes_per_token_detail",
            {{"attention", b.attention}, {"router", b.router}, {"experts", b.experts}, {"shared_expert", b.shared_expert},
             {"dense_ffn", b.dense_ffn}, {"norms", b.norms}, {"lm_head", b.lm_head}, {"embedding", b.embedding}}},
           {"bandwidth_gb_per_s", spread_json(r.bandwidth.best)},
           {"bandwidth_buffer_bytes", r.bandwidth_buffer},
           {"bandwidth_pattern", r.bandwidth.best_pattern.name()},
           {"roofline_tokens_per_s", r.roofline_tps()},
           {"roofline_fraction", r.roofline_fraction()},
           {"roofline_fraction_samples", r.roofline_fraction_samples()},
           {"roofline_fraction_of_medians", r.roofline_fraction_of_medians()}};
    json by = json::object();
    for (const auto& [pattern, spread] : r.bandwidth.by_pattern) by[pattern.name()] = spread_json(spread);
    j["bandwidth_by_pattern"] = by;
    json k = json::object();
    for (const auto& [type, v] : r.kernels) k[type] = {{"matvec", v.first}, {"matmul", v.second}};
    j["kernels"] = k;
    if (!r.decode_layers.empty()) {
        json layers = json::array();
        for (const LayerTimes& l : r.decode_layers)
            layers.push_back({{"layer", l.layer}, {"attention_us", l.attention_us}, {"router_us", l.router_us},
                              {"experts_us", l.experts_us}, {"total_us", l.total_us()}});
        j["decode_layers"] = layers;
        j["decode_lm_head_us"] = r.decode_lm_head_us;
        j["decode_token_us"] = r.decode_token_us;
    }
    j["decoded"] = r.decoded;
    if (const auto& c = r.expert_cache)
        j["expert_cache"] = {{"policy", cache_policy_name(c->policy)}, {"ram_budget", c->ram_budget},
                             {"slots_per_layer", c->slots_per_layer}, {"hits", c->totals.hits}, {"misses", c->totals.misses},
                             {"bytes_read", c->totals.bytes_read}, {"stall_ns", c->totals.stall_ns}};
    if (!r.cold_tps.empty()) {
        j["cold_tokens"] = r.config.cold_tokens;
        j["cold_tokens_per_s"] = spread_json(Spread::of(r.cold_tps));
    }
    j["machine_load"] = load_json(r.load);
    j["unreliable"] = r.unreliable();
    j["ranks"] = r.ranks;
    if (r.ranks > 1) {
        // Per token and MoE layer over the timed repetitions: what this rank sent and received, and the exchange's
        // time (the wait for the slowest rank included).
        const auto per_token_layer = [&](const ExchangeStats& e, uint64_t tokens) {
            const double units = double(std::max<uint64_t>(tokens * r.moe_layers, 1));
            return json{{"bytes_sent_per_token_layer", double(e.bytes_sent) / units},
                        {"bytes_received_per_token_layer", double(e.bytes_received) / units},
                        {"exchange_us_per_layer_step", e.exchanges ? double(e.wait_ns) * 1e-3 / double(e.exchanges) : 0.0},
                        {"exchanges", e.exchanges}};
        };
        j["exchange"] = {{"prompt", per_token_layer(r.prompt_exchange, uint64_t(r.config.prompt_tokens) * r.config.reps)},
                         {"decode", per_token_layer(r.decode_exchange, uint64_t(r.config.decode_tokens) * r.config.reps)},
                         {"hidden", r.hidden}, {"experts_per_token", r.experts_per_token}, {"moe_layers", r.moe_layers}};
    }
    return j;
}

std::string BenchReport::unreliable() const {
    return unreliable_reason(load, {{"prompt tok/s", prompt_tps}, {"decode tok/s", decode_tps}});
}

std::string comparison_unreliable(const std::vector<KernelRun>& runs) {
    if (runs.empty()) return {};
    std::vector<NamedSpread> figures;
    for (const KernelRun& r : runs) {
        const std::string name = kernels::variant_display_name(r.variant);
        figures.push_back({"prompt tok/s of " + name, r.report.prompt_tps});
        figures.push_back({"decode tok/s of " + name, r.report.decode_tps});
    }
    return unreliable_reason(runs.front().report.load, figures);
}

std::string bench_text(const BenchReport& r) {
    char buf[1024];
    std::string out;
    auto line = [&](const char* fmt, auto... args) {
        std::snprintf(buf, sizeof buf, fmt, args...);
        out += buf;
    };
    line("model %s, %u threads, router %s, prefetch %s, huge pages %s\n", r.model_path.c_str(), r.threads,
         router_kind_name(r.config.session.router), r.config.session.prefetch_experts ? "on" : "off",
         r.config.session.huge_pages ? "on" : "off");
    line("prompt  %4u tokens: %8.2f tok/s median (min %.2f, max %.2f) over %u reps, positions %u..%u\n",
         r.config.prompt_tokens, r.prompt_tps.median, r.prompt_tps.min, r.prompt_tps.max, r.config.reps,
         r.prompt_first_position, r.prompt_first_position + r.config.prompt_tokens - 1);
    line("decode  %4u tokens: %8.2f tok/s median (min %.2f, max %.2f), positions %u..%u\n", r.config.decode_tokens,
         r.decode_tps.median, r.decode_tps.min, r.decode_tps.max, r.decode_first_position,
         r.decode_first_position + r.config.decode_tokens - 1);
    if (!r.cold_tps.empty()) {
        const Spread c = Spread::of(r.cold_tps);
        line("cold    %4u tokens: %8.2f tok/s median (min %.2f, max %.2f) over %zu loads\n", r.config.cold_tokens, c.median,
             c.min, c.max, r.cold_tps.size());
    }
    if (const auto& c = r.expert_cache)
        line("expert cache: %s, budget %.1f MiB, %u slots per layer; %llu hits, %llu misses, %.1f MiB read\n",
             cache_policy_name(c->policy), double(c->ram_budget) / double(1 << 20), c->slots_per_layer,
             static_cast<unsigned long long>(c->totals.hits), static_cast<unsigned long long>(c->totals.misses),
             double(c->totals.bytes_read) / double(1 << 20));
    std::string kernels;
    for (const auto& [type, v] : r.kernels) kernels += (kernels.empty() ? "" : ", ") + type + " " + v.first + "/" + v.second;
    line("kernels (matvec/matmul): %s\n", kernels.c_str());
    if (!r.decode_layers.empty()) {
        std::string layers;
        double sum = 0;
        for (const LayerTimes& l : r.decode_layers) {
            std::snprintf(buf, sizeof buf, "%sL%u %.1f", layers.empty() ? "" : ", ", l.layer, l.total_us());
            layers += buf;
            sum += l.total_us();
        }
        line("decode time per token (one observed run after the timed ones): %.1f us = layers %.1f (%s) + lm head "
             "%.1f + other %.1f\n",
             r.decode_token_us, sum, layers.c_str(), r.decode_lm_head_us,
             std::max(0.0, r.decode_token_us - sum - r.decode_lm_head_us));
    }
    line("bytes per decoded token: %.2f MB (attention %.2f, router %.3f, experts %.2f, shared %.2f, dense %.2f, "
         "lm head %.2f, embedding row %.4f, norms %.4f)\n",
         r.bytes.total() / 1e6, r.bytes.attention / 1e6, r.bytes.router / 1e6, r.bytes.experts / 1e6,
         r.bytes.shared_expert / 1e6, r.bytes.dense_ffn / 1e6, r.bytes.lm_head / 1e6, r.bytes.embedding / 1e6,
         r.bytes.norms / 1e6);
    std::string patterns;
    for (const auto& [pattern, spread] : r.bandwidth.by_pattern) {
        std::snprintf(buf, sizeof buf, "%s%s: %.2f", patterns.empty() ? "" : ", ", pattern.name().c_str(), spread.median);
        patterns += buf;
    }
    line("memory bandwidth: %.2f GB/s median (min %.2f, max %.2f; %zu MiB read, %u threads, streams per thread %s; "
         "medians by pattern %s)\n",
         r.bandwidth.best.median, r.bandwidth.best.min, r.bandwidth.best.max, r.bandwidth_buffer >> 20, r.threads,
         r.bandwidth.best_pattern.name().c_str(), patterns.c_str());
    line("roofline: %.2f tok/s; decode reaches %.1f%% (median of the repetitions, each against the bandwidth "
         "measured either side of it; %.1f%% median against median)\n",
         r.roofline_tps(), 100.0 * r.roofline_fraction(), 100.0 * r.roofline_fraction_of_medians());
    line("machine: %s\n", r.load.describe().c_str());
    if (const std::string why = r.unreliable(); !why.empty()) line("UNRELIABLE: %s\n", why.c_str());
    return out;
}

Result<std::vector<kernels::Variant>> parse_kernel_list(const std::string& list, const std::string& option) {
    std::string runnable;
    for (kernels::Variant v : kernels::supported_variants()) runnable += (runnable.empty() ? "" : ", ") + std::string(kernels::variant_name(v));
    if (list == "all") return kernels::supported_variants();
    std::vector<kernels::Variant> out;
    size_t begin = 0;
    while (begin <= list.size()) {
        const size_t end = std::min(list.find(',', begin), list.size());
        const std::string name = list.substr(begin, end - begin);
        kernels::Variant v{};
        if (!kernels::variant_from_name(name, &v))
            return error(option + ": unknown variant '" + name + "' (all, or some of: scalar, avx2, avx512, neon, neon_translated)");
        if (!kernels::variant_supported(v))
            return error(option + ": " + name + ": this CPU or build cannot run it (it runs " + runnable + ")");
        if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
        begin = end + 1;
    }
    return out;
}

std::string kernel_comparison_text(const std::vector<KernelRun>& runs) {
    if (runs.empty()) return {};
    char buf[512];
    std::string out;
    const BenchReport& base = runs.front().report;
    std::snprintf(buf, sizeof buf, "kernel comparison: %s, %u threads, prompt %u, decode %u tokens, %u reps\n",
                  base.model_path.c_str(), base.threads, base.config.prompt_tokens, base.config.decode_tokens, base.config.reps);
    out += buf;
    std::snprintf(buf, sizeof buf, "%-18s %12s %8s %12s %8s  %s\n", "kernel", "prompt tok/s", "x", "decode tok/s", "x",
                  "decode us per layer (L: total), lm head");
    out += buf;
    for (const KernelRun& r : runs) {
        std::string layers;
        for (const LayerTimes& l : r.report.decode_layers) {
            std::snprintf(buf, sizeof buf, "%sL%u: %.1f", layers.empty() ? "" : ", ", l.layer, l.total_us());
            layers += buf;
        }
        if (!r.report.decode_layers.empty()) {
            std::snprintf(buf, sizeof buf, "; %.1f", r.report.decode_lm_head_us);
            layers += buf;
        }
        std::snprintf(buf, sizeof buf, "%-18s %12.2f %8.2f %12.2f %8.2f  %s\n", kernels::variant_display_name(r.variant),
                      r.report.prompt_tps.median, r.report.prompt_tps.median / base.prompt_tps.median, r.report.decode_tps.median,
                      r.report.decode_tps.median / base.decode_tps.median, layers.c_str());
        out += buf;
    }
    out += "machine: " + base.load.describe() + "\n";
    if (const std::string why = comparison_unreliable(runs); !why.empty()) out += "UNRELIABLE: " + why + "\n";
    for (const KernelRun& r : runs)
        if (r.variant == kernels::Variant::NeonTranslated) out += std::string("note: ") + kNeonTranslatedNote + "\n";
    for (const KernelRun& r : runs) out += "\n== kernel " + std::string(kernels::variant_name(r.variant)) + "\n" + bench_text(r.report);
    return out;
}

json kernel_comparison_json(const std::vector<KernelRun>& runs) {
    json list = json::array();
    for (const KernelRun& r : runs) {
        json j = bench_json(r.report);
        j["kernel"] = kernels::variant_name(r.variant);
        list.push_back(std::move(j));
    }
    return json{{"kernel_comparison", list}, {"unreliable", comparison_unreliable(runs)}};
}

}  // namespace colibri::tools
