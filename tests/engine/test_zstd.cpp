// .bin.zst files: `colibri convert --zstd` output gives logits bit-identical to the .bin for every family and
// weight type; experts are decompressed on first use only; damage to the container or to a frame gives a clear
// error naming what is damaged (never a crash, never silently wrong weights); a failed conversion leaves
// nothing behind.
#include <xxhash.h>

#include <QDir>
#include <QTemporaryDir>
#include <QtTest>
#include <string_view>
#include <cstring>
#include <set>

#include "../test_support.h"
#include "engine/file/format.h"
#include "engine/core/model.h"
#include "engine/core/session.h"

using namespace colibri;
using namespace colibri::test;

namespace {

// Records the experts every MoE layer selected.
struct RoutingLog : TraceObserver {
    std::map<uint32_t, std::set<int32_t>> selected;
    void on_routing(const RoutingRecord& r) override {
        for (int32_t e : r.experts) selected[r.layer].insert(e);
    }
};

// The frame table of a .bin.zst, read straight from its bytes (docs/FORMAT.md, "Compressed files").
std::vector<format::FrameEntry> frames_of(const QByteArray& zst) {
    format::ZstdHeader h;
    std::memcpy(&h, zst.constData(), sizeof h);
    std::vector<format::FrameEntry> frames(h.frame_count);
    std::memcpy(frames.data(), zst.constData() + h.frame_table_offset, frames.size() * sizeof(format::FrameEntry));
    return frames;
}

// Index of the section holding expert (layer, expert) of a model.
uint32_t expert_section(const Model& m, uint32_t layer, uint32_t expert) {
    const auto sections = m.file().sections();
    for (uint32_t i = 0; i < sections.size(); ++i)
        if (sections[i].kind == static_cast<uint32_t>(format::SectionKind::Expert) && sections[i].layer == layer &&
            sections[i].expert == expert)
            return i;
    return 0;
}

}  // namespace

class TestZstd : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

    QString convert(const QString& family, const QString& type, bool zstd) {
        const QString out = dir_.filePath(family + "-" + type + (zstd ? ".bin.zst" : ".bin"));
        if (QFile::exists(out)) return out;
        const CliResult r = run_cli({"convert", reference("hf/" + family + "/model"), "-o", out, "--type", type, "-q"});
        if (r.exit_code != 0) qWarning("%s", r.err.constData());
        return r.exit_code == 0 ? out : QString();
    }

    QByteArray logits(const QString& model, const QString& ids) {
        const QString out = model + ".logits";
        const CliResult r = run_cli({"logits", "-m", model, "--tokens", ids, "--out", out, "-t", "2"});
        if (r.exit_code != 0) qWarning("%s", r.err.constData());
        return r.exit_code == 0 ? read_all(out) : QByteArray();
    }

