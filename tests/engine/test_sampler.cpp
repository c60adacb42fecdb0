// Sampler: greedy equals argmax, each filter does what it says, and a seed reproduces the same tokens.
#include <QtTest>
#include <cmath>
#include <limits>
#include <map>
#include <random>

#include "engine/core/sampler.h"

using namespace colibri;

namespace {
std::vector<float> logits_of(std::initializer_list<float> probs) {
    std::vector<float> l;
    for (float p : probs) l.push_back(std::log(p));
    return l;
}

// Temperature 1 with every filter off: the model's own distribution; tests switch on one filter at a time.
SamplerConfig unfiltered() {
    SamplerConfig cfg;
    cfg.temperature = 1.0f;
    cfg.top_k = 0;
    cfg.top_p = 1.0f;
    cfg.min_p = 0.0f;
    return cfg;
}

std::map<int32_t, int> histogram(SamplerConfig cfg, const std::vector<float>& logits, int draws,
                                 const std::vector<int32_t>& history = {}) {
    Sampler s(cfg);
    std::map<int32_t, int> h;
    for (int i = 0; i < draws; ++i) ++h[s.sample(logits, history)];
    return h;
}
}  // namespace

class TestSampler : public QObject {
    Q_OBJECT
private slots:
    void greedy_is_argmax() {
        SamplerConfig cfg;
        cfg.greedy = true;
        Sampler s(cfg);
        QCOMPARE(s.sample(std::vector<float>{0.1f, 3.0f, -1.0f, 2.9f}, {}), 1);
        QCOMPARE(argmax(std::vector<float>{1.0f, 5.0f, 5.0f}), 1);  // ties: lowest id
        cfg.greedy = false;
        cfg.temperature = 0.0f;
        Sampler t(cfg);
        QCOMPARE(t.sample(std::vector<float>{0.1f, 3.0f, -1.0f, 2.9f}, {}), 1);
    }

    // Temperatures down to the smallest float (1e-39 and below are subnormal) pick the most likely token, as
    // greedy does; they gave token 0 every time (every logit over the temperature was +inf, the softmax NaN).
    // At and above kGreedyBelowTemperature sampling still samples.
    void tiny_temperature_is_greedy() {
        std::vector<float> logits(300);
        std::mt19937 rng(5);
        std::normal_distribution<float> dist(0.0f, 4.0f);
        for (float& l : logits) l = dist(rng);
        logits[0] = -50.0f;
        logits[217] = 40.0f;
        const float denormal_min = std::numeric_limits<float>::denorm_min();
        for (float t : {denormal_min, 1e-45f, 1e-39f, 1e-38f, 1e-30f, 1e-6f, 5e-5f, std::nextafter(kGreedyBelowTemperature, 0.0f)}) {
            SamplerConfig cfg = unfiltered();
            cfg.temperature = t;
            cfg.top_k = 40;
            cfg.top_p = 0.95f;
            cfg.min_p = 0.05f;
            QVERIFY(sampler_config_problem(cfg).empty());
            for (uint64_t seed = 0; seed < 20; ++seed) {
                cfg.seed = seed;
                Sampler s(cfg);
                QCOMPARE(s.sample(logits, {}), 217);
            }
        }
        // Just above the bound: still a draw, which with these logits is the maximum (40 against at most ~16).
        SamplerConfig cfg = unfiltered();
        cfg.temperature = kGreedyBelowTemperature;
        QCOMPARE(Sampler(cfg).sample(logits, {}), 217);
        // Near-equal logits at a small temperature: both are drawn (sampling, not greedy).
        cfg.temperature = 0.01f;
        const auto h = histogram(cfg, {0.0f, 0.005f, -9.0f}, 2000);
        QVERIFY(h.count(0) && h.count(1) && !h.count(2));
    }

    // Logits so large that dividing by an ordinary temperature overflows: the largest wins (ties by id, as
    // everywhere), never NaN probabilities that pick the last candidate; NaN logits are never drawn.
    void huge_and_nan_logits_stay_sane() {
        const float big = std::numeric_limits<float>::max();
        SamplerConfig cfg = unfiltered();
        cfg.temperature = 0.5f;
        for (uint64_t seed = 0; seed < 50; ++seed) {
            cfg.seed = seed;
            Sampler s(cfg);
            QCOMPARE(s.sample(std::vector<float>{1.0f, big, -big, big * 0.25f}, {}), 1);
            const int32_t tie = s.sample(std::vector<float>{big, 0.0f, big}, {});
            QVERIFY(tie == 0 || tie == 2);
            QCOMPARE(s.sample(std::vector<float>{NAN, 2.0f, NAN, 1.0f - 1e6f}, {}), 1);
        }
        const auto h = histogram(cfg, {big, 0.0f, big}, 400);
        QVERIFY(h.at(0) > 100 && h.at(2) > 100);  // the two infinite ones share the draws
    }

