// What the shared transformers references do not cover, against an independent float64 implementation of
// transformers v5.2.0's modeling code (tests/generators/family_checks/make_checks.py, which first reproduces the shared
// references within 3e-6): DeepSeek YaRN with mscale / mscale_all_dim, MLA without a low-rank q (V2-Lite), Qwen3's
// mlp_only_layers, GLM-4.5's q/k norm with two expert groups, and gpt-oss over 140 positions, where a sliding
// layer's KV ring (128 slots) wraps. Each case in tests/data/families is converted
// and must give the expected logits (1e-3), experts in the same order with weights and selection scores within
// 1e-4, the same greedy ids, and the same bits with -t 1 and -t 2.
#include <QDir>
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>
#include <cstring>

#include "../test_support.h"

using namespace colibri::test;

class TestFamilyChecks : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;

    static QString case_dir(const QString& name) { return QStringLiteral(COLIBRI_TEST_DATA_DIR "/families/") + name; }

private slots:
    void initTestCase() { QVERIFY(dir_.isValid()); }

    void matches_independent_implementation_data() {
        QTest::addColumn<QString>("name");
        const QStringList cases = QDir(QStringLiteral(COLIBRI_TEST_DATA_DIR "/families")).entryList(QDir::Dirs | QDir::NoDotAndDotDot);
        QVERIFY(cases.size() >= 6);
        for (const QString& c : cases) QTest::newRow(qPrintable(c)) << c;
    }

    void matches_independent_implementation() {
        QFETCH(QString, name);
        const QJsonObject want = read_json(case_dir(name) + "/expected.json").object();
        const QString model = dir_.filePath(name + ".bin");
        CliResult r = run_cli({"convert", case_dir(name), "-o", model, "-q"});
        QVERIFY2(r.exit_code == 0 && !r.crashed, r.err.constData());
        const QString ids = ids_arg(want["input_ids"].toArray());

        QByteArray first;
        for (const char* threads : {"1", "2"}) {
            const QString out = dir_.filePath(name + "-t" + threads + ".f32");
            r = run_cli({"logits", "-m", model, "--tokens", ids, "-t", threads, "--out", out});
            QVERIFY2(r.exit_code == 0, r.err.constData());
            const QByteArray bytes = read_all(out);
            if (first.isEmpty()) first = bytes;
            QVERIFY2(bytes == first, "logits differ between -t 1 and -t 2");
        }
        const std::vector<float> got = read_f32(dir_.filePath(name + "-t1.f32"));
        const std::vector<float> ref = read_f32(case_dir(name) + "/logits.f32");
        QCOMPARE(got.size(), ref.size());
        double max_diff = 0.0;
        for (size_t i = 0; i < got.size(); ++i) max_diff = std::max(max_diff, std::fabs(double(got[i]) - double(ref[i])));
        qInfo("%s: max |dlogit| = %.3g", qPrintable(name), max_diff);
        QVERIFY2(max_diff <= 1e-3, qPrintable(QString("max |dlogit| %1").arg(max_diff)));

        r = run_cli({"route", "-m", model, "--tokens", ids, "--json"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        const QJsonArray got_layers = QJsonDocument::fromJson(r.out).object()["layers"].toArray();
        const QJsonArray want_layers = want["layers"].toArray();
        QCOMPARE(got_layers.size(), want_layers.size());
        double max_w = 0.0;
        for (int l = 0; l < want_layers.size(); ++l) {
            const QJsonObject g = got_layers[l].toObject(), w = want_layers[l].toObject();
            QCOMPARE(g["layer"].toInt(), w["layer"].toInt());
            const QJsonArray ge = g["experts"].toArray(), we = w["experts"].toArray();
            QCOMPARE(ge.size(), we.size());
            for (int t = 0; t < we.size(); ++t) {
                QVERIFY2(ge[t].toArray() == we[t].toArray(), qPrintable(QString("layer %1 token %2: experts differ").arg(l).arg(t)));
                for (const char* key : {"weights", "selection_scores"})
                    for (int k = 0; k < we[t].toArray().size(); ++k)
                        max_w = std::max(max_w, std::fabs(g[key].toArray()[t].toArray()[k].toDouble() -
                                                          w[key].toArray()[t].toArray()[k].toDouble()));
            }
        }
        qInfo("%s: max |dweight|, |dselection| = %.3g", qPrintable(name), max_w);
        QVERIFY(max_w <= 1e-4);

        r = run_cli({"generate", "-m", model, "--tokens", ids, "-n", "8", "--greedy", "--json"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        QCOMPARE(QJsonDocument::fromJson(r.out).object()["new_ids"].toArray(), want["new_ids"].toArray());
    }
};

QTEST_GUILESS_MAIN(TestFamilyChecks)
#include "test_family_checks.moc"
