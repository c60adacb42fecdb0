// `colibri export` (.bin → GGUF) against llama.cpp's own files: every GGUF of tests/data/gguf and the shared
// Mixtral, imported by `colibri convert` and exported again, gives back the same tensors (names, shapes, ggml
// types, every byte: q4_K's nibbles return to ggml's order, llama's q/k rows to llama.cpp's permutation) and the
// same hyper-parameter keys with the same values as llama.cpp's converter wrote. Also: hostile exports fail cleanly.
#include <QTemporaryDir>
#include <QtTest>
#include <cstring>
#include <nlohmann/json.hpp>

#include "../test_support.h"
#include "tools/gguf.h"

using namespace colibri;
using namespace colibri::test;
using nlohmann::json;

namespace {

// Keys a round trip cannot reproduce: what the .bin does not keep (the unused dense width of an all-MoE model,
// descriptive names), and the vocabulary size, which the export always states (it has no token list).
bool ignored_key(const std::string& key, const std::string& arch) {
    if (key.rfind(arch + ".", 0) != 0) return true;  // general.*, tokenizer.*
    for (const char* k : {".feed_forward_length", ".vocab_size"})
        if (key == arch + k) return true;
    return false;
}

// Older llama.cpp converters wrote qwen2moe's shared-expert gate as [n, 1], current ones (and the export) as
// [n]: the same tensor to ggml.
std::vector<uint64_t> without_trailing_ones(std::vector<uint64_t> ne) {
    while (ne.size() > 1 && ne.back() == 1) ne.pop_back();
    return ne;
}

}  // namespace

class TestGgufExport : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

