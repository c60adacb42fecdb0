// Parity with Hugging Face transformers on the reference models: convert each family, then compare logits,
// routing and greedy generation through the CLI, for f32 and f16 weights.
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>
#include <cstring>

#include "../test_support.h"

using namespace colibri::test;

struct Tolerance {
    double logits;   // max |Δlogit|
    double weights;  // max |Δ routing weight|
};

class TestReferenceParity : public QObject {
    Q_OBJECT

private:
    QTemporaryDir dir_;

    QString convert(const QString& family, const QString& type) {
        const QString out = dir_.filePath(family + "-" + type + ".bin");
        if (QFile::exists(out)) return out;
        const CliResult r = run_cli({"convert", reference("hf/" + family + "/model"), "-o", out, "--type", type, "-q"});
        if (r.crashed || r.exit_code != 0) qWarning("convert failed: %s", r.err.constData());
        return r.exit_code == 0 ? out : QString();
    }

    void check_family(const QString& family, const QString& type, const Tolerance& tol) {
        const QString model = convert(family, type);
        QVERIFY2(!model.isEmpty(), "conversion failed");
        const QJsonArray input = read_json(reference("hf/" + family + "/ref/input_ids.json")).array();
        QCOMPARE(input.size(), 16);
        const QString ids = ids_arg(input);

        // Logits at every position.
        const QString logits_path = dir_.filePath(family + "-" + type + ".f32");
        CliResult r = run_cli({"logits", "-m", model, "--tokens", ids, "--out", logits_path});
        QVERIFY2(r.exit_code == 0 && !r.crashed, r.err.constData());
        const std::vector<float> got = read_f32(logits_path);
        const std::vector<float> want = read_f32(reference("hf/" + family + "/ref/logits.f32"));
        QCOMPARE(got.size(), want.size());
        double max_diff = 0.0;
        for (size_t i = 0; i < got.size(); ++i) max_diff = std::max(max_diff, std::fabs(double(got[i]) - double(want[i])));
        qInfo("%s %s: max |dlogit| = %.3g (bound %.3g)", qPrintable(family), qPrintable(type), max_diff, tol.logits);
        QVERIFY2(max_diff <= tol.logits, qPrintable(QString("max |dlogit| %1 > %2").arg(max_diff).arg(tol.logits)));

        // Routing: same top-2 experts for every MoE layer and token, weights close.
        r = run_cli({"route", "-m", model, "--tokens", ids, "--json"});
        QVERIFY2(r.exit_code == 0 && !r.crashed, r.err.constData());
        const QJsonArray got_layers = QJsonDocument::fromJson(r.out).object()["layers"].toArray();
        const QJsonArray want_layers = read_json(reference("hf/" + family + "/ref/router.json")).object()["layers"].toArray();
        QCOMPARE(got_layers.size(), want_layers.size());
        double max_w = 0.0;
        for (int l = 0; l < want_layers.size(); ++l) {
            const QJsonObject g = got_layers[l].toObject(), w = want_layers[l].toObject();
            QCOMPARE(g["layer"].toInt(), w["layer"].toInt());
            const QJsonArray ge = g["experts"].toArray(), we = w["experts"].toArray();
            const QJsonArray gw = g["weights"].toArray(), ww = w["weights"].toArray();
            QCOMPARE(ge.size(), we.size());
            for (int t = 0; t < we.size(); ++t) {
                QVERIFY2(ge[t].toArray() == we[t].toArray(),
                         qPrintable(QString("layer %1 token %2: experts differ").arg(l).arg(t)));
                for (int k = 0; k < ww[t].toArray().size(); ++k)
                    max_w = std::max(max_w, std::fabs(gw[t].toArray()[k].toDouble() - ww[t].toArray()[k].toDouble()));
            }
        }
        qInfo("%s %s: max |dweight| = %.3g (bound %.3g)", qPrintable(family), qPrintable(type), max_w, tol.weights);
        QVERIFY(max_w <= tol.weights);

        // Greedy generation: exactly the reference ids.
        r = run_cli({"generate", "-m", model, "--tokens", ids, "-n", "16", "--greedy", "--json"});
        QVERIFY2(r.exit_code == 0 && !r.crashed, r.err.constData());
        const QJsonArray new_ids = QJsonDocument::fromJson(r.out).object()["new_ids"].toArray();
        const QJsonArray want_ids = read_json(reference("hf/" + family + "/ref/generate.json")).object()["new_ids"].toArray();
        QCOMPARE(new_ids, want_ids);
    }

private slots:
    void initTestCase() { QVERIFY(dir_.isValid()); }

