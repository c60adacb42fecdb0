// Batched prompt evaluation equals token-by-token evaluation bit for bit: the logits after the prompt and
// every position's routing record (experts, weights, router logits and probabilities), for every family and
// weight type, for chunk sizes that do and do not divide the prompt, and for one and two threads. The session
// options that must not change numbers (expert prefetch, huge pages) do not, and their parts work; the KV
// cache becomes resident as positions fill, not when a session starts.
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>
#include <cstring>
#include <random>
#include <unistd.h>

#include "../test_support.h"
#include "engine/core/activation_buffer.h"
#include "engine/core/model.h"
#include "engine/cache/prefetch.h"
#include "engine/core/session.h"

using namespace colibri;
using namespace colibri::test;

namespace {

struct RoutingCopy {
    uint32_t layer, position;
    std::vector<int32_t> experts;
    std::vector<float> weights, logits, probs;
};

struct Recorder : TraceObserver {
    std::vector<RoutingCopy> routing;
    std::vector<LayerTiming> timing;
    void on_routing(const RoutingRecord& r) override {
        routing.push_back({r.layer, r.position, {r.experts.begin(), r.experts.end()}, {r.weights.begin(), r.weights.end()},
                           {r.router_logits.begin(), r.router_logits.end()}, {r.router_probs.begin(), r.router_probs.end()}});
    }
    void on_layer_timing(const LayerTiming& t) override { timing.push_back(t); }
    // Batched eval delivers records layer by layer: order them as token-by-token eval does.
    void sort() {
        std::stable_sort(routing.begin(), routing.end(), [](const RoutingCopy& a, const RoutingCopy& b) {
            return std::tie(a.position, a.layer) < std::tie(b.position, b.layer);
        });
    }
};

template <typename T>
bool bit_equal(const std::vector<T>& a, const std::vector<T>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

struct Run {
    std::vector<float> logits;
    Recorder trace;
};

// Evaluates ids with the given chunk size and thread count; one_by_one feeds them through eval(token).
Run evaluate(const Model& model, const std::vector<int32_t>& ids, uint32_t chunk, unsigned threads, bool one_by_one) {
    ThreadPool pool(threads);
    SessionOptions options;
    options.chunk = chunk;
    Session s(model, pool, 0, options);
    Run run;
    s.set_observer(&run.trace);
    Result<std::span<const float>> r = error("not run");
    if (one_by_one) {
        for (int32_t id : ids) r = s.eval(id);
    } else {
        r = s.eval(std::span<const int32_t>(ids));
    }
    if (r.is_ok()) run.logits.assign(r->begin(), r->end());
    run.trace.sort();
    return run;
}

// The process's resident memory (/proc/self/statm's second field, in pages).
size_t resident_bytes() {
    QFile f("/proc/self/statm");
    if (!f.open(QIODevice::ReadOnly)) return 0;
    const QList<QByteArray> fields = f.readAll().split(' ');
    return fields.size() > 1 ? size_t(fields[1].toULongLong()) * size_t(sysconf(_SC_PAGESIZE)) : 0;
}

}  // namespace

class TestBatchedEval : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

    std::unique_ptr<Model> convert(const QString& family, const QString& type) {
        const QString path = dir_.filePath(family + "-" + type + ".bin");
        const CliResult r = run_cli({"convert", reference("hf/" + family + "/model"), "-o", path, "--type", type, "-q"});
        if (r.exit_code != 0) qWarning("convert: %s", r.err.constData());
        auto m = Model::load(path.toStdString());
        return m.is_ok() ? std::move(m.value()) : nullptr;
    }