private slots:
    void bit_identical_logits_data() {
        QTest::addColumn<QString>("family");
        QTest::addColumn<QString>("type");
        // Sanitized (kSanitized): one float and one block type per family; the decompression path is the same for all.
        for (const char* family : {"mixtral", "qwen2_moe", "olmoe"})
            for (const char* type : {"f32", "f16", "bf16", "q8_0", "q4_k", "q4_0"})
                if (!kSanitized || std::string_view(type) == "f16" || std::string_view(type) == "q4_k")
                    QTest::newRow((std::string(family) + "/" + type).c_str()) << family << type;
    }
    void bit_identical_logits() {
        QFETCH(QString, family);
        QFETCH(QString, type);
        const QString bin = convert(family, type, false), zst = convert(family, type, true);
        QVERIFY(!bin.isEmpty() && !zst.isEmpty());
        QVERIFY(QFileInfo(zst).size() < QFileInfo(bin).size());
        const QString ids = ids_arg(read_json(reference("hf/" + family + "/ref/input_ids.json")).array());
        const QByteArray a = logits(bin, ids), b = logits(zst, ids);
        QVERIFY(!a.isEmpty());
        QCOMPARE(a.size(), b.size());
        QVERIFY2(a == b, "logits of the .bin.zst differ from the .bin");

        // info reports both sizes.
        const QJsonObject info = QJsonDocument::fromJson(run_cli({"info", zst, "--json"}).out).object();
        QCOMPARE(info["compressed"].toBool(), true);
        QCOMPARE(info["stored_size"].toInteger(), QFileInfo(zst).size());
        QCOMPARE(info["file_size"].toInteger(), QFileInfo(bin).size());
    }

    // Loading decompresses everything but the experts; a token makes exactly its selected experts resident.
    void experts_decompress_on_first_use() {
        const QString zst = convert("mixtral", "q8_0", true);
        auto m = Model::load(zst.toStdString());
        QVERIFY2(m.is_ok(), m.message().c_str());
        const Model& model = *m.value();
        QVERIFY(model.file().compressed());
        const auto sections = model.file().sections();
        for (uint32_t i = 0; i < sections.size(); ++i) {
            const bool expert = sections[i].kind == static_cast<uint32_t>(format::SectionKind::Expert);
            QCOMPARE(model.file().section_resident(i), !expert);
        }
        ThreadPool pool(1);
        Session session(model, pool);
        RoutingLog log;
        session.set_observer(&log);
        QVERIFY(session.eval(1).is_ok());
        QCOMPARE(log.selected.size(), size_t(model.hparams().n_layers));
        for (uint32_t i = 0; i < sections.size(); ++i) {
            if (sections[i].kind != static_cast<uint32_t>(format::SectionKind::Expert)) continue;
            const bool chosen = log.selected[sections[i].layer].count(static_cast<int32_t>(sections[i].expert)) > 0;
            QCOMPARE(model.file().section_resident(i), chosen);
        }
    }

    // A flipped byte inside one expert's frame: the file opens (experts are lazy), that expert fails with an
    // error naming it, the others work, and generation through the CLI fails cleanly if it gets there.
    void damaged_expert_frame_is_named() {
        const QString zst = convert("mixtral", "f16", true);
        auto clean = Model::load(zst.toStdString());
        QVERIFY(clean.is_ok());
        const uint32_t target = expert_section(*clean.value(), 1, 3);
        QVERIFY(target > 0);
        QByteArray bytes = read_all(zst);
        const format::FrameEntry f = frames_of(bytes)[target];
        bytes[static_cast<qsizetype>(f.stored_offset + f.stored_size / 2)] ^= 0x5A;
        const QString damaged = write_all(dir_.filePath("damaged-frame.bin.zst"), bytes);

        auto m = Model::load(damaged.toStdString());
        QVERIFY2(m.is_ok(), m.message().c_str());
        const Status bad = m.value()->ensure_expert(1, 3);
        QVERIFY(!bad);
        QVERIFY2(QString::fromStdString(bad.message()).contains("expert L1 E3"), bad.message().c_str());
        QVERIFY2(QString::fromStdString(bad.message()).contains("damaged zstd frame"), bad.message().c_str());
        QVERIFY(m.value()->ensure_expert(1, 2));
        QVERIFY(m.value()->ensure_expert(0, 3));
        // Asking again gives the same answer (the failure is remembered, not retried into a half-filled page).
        QVERIFY(!m.value()->ensure_expert(1, 3));

        // A prompt that routes to the damaged expert (found on the intact file) fails through the CLI with exit 1
        // and one line naming it.
        ThreadPool pool(1);
        Session session(*clean.value(), pool);
        RoutingLog log;
        session.set_observer(&log);
        int32_t token = 1;
        for (; token < 2000; ++token) {
            log.selected.clear();
            session.reset();
            QVERIFY(session.eval(token).is_ok());
            if (log.selected[1].count(3)) break;
        }
        QVERIFY(token < 2000);
        const CliResult r = run_cli({"logits", "-m", damaged, "--tokens", QString::number(token), "--top", "1"});
        QVERIFY(!r.crashed);
        QCOMPARE(r.exit_code, 1);
        QVERIFY2(r.err.contains("expert L1 E3") && r.err.count('\n') == 1, r.err.constData());
    }

    // Truncations and byte flips across the container header, the frame table and the metadata frame (read at
    // open) give an error or a correct load, never a crash; a flip in any frame is caught by zstd's checksum.
    void hostile_container() {
        const QString zst = convert("qwen2_moe", "q8_0", true);
        const QByteArray good = read_all(zst);
        const std::vector<format::FrameEntry> frames = frames_of(good);
        const QString path = dir_.filePath("hostile.bin.zst");
        int errors = 0, loads = 0;
        auto try_load = [&](const QByteArray& bytes) {
            write_all(path, bytes);
            auto m = Model::load(path.toStdString());
            if (!m) {
                ++errors;
                QVERIFY(!m.message().empty());
                QVERIFY(m.message().find('\n') == std::string::npos);
                return;
            }
            ++loads;
            // A load that succeeded must have every section it decompressed intact.
            for (uint32_t i = 0; i < m.value()->file().sections().size(); ++i)
                if (m.value()->file().section_resident(i)) QVERIFY(m.value()->file().verify_section(i));
        };
        // Truncations, dense over the header, frame table and first frame, sparse after.
        const qsizetype dense = static_cast<qsizetype>(frames[1].stored_offset);
        for (qsizetype n = 0; n < good.size(); n += n < dense ? 7 : 4099) try_load(good.left(n));
        // Byte flips over the header, frame table and metadata frame.
        for (qsizetype at = 0; at < dense; at += 3) {
            QByteArray b = good;
            b[at] = static_cast<char>(b[at] ^ 0xFF);
            try_load(b);
        }
        QVERIFY(errors > 0);
        // One flip in the middle of every frame: decompressing that section must fail.
        auto model = Model::load(zst.toStdString());
        QVERIFY(model.is_ok());
        for (size_t i = 1; i < frames.size(); ++i) {
            QByteArray b = good;
            b[static_cast<qsizetype>(frames[i].stored_offset + frames[i].stored_size / 2)] ^= 0x01;
            write_all(path, b);
            auto m = Model::load(path.toStdString());
            if (!m) continue;  // a section decompressed at open: caught there
            const bool expert = m.value()->file().sections()[i].kind == static_cast<uint32_t>(format::SectionKind::Expert);
            QVERIFY2(expert, "a non-expert section with a damaged frame loaded");
            QVERIFY(!m.value()->file().ensure_section(static_cast<uint32_t>(i)));
        }
        qInfo("hostile .bin.zst: %d loads refused, %d loaded intact", errors, loads);
    }

    // Frame tables that pass their checksums (recomputed here, as a hostile writer would) but lie: each is refused
    // with a message saying what is wrong, before any frame is decompressed out of bounds.
    void crafted_frame_tables_data() {
        QTest::addColumn<int>("lie");
        QTest::addColumn<QString>("expected");
        QTest::newRow("frame past the end") << 0 << "lies outside the file";
        QTest::newRow("frame beyond the image") << 1 << "lies outside the file or the image";
        QTest::newRow("frame inside the table") << 2 << "lies outside the file";
        QTest::newRow("huge image") << 3 << "out of range";
        QTest::newRow("too many frames") << 4 << "frame table lies outside the file";
        QTest::newRow("frame 1 moved") << 5 << "does not match section 1";
        QTest::newRow("frame 0 not metadata") << 6 << "frame 0 is not the metadata";
        QTest::newRow("one frame short") << 7 << "frames for";
    }
    void crafted_frame_tables() {
        QFETCH(int, lie);
        QFETCH(QString, expected);
        QByteArray b = read_all(convert("olmoe", "q8_0", true));
        format::ZstdHeader h;
        std::memcpy(&h, b.constData(), sizeof h);
        std::vector<format::FrameEntry> frames = frames_of(b);
        switch (lie) {
            case 0: frames[2].stored_size = static_cast<uint64_t>(b.size()); break;
            case 1: frames[2].image_size = h.image_size; break;
            case 2: frames[2].stored_offset = 8; break;
            case 3: h.image_size = uint64_t(1) << 50; break;
            case 4: h.frame_count = 1u << 30; break;
            case 5: frames[1].image_offset += 4096; break;
            case 6: frames[0].image_offset = 4096; break;
            case 7: h.frame_count -= 1; frames.pop_back(); break;
        }
        h.frame_table_xxh64 = XXH64(frames.data(), frames.size() * sizeof(format::FrameEntry), 0);
        h.header_xxh64 = 0;
        h.header_xxh64 = XXH64(&h, sizeof h, 0);
        std::memcpy(b.data(), &h, sizeof h);
        if (lie != 4) std::memcpy(b.data() + h.frame_table_offset, frames.data(), frames.size() * sizeof(format::FrameEntry));
        const QString path = write_all(dir_.filePath(QString("crafted-%1.bin.zst").arg(lie)), b);
        auto m = Model::load(path.toStdString());
        QVERIFY(!m);
        QVERIFY2(QString::fromStdString(m.message()).contains(expected), m.message().c_str());
        const CliResult r = run_cli({"info", path});
        QCOMPARE(r.exit_code, 1);
        QCOMPARE(r.err.count('\n'), 1);
    }

    // A conversion that fails (a bad weight type, a missing source, an unwritable directory) or is asked for a
    // non-.zst name with --zstd leaves no output and no temporary file behind.
    void failed_conversion_leaves_nothing() {
        QTemporaryDir out;
        const QString target = out.filePath("m.bin.zst");
        QCOMPARE(run_cli({"convert", reference("hf/mixtral/model"), "-o", target, "--type", "q9"}).exit_code, 1);
        QCOMPARE(run_cli({"convert", out.filePath("missing"), "-o", target}).exit_code, 1);
        const CliResult r = run_cli({"convert", reference("hf/mixtral/model"), "-o", out.filePath("m.bin"), "--zstd"});
        QCOMPARE(r.exit_code, 1);
        QVERIFY(r.err.contains("must end in .zst"));
        // A source that fails half-way: a config.json whose safetensors is truncated.
        const QString broken = out.filePath("broken");
        QDir().mkpath(broken);
        QFile::copy(reference("hf/mixtral/model/config.json"), broken + "/config.json");
        write_all(broken + "/model.safetensors", read_all(reference("hf/mixtral/model/model.safetensors")).left(1 << 20));
        QCOMPARE(run_cli({"convert", broken, "-o", target, "-q"}).exit_code, 1);
        const QStringList left = QDir(out.path()).entryList(QDir::Files);
        QVERIFY2(left.isEmpty(), qPrintable(left.join(", ")));
    }
};

QTEST_GUILESS_MAIN(TestZstd)
#include "test_zstd.moc"
