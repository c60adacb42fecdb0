// GGUF import: llama.cpp's own conversions of the reference Mixtral, Qwen2-MoE and OLMoE give the same logits as
// converting the HF directories directly; damaged or unsupported GGUF files give one-line errors.
#include <QTemporaryDir>
#include <QtTest>
#include <string_view>

#include "../test_support.h"

using namespace colibri::test;

class TestGguf : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

    QString write_variant(const QString& name, const QByteArray& bytes) { return write_all(dir_.filePath(name), bytes); }
    static QString gguf_data(const QString& name) { return QStringLiteral(COLIBRI_TEST_DATA_DIR "/gguf/") + name; }

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

    // tests/data/gguf/*-f32.gguf: the reference HF models (qwen2_moe, olmoe and the four transformers 5.2 ones)
    // through llama.cpp's convert_hf_to_gguf.py.
    void reference_families_data() {
        QTest::addColumn<QString>("family");
        QTest::addColumn<QString>("gguf");
        QTest::addColumn<QString>("type");
        // Sanitized (kSanitized): f32 only; the f16 rows repeat the same import path with other numbers.
        for (const char* type : {"f32", "f16"}) {
            if (kSanitized && type == std::string_view("f16")) continue;
            QTest::newRow(qPrintable(QString("qwen2_moe ") + type)) << "qwen2_moe" << "qwen2moe-f32.gguf" << type;
            QTest::newRow(qPrintable(QString("olmoe ") + type)) << "olmoe" << "olmoe-f32.gguf" << type;
            QTest::newRow(qPrintable(QString("qwen3_moe ") + type)) << "qwen3_moe" << "qwen3moe-f32.gguf" << type;
            QTest::newRow(qPrintable(QString("gpt_oss ") + type)) << "gpt_oss" << "gpt_oss-f32.gguf" << type;
            QTest::newRow(qPrintable(QString("deepseek_v3 ") + type)) << "deepseek_v3" << "deepseek_v3-f32.gguf" << type;
            QTest::newRow(qPrintable(QString("glm4_moe ") + type)) << "glm4_moe" << "glm4_moe-f32.gguf" << type;
            // minimax-m2, and GLM-4.7-Flash as llama.cpp writes it: deepseek2 (imported as deepseek_v3).
            QTest::newRow(qPrintable(QString("minimax_m2 ") + type)) << "minimax_m2" << "minimax_m2-f32.gguf" << type;
            QTest::newRow(qPrintable(QString("glm4_moe_lite ") + type)) << "glm4_moe_lite" << "glm4_moe_lite-f32.gguf" << type;
        }
    }

    void reference_families() {
        QFETCH(QString, family);
        QFETCH(QString, gguf);
        QFETCH(QString, type);
        const QString from_gguf = dir_.filePath(family + "-gguf-" + type + ".bin"), from_hf = dir_.filePath(family + "-hf-" + type + ".bin");
        CliResult r = run_cli({"convert", gguf_data(gguf), "-o", from_gguf, "--type", type, "-q"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        QCOMPARE(run_cli({"convert", reference("hf/" + family + "/model"), "-o", from_hf, "--type", type, "-q"}).exit_code, 0);
        const QString ids = ids_arg(read_json(reference("hf/" + family + "/ref/input_ids.json")).array());
        QCOMPARE(run_cli({"logits", "-m", from_gguf, "--tokens", ids, "--out", from_gguf + ".f32"}).exit_code, 0);
        QCOMPARE(run_cli({"logits", "-m", from_hf, "--tokens", ids, "--out", from_hf + ".f32"}).exit_code, 0);
        const std::vector<float> got = read_f32(from_gguf + ".f32"), hf = read_f32(from_hf + ".f32");
        const std::vector<float> want = read_f32(reference("hf/" + family + "/ref/logits.f32"));
        QCOMPARE(got.size(), size_t(16 * 4096));
        QCOMPARE(want.size(), got.size());
        double vs_hf = 0, vs_ref = 0;
        for (size_t i = 0; i < got.size(); ++i) {
            vs_hf = std::max(vs_hf, std::fabs(double(got[i]) - hf[i]));
            vs_ref = std::max(vs_ref, std::fabs(double(got[i]) - want[i]));
        }
        qInfo("%s %s: max |delta logit| vs the HF path %.3g, vs transformers %.3g", qPrintable(family), qPrintable(type), vs_hf, vs_ref);
        QVERIFY(vs_hf == 0);  // the same weights in the same places (f16: rounded from the same f32 values)
        QVERIFY(vs_ref <= (type == "f32" ? 1e-3 : 1e-2));
        if (type == "f32") {
            r = run_cli({"generate", "-m", from_gguf, "--tokens", ids, "-n", "16", "--greedy", "--json"});
            QCOMPARE(QJsonDocument::fromJson(r.out).object()["new_ids"].toArray(),
                     read_json(reference("hf/" + family + "/ref/generate.json")).object()["new_ids"].toArray());
        }
    }

    // Unsupported or inconsistent files are refused with one line naming what is wrong.
    void refused_files_data() {
        QTest::addColumn<QString>("gguf");
        QTest::addColumn<QByteArray>("find");
        QTest::addColumn<int>("offset");  // of the patched bytes, from the end of `find`; -1: replace `find` itself
        QTest::addColumn<QByteArray>("bytes");
        QTest::addColumn<QString>("message");
        const QByteArray f32_as_q4_1("\x03\0\0\0", 4), u32_as_f32("\x06\0\0\0", 4), ne_32("\x20\0\0\0\0\0\0\0", 8);
        QTest::newRow("unknown architecture") << "olmoe-f32.gguf" << QByteArray("olmoe") << -1 << QByteArray("olmox")
                                              << "GGUF architecture 'olmox' is not supported (llama with experts, qwen2moe, olmoe, qwen3moe, gpt-oss, deepseek2, glm4moe, minimax-m2, qwen3next, qwen35moe)";
        QTest::newRow("missing key") << "olmoe-f32.gguf" << QByteArray("olmoe.expert_used_count") << -1
                                     << QByteArray("olmoe.expert_used_counX") << "GGUF metadata: missing olmoe.expert_used_count";
        QTest::newRow("key of the wrong type") << "qwen2moe-f32.gguf" << QByteArray("qwen2moe.block_count") << 0 << u32_as_f32
                                               << "GGUF metadata: qwen2moe.block_count must be a positive integer";
        // The last tensor: a smaller size keeps llama.cpp's layout (no tensor follows whose offset would move).
        QTest::newRow("unsupported tensor type") << "olmoe-f32.gguf" << QByteArray("output_norm.weight") << 12 << f32_as_q4_1
                                                 << "tensor output_norm.weight has ggml type q4_1, which cannot be imported";
        QTest::newRow("tensor of the wrong shape") << "olmoe-f32.gguf" << QByteArray("output_norm.weight") << 4 << ne_32
                                                   << "tensor output_norm.weight has shape [32] (rows, columns), the metadata implies [64]";
        QTest::newRow("softmax gating") << "glm4_moe-f32.gguf" << QByteArray("glm4moe.expert_gating_func") << 4 << QByteArray("\x01\0\0\0", 4)
                                        << "GGUF metadata: glm4moe.expert_gating_func is not sigmoid";
        QTest::newRow("missing tensor") << "qwen2moe-f32.gguf" << QByteArray("blk.1.ffn_gate_inp_shexp.weight") << -1
                                        << QByteArray("blk.1.ffn_gate_inp_shexp.weighX") << "tensor blk.1.ffn_gate_inp_shexp.weight is missing";
        // llama.cpp's layout: each tensor's data where the previous one's ends, rounded up to the alignment (32). In
        // olmoe-f32.gguf blk.1.attn_q_norm.weight ([64] f32) lies at 3749376, after blk.1.attn_output.weight.
        const auto u64 = [](uint64_t v) { return QByteArray(reinterpret_cast<const char*>(&v), 8); };
        const QString q_norm = "GGUF tensor 'blk.1.attn_q_norm.weight' has offset %1, expected 3749376";
        QTest::newRow("offset with a gap") << "olmoe-f32.gguf" << QByteArray("blk.1.attn_q_norm.weight") << 16 << u64(3749376 + 32)
                                           << q_norm.arg(3749376 + 32);
        QTest::newRow("offset unaligned") << "olmoe-f32.gguf" << QByteArray("blk.1.attn_q_norm.weight") << 16 << u64(3749376 + 4)
                                          << q_norm.arg(3749376 + 4);
        QTest::newRow("offsets overlapping") << "olmoe-f32.gguf" << QByteArray("blk.1.attn_q_norm.weight") << 16 << u64(3732992)
                                             << q_norm.arg(3732992);
        // A Q6_K matrix declared f16 (320 x 256): its f16 size runs into the tensors after it, whose offsets then
        // disagree with it (NaN logits, before).
        QTest::newRow("type whose size runs into the next tensor")
            << "qwen2moe-256-q4_k_m.gguf" << QByteArray("output.weight") << 20 << QByteArray("\x01\0\0\0", 4)
            << "GGUF tensor 'output_norm.weight' has offset 67200, expected 163840 (where 'output.weight', 163840 bytes as f16, ends, aligned to 32)";
    }

    void refused_files() {
        QFETCH(QString, gguf);
        QFETCH(QByteArray, find);
        QFETCH(int, offset);
        QFETCH(QByteArray, bytes);
        QFETCH(QString, message);
        QByteArray b = read_all(gguf_data(gguf));
        const qsizetype at = b.indexOf(find);
        QVERIFY(at > 0);
        if (offset < 0) b.replace(at, find.size(), bytes);
        else b.replace(at + find.size() + offset, bytes.size(), bytes);
        const QString e = expect_failure(write_variant("refused.gguf", b));
        QVERIFY2(e.contains(message), qPrintable(e));
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
        // never a crash or a hang (sanitized, a third of them: fuzz_gguf and the corruption sweep run such flips
        // under ASan by the thousand).
        for (int pos = 0; pos < 4096; pos += kSanitized ? 183 : 61) {
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