    // The 16 reference ids, then deterministic random ones: 45 tokens cross several chunk boundaries.
    std::vector<int32_t> prompt(const QString& family, uint32_t vocab) {
        std::vector<int32_t> ids;
        for (const auto& v : read_json(reference("hf/" + family + "/ref/input_ids.json")).array()) ids.push_back(v.toInt());
        std::mt19937 rng(7);
        while (ids.size() < 45) ids.push_back(static_cast<int32_t>(rng() % vocab));
        return ids;
    }

private slots:
    void batched_equals_token_by_token_data() {
        QTest::addColumn<QString>("family");
        QTest::addColumn<QString>("type");
        // The newer families too: gpt_oss's sliding layers keep a ring of their window plus a chunk, which wraps
        // differently for each chunk size; deepseek_v3's latent attention caches latents.
        for (const char* family : {"mixtral", "qwen2_moe", "olmoe", "qwen3_moe", "gpt_oss", "deepseek_v3", "glm4_moe", "qwen3_next", "qwen3_5_moe"})
            for (const char* type : {"f32", "f16", "bf16", "q8_0", "q4_k", "q4_0"})
                QTest::newRow(qPrintable(QString("%1-%2").arg(family, type))) << QString(family) << QString(type);
    }

    void batched_equals_token_by_token() {
        QFETCH(QString, family);
        QFETCH(QString, type);
        auto model = convert(family, type);
        QVERIFY(model);
        const std::vector<int32_t> ids = prompt(family, model->hparams().vocab_size);
        const Run want = evaluate(*model, ids, 1, 1, true);
        QCOMPARE(want.logits.size(), size_t(model->hparams().vocab_size));
        QCOMPARE(want.trace.routing.size(), ids.size() * model->moe_layer_count());

        struct Case {
            uint32_t chunk;
            unsigned threads;
        };
        for (const Case c : {Case{64, 1}, Case{64, 2}, Case{16, 2}, Case{7, 1}, Case{7, 2}, Case{1, 2}}) {
            const Run got = evaluate(*model, ids, c.chunk, c.threads, false);
            const QByteArray where = QString("chunk %1, %2 threads").arg(c.chunk).arg(c.threads).toUtf8();
            QVERIFY2(bit_equal(got.logits, want.logits), where.constData());
            QCOMPARE(got.trace.routing.size(), want.trace.routing.size());
            for (size_t i = 0; i < want.trace.routing.size(); ++i) {
                const RoutingCopy &g = got.trace.routing[i], &w = want.trace.routing[i];
                QCOMPARE(g.layer, w.layer);
                QCOMPARE(g.position, w.position);
                QVERIFY2(g.experts == w.experts && bit_equal(g.weights, w.weights) && bit_equal(g.logits, w.logits) &&
                             bit_equal(g.probs, w.probs),
                         qPrintable(QString("%1: layer %2 position %3").arg(where.constData()).arg(w.layer).arg(w.position)));
            }
            // One timing record per token and layer, whatever the chunking.
            QCOMPARE(got.trace.timing.size(), ids.size() * model->hparams().n_layers);
        }
    }

    void sequences_batched_equal_each_alone_data() {
        QTest::addColumn<QString>("family");
        QTest::addColumn<QString>("type");
        for (const char* family : {"mixtral", "qwen2_moe", "olmoe", "qwen3_moe", "gpt_oss", "deepseek_v3", "glm4_moe", "qwen3_next", "qwen3_5_moe"})
            for (const char* type : {"f32", "q4_k"})
                QTest::newRow(qPrintable(QString("%1-%2").arg(family, type))) << QString(family) << QString(type);
    }

