// Session state: truncating the KV cache and continuing equals evaluating afresh, bit for bit (the chat
// loop relies on this to reuse the cached prefix), and the observer sees every MoE layer of every token.
#include <QTemporaryDir>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <vector>
#include <QtTest>

#include "../test_support.h"
#include "engine/core/elementwise.h"
#include "engine/core/fast_exp.h"
#include "engine/core/model.h"
#include "engine/core/session.h"

using namespace colibri;
using namespace colibri::test;

struct Counter : TraceObserver {
    int routing = 0, timing = 0;
    void on_routing(const RoutingRecord& r) override {
        ++routing;
        QCOMPARE(r.experts.size(), size_t(2));
        QVERIFY(r.weights[0] >= r.weights[1]);
    }
    void on_layer_timing(const LayerTiming& t) override {
        ++timing;
        QVERIFY(t.attention_ns > 0);
    }
};

// An observer that reads (fake) perf counters per layer and, when `experts`, per routed expert.
struct CounterLog : TraceObserver {
    struct FakeCounters : CounterSource {
        uint64_t value[1] = {1};
        void start(unsigned) override {}
        std::span<const uint64_t> stop(unsigned) override { return value; }
    } source;
    bool experts = true;
    int layer_records = 0, expert_records = 0;
    CounterSource* counters() override { return &source; }
    bool count_experts() override { return experts; }
    void on_counters(const CounterRecord& c) override { ++(c.expert < 0 ? layer_records : expert_records); }
};

class TestSession : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    std::unique_ptr<Model> model_;
    std::vector<int32_t> ids_;

