// colibri check (tools/check.h): valid files of every family and weight type pass; damage is reported per
// section by name with its byte range, every damaged section of a file at once; a NaN or outlying value in a damaged
// section names its tensor, byte, row and column; crafted headers (written by the converter, then
// patched and resealed so that only the structural damage remains) name the misaligned, overlapping or
// out-of-bounds section and the mis-shaped tensor; tokenizer and chat-template damage is named; a damaged
// .bin.zst frame names its expert; progress is monotonic and reaches the total; cancellation stops early; and
// the CLI's text, JSON and exit codes say the same.
#include <xxhash.h>

#include <QDir>
#include <QJsonArray>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>
#include <atomic>
#include <cstddef>
#include <cstring>

#include "../bin_bytes.h"
#include "../test_support.h"
#include "engine/file/format.h"
#include "engine/file/zst_writer.h"
#include "tools/check.h"
#include "tools/convert.h"

using namespace colibri;
using namespace colibri::format;
using namespace colibri::test;

namespace {

QString problems_text(const tools::CheckReport& r) {
    QStringList lines;
    for (const std::string& p : r.problems) lines << QString::fromStdString(p);
    return lines.join("\n");
}

// The problem line of a section whose checksum failed and whose values show nothing out of line: its byte range and
// every tensor it holds.
QString unlocated_mismatch(const tools::CheckReport& r, uint32_t section) {
    const tools::SectionCheck& s = r.sections.at(section);
    QStringList held;
    for (const tools::TensorCheck& t : r.tensors)
        if (t.section == section) held << QString("%1 at 0x%2").arg(QString::fromStdString(t.name)).arg(t.offset, 0, 16);
    return QString("%1: xxh64 mismatch in bytes 0x%2..0x%3; no value is out of line, so any of its tensors may be damaged: %4")
        .arg(QString::fromStdString(s.name)).arg(s.offset, 0, 16).arg(s.offset + s.size - 1, 0, 16).arg(held.join(", "));
}

const tools::TensorCheck* find_tensor(const tools::CheckReport& r, const std::string& name) {
    for (const tools::TensorCheck& t : r.tensors)
        if (t.name == name) return &t;
    return nullptr;
}

bool all_start_with(const tools::CheckReport& r, const QStringList& prefixes) {
    for (const std::string& p : r.problems) {
        bool ok = false;
        for (const QString& prefix : prefixes) ok = ok || QString::fromStdString(p).startsWith(prefix);
        if (!ok) return false;
    }
    return !r.problems.empty();
}

}  // namespace

class TestCheck : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

    QString bin(const QString& family, const QString& type) const { return dir_.filePath(family + "-" + type + ".bin"); }
    QString tokenizer_bin() const { return dir_.filePath("with-tokenizer.bin"); }

    tools::CheckReport check(const QString& path) { return tools::check_model(path.toStdString()); }

    // Writes patched bytes beside the originals and checks them.
    tools::CheckReport check_bytes(const QString& name, const QByteArray& bytes) { return check(write_all(dir_.filePath(name), bytes)); }

