// Engine-level determinism of the kernels: on a generated MoE model in every weight type, the logits of
// `colibri logits` are bit-identical for -t 1 and -t 2, and for every kernel variant this CPU runs
// (COLIBRI_KERNEL), since every variant follows the one canonical reduction order.
#include <QTemporaryDir>
#include <QtTest>

#include "../test_support.h"
#include "kernels/registry.h"

using namespace colibri;
using namespace colibri::test;

class TestKernelsEngine : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    const QString tokens_ = "1,7,42,99,3,250,17,64";

    QString bin(const QString& type) const { return dir_.filePath("model-" + type + ".bin"); }

    // The logits file of one run; empty on failure (the reason is logged).
    QByteArray logits(const QString& type, int threads, const char* variant) {
        if (variant) qputenv("COLIBRI_KERNEL", variant);
        else qunsetenv("COLIBRI_KERNEL");
        const QString out = dir_.filePath(QString("logits-%1-t%2-%3.f32").arg(type).arg(threads).arg(variant ? variant : "default"));
        const CliResult r = run_cli({"logits", "-m", bin(type), "--tokens", tokens_, "-t", QString::number(threads), "--out", out});
        qunsetenv("COLIBRI_KERNEL");
        if (r.crashed || r.exit_code != 0) {
            qWarning("colibri logits failed: %s", r.err.constData());
            return {};
        }
        return read_all(out);
    }

private slots:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        // Rows of 256 columns: whole q4_K super-blocks everywhere; 4 experts, top-2; odd row counts come from
        // the vocabulary (509 = prime).
        QVERIFY(make_model(dir_.filePath("hf"), {"--family", "qwen2_moe", "--vocab", "509", "--hidden", "256",
                                                 "--layers", "2", "--heads", "4", "--kv-heads", "2", "--experts", "4",
                                                 "--top-k", "2", "--ffn", "256", "--shared-ffn", "256", "--seed", "5"}));
        for (const char* type : {"f32", "f16", "bf16", "q8_0", "q4_k", "q4_0"}) {
            const CliResult r = run_cli({"convert", dir_.filePath("hf"), "-o", bin(type), "--type", type, "--quiet"});
            QVERIFY2(r.exit_code == 0 && !r.crashed, r.err.constData());
        }
    }

    void logits_bit_identical_data() {
        QTest::addColumn<QString>("type");
        for (const char* type : {"f32", "f16", "bf16", "q8_0", "q4_k", "q4_0"}) QTest::newRow(type) << type;
    }
    void logits_bit_identical() {
        QFETCH(QString, type);
        const QByteArray one = logits(type, 1, nullptr);
        QVERIFY(!one.isEmpty());
        QCOMPARE(size_t(one.size()), size_t(8 * 509 * sizeof(float)));
        QVERIFY2(logits(type, 2, nullptr) == one, "-t 2 differs from -t 1");
        for (kernels::Variant v : kernels::supported_variants()) {
            const QByteArray other = logits(type, 2, kernels::variant_name(v));
            QVERIFY2(other == one, qPrintable(QString("variant %1 differs").arg(kernels::variant_name(v))));
        }
    }

    void unsupported_variant_is_an_error() {
        qputenv("COLIBRI_KERNEL", "no_such_isa");
        const CliResult r = run_cli({"logits", "-m", bin("f32"), "--tokens", "1,2"});
        qunsetenv("COLIBRI_KERNEL");
        QCOMPARE(r.exit_code, 1);
        QVERIFY(!r.crashed);
        QVERIFY2(r.err.startsWith("colibri: COLIBRI_KERNEL: unknown kernel variant 'no_such_isa'"), r.err.constData());
        QCOMPARE(r.err.count('\n'), 1);
    }
};

QTEST_GUILESS_MAIN(TestKernelsEngine)
#include "test_kernels_engine.moc"
