// `colibri bench`: prompt and decode tokens/s, bytes per token, memory bandwidth and roofline (tools/bench.h).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "command.h"
#include "engine/distributed/launch.h"
#include "engine/core/router.h"
#include "kernels/registry.h"
#include "model_options.h"
#include "tools/bench.h"
#include "tools/bench_speculation.h"

namespace colibri::cli {

namespace {

using nlohmann::json;

struct BenchArgs {
    tools::BenchConfig config;
    std::string router = "exact";
    std::string kernel;  // --kernel: one variant, a list or "all" (a comparison)
    bool no_prefetch = false, prefetch = false, huge_pages = false, no_huge_pages = false;
    size_t bandwidth_mib = 0;
    std::string speculate = "off";
    tools::SpeculationBenchConfig speculation;
};

// --speculate: the summarise-and-edit workload with and without drafts (tools/bench_speculation.h).
Result<tools::SpeculationBench> speculation_run(const tools::ModelArgs& args, const BenchArgs& ba) {
    auto l = load(args);
    if (!l) return l.status();
    tools::SpeculationBenchConfig config = ba.speculation;
    config.mode = parse_speculate_mode(ba.speculate).value();
    config.decode_tokens = ba.config.decode_tokens;
    config.reps = ba.config.reps;
    return tools::bench_speculation(*l->model, *l->pool, ba.config.session, config);
}

int cmd_bench(const tools::ModelArgs& args, BenchArgs& ba, bool as_json) {
    if (args.path.empty()) return fail("bench", "no model given (use -m model.bin)");
    auto mode = parse_speculate_mode(ba.speculate);
    if (!mode) return fail("bench", mode.message());
    // Under mpirun every rank runs the same bench in step, its experts spread (rank 0 reports).
    std::unique_ptr<Communicator> comm;
    if (launched_ranks() > 1) {
        if (mode.value() != SpeculateMode::Off) return fail("bench", "under mpirun, bench measures plain decoding (no --speculate)");
        auto made = communicator_from_environment();
        if (!made) return fail("bench", made.message());
        comm = std::move(made.value());
        if (!(args.rank_timeout_s > 0 && args.rank_timeout_s <= 86400)) return fail("bench", "--rank-timeout must be in (0, 86400] seconds");
        ba.config.ranks = RankRequest{args.placement, std::chrono::milliseconds(static_cast<int64_t>(args.rank_timeout_s * 1000)), comm.get()};
        if (comm->rank() != 0 && std::freopen("/dev/null", "w", stdout) == nullptr) return fail("bench", "cannot silence stdout");
    } else if (!args.placement.empty()) {
        return fail("bench", "--placement: this is one process (start the ranks with mpirun -np N)");
    }
    if (mode.value() != SpeculateMode::Off) {  // a model that cannot draft so fails before the bench runs
        auto l = load(args);
        if (!l) return fail("bench", l.message());
        if (auto drafter = make_drafter(mode.value(), *l->model); !drafter) return fail("bench", drafter.message());
    }
    const std::optional<RouterKind> kind = parse_router_kind(ba.router);
    if (!kind) return fail("bench", "unknown router '" + ba.router + "' (exact or lut)");
    SessionOptions& so = ba.config.session;
    so = SessionOptions::from_environment();
    so.router = *kind;
    if (ba.prefetch) so.prefetch_experts = true;
    if (ba.no_prefetch) so.prefetch_experts = false;
    if (ba.huge_pages) so.huge_pages = true;
    if (ba.no_huge_pages) so.huge_pages = false;
    ba.config.bandwidth_buffer = ba.bandwidth_mib << 20;
    ba.config.context = args.context;
    auto cache = tools::expert_cache_request(args);
    if (!cache) return fail("bench", cache.message());
    ba.config.cache = std::move(cache.value());
    if (!ba.kernel.empty()) {
        auto variants = tools::parse_kernel_list(ba.kernel);
        if (!variants) return fail("bench", variants.message());
        std::vector<tools::KernelRun> runs;
        for (kernels::Variant v : variants.value()) {
            kernels::select_variant(v);  // every op and type, as COLIBRI_KERNEL=v would
            auto report = tools::run_bench(args.path, args.threads, ba.config);
            if (!report) return fail("bench", report.message());
            runs.push_back({v, std::move(report.value())});
        }
        if (runs.size() == 1 && !as_json) std::fputs(tools::bench_text(runs.front().report).c_str(), stdout);
        else if (runs.size() == 1) std::printf("%s\n", tools::bench_json(runs.front().report).dump(2).c_str());
        else if (as_json) std::printf("%s\n", tools::kernel_comparison_json(runs).dump(2).c_str());
        else std::fputs(tools::kernel_comparison_text(runs).c_str(), stdout);
        return 0;
    }
    auto report = tools::run_bench(args.path, args.threads, ba.config);
    if (!report) return fail("bench", report.message());
    std::optional<tools::SpeculationBench> speculation;
    if (mode.value() != SpeculateMode::Off) {
        auto run = speculation_run(args, ba);
        if (!run) return fail("bench", run.message());
        speculation = std::move(run.value());
    }
    if (as_json) {
        json j = tools::bench_json(report.value());
        if (speculation) j["speculation"] = tools::speculation_bench_json(*speculation);
        std::printf("%s\n", j.dump(2).c_str());
    } else {
        std::fputs(tools::bench_text(report.value()).c_str(), stdout);
        if (speculation) std::fputs(tools::speculation_bench_text(*speculation).c_str(), stdout);
    }
    return 0;
}

class Bench final : public Command {
public:
    explicit Bench(CLI::App& app) {
        sub_ = app.add_subcommand("bench", "prompt and decode tokens/s, bytes per token, memory bandwidth, roofline");
        sub_->add_option("-m,--model", args_.path, "model file (.bin)")->required();
        sub_->add_option("-t,--threads", args_.threads, "worker threads (default: all cores)");
        sub_->add_option("-c,--context", args_.context, "KV cache size in tokens (default: what -d, -p and -n need)");
        add_budget_args(sub_, args_);
        add_rank_args(sub_, args_);
        sub_->add_option("--kernel", bench_.kernel,
                         "kernel variant for every op and type: scalar, avx2, avx512, neon, neon_translated; a comma "
                         "list or 'all' runs the bench once per variant and compares them");
        sub_->add_option("-p,--prompt-tokens", bench_.config.prompt_tokens, "prompt length in tokens (default 128)");
        sub_->add_option("-n,--decode-tokens", bench_.config.decode_tokens, "tokens to decode (default 128)");
        sub_->add_option("-d,--depth", bench_.config.depth,
                         "tokens of context before the timed prompt and decode (default 0, as llama-bench -d)");
        sub_->add_option("-r,--reps", bench_.config.reps, "repetitions (default 5), after one warm-up");
        sub_->add_option("--cold", bench_.config.cold_reps, "also time N cold starts (page cache of the file dropped)");
        sub_->add_option("--cold-tokens", bench_.config.cold_tokens, "decode steps timed per cold start (default 16)");
        sub_->add_option("--chunk", bench_.config.session.chunk, "prompt tokens per batched chunk (default 64)");
        sub_->add_option("--router", bench_.router, "router: exact (default) or lut");
        sub_->add_option("--bandwidth-mib", bench_.bandwidth_mib, "MiB the bandwidth benchmark reads (default: max(1 GiB, 4 x LLC))");
        sub_->add_flag("--prefetch", bench_.prefetch, "madvise(WILLNEED) experts ahead of use");
        sub_->add_flag("--no-prefetch", bench_.no_prefetch, "no expert prefetch");
        sub_->add_flag("--huge-pages", bench_.huge_pages, "transparent huge pages for the KV cache and activations");
        sub_->add_flag("--no-huge-pages", bench_.no_huge_pages, "no huge pages");
        add_speculate_arg(sub_, bench_.speculate);
        sub_->add_option("--speculate-text", bench_.speculation.text_path,
                         "text of --speculate's summarise-and-edit workload (default " + std::string(tools::kSpeculationText) + ")");
        sub_->add_flag("--json", as_json_, "JSON output");
    }
    int run() override { return cmd_bench(args_, bench_, as_json_); }

private:
    tools::ModelArgs args_;
    BenchArgs bench_;
    bool as_json_ = false;
};

}  // namespace

std::unique_ptr<Command> bench_command(CLI::App& app) { return std::make_unique<Bench>(app); }

}  // namespace colibri::cli