private slots:
    void round_trip_data() {
        QTest::addColumn<QString>("gguf");
        for (const char* f : {"qwen2moe-f32", "olmoe-f32", "qwen3moe-f32", "gpt_oss-f32", "deepseek_v3-f32", "glm4_moe-f32",
                              "minimax_m2-f32", "glm4_moe_lite-f32",
                              "mixtral-256-quant", "qwen2moe-256-q4_k_m", "gpt_oss-mxfp4"})
            QTest::newRow(f) << QStringLiteral(COLIBRI_TEST_DATA_DIR "/gguf/%1.gguf").arg(f);
        QTest::newRow("mixtral-f32 (shared)") << reference("gguf/mixtral-f32.gguf");
    }
    void round_trip() {
        QFETCH(QString, gguf);
        const QString bin = dir_.filePath(QFileInfo(gguf).baseName() + ".bin"), back = bin + ".gguf";
        CliResult r = run_cli({"convert", gguf, "-o", bin, "--type", "f32", "-q"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        r = run_cli({"export", bin, "-o", back});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        auto a = tools::GgufFile::open(gguf.toStdString());
        auto b = tools::GgufFile::open(back.toStdString());
        QVERIFY2(a && b, (a ? b.message() : a.message()).c_str());
        const std::string arch = a.value()->metadata()["general.architecture"];
        QCOMPARE(b.value()->metadata()["general.architecture"].get<std::string>(), arch);
        for (const auto& [key, value] : a.value()->metadata().items()) {
            if (ignored_key(key, arch)) continue;
            QVERIFY2(b.value()->metadata().contains(key), ("export lacks " + key).c_str());
            QVERIFY2(b.value()->metadata()[key] == value, (key + ": " + b.value()->metadata()[key].dump() + " != " + value.dump()).c_str());
        }
        // deepseek2: llama.cpp's converter writes the gating function only from a config's scoring_func (the
        // reference has none); the export states sigmoid, which llama.cpp needs and the importer checks.
        for (const auto& [key, value] : b.value()->metadata().items())
            QVERIFY2(ignored_key(key, arch) || a.value()->metadata().contains(key) || key == "deepseek2.expert_gating_func",
                     ("export adds " + key).c_str());
        QCOMPARE(b.value()->tensors().size(), a.value()->tensors().size());
        for (const auto& [name, t] : a.value()->tensors()) {
            auto it = b.value()->tensors().find(name);
            QVERIFY2(it != b.value()->tensors().end(), ("export lacks tensor " + name).c_str());
            const tools::GgufTensor& u = it->second;
            QVERIFY2(without_trailing_ones(u.ne) == without_trailing_ones(t.ne) && u.type == t.type, name.c_str());
            QVERIFY2(u.size == t.size && std::memcmp(u.data, t.data, t.size) == 0, ("bytes of " + name).c_str());
        }
        // And it imports again to the same .bin tensors.
        const QString again = bin + ".again.bin";
        r = run_cli({"convert", back, "-o", again, "--type", "f32", "-q"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        r = run_cli({"logits", "-m", again, "--tokens", "1,2,3", "--out", again + ".f32"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        r = run_cli({"logits", "-m", bin, "--tokens", "1,2,3", "--out", bin + ".f32"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        QCOMPARE(read_all(again + ".f32"), read_all(bin + ".f32"));
    }

    // --placeholder-vocab: a BPE llama.cpp's loader takes (gpt2, a merges key), piece "<ID>" per id, the model's
    // bos/eos; the tensors as without it. (That llama-server then generates colibri's greedy ids on the demo model
    // was checked by hand: docs/SERVER.md.)
    void placeholder_vocabulary() {
        const QString gguf = QStringLiteral(COLIBRI_TEST_DATA_DIR "/gguf/qwen2moe-f32.gguf");
        const QString bin = dir_.filePath("vocab.bin"), plain = bin + ".gguf", vocab = bin + ".vocab.gguf";
        QCOMPARE(run_cli({"convert", gguf, "-o", bin, "--type", "f32", "-q"}).exit_code, 0);
        QCOMPARE(run_cli({"export", bin, "-o", plain}).exit_code, 0);
        CliResult r = run_cli({"export", bin, "-o", vocab, "--placeholder-vocab"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        auto a = tools::GgufFile::open(plain.toStdString());
        auto b = tools::GgufFile::open(vocab.toStdString());
        QVERIFY(a && b);
        const json& m = b.value()->metadata();
        QCOMPARE(m["tokenizer.ggml.model"].get<std::string>(), std::string("gpt2"));
        QCOMPARE(a.value()->metadata()["tokenizer.ggml.model"].get<std::string>(), std::string("none"));
        const auto tokens = tools::gguf_strings(m["tokenizer.ggml.tokens"]);
        QVERIFY(tokens);
        const std::string arch = m["general.architecture"].get<std::string>();
        QCOMPARE(tokens->size(), size_t(m[arch + ".vocab_size"].get<uint64_t>()));
        QCOMPARE(tokens->at(0), std::string("<0>"));
        QCOMPARE(tokens->back(), "<" + std::to_string(tokens->size() - 1) + ">");
        QVERIFY(tools::gguf_strings(m["tokenizer.ggml.merges"]));
        QCOMPARE(b.value()->tensors().size(), a.value()->tensors().size());
    }

    // Bad input: a missing or damaged .bin is a one-line error, and no output is left behind.
    void bad_input() {
        const QString out = dir_.filePath("bad.gguf");
        CliResult r = run_cli({"export", dir_.filePath("missing.bin"), "-o", out});
        QCOMPARE(r.exit_code, 1);
        QVERIFY2(r.err.startsWith("colibri: export: ") && r.err.count('\n') == 1, r.err.constData());
        QVERIFY(!QFile::exists(out));
        const QString junk = dir_.filePath("junk.bin");
        QFile f(junk);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(QByteArray(5000, 'x'));
        f.close();
        r = run_cli({"export", junk, "-o", out});
        QCOMPARE(r.exit_code, 1);
        QVERIFY(!QFile::exists(out));
    }
};

QTEST_GUILESS_MAIN(TestGgufExport)
#include "test_gguf_export.moc"