    void sequences_batched_equal_each_alone() {
        // Continuous batching (Session::eval_batch): three sequences at different points (one decoding after 20
        // tokens, one in the middle of its prompt, one just starting) go through forward passes together. Each
        // one's logits and routing are bit for bit what the same tokens give its session alone.
        QFETCH(QString, family);
        QFETCH(QString, type);
        auto model = convert(family, type);
        QVERIFY(model);
        const std::vector<int32_t> ids = prompt(family, model->hparams().vocab_size);
        const std::span<const int32_t> all(ids);
        // Each sequence's steps: what it feeds at each of three forward passes.
        struct Plan {
            std::vector<std::span<const int32_t>> steps;
        };
        const Plan plans[3] = {
            {{all.subspan(0, 20), all.subspan(20, 1), all.subspan(21, 1), all.subspan(22, 1)}},
            {{all.subspan(0, 5), all.subspan(5, 12), all.subspan(17, 9), all.subspan(26, 1)}},
            {{all.subspan(30, 1), all.subspan(31, 3), all.subspan(34, 1), all.subspan(35, 1)}},
        };
        ThreadPool pool(2);
        Recorder alone_trace[3], batch_trace[3];
        std::vector<float> alone_logits[3];
        for (int q = 0; q < 3; ++q) {
            Session s(*model, pool);
            s.set_observer(&alone_trace[q]);
            for (auto step : plans[q].steps) {
                auto r = s.eval(step);
                QVERIFY2(r.is_ok(), r.message().c_str());
                alone_logits[q].assign(r->begin(), r->end());
            }
        }
        std::vector<std::unique_ptr<Session>> sessions;
        for (int q = 0; q < 3; ++q) {
            sessions.push_back(std::make_unique<Session>(*model, pool));
            sessions.back()->set_observer(&batch_trace[q]);
        }
        // The first step is each sequence's own (a long prompt is evaluated before it joins); then together, in
        // a different order each time so that every sequence is once the lead whose buffers hold the step.
        for (int q = 0; q < 3; ++q) QVERIFY(sessions[q]->eval(plans[q].steps[0]).is_ok());
        const int orders[3][3] = {{0, 1, 2}, {2, 0, 1}, {1, 2, 0}};
        for (int step = 1; step < 4; ++step) {
            std::vector<Session::BatchPart> parts;
            for (int q : orders[step - 1]) parts.push_back({sessions[q].get(), plans[q].steps[step]});
            const Status st = Session::eval_batch(parts);
            QVERIFY2(st.is_ok(), st.message().c_str());
        }
        for (int q = 0; q < 3; ++q) {
            const QByteArray where = QString("sequence %1").arg(q).toUtf8();
            const std::span<const float> got = sessions[q]->logits();
            QVERIFY2(bit_equal(std::vector<float>(got.begin(), got.end()), alone_logits[q]), where.constData());
            alone_trace[q].sort();
            batch_trace[q].sort();
            QCOMPARE(batch_trace[q].routing.size(), alone_trace[q].routing.size());
            for (size_t i = 0; i < alone_trace[q].routing.size(); ++i) {
                const RoutingCopy &g = batch_trace[q].routing[i], &w = alone_trace[q].routing[i];
                QCOMPARE(g.position, w.position);
                QCOMPARE(g.layer, w.layer);
                QVERIFY2(g.experts == w.experts && bit_equal(g.weights, w.weights) && bit_equal(g.probs, w.probs), where.constData());
            }
            QCOMPARE(batch_trace[q].timing.size(), alone_trace[q].timing.size());
            size_t fed = 0;
            for (auto step : plans[q].steps) fed += step.size();
            QCOMPARE(size_t(sessions[q]->position()), fed);
        }
    }

    void a_bad_batch_evaluates_nothing() {
        auto model = convert("olmoe", "f32");
        QVERIFY(model);
        ThreadPool pool(1), other_pool(1);
        SessionOptions options;
        options.chunk = 4;
        Session a(*model, pool, 16, options), b(*model, pool, 16, options), c(*model, other_pool, 16, options);
        const std::vector<int32_t> good{1, 2}, bad{3, int32_t(model->hparams().vocab_size)}, five{1, 2, 3, 4, 5};
        auto refused = [&](std::vector<Session::BatchPart> parts, const char* why) {
            const Status s = Session::eval_batch(parts);
            return !s.is_ok() && QString::fromStdString(s.message()).contains(why) && a.position() == 0 && b.position() == 0 &&
                   c.position() == 0;
        };
        QVERIFY(refused({}, "no sequences"));
        QVERIFY(refused({{&a, good}, {&b, bad}}, "out of range"));
        QVERIFY(refused({{&a, good}, {&a, good}}, "twice"));
        QVERIFY(refused({{&a, good}, {&c, good}}, "share one model and thread pool"));
        QVERIFY(refused({{&a, good}, {&b, five}}, "chunk capacity of 4"));
        QVERIFY(refused({{&a, good}, {&b, {}}}, "without a session or tokens"));
        QVERIFY(Session::eval_batch(std::vector<Session::BatchPart>{{&a, good}, {&b, good}}).is_ok());
        QCOMPARE(a.position(), 2u);
        QCOMPARE(b.position(), 2u);
    }

