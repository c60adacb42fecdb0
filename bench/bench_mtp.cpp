// What the multi-token-prediction head costs beside the model it drafts for (Google Benchmark): one decode step of
// the model without the head, the same step with the head following it (its layer on the step's row), and one to
// three greedy drafts, all at the same position of a 64-token prompt (each iteration is undone with truncate).
// The model is any .bin with a head, e.g. a glm4_moe one from colibri-make-model --mtp-layers 1:
//   COLIBRI_MTP_BENCH_MODEL=m.bin build/bench/bench_mtp --benchmark_repetitions=5 --benchmark_report_aggregates_only
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "engine/core/model.h"
#include "engine/core/session.h"
#include "engine/core/thread_pool.h"

namespace {

using namespace colibri;

struct Fixture {
    std::unique_ptr<Model> model;
    std::unique_ptr<ThreadPool> pool;
    std::vector<int32_t> prompt;
};

Fixture& fixture() {
    static Fixture f = [] {
        Fixture x;
        const char* path = std::getenv("COLIBRI_MTP_BENCH_MODEL");
        if (path == nullptr) return x;
        auto m = Model::load(path);
        if (!m) {
            std::fprintf(stderr, "bench_mtp: %s\n", m.message().c_str());
            return x;
        }
        x.model = std::move(m.value());
        const char* threads = std::getenv("COLIBRI_THREADS");
        auto p = ThreadPool::create(threads ? unsigned(std::atoi(threads)) : 0);
        if (p) x.pool = std::move(p.value());
        for (uint32_t i = 0; i < 64; ++i) x.prompt.push_back(int32_t((i * 7919 + 13) % x.model->hparams().vocab_size));
        return x;
    }();
    return f;
}

// A session at position 64 of the prompt; false (and the benchmark skipped) without a model with a head.
std::unique_ptr<Session> prepared(benchmark::State& state, bool mtp) {
    Fixture& f = fixture();
    if (!f.model || !f.pool || f.model->mtp_layers().empty()) {
        state.SkipWithError("set COLIBRI_MTP_BENCH_MODEL to a .bin with an MTP head");
        return nullptr;
    }
    SessionOptions o = SessionOptions::from_environment();
    o.mtp = mtp;
    auto s = std::make_unique<Session>(*f.model, *f.pool, 256, o);
    if (!s->eval(f.prompt)) state.SkipWithError("prompt failed");
    return s;
}

void decode_step(benchmark::State& state, bool mtp) {
    auto s = prepared(state, mtp);
    if (!s) return;
    for (auto _ : state) {
        auto r = s->eval(int32_t(5));
        benchmark::DoNotOptimize(r);
        if (!s->truncate(64)) state.SkipWithError("truncate failed");
    }
}

void BM_decode_step(benchmark::State& state) { decode_step(state, false); }
void BM_decode_step_with_head(benchmark::State& state) { decode_step(state, true); }

void BM_mtp_draft(benchmark::State& state) {
    auto s = prepared(state, true);
    if (!s) return;
    std::vector<int32_t> drafts(size_t(state.range(0)));
    for (auto _ : state) {
        auto k = s->mtp_draft(5, drafts);
        benchmark::DoNotOptimize(k);
    }
}

BENCHMARK(BM_decode_step)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_decode_step_with_head)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_mtp_draft)->Arg(1)->Arg(2)->Arg(3)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