    void parity_data() {
        QTest::addColumn<QString>("family");
        QTest::addColumn<QString>("type");
        QTest::addColumn<double>("logit_tol");
        QTest::addColumn<double>("weight_tol");
        // f32: the reference README's bounds. f16: weights rounded to 11-bit mantissas (relative error
        // <= 2^-11 = 4.9e-4 each); over the ~7 chained projections to logits of magnitude ~4 that allows
        // ~7 * 4.9e-4 * 4 = 1.4e-2 in the worst case; measured 3.5e-3..4.9e-3, bound 1e-2.
        for (const char* fam : {"mixtral", "qwen2_moe", "olmoe"}) {
            QTest::newRow(qPrintable(QString(fam) + "/f32")) << QString(fam) << "f32" << 1e-3 << 1e-4;
            QTest::newRow(qPrintable(QString(fam) + "/f16")) << QString(fam) << "f16" << 1e-2 << 1e-3;
        }
    }

    void parity() {
        QFETCH(QString, family);
        QFETCH(QString, type);
        QFETCH(double, logit_tol);
        QFETCH(double, weight_tol);
        check_family(family, type, Tolerance{logit_tol, weight_tol});
    }

    // q8_0 against the f32 reference, teacher-forced at each of the 16 positions (colibri compare): top-1
    // agreement and mean KL(ref || q8_0). q8_0 matrices run on the integer path, so the activations are
    // quantised to 8 bits per block of 32 as in llama.cpp (kernels/canonical.h). Measured with that: mixtral
    // 15/16, 4.9e-4; qwen2_moe 13/16, 2.7e-4; olmoe 16/16, 1.4e-4 (with f32 activations it was 16/16, 9.7e-5;
    // 13/16, 1.4e-4; 16/16, 6.6e-5). The misses are near-ties: mixtral's position 12 has a reference top-1
    // margin of 0.026 logits, qwen2_moe's positions 8, 9 and 14 0.018, 0.011 and 0.005, below q8_0's logit
    // noise (max |dlogit| 0.1..0.4 on these random models), so no 8-bit scheme can promise them
    // (docs/QUANTIZATION.md). What is asserted instead: every position whose reference margin exceeds 0.03
    // agrees, and the mean KL stays within 1.5x of what was measured.
    void q8_0_quality_data() {
        QTest::addColumn<QString>("family");
        QTest::addColumn<double>("max_kl");
        // 1.5× the mean KL measured with 8-bit activations (docs/QUANTIZATION.md, table (a)).
        QTest::newRow("mixtral") << "mixtral" << 7.5e-4;
        QTest::newRow("qwen2_moe") << "qwen2_moe" << 4.0e-4;
        QTest::newRow("olmoe") << "olmoe" << 2.1e-4;
    }

    void q8_0_quality() {
        QFETCH(QString, family);
        QFETCH(double, max_kl);
        const QString model = convert(family, "q8_0");
        QVERIFY(!model.isEmpty());
        const QString ids = ids_arg(read_json(reference("hf/" + family + "/ref/input_ids.json")).array());
        const CliResult r = run_cli({"compare", "-m", model, "--baseline-logits", reference("hf/" + family + "/ref/logits.f32"),
                                     "--tokens", ids, "--json"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        const QJsonObject j = QJsonDocument::fromJson(r.out).object();
        QCOMPARE(j["positions"].toInt(), 16);
        qInfo("%s q8_0: top-1 %d/16, mean KL %.3g", qPrintable(family), j["top1_agree"].toInt(), j["mean_kl"].toDouble());
        for (const auto& d : j["disagreements"].toArray()) {
            const QJsonObject o = d.toObject();
            QVERIFY2(o["baseline_margin"].toDouble() <= 0.03,
                     qPrintable(QString("position %1 flipped with a reference margin of %2")
                                    .arg(o["position"].toInt()).arg(o["baseline_margin"].toDouble())));
        }
        QVERIFY(j["mean_kl"].toDouble() <= max_kl);
    }

    // Same logits, bit for bit, for -t 1 and -t 2 and across runs.
    void determinism_data() {
        QTest::addColumn<QString>("family");
        QTest::addColumn<QString>("type");
        for (const char* fam : {"mixtral", "qwen2_moe", "olmoe"})
            for (const char* type : {"f32", "f16", "bf16", "q8_0"})
                QTest::newRow(qPrintable(QString(fam) + "/" + type)) << QString(fam) << QString(type);
    }

    void determinism() {
        QFETCH(QString, family);
        QFETCH(QString, type);
        const QString model = convert(family, type);
        QVERIFY(!model.isEmpty());
        const QString ids = ids_arg(read_json(reference("hf/" + family + "/ref/input_ids.json")).array());
        QByteArray first;
        int run = 0;
        for (const char* threads : {"1", "2", "2", "1"}) {
            const QString out = dir_.filePath(QString("det-%1-%2-%3.f32").arg(family, type).arg(run++));
            const CliResult r = run_cli({"logits", "-m", model, "--tokens", ids, "-t", threads, "--out", out});
            QVERIFY2(r.exit_code == 0, r.err.constData());
            const QByteArray bytes = read_all(out);
            QVERIFY(!bytes.isEmpty());
            if (first.isEmpty()) first = bytes;
            QVERIFY2(bytes == first, qPrintable(QString("logits differ with -t %1").arg(threads)));
        }
    }
};

QTEST_GUILESS_MAIN(TestReferenceParity)
#include "test_reference_parity.moc"
