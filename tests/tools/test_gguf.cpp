// GGUF import: llama.cpp's own conversion of the reference Mixtral gives the same logits as converting the HF
// directory directly; damaged GGUF files give one-line errors.
#include <QTemporaryDir>
#include <QtTest>

#include "../test_support.h"

using namespace colibri::test;

class TestGguf : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

    QString write_variant(const QString& name, const QByteArray& bytes) { return write_all(dir_.filePath(name), bytes); }

    QString expect_failure(const QString& gguf) {
        const QString out = dir_.filePath("out.bin");
        const CliResult r = run_cli({"convert", gguf, "-o", out});
        if (r.crashed || r.exit_code == 0 || !r.err.startsWith("colibri: convert: ") || r.err.count('\n') != 1 || QFile::exists(out)) {
            QTest::qFail(qPrintable("expected a clean failure, got: " + QString::fromUtf8(r.err)), __FILE__, __LINE__);
            return {};
        }
        return QString::fromUtf8(r.err);
    }

private slots:
    void same_logits_as_the_hf_path_data() {
        QTest::addColumn<QString>("type");
        QTest::newRow("f32") << "f32";
        QTest::newRow("f16") << "f16";
    }

    void same_logits_as_the_hf_path() {
        QFETCH(QString, type);
        const QString from_gguf = dir_.filePath("gguf-" + type + ".bin"), from_hf = dir_.filePath("hf-" + type + ".bin");
        CliResult r = run_cli({"convert", reference("gguf/mixtral-f32.gguf"), "-o", from_gguf, "--type", type});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        QCOMPARE(run_cli({"convert", reference("hf/mixtral/model"), "-o", from_hf, "--type", type, "-q"}).exit_code, 0);
        const QString ids = ids_arg(read_json(reference("hf/mixtral/ref/input_ids.json")).array());
        QCOMPARE(run_cli({"logits", "-m", from_gguf, "--tokens", ids, "--out", from_gguf + ".f32"}).exit_code, 0);
        QCOMPARE(run_cli({"logits", "-m", from_hf, "--tokens", ids, "--out", from_hf + ".f32"}).exit_code, 0);
        const QByteArray a = read_all(from_gguf + ".f32");
        QCOMPARE(a.size(), 16 * 32000 * 4);
        QVERIFY(a == read_all(from_hf + ".f32"));  // the same weights in the same places: bit-identical
        if (type == "f32") {
            const std::vector<float> got = read_f32(from_gguf + ".f32"), want = read_f32(reference("hf/mixtral/ref/logits.f32"));
            double max_diff = 0;
            for (size_t i = 0; i < got.size(); ++i) max_diff = std::max(max_diff, std::fabs(double(got[i]) - want[i]));
            QVERIFY(max_diff <= 1e-3);
        }
        r = run_cli({"generate", "-m", from_gguf, "--tokens", ids, "-n", "16", "--greedy", "--json"});
        if (type == "f32")
            QCOMPARE(QJsonDocument::fromJson(r.out).object()["new_ids"].toArray(),
                     read_json(reference("hf/mixtral/ref/generate.json")).object()["new_ids"].toArray());
    }

    void damaged_files() {
        const QByteArray good = read_all(reference("gguf/mixtral-f32.gguf"));
        QVERIFY(good.size() > 1000000);
        QVERIFY(expect_failure(write_variant("t1.gguf", good.left(20))).contains("too short"));
        for (qsizetype at : {qsizetype(100), qsizetype(5000), qsizetype(700000), good.size() - 10}) {
            const QString e = expect_failure(write_variant("t.gguf", good.left(at)));
            QVERIFY2(e.contains("past the end") || e.contains("missing"), qPrintable(e));
        }
        QByteArray b = good;
        b[0] = 'X';
        QVERIFY(expect_failure(write_variant("magic.gguf", b)).contains("wrong magic"));
        b = good;
        b[4] = 9;
        QVERIFY(expect_failure(write_variant("version.gguf", b)).contains("unsupported GGUF version 9"));
        // Architecture renamed: refused, not misread.
        b = good;
        const qsizetype at = b.indexOf("llama");
        QVERIFY(at > 0);
        b.replace(at, 5, "gpt2x");
        QVERIFY(expect_failure(write_variant("arch.gguf", b)).contains("architecture 'gpt2x' is not supported"));
        // Every single-byte flip in the first 4 KiB (keys, types, counts, tensor infos): an error or a valid file,
        // never a crash or a hang.
        for (int pos = 0; pos < 4096; pos += 61) {
            QByteArray f = good;
            f[pos] = static_cast<char>(f[pos] ^ 0xFF);
            const CliResult r = run_cli({"convert", write_variant("flip.gguf", f), "-o", dir_.filePath("flip.bin"), "-q"});
            QVERIFY2(!r.crashed, qPrintable(QString("crash at byte %1").arg(pos)));
            if (r.exit_code != 0) QVERIFY(r.err.startsWith("colibri: "));
            QFile::remove(dir_.filePath("flip.bin"));
        }
    }
};

QTEST_GUILESS_MAIN(TestGguf)
#include "test_gguf.moc"