private slots:
    // fast_exp against the correctly rounded e^x (from double precision): within 2 ulp over [−87.3, 88.3],
    // every float of the range visited in steps of 2^12 representations plus the neighbourhoods of 0 and the
    // ends; the clamps beyond, NaN, and silu at a few points.
    void fast_exp_accuracy() {
        auto ulps = [](float got, double want_d) {
            const float want = float(want_d);
            int32_t a, b;
            std::memcpy(&a, &got, 4);
            std::memcpy(&b, &want, 4);
            return std::abs(int64_t(a) - int64_t(b));
        };
        int64_t worst = 0;
        float worst_x = 0;
        auto visit = [&](float x) {
            const int64_t u = ulps(fast_exp(x), std::exp(double(x)));
            if (u > worst) worst = u, worst_x = x;
        };
        for (const float end : {-87.3f, 88.3f}) {  // from the end down to ±0 in magnitude
            uint32_t bits;
            std::memcpy(&bits, &end, 4);
            const uint32_t sign = bits & 0x80000000u;
            for (int64_t m = bits & 0x7FFFFFFF; m >= 0; m -= 1 << 12) {
                const uint32_t b = sign | uint32_t(m);
                float x;
                std::memcpy(&x, &b, 4);
                visit(x);
            }
        }
        for (float x = -1e-3f; x < 1e-3f; x += 1e-7f) visit(x);
        for (float x = -87.3f; x < -87.0f; x += 1e-4f) visit(x);
        for (float x = 88.0f; x < 88.3f; x += 1e-4f) visit(x);
        QVERIFY2(worst <= 2, qPrintable(QString("%1 ulp at x = %2").arg(worst).arg(double(worst_x), 0, 'g', 9)));
        QCOMPARE(fast_exp(0.0f), 1.0f);
        QCOMPARE(fast_exp(-1000.0f), std::ldexp(1.0f, -126));  // clamped: the smallest normal, not 0
        QVERIFY(std::isfinite(fast_exp(1000.0f)) && fast_exp(1000.0f) > 1e38f);
        QVERIFY(std::isfinite(fast_exp(-INFINITY)) && std::isfinite(fast_exp(INFINITY)));
        QVERIFY(std::isnan(fast_exp(NAN)));
        // silu_mul over more than one block, against x / (1 + e^−x) · u in double precision.
        std::vector<float> g(600), u(600);
        for (size_t i = 0; i < g.size(); ++i) g[i] = float(i) * 0.05f - 15.0f, u[i] = 0.5f + float(i % 7);
        g[0] = 0.0f, g[1] = -200.0f, g[2] = 200.0f;
        std::vector<float> want(g.size());
        for (size_t i = 0; i < g.size(); ++i) want[i] = float(double(g[i]) / (1.0 + std::exp(-double(g[i]))) * u[i]);
        silu_mul(g.data(), u.data(), g.size());
        QCOMPARE(g[0], 0.0f);
        QVERIFY(std::fabs(g[1]) < 1e-30f && g[2] == 200.0f * u[2]);
        for (size_t i = 3; i < g.size(); ++i)
            QVERIFY2(std::fabs(g[i] - want[i]) <= 4e-7f * std::fabs(want[i]) + 1e-30f, qPrintable(QString::number(i)));
    }

    // rmsnorm, the softmax and silu_mul run in the widest version the CPU has (x86-64-v4 here, elementwise.h);
    // each must give the bits of the same formula compiled for the baseline, as this file is: a plain loop,
    // lane_fold's order, fast_exp. Odd lengths cover the vector loops' remainders.
    void vector_versions_give_the_baseline_bits() {
        std::mt19937 rng(5);
        std::normal_distribution<float> normal(0.0f, 3.0f);
        const auto same = [](const std::vector<float>& a, const std::vector<float>& b) {
            return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
        };
        for (size_t n : {1u, 7u, 16u, 17u, 64u, 100u, 1024u, 2816u, 4099u}) {
            std::vector<float> x(n), w(n), u(n);
            for (size_t i = 0; i < n; ++i) x[i] = normal(rng), w[i] = 1.0f + 0.1f * normal(rng), u[i] = normal(rng);
            if (n > 2) x[1] = -200.0f, x[2] = 95.0f;  // fast_exp's clamps

            std::vector<float> got(n), want(n);
            rmsnorm(x.data(), w.data(), 1e-5f, n, got.data());
            const float ss = lane_fold(x.data(), n, 0.0f, [](float a) { return a * a; }, [](float a, float b) { return a + b; });
            const float inv = 1.0f / std::sqrt(ss / float(n) + 1e-5f);
            for (size_t i = 0; i < n; ++i) want[i] = w[i] * (x[i] * inv);
            QVERIFY2(same(got, want), qPrintable(QString("rmsnorm, n = %1").arg(n)));

            got = x, want = x;
            attention_softmax(got.data(), uint32_t(n), 0.125f);
            for (float& v : want) v *= 0.125f;
            const float mx = lane_fold(want.data(), n, want[0], [](float a) { return a; }, [](float a, float b) { return a > b ? a : b; });
            for (float& v : want) v = fast_exp(v - mx);
            const float sum = lane_fold(want.data(), n, 0.0f, [](float a) { return a; }, [](float a, float b) { return a + b; });
            for (float& v : want) v /= sum;
            QVERIFY2(same(got, want), qPrintable(QString("softmax, n = %1").arg(n)));

            got = x, want = x;
            silu_mul(got.data(), u.data(), n);
            for (size_t i = 0; i < n; ++i) want[i] = want[i] / (1.0f + fast_exp(-want[i])) * u[i];
            QVERIFY2(same(got, want), qPrintable(QString("silu_mul, n = %1").arg(n)));
        }
    }

    // The reference model of a family, converted (f32) and loaded.
    std::unique_ptr<Model> load_reference(const QString& family) {
        const QString path = dir_.filePath(family + ".bin");
        if (!QFile::exists(path) && run_cli({"convert", reference("hf/" + family + "/model"), "-o", path, "-q"}).exit_code != 0) return nullptr;
        auto m = Model::load(path.toStdString());
        return m.is_ok() ? std::move(m.value()) : nullptr;
    }

    void initTestCase() {
        const QString path = dir_.filePath("olmoe.bin");
        QCOMPARE(run_cli({"convert", reference("hf/olmoe/model"), "-o", path, "-q"}).exit_code, 0);
        auto m = Model::load(path.toStdString());
        QVERIFY2(m.is_ok(), m.message().c_str());
        model_ = std::move(m.value());
        for (const auto& v : read_json(reference("hf/olmoe/ref/input_ids.json")).array()) ids_.push_back(v.toInt());
    }

    void truncate_and_continue_equals_fresh() {
        ThreadPool pool(2);
        Session fresh(*model_, pool), reused(*model_, pool);
        auto a = fresh.eval(std::span<const int32_t>(ids_));
        QVERIFY(a.is_ok());
        const std::vector<float> want(a->begin(), a->end());

        QVERIFY(reused.eval(std::span<const int32_t>(ids_.data(), 8)).is_ok());
        const std::vector<int32_t> detour{5, 6, 7};
        QVERIFY(reused.eval(std::span<const int32_t>(detour)).is_ok());
        QCOMPARE(reused.position(), 11u);
        QVERIFY(reused.truncate(8).is_ok());
        auto b = reused.eval(std::span<const int32_t>(ids_.data() + 8, ids_.size() - 8));
        QVERIFY(b.is_ok());
        QVERIFY(std::equal(b->begin(), b->end(), want.begin()));

        reused.reset();
        auto c = reused.eval(std::span<const int32_t>(ids_));
        QVERIFY(std::equal(c->begin(), c->end(), want.begin()));
    }

    // 200 positions span four blocks of the transposed key cache (64 positions each, the last one partial):
    // the logits must not depend on the context size (it sets how many blocks a KV head reserves), the prompt
    // chunk size or the thread count, and evaluating one token at a time must give the same as a whole prompt.
    void long_sequence_does_not_depend_on_context_or_chunking() {
        const uint32_t vocab = model_->hparams().vocab_size;
        std::vector<int32_t> seq(200);
        for (size_t i = 0; i < seq.size(); ++i) seq[i] = static_cast<int32_t>((uint32_t(ids_[i % ids_.size()]) + 31 * i) % vocab);
        ThreadPool two(2), one(1);
        Session whole(*model_, two, 4096);
        auto a = whole.eval(std::span<const int32_t>(seq));
        QVERIFY(a.is_ok());
        const std::vector<float> want(a->begin(), a->end());

        Session stepwise(*model_, one, 200);
        for (size_t i = 0; i + 1 < seq.size(); ++i) QVERIFY(stepwise.eval(seq[i]).is_ok());
        auto b = stepwise.eval(seq.back());
        QVERIFY(b.is_ok());
        QVERIFY(std::equal(b->begin(), b->end(), want.begin()));

        SessionOptions options;
        options.chunk = 37;
        Session chunked(*model_, two, 257, options);
        auto c = chunked.eval(std::span<const int32_t>(seq));
        QVERIFY(c.is_ok());
        QVERIFY(std::equal(c->begin(), c->end(), want.begin()));
    }

    // `tokens` tokens through a session on 1 thread, then on each of `threads`, chunked and token by token: the
    // same bits.
    static void same_logits_for_any_split(const Model& model, std::initializer_list<unsigned> threads, size_t tokens) {
        const uint32_t vocab = model.hparams().vocab_size;
        std::vector<int32_t> seq(tokens);
        for (size_t i = 0; i < seq.size(); ++i) seq[i] = static_cast<int32_t>((17 + 53 * i) % vocab);
        ThreadPool one(1);
        Session separate(model, one);
        auto a = separate.eval(std::span<const int32_t>(seq));
        QVERIFY(a.is_ok());
        const std::vector<float> want(a->begin(), a->end());
        for (unsigned t : threads) {
            ThreadPool pool(t);
            Session whole(model, pool);
            auto b = whole.eval(std::span<const int32_t>(seq));
            QVERIFY(b.is_ok());
            QVERIFY2(std::equal(b->begin(), b->end(), want.begin()), qPrintable(QString("%1 threads, chunked").arg(t)));
            Session stepwise(model, pool);
            for (size_t i = 0; i + 1 < seq.size(); ++i) QVERIFY(stepwise.eval(seq[i]).is_ok());
            auto c = stepwise.eval(seq.back());
            QVERIFY(c.is_ok());
            QVERIFY2(std::equal(c->begin(), c->end(), want.begin()), qPrintable(QString("%1 threads, stepwise").arg(t)));
        }
    }

    // Gated DeltaNet hybrids (qwen3_next, qwen3_5_moe): 150 tokens are three prompt chunks of 64; the recurrent and
    // conv states carried across chunks, token by token and on 1, 2 and 3 threads (3 does not divide the 4 value
    // heads) give the same bits, and so does a chunk of 37.
    void gated_deltanet_same_bits_for_any_split_data() {
        QTest::addColumn<QString>("family");
        QTest::newRow("qwen3_next") << "qwen3_next";
        QTest::newRow("qwen3_5_moe") << "qwen3_5_moe";
    }
    void gated_deltanet_same_bits_for_any_split() {
        QFETCH(QString, family);
        auto m = load_reference(family);
        QVERIFY(m != nullptr);
        same_logits_for_any_split(*m, {2, 3}, 150);
        std::vector<int32_t> seq(150);
        for (size_t i = 0; i < seq.size(); ++i) seq[i] = static_cast<int32_t>((17 + 53 * i) % m->hparams().vocab_size);
        ThreadPool pool(2);
        Session whole(*m, pool);
        auto a = whole.eval(std::span<const int32_t>(seq));
        QVERIFY(a.is_ok());
        SessionOptions options;
        options.chunk = 37;
        Session chunked(*m, pool, 0, options);
        auto b = chunked.eval(std::span<const int32_t>(seq));
        QVERIFY(b.is_ok());
        QVERIFY(std::equal(a->begin(), a->end(), b->begin()));
    }

    // The Studio's state trace (on_linear_state): tracing a hybrid changes no logit bit, a prompt chunk and single
    // tokens alike; every Gated DeltaNet layer reports each position once, β in (0, 1), the decay in (0, 1], and the
    // norms equal the Frobenius norms of the state read back after each token of an untraced token-by-token run.
    void gated_deltanet_state_trace_data() {
        QTest::addColumn<QString>("family");
        QTest::newRow("qwen3_next") << "qwen3_next";
        QTest::newRow("qwen3_5_moe") << "qwen3_5_moe";
    }
    void gated_deltanet_state_trace() {
        QFETCH(QString, family);
        auto m = load_reference(family);
        QVERIFY(m != nullptr);
        const Model& model = *m;
        const size_t nv = model.hparams().linear_value_heads, cells = model.hparams().linear_key_dim * model.hparams().linear_value_dim;
        struct StateLog : TraceObserver {
            std::map<std::pair<uint32_t, uint32_t>, std::vector<float>> norms, betas, decays;  // (layer, position)
            std::vector<LayerTiming> timings;
            void on_layer_timing(const LayerTiming& t) override { timings.push_back(t); }
            void on_linear_state(const LinearStateRecord& r) override {
                QVERIFY(norms.emplace(std::pair{r.layer, r.position}, std::vector<float>(r.state_norms.begin(), r.state_norms.end())).second);
                betas[{r.layer, r.position}].assign(r.betas.begin(), r.betas.end());
                decays[{r.layer, r.position}].assign(r.decays.begin(), r.decays.end());
            }
        } log;
        std::vector<int32_t> seq(140);
        for (size_t i = 0; i < seq.size(); ++i) seq[i] = static_cast<int32_t>((29 + 37 * i) % model.hparams().vocab_size);
        const size_t prompt = 130;  // three chunks of 64, then single tokens
        ThreadPool pool(2);
        Session plain(model, pool), traced(model, pool), stepwise(model, pool);
        traced.set_observer(&log);
        auto a = plain.eval(std::span<const int32_t>(seq.data(), prompt));
        auto b = traced.eval(std::span<const int32_t>(seq.data(), prompt));
        QVERIFY(a.is_ok() && b.is_ok());
        QVERIFY2(std::equal(a->begin(), a->end(), b->begin()), "tracing changed the prompt's logits");
        for (size_t i = prompt; i < seq.size(); ++i) {
            auto c = plain.eval(seq[i]);
            auto d = traced.eval(seq[i]);
            QVERIFY(c.is_ok() && d.is_ok());
            QVERIFY2(std::equal(c->begin(), c->end(), d->begin()), qPrintable(QString("tracing changed the logits at %1").arg(i)));
        }
        std::vector<uint32_t> linear;
        for (uint32_t l = 0; l < model.layers().size(); ++l)
            if (model.layers()[l].mixer == TokenMixer::GatedDeltaNet) linear.push_back(l);
        QVERIFY(!linear.empty() && linear.size() < model.layers().size());
        QCOMPARE(log.norms.size(), linear.size() * seq.size());
        double largest = 0.0;
        for (uint32_t p = 0; p < seq.size(); ++p) {
            QVERIFY(stepwise.eval(seq[p]).is_ok());
            for (const uint32_t l : linear) {
                const auto it = log.norms.find({l, p});
                QVERIFY2(it != log.norms.end(), qPrintable(QString("no record of layer %1 at %2").arg(l).arg(p)));
                QCOMPARE(it->second.size(), nv);
                const std::span<const float> state = stepwise.linear_recurrent_state(l);
                QCOMPARE(state.size(), nv * cells);
                for (size_t j = 0; j < nv; ++j) {
                    double ss = 0.0;
                    for (size_t i = 0; i < cells; ++i) ss += double(state[j * cells + i]) * state[j * cells + i];
                    const double want = std::sqrt(ss);
                    largest = std::max(largest, want);
                    QVERIFY2(std::abs(it->second[j] - want) <= 1e-5 * std::max(want, 1.0),
                             qPrintable(QString("layer %1 head %2 at %3: %4, read back %5").arg(l).arg(j).arg(p).arg(it->second[j]).arg(want)));
                    const float beta = log.betas[{l, p}][j], decay = log.decays[{l, p}][j];
                    QVERIFY2(beta > 0.0f && beta < 1.0f, qPrintable(QString("beta %1").arg(beta)));
                    QVERIFY2(decay > 0.0f && decay <= 1.0f, qPrintable(QString("decay %1").arg(decay)));
                }
            }
        }
        QVERIFY(largest > 0.0);  // the states were written
        // The profiler's split of a linear layer: every step timed, within the mixer's time; none for full attention.
        QCOMPARE(log.timings.size(), model.layers().size() * seq.size());
        for (const LayerTiming& t : log.timings) {
            const bool is_linear = std::find(linear.begin(), linear.end(), t.layer) != linear.end();
            uint64_t sum = 0;
            for (size_t s = 0; s < kDeltaNetSteps; ++s) {
                QVERIFY2((t.deltanet_ns[s] > 0) == is_linear, qPrintable(QString("layer %1 step %2: %3 ns").arg(t.layer).arg(s).arg(t.deltanet_ns[s])));
                sum += t.deltanet_ns[s];
            }
            QVERIFY2(sum <= t.attention_ns, qPrintable(QString("layer %1: steps %2 ns, mixer %3 ns").arg(t.layer).arg(sum).arg(t.attention_ns)));
        }
        QVERIFY(stepwise.linear_recurrent_state(0).empty() == (model.layers()[0].mixer != TokenMixer::GatedDeltaNet));
    }

    // Rewinding a hybrid (truncate to any earlier position, reset) must give what a fresh session gives: its
    // recurrent and conv states cannot be cut back like a KV cache, so the session restores a checkpoint and
    // re-evaluates what follows it.
    void gated_deltanet_rewind_equals_fresh() {
        auto m = load_reference("qwen3_next");
        QVERIFY(m != nullptr);
        std::vector<int32_t> seq(150);
        for (size_t i = 0; i < seq.size(); ++i) seq[i] = static_cast<int32_t>((11 + 71 * i) % m->hparams().vocab_size);
        ThreadPool pool(2);
        // The default checkpoints (a prompt's end), and one every 16 positions with at most 3 kept (the oldest dropped).
        SessionOptions dense;
        dense.checkpoint_interval = 16;
        dense.state_checkpoints = 3;
        for (const SessionOptions& options : {SessionOptions(), dense})
        for (const uint32_t cut : {0u, 1u, 5u, 64u, 100u, 119u, 120u, 125u, 130u}) {  // the detour began at 130
            Session fresh(*m, pool);
            auto a = fresh.eval(std::span<const int32_t>(seq));
            QVERIFY(a.is_ok());
            const std::vector<float> want(a->begin(), a->end());
            Session reused(*m, pool, 0, options);
            // A prompt, a reply token by token, a detour; then back to `cut` and on with the same tokens as fresh.
            QVERIFY(reused.eval(std::span<const int32_t>(seq.data(), 120)).is_ok());
            for (size_t i = 120; i < 130; ++i) QVERIFY(reused.eval(seq[i]).is_ok());
            const std::vector<int32_t> detour{5, 6, 7, 8};
            QVERIFY(reused.eval(std::span<const int32_t>(detour)).is_ok());
            QVERIFY(reused.truncate(cut).is_ok());
            QCOMPARE(reused.position(), cut);
            auto b = reused.eval(std::span<const int32_t>(seq.data() + cut, seq.size() - cut));
            QVERIFY(b.is_ok());
            QVERIFY2(std::equal(b->begin(), b->end(), want.begin()), qPrintable(QString("rewound to %1").arg(cut)));
        }
        Session reused(*m, pool);
        QVERIFY(reused.eval(std::span<const int32_t>(seq.data(), 100)).is_ok());
        reused.reset();
        auto c = reused.eval(std::span<const int32_t>(seq));
        Session fresh(*m, pool);
        auto d = fresh.eval(std::span<const int32_t>(seq));
        QVERIFY(c.is_ok() && d.is_ok());
        QVERIFY(std::equal(c->begin(), c->end(), d->begin()));
    }

    // With two threads and two KV heads, a model without olmoe's whole-projection q/k norm (mixtral) computes
    // each KV head's q, k and v rows and its attention in one hand-off per part; one thread and three threads
    // (two heads do not split three ways) take the separate projection and attention hand-offs, and with three
    // threads a token's two (token, KV head) pairs split their query heads among the parts. Prompt chunks
    // and single tokens, every split: the same bits.
    void fused_attention_equals_separate_hand_offs() {
        const QString path = dir_.filePath("mixtral.bin");
        QCOMPARE(run_cli({"convert", reference("hf/mixtral/model"), "-o", path, "-q"}).exit_code, 0);
        auto m = Model::load(path.toStdString());
        QVERIFY2(m.is_ok(), m.message().c_str());
        QCOMPARE(m.value()->hparams().n_kv_heads, 2u);
        same_logits_for_any_split(*m.value(), {2, 3}, 90);
    }

    // Multi-query attention (one KV head for eight query heads of 128): a decoded token's attention is one
    // (token, KV head) pair, and from about 100 positions on (3 threads; 160 for 5) it pays to split it among
    // the parts by query heads. 2, 3 and 5 threads (5 does not divide 8), 200 tokens: the bits of one thread.
    void multi_query_attention_splits_query_heads() {
        const QString hf = dir_.filePath("mqa-hf"), path = dir_.filePath("mqa.bin");
        QVERIFY(make_model(hf, {"--family", "mixtral", "--vocab", "300", "--hidden", "1024", "--layers", "2", "--heads", "8",
                                "--kv-heads", "1", "--experts", "4", "--top-k", "2", "--ffn", "64"}));
        QCOMPARE(run_cli({"convert", hf, "-o", path, "--type", "f16", "-q"}).exit_code, 0);
        auto m = Model::load(path.toStdString());
        QVERIFY2(m.is_ok(), m.message().c_str());
        QCOMPARE(m.value()->hparams().n_kv_heads, 1u);
        QCOMPARE(m.value()->hparams().head_dim, 128u);
        same_logits_for_any_split(*m.value(), {2, 3, 5}, 200);
    }

    void context_limit_is_an_error() {
        ThreadPool pool(1);
        Session s(*model_, pool, 4);
        QVERIFY(s.eval(std::span<const int32_t>(ids_.data(), 4)).is_ok());
        auto r = s.eval(ids_[4]);
        QVERIFY(!r.is_ok());
        QVERIFY(QString::fromStdString(r.message()).contains("context full"));
        QVERIFY(!s.eval(-1).is_ok());
    }

    void observer_sees_each_layer() {
        ThreadPool pool(1);
        Session s(*model_, pool);
        Counter counter;
        s.set_observer(&counter);
        QVERIFY(s.eval(std::span<const int32_t>(ids_.data(), 5)).is_ok());
        QCOMPARE(counter.routing, 5 * 2);
        QCOMPARE(counter.timing, 5 * 2);
    }

    // Every token gets one TokenTiming after its layers; its total covers its layers' stages and the lm head,
    // which only the chunk's last token (the one whose logits are computed) is charged with.
    void token_timing_accounts_for_each_token() {
        struct Timings : TraceObserver {
            std::vector<LayerTiming> layers;
            std::vector<TokenTiming> tokens;
            void on_layer_timing(const LayerTiming& t) override { layers.push_back(t); }
            void on_token_timing(const TokenTiming& t) override { tokens.push_back(t); }
        } log;
        ThreadPool pool(2);
        Session s(*model_, pool);
        s.set_observer(&log);
        QVERIFY(s.eval(std::span<const int32_t>(ids_.data(), 6)).is_ok());
        QVERIFY(s.eval(ids_[6]).is_ok());
        QCOMPARE(log.tokens.size(), size_t(7));
        for (uint32_t i = 0; i < 7; ++i) {
            const TokenTiming& t = log.tokens[i];
            QCOMPARE(t.position, i);
            uint64_t stages = t.lm_head_ns;
            for (const LayerTiming& l : log.layers)
                if (l.position == i) stages += l.attention_ns + l.router_ns + l.experts_ns;
            QVERIFY2(stages <= t.total_ns, qPrintable(QString("position %1: stages %2 ns, total %3 ns").arg(i).arg(stages).arg(t.total_ns)));
            QCOMPARE(t.lm_head_ns > 0, i == 5 || i == 6);  // the last of the prompt chunk, and the single token
        }
    }

    // The routed experts run one at a time when an observer counts per expert (Session::counted_experts), in
    // two hand-offs with the shared expert otherwise (mapped_experts): the same logits, for the families whose
    // MoE differs (gpt_oss's biased, clamped experts, qwen2_moe's gated and deepseek_v3's ungated shared
    // expert); and each layer's token mixer is the one the family's attention rules name.
    void counted_experts_equal_mapped_data() {
        QTest::addColumn<QString>("family");
        for (const char* f : {"olmoe", "gpt_oss", "qwen2_moe", "deepseek_v3"}) QTest::newRow(f) << f;
    }
    void counted_experts_equal_mapped() {
        QFETCH(QString, family);
        const QString path = dir_.filePath(family + "-counted.bin");
        QCOMPARE(run_cli({"convert", reference("hf/" + family + "/model"), "-o", path, "-q"}).exit_code, 0);
        auto m = Model::load(path.toStdString());
        QVERIFY2(m.is_ok(), m.message().c_str());
        const Model& model = *m.value();
        for (const LayerWeights& w : model.layers())
            QCOMPARE(w.mixer, model.rules().attention.mla ? TokenMixer::LatentAttention : TokenMixer::Attention);
        QCOMPARE(model.rules().attention.mla, family == "deepseek_v3");
        std::vector<int32_t> ids;
        for (const auto& v : read_json(reference("hf/" + family + "/ref/input_ids.json")).array()) ids.push_back(v.toInt());

        CounterLog counting;
        ThreadPool pool(2);
        Session mapped(model, pool), counted(model, pool);
        counted.set_observer(&counting);
        auto a = mapped.eval(std::span<const int32_t>(ids));
        auto b = counted.eval(std::span<const int32_t>(ids));
        QVERIFY(a.is_ok() && b.is_ok());
        QCOMPARE(counting.expert_records, int(ids.size() * model.moe_layer_count() * model.hparams().n_experts_active));
        QVERIFY(std::equal(a->begin(), a->end(), b->begin()));
    }

    // An observer that counts layers only gets no per-expert records (and so no one-expert-at-a-time path).
    void layer_counters_without_expert_counters() {
        ThreadPool pool(1);
        for (const bool experts : {false, true}) {
            Session s(*model_, pool);
            CounterLog log;
            log.experts = experts;
            s.set_observer(&log);
            QVERIFY(s.eval(std::span<const int32_t>(ids_.data(), 3)).is_ok());
            QCOMPARE(log.layer_records, 3 * 2);
            QCOMPARE(log.expert_records, experts ? 3 * 2 * int(model_->hparams().n_experts_active) : 0);
        }
    }
};

QTEST_GUILESS_MAIN(TestSession)
#include "test_session.moc"
