// Hostile and damaged inputs: each must give one line "colibri: ..." on stderr and a non-zero exit,
// never a crash, a hang or a partial output file.
#include <QDir>
#include <QTemporaryDir>
#include <QtTest>
#include <cstring>
#include <stdexcept>
#include <xxhash.h>

#include "../test_support.h"
#include "engine/file/format.h"

using namespace colibri::test;
using namespace colibri::format;

class TestBadInput : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;
    QString good_;  // a valid converted model
    QByteArray good_bytes_;

    // Runs a command that must fail cleanly; returns its stderr line.
    QString expect_failure(const QStringList& args) {
        const CliResult r = run_cli(args);
        if (r.crashed) {
            QTest::qFail("colibri crashed or hung", __FILE__, __LINE__);
            return {};
        }
        if (r.exit_code == 0) {
            QTest::qFail("colibri exited 0 on bad input", __FILE__, __LINE__);
            return {};
        }
        const QString err = QString::fromUtf8(r.err);
        const QStringList lines = err.split('\n', Qt::SkipEmptyParts);
        if (lines.size() != 1 || !lines[0].startsWith("colibri: ")) {
            QTest::qFail(qPrintable("expected one 'colibri: ' line, got: " + err), __FILE__, __LINE__);
            return {};
        }
        return lines[0];
    }

    QString write_variant(const QString& name, const QByteArray& bytes) { return write_all(dir_.filePath(name), bytes); }

    // The header of a model file's bytes. A file too short to hold one is the fixture going wrong (the
    // converter wrote it), not the case under test: the exception fails the test function before any caller
    // writes through the header's offsets.
    FileHeader header_of(const QByteArray& b) {
        FileHeader h{};
        if (b.size() < qsizetype(sizeof(h))) throw std::runtime_error("model file shorter than its header");
        std::memcpy(&h, b.constData(), sizeof(h));
        return h;
    }

    // Recomputes the metadata checksum so that the structural check itself is what must catch the damage.
    void reseal(QByteArray& b) {
        FileHeader h = header_of(b);
        h.metadata_xxh64 = 0;
        std::memcpy(b.data(), &h, sizeof(h));
        h.metadata_xxh64 = XXH64(b.constData(), h.metadata_size, 0);
        std::memcpy(b.data(), &h, sizeof(h));
    }

    SectionEntry* section(QByteArray& b, uint32_t i) {
        const FileHeader h = header_of(b);
        return reinterpret_cast<SectionEntry*>(b.data() + h.section_table_offset) + i;
    }

    // A copy of an HF reference directory whose config.json is replaced.
    QString hf_copy(const QString& name, const QByteArray& config, const QByteArray& safetensors = {}) {
        const QString d = dir_.filePath(name);
        QDir().mkpath(d);
        const QString src = reference("hf/qwen2_moe/model/");
        write_variant(name + "/config.json", config);
        QFile::copy(src + "generation_config.json", d + "/generation_config.json");
        if (safetensors.isEmpty()) {
            QFile::copy(src + "model.safetensors", d + "/model.safetensors");
        } else {
            write_variant(name + "/model.safetensors", safetensors);
        }
        return d;
    }

    QByteArray config_with(const std::function<void(QJsonObject&)>& edit) {
        QJsonObject cfg = read_json(reference("hf/qwen2_moe/model/config.json")).object();
        edit(cfg);
        return QJsonDocument(cfg).toJson();
    }