    // argmax (vectorised) against its definition, the first index that no later value exceeds: random lengths
    // around the vector widths and a vocabulary-sized one, with ties, NaNs (also first), ±0, ±inf, all NaN.
    void argmax_matches_definition() {
        const auto reference = [](const std::vector<float>& v) {
            int32_t best = 0;
            for (size_t i = 1; i < v.size(); ++i)
                if (v[i] > v[best]) best = static_cast<int32_t>(i);
            return best;
        };
        std::mt19937 rng(7);
        std::uniform_int_distribution<int> small(-3, 3);
        const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity();
        int checks = 0;
        for (size_t n : {size_t(1), size_t(3), size_t(63), size_t(64), size_t(65), size_t(79), size_t(80), size_t(257), size_t(32000)}) {
            for (int trial = 0; trial < 200; ++trial) {
                std::vector<float> v(n);
                for (float& x : v) x = float(small(rng));  // few distinct values: many ties
                const int kind = trial % 8;
                if (kind == 1) v[rng() % n] = nan;
                if (kind == 2) v[0] = nan;
                if (kind == 3) std::fill(v.begin(), v.end(), nan);
                if (kind == 4) for (float& x : v) x = (rng() % 2) ? 0.0f : -0.0f;
                if (kind == 5) v[rng() % n] = inf, v[rng() % n] = -inf;
                if (kind == 6) for (float& x : v) x = -inf;
                if (kind == 7) v[n - 1] = 100.0f;
                if (kind == 0) {  // distinct values with one NaN in ten: a NaN must never erase a lane's maximum so far
                    std::normal_distribution<float> normal;
                    for (float& x : v) x = rng() % 10 == 0 ? nan : normal(rng);
                }
                QCOMPARE(argmax(v), reference(v));
                ++checks;
            }
        }
        QCOMPARE(argmax(std::vector<float>{}), 0);
        qInfo("%d vectors", checks);
    }

    void seed_reproduces_sequence() {
        SamplerConfig cfg = unfiltered();
        cfg.seed = 1234;
        const auto logits = logits_of({0.2f, 0.2f, 0.2f, 0.2f, 0.2f});
        std::vector<int32_t> a, b, c;
        Sampler s1(cfg), s2(cfg);
        cfg.seed = 99;
        Sampler s3(cfg);
        for (int i = 0; i < 64; ++i) {
            a.push_back(s1.sample(logits, {}));
            b.push_back(s2.sample(logits, {}));
            c.push_back(s3.sample(logits, {}));
        }
        QCOMPARE(a, b);
        QVERIFY(a != c);
    }

    void temperature_one_follows_distribution() {
        SamplerConfig cfg = unfiltered();
        cfg.seed = 7;
        const auto h = histogram(cfg, logits_of({0.5f, 0.3f, 0.2f}), 20000);
        // 20000 draws: standard deviation of a share is below 0.0036; 5 sigma bounds.
        QVERIFY(std::fabs(h.at(0) / 20000.0 - 0.5) < 0.018);
        QVERIFY(std::fabs(h.at(1) / 20000.0 - 0.3) < 0.018);
        QVERIFY(std::fabs(h.at(2) / 20000.0 - 0.2) < 0.018);
    }

    void top_k_keeps_k() {
        SamplerConfig cfg = unfiltered();
        cfg.top_k = 2;
        const auto h = histogram(cfg, logits_of({0.1f, 0.4f, 0.2f, 0.3f}), 2000);
        QCOMPARE(h.size(), size_t(2));
        QVERIFY(h.count(1) && h.count(3));
    }

    void top_p_keeps_nucleus() {
        SamplerConfig cfg = unfiltered();
        cfg.top_p = 0.6f;  // 0.4 + 0.3 >= 0.6: the two most likely
        const auto h = histogram(cfg, logits_of({0.1f, 0.4f, 0.2f, 0.3f}), 2000);
        QCOMPARE(h.size(), size_t(2));
        QVERIFY(h.count(1) && h.count(3));
    }

    void min_p_drops_unlikely() {
        SamplerConfig cfg = unfiltered();
        cfg.min_p = 0.6f;  // keeps p >= 0.6 * 0.4 = 0.24
        const auto h = histogram(cfg, logits_of({0.1f, 0.4f, 0.2f, 0.3f}), 2000);
        QCOMPARE(h.size(), size_t(2));
        QVERIFY(h.count(1) && h.count(3));
    }

    void repetition_penalty_as_transformers() {
        SamplerConfig cfg;
        cfg.greedy = true;
        cfg.repetition_penalty = 2.0f;
        Sampler s(cfg);
        // Token 0 (logit 3) is penalised to 1.5, below token 1 (2.0). Negative logits are multiplied.
        QCOMPARE(s.sample(std::vector<float>{3.0f, 2.0f, -1.0f}, std::vector<int32_t>{0, 0, 0}), 1);
        QCOMPARE(s.sample(std::vector<float>{-1.0f, -1.5f}, std::vector<int32_t>{0}), 1);
        cfg.repetition_window = 1;  // only the last token counts
        Sampler w(cfg);
        QCOMPARE(w.sample(std::vector<float>{3.0f, 2.0f, -1.0f}, std::vector<int32_t>{0, 2}), 0);
    }

    void temperature_sharpens() {
        SamplerConfig cfg = unfiltered();
        cfg.temperature = 0.1f;
        const auto h = histogram(cfg, logits_of({0.45f, 0.55f}), 2000);
        QVERIFY(h.at(1) > 1700);  // (0.55/0.45)^10 = 7.4: p(1) = 0.88, 1763 expected, sd 15
    }
};

QTEST_APPLESS_MAIN(TestSampler)
#include "test_sampler.moc"