    void batched_continues_after_truncate() {
        auto model = convert("qwen2_moe", "q8_0");
        QVERIFY(model);
        const std::vector<int32_t> ids = prompt("qwen2_moe", model->hparams().vocab_size);
        const Run want = evaluate(*model, ids, 1, 1, true);
        ThreadPool pool(2);
        SessionOptions options;
        options.chunk = 8;
        Session s(*model, pool, 0, options);
        QVERIFY(s.eval(std::span<const int32_t>(ids.data(), 20)).is_ok());
        const std::vector<int32_t> detour{5, 6, 7, 8, 9, 10, 11, 12, 13};
        QVERIFY(s.eval(std::span<const int32_t>(detour)).is_ok());
        QVERIFY(s.truncate(20).is_ok());
        auto r = s.eval(std::span<const int32_t>(ids.data() + 20, ids.size() - 20));
        QVERIFY(r.is_ok());
        QVERIFY(std::memcmp(r->data(), want.logits.data(), want.logits.size() * sizeof(float)) == 0);
    }

    void bad_input_evaluates_nothing() {
        auto model = convert("olmoe", "f32");
        QVERIFY(model);
        ThreadPool pool(1);
        Session s(*model, pool, 8);
        const std::vector<int32_t> bad{1, 2, int32_t(model->hparams().vocab_size)};
        auto r = s.eval(std::span<const int32_t>(bad));
        QVERIFY(!r.is_ok());
        QVERIFY(QString::fromStdString(r.message()).contains("out of range"));
        QCOMPARE(s.position(), 0u);
        const std::vector<int32_t> long_prompt(9, 1);
        r = s.eval(std::span<const int32_t>(long_prompt));
        QVERIFY(!r.is_ok());
        QVERIFY(QString::fromStdString(r.message()).contains("context full"));
        QCOMPARE(s.position(), 0u);
    }

    void options_switches_change_nothing_numerically() {
        auto model = convert("mixtral", "f16");
        QVERIFY(model);
        const std::vector<int32_t> ids = prompt("mixtral", model->hparams().vocab_size);
        const Run want = evaluate(*model, ids, 1, 1, true);
        ThreadPool pool(2);
        SessionOptions options;
        options.prefetch_experts = true;
        options.huge_pages = true;
        Session s(*model, pool, 0, options);
        auto r = s.eval(std::span<const int32_t>(ids));
        QVERIFY(r.is_ok());
        QVERIFY(std::memcmp(r->data(), want.logits.data(), want.logits.size() * sizeof(float)) == 0);
    }

    void huge_page_buffers_are_aligned() {
        ActivationBuffer<float> big{ActivationAllocator<float>(true)};
        big.resize(3 << 20);  // 12 MiB
        QCOMPARE(reinterpret_cast<uintptr_t>(big.data()) % activation_memory::kHugePage, uintptr_t(0));
        ActivationBuffer<float> small{ActivationAllocator<float>(true)};
        small.resize(16);
        small[15] = 1.0f;
        ActivationBuffer<float> copy = big;  // the allocator (and its choice) travels with the buffer
        QVERIFY(copy.get_allocator().huge_pages());
        QCOMPARE(copy.size(), big.size());
    }

    // Buffers on small pages start on a 64-byte cache line, whatever their size (operator new's large blocks
    // begin 16 bytes into a page), so that no 512-bit load of an activation vector straddles two lines.
    void small_page_buffers_start_on_a_cache_line() {
        for (size_t n : {size_t(1), size_t(16), size_t(1000), size_t(3) << 20}) {
            ActivationBuffer<float> b{ActivationAllocator<float>(false)};
            b.resize(n);
            QCOMPARE(reinterpret_cast<uintptr_t>(b.data()) % 64, uintptr_t(0));
            ActivationBuffer<float> huge_allocator_small_buffer{ActivationAllocator<float>(true)};
            huge_allocator_small_buffer.resize(std::min<size_t>(n, 1000));  // below 2 MiB: operator new too
            QCOMPARE(reinterpret_cast<uintptr_t>(huge_allocator_small_buffer.data()) % 64, uintptr_t(0));
        }
    }

