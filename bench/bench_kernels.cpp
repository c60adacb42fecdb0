// Google Benchmark micro-benchmarks of the kernel variants: matvec and matmul per weight type, variant, shape
// and thread count (threads split the rows as the engine's pool does). Not run by ctest; `colibri tune`
// measures the same kernels single-threaded for the dispatch choice.
//   build/bench/bench_kernels --benchmark_filter='matvec/q8_0/.*/2816x1024/t2'
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/thread_pool.h"
#include "kernels/matvec.h"
#include "kernels/random_blocks.h"
#include "kernels/registry.h"
#include "kernels/tuner.h"

namespace {

using namespace colibri;
using namespace colibri::kernels;

struct Matrix {
    std::vector<uint8_t> bytes;
};

// Deterministic weights with realistic scales (kernels/random_blocks.h); one matrix per (type, shape), shared by
// all benchmarks.
const std::vector<uint8_t>& matrix(WeightType type, size_t rows, size_t cols) {
    static std::map<std::tuple<int, size_t, size_t>, std::unique_ptr<Matrix>> cache;
    auto& slot = cache[{int(type), rows, cols}];
    if (!slot) {
        slot = std::make_unique<Matrix>();
        std::vector<uint8_t>& m = slot->bytes;
        m.resize(row_bytes(type, cols) * rows);
        random_matrix(type, rows, cols, 0.5f, rows * 131 + cols, m.data());
    }
    return slot->bytes;
}

ThreadPool& pool(unsigned threads) {
    static std::map<unsigned, std::unique_ptr<ThreadPool>> pools;
    auto& p = pools[threads];
    if (!p) p = std::make_unique<ThreadPool>(threads);
    return *p;
}

void run(benchmark::State& state, Op op, WeightType type, Variant variant, size_t rows, size_t cols, unsigned threads,
         size_t n) {
    const std::vector<uint8_t>& w = matrix(type, rows, cols);
    const KernelSet* k = kernel_set(variant);
    std::vector<float> x(cols * n, 0.5f), y(rows * n);
    ThreadPool& p = pool(threads);
    for (auto _ : state) {
        p.parallel_for(rows, 16, [&](size_t b, size_t e) {
            if (op == Op::Matvec) k->matvec[size_t(type)](w.data(), cols, x.data(), y.data() + b, b, e);
            else k->matmul[size_t(type)](w.data(), cols, x.data(), n, y.data() + b, rows, b, e);
        });
        benchmark::DoNotOptimize(y.data());
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(w.size()));
    state.counters["GFLOP/s"] = benchmark::Counter(2.0 * double(rows) * double(cols) * double(n) * double(state.iterations()),
                                                   benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

constexpr size_t kDramBytes = size_t(256) << 20;

// Distinct copies of one expert-shaped matrix, kDramBytes in all, so that consecutive iterations never find
// their weights in cache.
const std::vector<uint8_t>& dram_matrices(WeightType type, size_t rows, size_t cols, size_t* copies) {
    static std::map<int, std::unique_ptr<Matrix>> cache;
    const std::vector<uint8_t>& one = matrix(type, rows, cols);
    *copies = std::max<size_t>(1, kDramBytes / one.size());
    auto& slot = cache[int(type)];
    if (!slot) {
        slot = std::make_unique<Matrix>();
        slot->bytes.resize(one.size() * *copies);
        for (size_t c = 0; c < *copies; ++c) std::memcpy(slot->bytes.data() + c * one.size(), one.data(), one.size());
    }
    return slot->bytes;
}

void run_dram(benchmark::State& state, WeightType type, Variant variant, unsigned threads) {
    constexpr size_t rows = 2816, cols = 1024;
    size_t copies = 0;
    const std::vector<uint8_t>& all = dram_matrices(type, rows, cols, &copies);
    const size_t bytes = all.size() / copies;
    const KernelSet* k = kernel_set(variant);
    std::vector<float> x(cols, 0.5f), y(rows);
    ThreadPool& p = pool(threads);
    size_t next = 0;
    for (auto _ : state) {
        const uint8_t* w = all.data() + next * bytes;
        next = (next + 1) % copies;
        p.parallel_for(rows, 16, [&](size_t b, size_t e) { k->matvec[size_t(type)](w, cols, x.data(), y.data() + b, b, e); });
        benchmark::DoNotOptimize(y.data());
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(bytes));
}

void run_read(benchmark::State& state, size_t streams, bool prefetch, unsigned threads) {
    static std::vector<uint8_t> buffer(kDramBytes, 1);
    ThreadPool& p = pool(threads);
    std::vector<uint64_t> sums(threads);
    for (auto _ : state) {
        p.parallel_for(threads, 1, [&](size_t pb, size_t pe) {
            for (size_t part = pb; part < pe; ++part) {
                const size_t b = kDramBytes * part / threads / 64 * 64, e = kDramBytes * (part + 1) / threads / 64 * 64;
                sums[part] += stream_sum(buffer.data() + b, e - b, streams, prefetch);
            }
        });
        benchmark::DoNotOptimize(sums.data());
    }
    state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(kDramBytes));
}

// One hand-off of the engine's pool with nothing to do but write a slot of the part's own: what each of a
// decode token's ~40 hand-offs costs in cache-line transfers and wake-ups. Balanced jobs also time their
// parts and move the split.
void run_handoff(benchmark::State& state, ThreadPool::Split split, unsigned threads) {
    ThreadPool& p = pool(threads);
    struct alignas(64) Slot {
        size_t items = 0;
    };
    std::vector<Slot> slots(threads);
    const size_t n = ThreadPool::kBalancedMinItems;
    for (auto _ : state) {
        p.parallel_for(n, 1, [&](size_t b, size_t e) { slots[b * threads / n].items += e - b; }, split);
        benchmark::ClobberMemory();
    }
    benchmark::DoNotOptimize(slots.data());
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<WeightType> types;  // the weight-type table's matrix rows
    for (const WeightTypeInfo& w : weight_types())
        if (w.matrix) types.push_back(w.type);
    // Mixtral-like expert and head shapes; gpt-oss-20b's expert shape (2 x 2880 rows of fused gate/up, 2880 columns:
    // block types of 32 only).
    const std::pair<size_t, size_t> shapes[] = {{1024, 1024}, {2816, 1024}, {1024, 2816}, {32000, 1024}, {5760, 2880}};
    for (Op op : {Op::Matvec, Op::Matmul}) {
        for (WeightType t : types) {
            for (Variant v : supported_variants()) {
                for (const auto& shape : shapes) {
                    const size_t rows = shape.first, cols = shape.second;  // named copies: clang 14 cannot capture bindings
                    if (cols % weight_type_info(t).block_values) continue;
                    for (unsigned threads : {1u, 2u}) {
                        const size_t n = op == Op::Matvec ? 1 : 16;
                        const std::string name = std::string(op_name(op)) + "/" + weight_type_label(t) + "/" +
                                                 variant_name(v) + "/" + std::to_string(rows) + "x" +
                                                 std::to_string(cols) + "/t" + std::to_string(threads);
                        benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) {
                            run(s, op, t, v, rows, cols, threads, n);
                        })->UseRealTime()->Unit(benchmark::kMicrosecond);
                    }
                }
            }
        }
    }
    for (WeightType t : types)
        for (Variant v : supported_variants()) {
            const std::string name = std::string("matvec_dram/") + weight_type_label(t) + "/" + variant_name(v) + "/t2";
            benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) { run_dram(s, t, v, 2); })
                ->UseRealTime()
                ->Unit(benchmark::kMicrosecond);
        }
    for (const auto& [label, split_kind] : {std::pair{"equal", ThreadPool::Split::Equal}, std::pair{"balanced", ThreadPool::Split::Balanced}}) {
        const std::string name = std::string("pool_handoff/") + label + "/t2";
        const ThreadPool::Split split = split_kind;  // a named copy: clang 14 cannot capture a structured binding
        benchmark::RegisterBenchmark(name.c_str(), [split](benchmark::State& s) { run_handoff(s, split, 2); })
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
    }
    for (size_t streams : {1, 2, 4})
        for (bool prefetch : {false, true}) {
            const std::string name = "read/" + std::to_string(streams) + (prefetch ? "+prefetch" : "") + "/t2";
            benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) { run_read(s, streams, prefetch, 2); })
                ->UseRealTime()
                ->Unit(benchmark::kMillisecond);
        }
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