private slots:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        good_ = dir_.filePath("good.bin");
        const CliResult r = run_cli({"convert", reference("hf/qwen2_moe/model"), "-o", good_, "-q"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        good_bytes_ = read_all(good_);
        QVERIFY(good_bytes_.size() > 8192);
        QCOMPARE(run_cli({"info", good_}).exit_code, 0);
    }

    void missing_file() {
        const QString e = expect_failure({"info", dir_.filePath("does-not-exist.bin")});
        QVERIFY(e.contains("No such file"));
    }

    void directory_instead_of_file() { QVERIFY(expect_failure({"info", dir_.path()}).contains("not a regular file")); }

    void empty_file() { QVERIFY(expect_failure({"info", write_variant("empty.bin", {})}).contains("truncated")); }

    void truncated_file() {
        for (qsizetype at : {qsizetype(100), qsizetype(4096), good_bytes_.size() / 2, good_bytes_.size() - 1}) {
            const QString e = expect_failure({"info", write_variant("trunc.bin", good_bytes_.left(at))});
            QVERIFY2(e.contains("truncated"), qPrintable(e));
        }
    }

    void wrong_magic() {
        QByteArray b = good_bytes_;
        b[0] = 'X';
        QVERIFY(expect_failure({"info", write_variant("magic.bin", b)}).contains("wrong magic"));
        QVERIFY(expect_failure({"info", reference("hf/qwen2_moe/model/model.safetensors")}).contains("wrong magic"));
    }

    void unknown_major_version() {
        QByteArray b = good_bytes_;
        FileHeader h = header_of(b);
        h.version_major = 3;
        h.version_minor = 0;
        std::memcpy(b.data(), &h, sizeof(h));
        reseal(b);
        const QString e = expect_failure({"info", write_variant("version.bin", b)});
        QVERIFY2(e.contains("unsupported format version 3.0 (this build reads 1.x to 2.x)"), qPrintable(e));
        h.version_major = 0;
        std::memcpy(b.data(), &h, sizeof(h));
        reseal(b);
        QVERIFY(expect_failure({"info", write_variant("version0.bin", b)}).contains("unsupported format version 0.0"));
    }

    void unknown_minor_version_is_accepted() {
        QByteArray b = good_bytes_;
        FileHeader h = header_of(b);
        h.version_minor = 7;
        std::memcpy(b.data(), &h, sizeof(h));
        reseal(b);
        QCOMPARE(run_cli({"info", write_variant("minor.bin", b)}).exit_code, 0);
    }

    void offset_past_end() {
        QByteArray b = good_bytes_;
        section(b, 3)->offset = static_cast<uint64_t>(b.size()) + 4096;
        reseal(b);
        const QString e = expect_failure({"info", write_variant("past-end.bin", b)});
        QVERIFY2(e.contains("runs past the end"), qPrintable(e));
        // A size that overflows offset + size must not wrap around.
        b = good_bytes_;
        section(b, 3)->size = ~uint64_t(0) - 100;
        reseal(b);
        QVERIFY(expect_failure({"info", write_variant("overflow.bin", b)}).contains("runs past the end"));
    }

    void misaligned_section() {
        QByteArray b = good_bytes_;
        section(b, 3)->offset += 64;
        reseal(b);
        const QString e = expect_failure({"info", write_variant("misaligned.bin", b)});
        QVERIFY2(e.contains("misaligned"), qPrintable(e));
    }

    void overlapping_sections() {
        QByteArray b = good_bytes_;
        section(b, 4)->offset = section(b, 3)->offset;
        reseal(b);
        QVERIFY(expect_failure({"info", write_variant("overlap.bin", b)}).contains("overlap"));
    }

    void damaged_metadata() {
        QByteArray b = good_bytes_;
        b[static_cast<qsizetype>(sizeof(FileHeader)) + 20] = static_cast<char>(b[static_cast<qsizetype>(sizeof(FileHeader)) + 20] ^ 1);
        const QString e = expect_failure({"info", write_variant("meta.bin", b)});
        QVERIFY2(e.contains("checksum") || e.contains("section"), qPrintable(e));
    }

    void tensor_table_lies() {
        QByteArray b = good_bytes_;
        const FileHeader h = header_of(b);
        auto* t = reinterpret_cast<TensorEntry*>(b.data() + h.tensor_table_offset);
        t->dims[0] *= 2;  // shape no longer matches the stored size
        reseal(b);
        QVERIFY(expect_failure({"info", write_variant("tensor.bin", b)}).contains("does not match its shape"));
    }

    // Found by a mutation sweep: a huge size that no tensor vouches for once made the session allocate gigabytes.
    void unvouched_hyper_parameter() {
        QByteArray b = good_bytes_;
        FileHeader h = header_of(b);
        h.hparams.dense_ffn = 1u << 31;
        std::memcpy(b.data(), &h, sizeof(h));
        reseal(b);
        const QString e = expect_failure({"logits", "-m", write_variant("dense.bin", b), "--tokens", "1,2"});
        QVERIFY2(e.contains("dense_ffn is set but no layer is dense"), qPrintable(e));
        QVERIFY(expect_failure({"logits", "-m", good_, "--tokens", "1", "-c", "4000000000"}).contains("exceeds the model's maximum"));
    }

    void config_missing_field() {
        const QString d = hf_copy("no-hidden", config_with([](QJsonObject& c) { c.remove("hidden_size"); }));
        const QString out = dir_.filePath("no-hidden.bin");
        QVERIFY(expect_failure({"convert", d, "-o", out}).contains("missing field 'hidden_size'"));
        QVERIFY(!QFile::exists(out));
    }

    void config_wrong_field() {
        const QString d = hf_copy("bad-type", config_with([](QJsonObject& c) { c["num_hidden_layers"] = "two"; }));
        QVERIFY(expect_failure({"convert", d, "-o", dir_.filePath("x.bin")}).contains("'num_hidden_layers' must be a positive integer"));
        const QString d2 = hf_copy("bad-family", config_with([](QJsonObject& c) { c["model_type"] = "llama"; }));
        QVERIFY(expect_failure({"convert", d2, "-o", dir_.filePath("x.bin")}).contains("unsupported model_type 'llama'"));
        // A config that disagrees with the checkpoint's shapes.
        const QString d3 = hf_copy("bad-shape", config_with([](QJsonObject& c) { c["moe_intermediate_size"] = 96; }));
        QVERIFY(expect_failure({"convert", d3, "-o", dir_.filePath("x.bin")}).contains("has shape [128, 64], config.json implies [96, 64]"));
        // Counts that would make planning run away.
        const QString d5 = hf_copy("many-experts", config_with([](QJsonObject& c) { c["num_experts"] = 2000000000; }));
        QVERIFY(expect_failure({"convert", d5, "-o", dir_.filePath("x.bin")}).contains("experts exceed 4096"));
        const QString d4 = hf_copy("not-json", "{ \"hidden_size\": ");
        QVERIFY(expect_failure({"convert", d4, "-o", dir_.filePath("x.bin")}).contains("not valid JSON"));
        QVERIFY(!QFile::exists(dir_.filePath("x.bin")));
    }

    // The Gated DeltaNet hybrids' configs and header fields: each inconsistency is one clear error, nothing written.
    void hybrid_config_and_header_problems() {
        auto hybrid = [](const QString& family, const std::function<void(QJsonObject&)>& edit) {
            QJsonObject cfg = read_json(reference("hf/" + family + "/model/config.json")).object();
            edit(cfg);
            return QJsonDocument(cfg).toJson();
        };
        const QString out = dir_.filePath("hybrid.bin");
        const struct {
            const char* name;
            QByteArray config;
            const char* error;
        } cases[] = {
            {"gdn-ratio", hybrid("qwen3_next", [](QJsonObject& c) { c["linear_num_value_heads"] = 3; }),
             "linear value heads 3 are not a multiple of linear key heads 2"},
            {"gdn-missing", hybrid("qwen3_next", [](QJsonObject& c) { c.remove("linear_key_head_dim"); }), "missing field 'linear_key_head_dim'"},
            {"gdn-types", hybrid("qwen3_next", [](QJsonObject& c) { c["full_attention_interval"] = 2; }),
             "layer_types[1] is \"linear_attention\", not what full_attention_interval 2 says"},
            // Found by fuzz_config: a step of 0 was read before the config's errors were, a division by zero.
            {"gdn-step", hybrid("qwen3_next", [](QJsonObject& c) { c["decoder_sparse_step"] = 0; }),
             "field 'decoder_sparse_step' must be a positive integer"},
            {"gdn-text", hybrid("qwen3_5_moe", [](QJsonObject& c) {
                 c["model_type"] = "qwen3_5_moe";
                 c["text_config"] = 5;
             }), "field 'text_config' must be an object with model_type qwen3_5_moe_text"},
        };
        for (const auto& c : cases) {
            const QString e = expect_failure({"convert", hf_copy(c.name, c.config), "-o", out});
            QVERIFY2(e.contains(c.error), qPrintable(e));
            QVERIFY(!QFile::exists(out));
        }
        // A file of another family with linear-attention fields, or with the reserved bytes set, is refused.
        QByteArray b = good_bytes_;
        FileHeader h = header_of(b);
        h.hparams.linear_key_heads = 2;
        std::memcpy(b.data(), &h, sizeof(h));
        reseal(b);
        QString e = expect_failure({"logits", "-m", write_variant("linear.bin", b), "--tokens", "1,2"});
        QVERIFY2(e.contains("only qwen3_next and qwen3_5_moe have Gated DeltaNet layers"), qPrintable(e));
        b = good_bytes_;
        h = header_of(b);
        h.hparams.reserved_hparams[3] = 1;
        std::memcpy(b.data(), &h, sizeof(h));
        reseal(b);
        e = expect_failure({"logits", "-m", write_variant("reserved.bin", b), "--tokens", "1"});
        QVERIFY2(e.contains("reserved hyper-parameter bytes are not zero"), qPrintable(e));
    }

    void safetensors_header_lies() {
        const QByteArray st = read_all(reference("hf/qwen2_moe/model/model.safetensors"));
        uint64_t len;
        std::memcpy(&len, st.constData(), 8);
        const QByteArray header = st.mid(8, static_cast<qsizetype>(len));
        const QByteArray config = read_all(reference("hf/qwen2_moe/model/config.json"));
        const QString out = dir_.filePath("lie.bin");

        // Offsets past the end of the data.
        QByteArray data = st;
        data.truncate(data.size() - 1000);
        QVERIFY(expect_failure({"convert", hf_copy("st-short", config, data), "-o", out}).contains("exceed the data section"));
        // A shape that does not match its byte range.
        QJsonObject h = QJsonDocument::fromJson(header).object();
        QJsonObject t = h["model.norm.weight"].toObject();
        t["shape"] = QJsonArray{65};
        h["model.norm.weight"] = t;
        QByteArray nh = QJsonDocument(h).toJson(QJsonDocument::Compact);
        nh.append(QByteArray(static_cast<qsizetype>(len) - nh.size(), ' '));
        QVERIFY(nh.size() == static_cast<qsizetype>(len));
        QByteArray lying = st.left(8) + nh + st.mid(8 + static_cast<qsizetype>(len));
        QVERIFY(expect_failure({"convert", hf_copy("st-shape", config, lying), "-o", out}).contains("shape needs 260 bytes"));
        // A header length larger than the file.
        QByteArray huge = st;
        const uint64_t big = 1ull << 40;
        std::memcpy(huge.data(), &big, 8);
        QVERIFY(expect_failure({"convert", hf_copy("st-len", config, huge), "-o", out}).contains("header length"));
        // Not JSON at all.
        QByteArray garbage = st;
        garbage[8] = '!';
        QVERIFY(expect_failure({"convert", hf_copy("st-json", config, garbage), "-o", out}).contains("not valid JSON"));
        QVERIFY(!QFile::exists(out));
        QDir d(dir_.path());
        QVERIFY(d.entryList({"lie.bin*"}, QDir::Files | QDir::Hidden).isEmpty());  // no temp files left either
    }

    // One context check and one token-id check (engine/core/model.h), worded alike by every command that opens
    // a model, serve and bench included.
    void one_context_and_token_check() {
        const CliResult info = run_cli({"info", good_, "--json"});
        QCOMPARE(info.exit_code, 0);
        const QJsonObject hp = QJsonDocument::fromJson(info.out).object();
        const QString too_long = QStringLiteral("context 4000000000 exceeds the model's maximum of %1").arg(hp["max_position"].toInt());
        const QString bad_id = QStringLiteral("token id 99999 out of range (vocabulary %1)").arg(hp["vocab_size"].toInt());
        const QStringList ids{"--tokens", "1,2"}, bad_ids{"--tokens", "1,99999"};
        const std::vector<QStringList> commands{{"logits", "-m", good_}, {"generate", "-m", good_}, {"route", "-m", good_},
                                                {"compare", "-m", good_, "--baseline", good_}};
        for (const QStringList& c : commands) {
            QCOMPARE(expect_failure(c + ids + QStringList{"-c", "4000000000"}), "colibri: " + c[0] + ": " + too_long);
            QCOMPARE(expect_failure(c + bad_ids), "colibri: " + c[0] + ": " + bad_id);
        }
        for (const QStringList& c : std::vector<QStringList>{{"bench", "-m", good_}, {"serve", "-m", good_, "--port", "0"}, {"chat", "-m", good_}})
            QCOMPARE(expect_failure(c + QStringList{"-c", "4000000000"}), "colibri: " + c[0] + ": " + too_long);
    }

    void bad_cli_arguments() {
        QVERIFY(expect_failure({"logits", "-m", good_, "--tokens", "1,x,3"}).contains("not a token id"));
        QVERIFY(expect_failure({"logits", "-m", good_, "--tokens", "1,99999"}).contains("out of range"));
        QVERIFY(expect_failure({"logits", "-m", good_}).contains("give --tokens or --prompt"));
        QVERIFY(expect_failure({"convert", dir_.filePath("nowhere"), "-o", dir_.filePath("y.bin")}).contains("no such file"));
        QVERIFY(expect_failure({"convert", reference("hf/qwen2_moe/model"), "-o", dir_.filePath("y.bin"), "--type", "f8"}).contains("unknown weight type"));
        QVERIFY(expect_failure({"frobnicate"}).startsWith("colibri: usage"));
        QVERIFY(expect_failure({"chat", "-m", good_}).contains("no tokenizer"));
    }
};

QTEST_GUILESS_MAIN(TestBadInput)
#include "test_bad_input.moc"