    // The KV cache's memory is mapped zero pages that become resident as they are written or populated: a
    // buffer of 64 MiB adds almost nothing until touched, reads as zeros, and becomes resident when populated
    // (keeping what it holds) or written; huge-page buffers start on a 2 MiB boundary; a move hands the
    // mapping over.
    void zero_page_buffers_fill_on_demand() {
        const size_t n = size_t(16) << 20;  // floats: 64 MiB
        const size_t before = resident_bytes();
        ZeroPageBuffer<float> b(n, false);
        QCOMPARE(b.size(), n);
        const size_t mapped = resident_bytes();
        QVERIFY2(mapped - before < (size_t(4) << 20), qPrintable(QString("resident grew by %1 bytes").arg(mapped - before)));
        for (size_t i = 0; i < n; i += 4096 / sizeof(float)) QCOMPARE(b.data()[i], 0.0f);
        b.data()[5] = 7.0f;
        QVERIFY(b.populate(3, n / 2));  // resident in one call, contents kept
        QVERIFY(resident_bytes() - before >= (size_t(30) << 20));
        QCOMPARE(b.data()[5], 7.0f);
        QCOMPARE(b.data()[n / 2], 0.0f);
        for (size_t i = 0; i < n; i += 4096 / sizeof(float)) b.data()[i] = float(i);
        QVERIFY(resident_bytes() - before >= (size_t(60) << 20));
        ZeroPageBuffer<float> moved = std::move(b);
        QCOMPARE(moved.size(), n);
        QCOMPARE(moved.data()[4096], 4096.0f);
        QVERIFY(b.data() == nullptr && b.size() == 0);
        ZeroPageBuffer<float> huge(n, true);
        QCOMPARE(reinterpret_cast<uintptr_t>(huge.data()) % activation_memory::kHugePage, uintptr_t(0));
        huge.data()[n - 1] = 1.0f;  // the whole span is mapped
        moved = std::move(huge);    // unmaps the first buffer
        QCOMPARE(moved.data()[n - 1], 1.0f);
    }

    // A session's start costs nothing per position of its context: with a context of 128K positions (a 64 MiB
    // KV cache for this model) constructing it and evaluating a prompt adds a small part of that to resident
    // memory, and the logits are those of a default-sized session.
    void long_context_session_does_not_fault_in_its_cache() {
        auto model = convert("mixtral", "f16");
        QVERIFY(model);
        const format::HyperParams& hp = model->hparams();
        const uint32_t context = 1u << 17;
        const size_t kv_bytes = 2 * size_t(hp.n_layers) * context * hp.n_kv_heads * hp.head_dim * sizeof(float);
        QVERIFY(kv_bytes >= (size_t(32) << 20));
        const std::vector<int32_t> ids = prompt("mixtral", hp.vocab_size);
        const Run want = evaluate(*model, ids, 1, 1, false);
        QVERIFY(!want.logits.empty());
        ThreadPool pool(1);
        SessionOptions options;
        options.huge_pages = false;  // huge pages fault in 2 MiB at a time, by design
        const size_t before = resident_bytes();
        Session s(*model, pool, context, options);
        auto r = s.eval(std::span<const int32_t>(ids));
        const size_t grew = resident_bytes() - before;
        QVERIFY(r.is_ok());
        QVERIFY2(grew < kv_bytes / 8, qPrintable(QString("resident grew by %1 of a %2-byte cache").arg(grew).arg(kv_bytes)));
        QVERIFY(std::memcmp(r->data(), want.logits.data(), want.logits.size() * sizeof(float)) == 0);
    }

    void prefetcher_advises_known_experts_only() {
        auto model = convert("olmoe", "q8_0");
        QVERIFY(model);
        ExpertPrefetcher prefetcher(*model);
        const std::vector<int32_t> experts{0, 1, -1, 1000};
        prefetcher.prefetch(0, experts);
        QCOMPARE(prefetcher.calls(), uint64_t(2));
        prefetcher.prefetch(99, experts);  // no such layer
        QCOMPARE(prefetcher.calls(), uint64_t(2));
    }
};

QTEST_GUILESS_MAIN(TestBatchedEval)
#include "test_batched_eval.moc"
