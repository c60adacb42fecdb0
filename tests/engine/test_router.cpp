// The router variants: the LUT router's table, its fixed-point weights (they sum to 1 within the Q16
// rounding), its determinism, its handling of NaN logits, and its top-k agreement with the exact router on
// the reference models (through tools::compare_routers, what `colibri route --compare` prints).
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "../test_support.h"
#include "colibri/colibri.h"
#include "engine/core/model.h"
#include "engine/core/router.h"
#include "tools/router_compare.h"

using namespace colibri;
using namespace colibri::test;

class TestRouter : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

private slots:
    void names() {
        QCOMPARE(parse_router_kind("exact").value(), RouterKind::Exact);
        QCOMPARE(parse_router_kind("lut").value(), RouterKind::Lut);
        QVERIFY(!parse_router_kind("LUT").has_value());
        QVERIFY(!parse_router_kind("").has_value());
        QCOMPARE(QString(router_kind_name(RouterKind::Lut)), QString("lut"));
    }

    void table_is_exp_in_q16() {
        const uint32_t* t = lut_router::table();
        QCOMPARE(t[0], lut_router::kOneQ16);
        for (uint32_t q = 1; q < lut_router::kTableSize; ++q) {
            QVERIFY(t[q] <= t[q - 1]);
            const double want = 65536.0 * std::exp(-double(q) / lut_router::kStepsPerNat);
            QVERIFY(std::fabs(double(t[q]) - want) <= 0.5);
        }
        QVERIFY(t[lut_router::kTableSize - 1] > 0);
    }

    void lut_weights_sum_to_one_and_are_deterministic() {
        std::mt19937 rng(3);
        std::normal_distribution<float> normal(0.0f, 2.0f);
        for (int trial = 0; trial < 2000; ++trial) {
            const uint32_t n = 2 + rng() % 63, k = 1 + rng() % std::min<uint32_t>(n, 8);
            const bool renormalise = trial % 2 == 0;
            std::vector<float> logits(n), probs(n), probs2(n), w(k), w2(k);
            std::vector<int32_t> sel(k), sel2(k);
            for (float& v : logits) v = normal(rng);
            route_token(RouterKind::Lut, logits.data(), n, k, renormalise, probs.data(), sel.data(), w.data());
            route_token(RouterKind::Lut, logits.data(), n, k, renormalise, probs2.data(), sel2.data(), w2.data());
            QVERIFY(sel == sel2 && std::memcmp(w.data(), w2.data(), k * 4) == 0 && std::memcmp(probs.data(), probs2.data(), n * 4) == 0);

            double sum_w = 0, sum_p = 0;
            for (float p : probs) sum_p += p;
            for (uint32_t j = 0; j < k; ++j) {
                sum_w += w[j];
                QVERIFY(sel[j] >= 0 && sel[j] < int32_t(n));
                for (uint32_t i = 0; i < j; ++i) QVERIFY(sel[i] != sel[j]);
                if (j) QVERIFY(w[j] <= w[j - 1]);
            }
            // Each Q16 quotient is rounded to nearest: at most half a unit off per term.
            QVERIFY(std::fabs(sum_p - 1.0) <= 0.5 * n / 65536.0 + 1e-6);
            if (renormalise) QVERIFY2(std::fabs(sum_w - 1.0) <= 0.5 * k / 65536.0 + 1e-6, qPrintable(QString::number(sum_w - 1.0)));

            // The experts the exact router picks, where their logits are more than one table step apart from
            // the next, are the LUT's too.
            std::vector<float> ep(n), ew(k);
            std::vector<int32_t> es(k);
            route_token(RouterKind::Exact, logits.data(), n, k, renormalise, ep.data(), es.data(), ew.data());
            std::vector<float> sorted = logits;
            std::sort(sorted.begin(), sorted.end(), std::greater<float>());
            bool separated = true;
            for (uint32_t j = 0; j < k && j + 1 < n; ++j) separated &= sorted[j] - sorted[j + 1] > 2.0f / lut_router::kStepsPerNat;
            const float max_logit = sorted[0];
            separated &= max_logit - sorted[std::min(k, n - 1)] < 7.0f;  // within the table's range
            if (separated) QVERIFY(sel == es);
        }
    }

    void lut_ignores_nan_logits() {
        const float nan = std::numeric_limits<float>::quiet_NaN();
        const std::vector<float> logits{0.5f, nan, 2.0f, -1.0f};
        std::vector<float> probs(4), w(2);
        std::vector<int32_t> sel(2);
        route_token(RouterKind::Lut, logits.data(), 4, 2, true, probs.data(), sel.data(), w.data());
        QCOMPARE(sel[0], 2);
        QCOMPARE(sel[1], 0);
        QCOMPARE(probs[1], 0.0f);
    }

    void c_api_selects_the_router() {
        const QString path = dir_.filePath("c_api.bin");
        QCOMPARE(run_cli({"convert", reference("hf/olmoe/model"), "-o", path, "-q"}).exit_code, 0);
        colibri_model* m = colibri_model_open(path.toUtf8().constData());
        QVERIFY(m);
        colibri_session* exact = colibri_session_new(m, 1, 0);
        colibri_session* lut = colibri_session_new(m, 1, 0);
        QCOMPARE(colibri_session_set_router(lut, "lut"), 0);
        QCOMPARE(colibri_session_set_router(lut, "fast"), -1);
        QVERIFY(QString(colibri_last_error()).contains("unknown router"));
        QCOMPARE(colibri_session_set_router(nullptr, "lut"), -1);
        std::vector<int32_t> ids;
        for (const auto& v : read_json(reference("hf/olmoe/ref/input_ids.json")).array()) ids.push_back(v.toInt());
        const size_t vocab = size_t(colibri_model_vocab_size(m));
        std::vector<float> a(vocab), b(vocab);
        QCOMPARE(colibri_session_eval(exact, ids.data(), ids.size(), a.data()), 0);
        QCOMPARE(colibri_session_eval(lut, ids.data(), ids.size(), b.data()), 0);
        // Same experts everywhere on this model, slightly different weights: close, not equal, logits.
        QVERIFY(a != b);
        double max_diff = 0;
        for (size_t i = 0; i < vocab; ++i) max_diff = std::max(max_diff, std::fabs(double(a[i]) - double(b[i])));
        QVERIFY2(max_diff < 0.05, qPrintable(QString::number(max_diff)));
        colibri_session_free(exact);
        colibri_session_free(lut);
        colibri_model_close(m);
    }

    void agreement_on_reference_models_data() {
        QTest::addColumn<QString>("family");
        for (const char* f : {"mixtral", "qwen2_moe", "olmoe"}) QTest::newRow(f) << QString(f);
    }

    void agreement_on_reference_models() {
        QFETCH(QString, family);
        const QString path = dir_.filePath(family + ".bin");
        QCOMPARE(run_cli({"convert", reference("hf/" + family + "/model"), "-o", path, "-q"}).exit_code, 0);
        auto model = Model::load(path.toStdString());
        QVERIFY(model.is_ok());
        std::vector<int32_t> ids;
        for (const auto& v : read_json(reference("hf/" + family + "/ref/input_ids.json")).array()) ids.push_back(v.toInt());
        ThreadPool pool(2);
        auto a = tools::compare_routers(*model.value(), pool, ids, RouterKind::Lut);
        QVERIFY(a.is_ok());
        const tools::RouterAgreementCounts same = a->same_logits_total(), e2e = a->end_to_end_total();
        QCOMPARE(same.decisions, uint64_t(ids.size() * model.value()->moe_layer_count()));
        qInfo("%s: same logits: set %.4f order %.4f max |dw| %.3g; end to end: set %.4f order %.4f max |dw| %.3g",
              qPrintable(family), same.set_rate(), same.order_rate(), same.max_weight_diff, e2e.set_rate(), e2e.order_rate(),
              e2e.max_weight_diff);
        // Measured (docs/PERFORMANCE.md): qwen2_moe and olmoe agree everywhere; mixtral's layer 1, token 0 is a
        // near-tie (3rd expert 0.0036 nats below the 2nd, under one table step) and flips.
        QVERIFY(same.set_rate() >= 0.9);
        QVERIFY(e2e.set_rate() >= 0.9);
        QVERIFY(same.max_weight_diff < 0.01);
    }
};

QTEST_GUILESS_MAIN(TestRouter)
#include "test_router.moc"