private slots:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        for (const char* family : {"mixtral", "qwen2_moe", "olmoe"}) {
            for (const char* type : {"f32", "f16", "bf16", "q8_0", "q4_k", "q4_0"}) {
                tools::ConvertOptions options;
                QVERIFY(weight_type_from_name(type, &options.type));
                auto r = tools::convert_hf(reference(QString("hf/%1/model").arg(family)).toStdString(), bin(family, type).toStdString(), options);
                QVERIFY2(r.is_ok(), r.message().c_str());
            }
        }
        // A model with a real tokenizer and chat template (Qwen3's), a dense layer and tied embeddings.
        const QString hf = dir_.filePath("gen");
        QVERIFY(make_model(hf, {"--family", "qwen2_moe", "--vocab", "151936", "--hidden", "64", "--layers", "3", "--experts", "4",
                                "--top-k", "2", "--ffn", "64", "--shared-ffn", "64", "--tied", "--mlp-only-layers", "1",
                                "--tokenizer", reference("tokenizers/qwen3")}));
        tools::ConvertOptions f16;
        f16.type = WeightType::F16;
        auto r = tools::convert_hf(hf.toStdString(), tokenizer_bin().toStdString(), f16);
        QVERIFY2(r.is_ok(), r.message().c_str());
        // More layers than the reference models (the tensor-count bound must scale with them).
        const QString mixtral = dir_.filePath("gen-mixtral");
        QVERIFY(make_model(mixtral, {"--family", "mixtral", "--layers", "5", "--hidden", "128", "--ffn", "256", "--experts", "16"}));
        tools::ConvertOptions q4;
        q4.type = WeightType::Q4_K;
        r = tools::convert_hf(mixtral.toStdString(), dir_.filePath("mixtral-5-layers-q4_k.bin").toStdString(), q4);
        QVERIFY2(r.is_ok(), r.message().c_str());
    }

    void valid_models_data() {
        QTest::addColumn<QString>("path");
        for (const char* family : {"mixtral", "qwen2_moe", "olmoe"})
            for (const char* type : {"f32", "f16", "bf16", "q8_0", "q4_k", "q4_0"})
                QTest::addRow("%s-%s", family, type) << bin(family, type);
        QTest::addRow("qwen2_moe-with-tokenizer") << tokenizer_bin();
        QTest::addRow("mixtral-5-layers-16-experts-q4_k") << dir_.filePath("mixtral-5-layers-q4_k.bin");
    }
    void valid_models() {
        QFETCH(QString, path);
        const tools::CheckReport r = check(path);
        QVERIFY2(r.valid, qPrintable(problems_text(r)));
        QVERIFY(r.problems.empty() && r.fatal.empty() && !r.cancelled && !r.compressed);
        QVERIFY(!r.family.empty());
        BinBytes b(read_all(path));
        QCOMPARE(r.sections.size(), size_t(b.section_count()));
        QCOMPARE(r.tensors.size(), size_t(b.header().tensor_count));
        uint64_t content = 0;
        for (const tools::SectionCheck& s : r.sections) {
            QVERIFY2(s.checksum == tools::ChecksumState::Ok && s.checksum_ok && s.aligned && s.in_bounds, s.name.c_str());
            QCOMPARE(s.xxh64_actual, s.xxh64_expected);
            if (s.index > 0) content += s.size;
        }
        QCOMPARE(r.bytes_checked, content);
        for (const tools::TensorCheck& t : r.tensors) QVERIFY2(t.shape_ok && t.aligned && t.checksum == tools::ChecksumState::Ok, t.name.c_str());
    }

    // One flipped byte inside an expert: exactly that expert is named, in the report, the CLI's text and its JSON.
    void flipped_expert_byte() {
        BinBytes b(read_all(bin("mixtral", "f32")));
        const int e = b.find_section(SectionKind::Expert, 1, 5);
        QVERIFY(e > 0);
        const SectionEntry s = b.section(static_cast<uint32_t>(e));
        b.flip(s.offset + s.size / 2, 0x10);
        const QString path = write_all(dir_.filePath("flipped.bin"), b.bytes());
        const tools::CheckReport r = check(path);
        QVERIFY(!r.valid);
        const QString line = unlocated_mismatch(r, static_cast<uint32_t>(e));
        QVERIFY2(line.startsWith("layer 1 expert 5 (gate up down): xxh64 mismatch in bytes 0x") &&
                     line.contains(", layers.1.experts.5.up at 0x"), qPrintable(line));
        QCOMPARE(problems_text(r), line);
        for (const tools::SectionCheck& c : r.sections)
            QCOMPARE(c.checksum, c.index == uint32_t(e) ? tools::ChecksumState::Mismatch : tools::ChecksumState::Ok);
        for (const tools::TensorCheck& t : r.tensors)
            QCOMPARE(t.checksum == tools::ChecksumState::Mismatch, QString::fromStdString(t.name).startsWith("layers.1.experts.5."));

        CliResult cli = run_cli({"check", path});
        QCOMPARE(cli.exit_code, 1);
        QStringList lines = QString::fromUtf8(cli.out).split('\n', Qt::SkipEmptyParts);
        QCOMPARE(lines.size(), 2);
        QCOMPARE(lines[0], line);
        QVERIFY2(lines[1].startsWith(path + ": INVALID"), qPrintable(lines[1]));

        cli = run_cli({"check", path, "--json"});
        QCOMPARE(cli.exit_code, 1);
        const QJsonObject j = QJsonDocument::fromJson(cli.out).object();
        QCOMPARE(j["valid"].toBool(), false);
        QCOMPARE(j["problems"].toArray(), QJsonArray{line});
        int mismatched = 0;
        for (const auto& v : j["sections"].toArray()) {
            const QJsonObject o = v.toObject();
            if (o["checksum"].toString() == "ok") continue;
            ++mismatched;
            QCOMPARE(o["checksum"].toString(), QString("mismatch"));
            QCOMPARE(o["name"].toString(), QString("layer 1 expert 5 (gate up down)"));
            QCOMPARE(o["layer"].toInt(), 1);
            QCOMPARE(o["expert"].toInt(), 5);
            QCOMPARE(o["offset"].toDouble(), double(s.offset));
            QVERIFY(o["xxh64_actual"].toString() != o["xxh64_expected"].toString());
        }
        QCOMPARE(mismatched, 1);
        QCOMPARE(j["tensors"].toArray().size(), int(b.header().tensor_count));
        QCOMPARE(j["tensors"].toArray()[0].toObject()["name"].toString(), QString("embed"));
    }

    // The check goes on after damage: three damaged sections, three problems, in section order.
    void every_damaged_section_is_reported() {
        BinBytes b(read_all(bin("qwen2_moe", "q8_0")));
        std::vector<uint32_t> damaged;
        for (const int i : {b.find_section(SectionKind::Embedding), b.find_section(SectionKind::Expert, 0, 3),
                            b.find_section(SectionKind::SharedExpert, 1)}) {
            QVERIFY(i > 0);
            const SectionEntry s = b.section(static_cast<uint32_t>(i));
            b.flip(s.offset, 0x01);
            damaged.push_back(static_cast<uint32_t>(i));
        }
        const tools::CheckReport r = check_bytes("three.bin", b.bytes());
        QStringList expected;
        for (uint32_t i : damaged) expected << unlocated_mismatch(r, i);
        QVERIFY(expected[0].startsWith("embedding: xxh64 mismatch") && expected[1].startsWith("layer 0 expert 3 (gate up down): xxh64 mismatch") &&
                expected[2].startsWith("layer 1 shared expert (gate up down): xxh64 mismatch"));
        QCOMPARE(problems_text(r), expected.join("\n"));
    }

    // Damage the values show: the tensor, the byte (a float type's value, a block type's block), row and column.
    void damaged_value_is_located() {
        // f32: an exponent bit flipped makes one value ~1e37, an outlier among values of ~0.02.
        const tools::CheckReport f32 = check(bin("mixtral", "f32"));
        const tools::TensorCheck* down = find_tensor(f32, "layers.0.experts.2.down");
        QVERIFY(down != nullptr && down->shape.size() == 2);
        BinBytes b(read_all(bin("mixtral", "f32")));
        const uint64_t value = down->offset + (2 * down->shape[1] + 3) * 4;  // row 2, column 3
        b.flip(value + 3, 0x40);
        tools::CheckReport r = check_bytes("outlier.bin", b.bytes());
        QCOMPARE(r.problems.size(), size_t(1));
        QString text = QString::fromStdString(r.problems[0]);
        QVERIFY2(text.startsWith("layer 0 expert 2 (gate up down): xxh64 mismatch in bytes 0x") &&
                     text.contains("; tensor layers.0.experts.2.down holds an outlier (") &&
                     text.endsWith(QString(" at byte 0x%1 (row 2, column 3)").arg(value, 0, 16)), qPrintable(text));
        // q8_0: a block's f16 scale set to NaN makes its 32 values NaN; the block's first byte is named.
        const tools::CheckReport q8 = check(bin("mixtral", "q8_0"));
        const tools::TensorCheck* up = find_tensor(q8, "layers.1.experts.0.up");
        QVERIFY(up != nullptr && up->type == "q8_0");
        BinBytes c(read_all(bin("mixtral", "q8_0")));
        const uint64_t block = up->offset + up->shape[1] / 32 * 34 + 34;  // row 1, second block
        c.flip(block, static_cast<uint8_t>(~c.bytes()[static_cast<qsizetype>(block)]));
        c.flip(block + 1, static_cast<uint8_t>(~c.bytes()[static_cast<qsizetype>(block + 1)]));
        r = check_bytes("nan-scale.bin", c.bytes());
        QCOMPARE(r.problems.size(), size_t(1));
        text = QString::fromStdString(r.problems[0]);
        QVERIFY2(text.endsWith(QString("; tensor layers.1.experts.0.up holds a NaN in the block at byte 0x%1 (row 1, column 32)").arg(block, 0, 16)),
                 qPrintable(text));
    }

    void misaligned_section() {
        BinBytes b(read_all(bin("olmoe", "f32")));
        const uint32_t i = static_cast<uint32_t>(b.find_section(SectionKind::Router, 1));
        SectionEntry s = b.section(i);
        s.offset += 64;
        b.set_section(i, s);
        b.reseal();
        const tools::CheckReport r = check_bytes("misaligned.bin", b.bytes());
        QVERIFY(!r.valid);
        QVERIFY2(QString::fromStdString(r.problems.front()).startsWith("layer 1 router: misaligned (offset"), qPrintable(problems_text(r)));
        QVERIFY(!r.sections[i].aligned);
        // What else follows from the move: the router's tensor now starts before its section; its bytes hash differently.
        QVERIFY2(all_start_with(r, {"layer 1 router:", "tensor layers.1.router:", "layer 1 table entry:"}), qPrintable(problems_text(r)));
        QVERIFY(problems_text(r).contains("layer 1 router: xxh64 mismatch"));
    }

    void overlapping_sections() {
        BinBytes b(read_all(bin("mixtral", "q8_0")));
        const uint32_t first = static_cast<uint32_t>(b.find_section(SectionKind::Expert, 0, 2));
        const uint32_t second = static_cast<uint32_t>(b.find_section(SectionKind::Expert, 0, 3));
        SectionEntry s = b.section(second);
        s.offset = b.section(first).offset;
        s.xxh64 = b.section(first).xxh64;  // its bytes are now expert 2's: only the overlap is wrong
        b.set_section(second, s);
        b.reseal();
        const tools::CheckReport r = check_bytes("overlap.bin", b.bytes());
        QVERIFY(!r.valid);
        QVERIFY2(problems_text(r).contains("layer 0 expert 3 (gate up down): overlaps layer 0 expert 2 (gate up down)"), qPrintable(problems_text(r)));
        QVERIFY2(all_start_with(r, {"layer 0 expert 3", "tensor layers.0.experts.3.", "expert table entry"}), qPrintable(problems_text(r)));
    }

    void section_out_of_bounds() {
        BinBytes b(read_all(bin("qwen2_moe", "f16")));
        const uint32_t i = static_cast<uint32_t>(b.find_section(SectionKind::Output));
        SectionEntry s = b.section(i);
        s.size = static_cast<uint64_t>(b.bytes().size());  // from its offset, past the end
        b.set_section(i, s);
        b.reseal();
        const tools::CheckReport r = check_bytes("oob.bin", b.bytes());
        QVERIFY(!r.valid);
        QVERIFY2(QString::fromStdString(r.problems.front()).startsWith("output: runs past the end of the file"), qPrintable(problems_text(r)));
        QCOMPARE(r.sections[i].checksum, tools::ChecksumState::Unreadable);
        QVERIFY(!r.sections[i].in_bounds);
        QVERIFY2(all_start_with(r, {"output:"}), qPrintable(problems_text(r)));
    }

    void truncated_file_reports_every_lost_section() {
        QByteArray bytes = read_all(bin("olmoe", "f32"));
        BinBytes b(bytes);
        const SectionEntry last = b.section(b.section_count() - 1);
        const SectionEntry before = b.section(b.section_count() - 2);
        bytes.truncate(static_cast<qsizetype>(before.offset + 8));
        const tools::CheckReport r = check_bytes("truncated.bin", bytes);
        QVERIFY(!r.valid);
        QVERIFY(r.fatal.empty());
        QVERIFY2(QString::fromStdString(r.problems.front()).startsWith("metadata: truncated file"), qPrintable(problems_text(r)));
        QCOMPARE(r.sections[b.section_count() - 1].checksum, tools::ChecksumState::Unreadable);
        QCOMPARE(r.sections[b.section_count() - 2].checksum, tools::ChecksumState::Unreadable);
        QCOMPARE(r.sections[b.section_count() - 3].checksum, tools::ChecksumState::Ok);
        QVERIFY(last.offset > before.offset);
    }

    void tensor_shape_against_hyper_parameters() {
        BinBytes b(read_all(bin("mixtral", "f32")));
        const int k = b.tensor_index("layers.0.attn.k");
        QVERIFY(k >= 0);
        TensorEntry t = b.tensor(static_cast<uint32_t>(k));
        std::swap(t.dims[0], t.dims[1]);  // the same bytes, the wrong shape
        b.set_tensor(static_cast<uint32_t>(k), t);
        b.reseal();
        const tools::CheckReport r = check_bytes("shape.bin", b.bytes());
        QCOMPARE(problems_text(r), QString("tensor layers.0.attn.k: has shape [%1, %2], the hyper-parameters need [%2, %1]")
                                       .arg(t.dims[0]).arg(t.dims[1]));
        QVERIFY(!r.tensors[static_cast<size_t>(k)].shape_ok);
    }

    void unknown_weight_type_and_missing_tensor() {
        BinBytes b(read_all(bin("qwen2_moe", "f32")));
        const int gate = b.tensor_index("layers.1.experts.2.gate");
        const int bias = b.tensor_index("layers.0.attn.q_bias");
        QVERIFY(gate >= 0 && bias >= 0);
        TensorEntry t = b.tensor(static_cast<uint32_t>(gate));
        t.weight_type = 77;
        b.set_tensor(static_cast<uint32_t>(gate), t);
        t = b.tensor(static_cast<uint32_t>(bias));
        std::memcpy(t.name, "layers.0.attn.q_biax", 20);  // renamed: the real one is missing, this one unknown
        b.set_tensor(static_cast<uint32_t>(bias), t);
        b.reseal();
        const tools::CheckReport r = check_bytes("types.bin", b.bytes());
        const QString text = problems_text(r);
        QVERIFY2(text.contains("tensor layers.1.experts.2.gate: unknown weight type 77"), qPrintable(text));
        QVERIFY2(text.contains("tensor layers.0.attn.q_bias: missing"), qPrintable(text));
        QVERIFY2(text.contains("tensor layers.0.attn.q_biax: not part of a qwen2_moe model"), qPrintable(text));
        QCOMPARE(r.tensors[static_cast<size_t>(gate)].type, std::string("unknown"));
    }

    void damaged_metadata_is_reported_and_the_check_goes_on() {
        BinBytes b(read_all(bin("mixtral", "f32")));
        const int e = b.find_section(SectionKind::Expert, 0, 1);
        SectionEntry s = b.section(static_cast<uint32_t>(e));
        s.reserved = 1;  // harmless but not resealed: the metadata checksum catches it
        b.set_section(static_cast<uint32_t>(e), s);
        b.flip(s.offset + 100, 0x04);
        const tools::CheckReport r = check_bytes("meta.bin", b.bytes());
        QCOMPARE(problems_text(r), "metadata: xxh64 mismatch (header or tables damaged)\n" + unlocated_mismatch(r, static_cast<uint32_t>(e)));
        QCOMPARE(r.sections[0].checksum, tools::ChecksumState::Mismatch);
    }

    void unreadable_header_is_fatal() {
        QByteArray bytes = read_all(bin("olmoe", "q8_0"));
        bytes[0] = 'X';
        tools::CheckReport r = check_bytes("magic.bin", bytes);
        QVERIFY(!r.valid && !r.unreadable);
        QVERIFY2(QString::fromStdString(r.fatal).endsWith("not a colibri model file (wrong magic)"), r.fatal.c_str());
        QCOMPARE(r.problems.size(), size_t(1));
        r = check_bytes("short.bin", bytes.left(100));
        QVERIFY2(QString::fromStdString(r.fatal).contains("truncated file (100 bytes"), r.fatal.c_str());
        r = check(dir_.filePath("no-such-file.bin"));
        QVERIFY(!r.valid && r.unreadable && !r.fatal.empty());
    }

    void tokenizer_damage_data() {
        QTest::addColumn<int>("kind");
        QTest::addColumn<QString>("from");
        QTest::addColumn<QString>("to");
        QTest::addColumn<QString>("problem");
        QTest::addRow("tokenizer.json no longer JSON") << int(SectionKind::TokenizerJson) << "{" << "[" << "tokenizer: ";
        QTest::addRow("config names a missing eos token")
            << int(SectionKind::TokenizerConfig) << "\"eos_token\": \"<|im_end|>\"" << "\"eos_token\": \"<|im_enX|>\""
            << "tokenizer config: eos_token \"<|im_enX|>\" is not in the vocabulary";
        QTest::addRow("template emits an unknown marker")
            << int(SectionKind::ChatTemplate) << "<|im_start|>assistant" << "<|im_stArt|>assistant"
            << "chat template: emits \"<|im_stArt|>\", which is not a token of the vocabulary";
        QTest::addRow("template does not parse") << int(SectionKind::ChatTemplate) << "{%- endfor %}" << "{%- endfxr %}"
                                                 << "chat template: does not parse: ";
    }
    void tokenizer_damage() {
        QFETCH(int, kind);
        QFETCH(QString, from);
        QFETCH(QString, to);
        QFETCH(QString, problem);
        BinBytes b(read_all(tokenizer_bin()));
        const int i = b.find_section(static_cast<SectionKind>(kind));
        QVERIFY(i > 0);
        const SectionEntry s = b.section(static_cast<uint32_t>(i));
        const QByteArray text = b.bytes().mid(static_cast<qsizetype>(s.offset), static_cast<qsizetype>(s.size));
        const qsizetype at = text.indexOf(from.toUtf8());
        QVERIFY2(at >= 0, qPrintable(from));
        QCOMPARE(from.size(), to.size());
        // Resealed section and metadata: the text is damaged, its checksum is not.
        b.rewrite_section(static_cast<uint32_t>(i), static_cast<uint64_t>(at), to.toUtf8());
        b.reseal();
        const tools::CheckReport r = check_bytes("tokenizer.bin", b.bytes());
        QVERIFY(!r.valid);
        QVERIFY2(r.problems.size() == 1 && QString::fromStdString(r.problems[0]).startsWith(problem), qPrintable(problems_text(r)));
        QCOMPARE(r.sections[static_cast<size_t>(i)].checksum, tools::ChecksumState::Ok);
    }

    void header_token_ids_outside_the_vocabulary() {
        BinBytes b(read_all(tokenizer_bin()));
        FileHeader h = b.header();
        h.hparams.eos_id = static_cast<int32_t>(h.hparams.vocab_size);
        b.set_header(h);
        b.reseal();
        const tools::CheckReport r = check_bytes("eos.bin", b.bytes());
        QCOMPARE(problems_text(r), QString("metadata: eos_id %1 lies outside the vocabulary (%1 rows)").arg(h.hparams.vocab_size));
    }

    // gpt_oss's clamped activation set on a family without expert biases: refused, not run with missing biases
    // (test_corruption's sweep found this as a crash in the forward pass).
    void clamped_activation_without_biases() {
        BinBytes b(read_all(bin("mixtral", "f16")));
        FileHeader h = b.header();
        h.hparams.swiglu_limit = 7.0f;
        b.set_header(h);
        b.reseal();
        const tools::CheckReport r = check_bytes("limit.bin", b.bytes());
        QVERIFY(!r.valid);
        QVERIFY2(problems_text(r).contains("swiglu_limit is gpt_oss's clamped activation and needs its expert biases"),
                 qPrintable(problems_text(r)));
    }

    // A damaged expert count must not make the check build an unbounded list of expected tensors.
    void absurd_hyper_parameters() {
        BinBytes b(read_all(bin("mixtral", "f16")));
        FileHeader h = b.header();
        h.hparams.n_experts = 1u << 30;
        b.set_header(h);
        b.reseal();
        const tools::CheckReport r = check_bytes("experts.bin", b.bytes());
        QVERIFY(!r.valid);
        QVERIFY2(problems_text(r).contains("hyper-parameters: 1073741824 experts exceed 4096"),
                 qPrintable(problems_text(r)));
    }

    void zst_valid_and_damaged_frame() {
        const QString zst = dir_.filePath("mixtral-q8_0.bin.zst");
        Status s = compress_model(bin("mixtral", "q8_0").toStdString(), zst.toStdString());
        QVERIFY2(s.is_ok(), s.message().c_str());
        tools::CheckReport r = check(zst);
        QVERIFY2(r.valid, qPrintable(problems_text(r)));
        QVERIFY(r.compressed && r.stored_size < r.image_size);
        QCOMPARE(r.image_size, uint64_t(read_all(bin("mixtral", "q8_0")).size()));

        // Damage the middle of expert L1 E6's frame (zstd's content checksum or its block structure catches it).
        QByteArray bytes = read_all(zst);
        const BinBytes plain(read_all(bin("mixtral", "q8_0")));
        const int e = plain.find_section(SectionKind::Expert, 1, 6);
        ZstdHeader zh;
        std::memcpy(&zh, bytes.constData(), sizeof zh);
        FrameEntry f;
        std::memcpy(&f, bytes.constData() + zh.frame_table_offset + uint64_t(e) * sizeof f, sizeof f);
        bytes[static_cast<qsizetype>(f.stored_offset + f.stored_size / 2)] ^= 0x55;
        const QString damaged = write_all(dir_.filePath("damaged.bin.zst"), bytes);
        r = check(damaged);
        QVERIFY(!r.valid);
        QCOMPARE(r.problems.size(), size_t(1));
        QVERIFY2(QString::fromStdString(r.problems[0]).startsWith("layer 1 expert 6 (gate up down): damaged zstd frame ("),
                 qPrintable(problems_text(r)));
        QCOMPARE(r.sections[static_cast<size_t>(e)].checksum, tools::ChecksumState::DamagedFrame);
        QCOMPARE(r.sections[static_cast<size_t>(e)].stored_size, f.stored_size);

        const CliResult cli = run_cli({"check", damaged, "--json"});
        QCOMPARE(cli.exit_code, 1);
        const QJsonObject j = QJsonDocument::fromJson(cli.out).object();
        QCOMPARE(j["compressed"].toBool(), true);
        QCOMPARE(j["sections"].toArray()[e].toObject()["checksum"].toString(), QString("damaged_frame"));
    }

    void zst_container_damage() {
        const QString zst = dir_.filePath("olmoe-f16.bin.zst");
        QVERIFY(compress_model(bin("olmoe", "f16").toStdString(), zst.toStdString()).is_ok());
        QByteArray bytes = read_all(zst);
        // A frame table entry pointing past the file: that section has no frame, the rest is still checked.
        ZstdHeader zh;
        std::memcpy(&zh, bytes.constData(), sizeof zh);
        const BinBytes plain(read_all(bin("olmoe", "f16")));
        const int e = plain.find_section(SectionKind::Expert, 0, 4);
        FrameEntry f;
        const qsizetype at = static_cast<qsizetype>(zh.frame_table_offset + uint64_t(e) * sizeof f);
        std::memcpy(&f, bytes.constData() + at, sizeof f);
        f.stored_offset = static_cast<uint64_t>(bytes.size());
        std::memcpy(bytes.data() + at, &f, sizeof f);
        const tools::CheckReport r = check_bytes("frame-table.bin.zst", bytes);
        QVERIFY(!r.valid && r.fatal.empty());
        const QString text = problems_text(r);
        QVERIFY2(text.contains(".bin.zst frame table: xxh64 mismatch"), qPrintable(text));
        QVERIFY2(text.contains(QString(".bin.zst frame %1 lies outside the file").arg(e)), qPrintable(text));
        QVERIFY2(text.contains("layer 0 expert 4 (gate up down): damaged zstd frame"), qPrintable(text));
        for (const tools::SectionCheck& s : r.sections)
            QCOMPARE(s.checksum, s.index == uint32_t(e) ? tools::ChecksumState::DamagedFrame : tools::ChecksumState::Ok);
    }

    void progress_is_monotonic_and_reaches_the_total() {
        std::vector<std::pair<uint64_t, uint64_t>> calls;
        tools::CheckOptions options;
        options.progress = [&calls](uint64_t done, uint64_t total) {
            calls.emplace_back(done, total);
            return true;
        };
        const tools::CheckReport r = tools::check_model(tokenizer_bin().toStdString(), options);
        QVERIFY(r.valid);
        QVERIFY(calls.size() > 10);  // a 30 MB file reports more than once
        const uint64_t total = calls.front().second;
        QCOMPARE(calls.front().first, uint64_t(0));
        QCOMPARE(calls.back(), std::make_pair(total, total));
        QCOMPARE(r.bytes_checked, total);
        for (size_t i = 1; i < calls.size(); ++i) {
            QVERIFY(calls[i].first >= calls[i - 1].first);
            QCOMPARE(calls[i].second, total);
        }
        // The void overload (the Studio's first caller) sees the same.
        uint64_t last = 0;
        tools::check_model(tokenizer_bin().toStdString(), [&last](uint64_t done, uint64_t) { last = done; });
        QCOMPARE(last, total);
    }

    void cancellation_stops_early() {
        int calls = 0;
        tools::CheckOptions options;
        options.progress = [&calls](uint64_t, uint64_t) { return ++calls < 3; };
        tools::CheckReport r = tools::check_model(tokenizer_bin().toStdString(), options);
        QCOMPARE(calls, 3);
        QVERIFY(r.cancelled && !r.valid);
        QVERIFY(r.bytes_checked > 0);
        QVERIFY(QString::fromStdString(r.problems.back()).startsWith("check cancelled after "));
        QCOMPARE(r.sections.back().checksum, tools::ChecksumState::NotChecked);

        // The flag another thread sets: read at the next progress point.
        std::atomic<bool> stop{false};
        tools::CheckOptions flagged;
        flagged.cancel = &stop;
        flagged.progress = [&stop](uint64_t done, uint64_t) {
            if (done > 0) stop = true;
            return true;
        };
        r = tools::check_model(tokenizer_bin().toStdString(), flagged);
        QVERIFY(r.cancelled);
        QVERIFY(r.bytes_checked < static_cast<uint64_t>(read_all(tokenizer_bin()).size()));
    }

    // Format 1.x differs from 2.x only in q4_K's code order: a 1.x file without q4_K tensors still loads, one with
    // them is refused by check and by the engine with a one-line reason (the codes would be read wrongly).
    void format_1_files() {
        const auto as_format_1 = [&](const QString& type) {
            BinBytes b(read_all(bin("qwen2_moe", type)));
            FileHeader h = b.header();
            h.version_major = 1;
            b.set_header(h);
            b.reseal();
            return write_all(dir_.filePath("v1-" + type + ".bin"), b.bytes());
        };
        QCOMPARE(BinBytes(read_all(bin("qwen2_moe", "f16"))).header().version_major, uint16_t(2));  // what the converter writes
        const QString f16 = as_format_1("f16"), q4k = as_format_1("q4_k");  // qwen2_moe's q4_k has two q4_K tensors
        QVERIFY(check(f16).valid);
        CliResult r = run_cli({"info", f16});
        QCOMPARE(r.exit_code, 0);

        const tools::CheckReport bad = check(q4k);
        QVERIFY(!bad.valid);
        QVERIFY2(problems_text(bad).contains("q4_k in format 1.x (ggml's code order): convert the model again"), qPrintable(problems_text(bad)));
        r = run_cli({"info", q4k});
        QVERIFY(r.exit_code != 0);
        // The loader and check apply one rule and say it in the same words (engine/file/file_rules.h).
        QVERIFY2(r.err.contains(": q4_k in format 1.x (ggml's code order): convert the model again") && r.err.count('\n') == 1,
                 r.err.constData());

        BinBytes future(read_all(bin("qwen2_moe", "f16")));
        FileHeader h = future.header();
        h.version_major = 3;
        h.version_minor = 0;
        future.set_header(h);
        future.reseal();
        const tools::CheckReport r3 = check_bytes("v3.bin", future.bytes());
        QVERIFY(!r3.valid);
        QVERIFY2(problems_text(r3).contains("unsupported format version 3.0 (this build reads 1.x to 2.x)"), qPrintable(problems_text(r3)));
    }

    void cli_exit_codes_and_output() {
        CliResult r = run_cli({"check", bin("olmoe", "q4_k")});
        QCOMPARE(r.exit_code, 0);
        QVERIFY2(r.out.startsWith((bin("olmoe", "q4_k") + ": valid: ").toUtf8()), r.out.constData());
        QVERIFY(r.err.isEmpty());  // no progress line when stderr is not a terminal

        r = run_cli({"check", bin("olmoe", "q4_k"), "--quiet"});
        QCOMPARE(r.exit_code, 0);
        QVERIFY(r.out.isEmpty() && r.err.isEmpty());

        r = run_cli({"check", bin("olmoe", "q4_k"), "--json"});
        QCOMPARE(r.exit_code, 0);
        const QJsonObject j = QJsonDocument::fromJson(r.out).object();
        QCOMPARE(j["valid"].toBool(), true);
        QCOMPARE(j["family"].toString(), QString("olmoe"));
        QCOMPARE(j["problems"].toArray().size(), 0);
        const QJsonObject tensor = j["tensors"].toArray()[0].toObject();
        for (const char* key : {"name", "shape", "type", "section", "offset", "size", "aligned", "shape_ok", "checksum"})
            QVERIFY2(tensor.contains(key), key);

        r = run_cli({"check", dir_.filePath("missing.bin")});
        QCOMPARE(r.exit_code, 2);
        QVERIFY2(r.err.startsWith("colibri: check: ") && r.err.count('\n') == 1, r.err.constData());

        r = run_cli({"check"});
        QCOMPARE(r.exit_code, 2);

        QByteArray bytes = read_all(bin("olmoe", "q4_k"));
        bytes[1] = 'X';
        r = run_cli({"check", write_all(dir_.filePath("cli-magic.bin"), bytes)});
        QCOMPARE(r.exit_code, 1);
        QVERIFY2(r.err.contains("wrong magic") && r.err.count('\n') == 1, r.err.constData());
    }

    // Resealed damage across the whole metadata: the check never crashes and never calls damage valid unless
    // the damage is harmless to the engine (a reserved byte, a name's padding).
    void resealed_metadata_damage_never_crashes() {
        const QByteArray good = read_all(bin("olmoe", "q4_0"));
        const uint64_t meta = BinBytes(good).header().metadata_size;
        const QString path = dir_.filePath("sweep.bin");
        int cases = 0, invalid = 0;
        for (uint64_t at = 0; at < meta; at += 7) {
            if (at >= offsetof(FileHeader, metadata_xxh64) && at < offsetof(FileHeader, metadata_xxh64) + 8) continue;
            BinBytes b(good);
            b.flip(at, 0xFF);
            b.reseal();
            write_all(path, b.bytes());
            const tools::CheckReport r = tools::check_model(path.toStdString());
            ++cases;
            invalid += r.valid ? 0 : 1;
            for (const std::string& p : r.problems) QVERIFY2(!p.empty() && p.find('\n') == std::string::npos, p.c_str());
            QVERIFY(!tools::check_report_json(r).empty());
        }
        qInfo("%d resealed metadata flips: %d reported invalid", cases, invalid);
        QVERIFY(invalid > cases / 2);
    }
};

QTEST_GUILESS_MAIN(TestCheck)
#include "test_check.moc"
