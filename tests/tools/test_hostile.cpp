// Hostile inputs, round 2 (issue 20), end to end through the CLI: each case was a crash, a hang, a memory
// blow-up, a clobbered file, a wrong acceptance or an unfriendly error. Each must now give a clear one-line
// error (or, where the input is acceptable, the right result) promptly, within bounded memory, and leave the
// file system as it was. The engine-level halves are in test_chat_template (templates) and test_tokenizer.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#include <QDir>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QMap>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

#include "../bin_bytes.h"
#include "../test_support.h"
#include "engine/file/format.h"
#include "fuzz/gguf_layout.h"

using namespace colibri;
using namespace colibri::test;
using namespace colibri::format;

extern char** environ;

namespace {

// The CLI run as a child whose resources we can see: exit status, peak resident memory, stderr.
struct Measured {
    int exit_code = -1;
    bool crashed = false;  // a signal, or killed at the timeout
    long peak_rss_mib = 0;
    QByteArray err;
};

Measured run_measured(const QStringList& args, int timeout_s = 300) {
    Measured m;
    QTemporaryFile err_file;
    if (!err_file.open()) return m;
    std::vector<std::string> storage{COLIBRI_CLI};
    for (const QString& a : args) storage.push_back(a.toStdString());
    std::vector<char*> argv;
    for (std::string& s : storage) argv.push_back(s.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, err_file.handle(), 2);
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, COLIBRI_CLI, &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) return m;
    int status = 0;
    struct rusage ru {};
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    while (wait4(pid, &status, WNOHANG, &ru) == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
            kill(pid, SIGKILL);
            wait4(pid, &status, 0, &ru);
            m.crashed = true;
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    m.crashed = m.crashed || !WIFEXITED(status);
    m.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    m.peak_rss_mib = ru.ru_maxrss / 1024;
    err_file.seek(0);
    m.err = err_file.readAll();
    return m;
}

// A GGUF file rebuilt with some key/values replaced or added (tensor infos and data kept; tensor offsets are
// relative to the data section, so only the padding before it moves).
class GgufEdit {
public:
    void string(const std::string& key, const std::string& value) {
        QByteArray v;
        put_u64(v, value.size());
        v.append(value.data(), static_cast<qsizetype>(value.size()));
        set(key, 8, v);
    }
    void f64(const std::string& key, double value) {
        QByteArray v(reinterpret_cast<const char*>(&value), 8);
        set(key, 12, v);
    }
    void u64(const std::string& key, uint64_t value) { set(key, 10, QByteArray(reinterpret_cast<const char*>(&value), 8)); }
    // A value of any type, as its bytes. Setting a key twice writes it twice.
    void raw(const std::string& key, uint32_t type, const QByteArray& value) { set(key, type, value); }
    void u8_array(const std::string& key, uint64_t count) {
        QByteArray v;
        const uint32_t item = 0;
        v.append(reinterpret_cast<const char*>(&item), 4);
        put_u64(v, count);
        v.append(QByteArray(static_cast<qsizetype>(count), '\x07'));
        set(key, 9, v);
    }
    QByteArray apply(const QByteArray& file) const {
        const auto* p = reinterpret_cast<const uint8_t*>(file.constData());
        const auto g = fuzz::parse_gguf_layout(p, static_cast<uint64_t>(file.size()));
        if (!g) return {};
        QByteArray out = file.left(24);
        uint64_t n_kv = 0;
        for (const fuzz::GgufKv& kv : g->kvs) {
            bool replaced = false;
            for (const auto& e : edits_) replaced = replaced || e.key == kv.key;
            if (replaced) continue;
            out += file.mid(static_cast<qsizetype>(kv.begin), static_cast<qsizetype>(kv.end - kv.begin));
            ++n_kv;
        }
        for (const auto& e : edits_) {
            put_u64(out, e.key.size());
            out.append(e.key.data(), static_cast<qsizetype>(e.key.size()));
            out.append(reinterpret_cast<const char*>(&e.type), 4);
            out += e.value;
            ++n_kv;
        }
        std::memcpy(out.data() + 16, &n_kv, 8);
        const uint64_t infos_begin = g->infos.empty() ? g->infos_end : g->infos.front().fields.front();
        out += file.mid(static_cast<qsizetype>(infos_begin), static_cast<qsizetype>(g->infos_end - infos_begin));
        while (static_cast<uint64_t>(out.size()) % g->alignment != 0) out.append('\0');
        out += file.mid(static_cast<qsizetype>(g->data_start));
        return out;
    }

private:
    struct Entry {
        std::string key;
        uint32_t type;
        QByteArray value;
    };
    static void put_u64(QByteArray& b, uint64_t v) { b.append(reinterpret_cast<const char*>(&v), 8); }
    void set(const std::string& key, uint32_t type, const QByteArray& value) { edits_.push_back(Entry{key, type, value}); }
    std::vector<Entry> edits_;
};

QString nested(int depth, const QString& open, const QString& inner, const QString& close) {
    QString s;
    s.reserve(depth * (open.size() + close.size()) + inner.size());
    for (int k = 0; k < depth; ++k) s += open;
    s += inner;
    for (int k = 0; k < depth; ++k) s += close;
    return s;
}

bool is_char_device(const QString& path) {
    struct stat st {};
    return stat(path.toLocal8Bit().constData(), &st) == 0 && S_ISCHR(st.st_mode);
}

}  // namespace

class TestHostile : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;
    QString good_;  // qwen2_moe reference, f32
    QString qwen3_;  // a small random qwen2_moe with the real Qwen3 tokenizer (11 MB section) and chat template
    QString gguf_;  // llama.cpp's OLMoE with its tokenizer and chat template

    // A command that must fail cleanly: one "colibri: " line, non-zero exit, no crash or hang.
    QString expect_failure(const QStringList& args, const QByteArray& input = {}, int timeout_ms = 300000) {
        const CliResult r = run_cli(args, input, timeout_ms);
        if (r.crashed) {
            QTest::qFail(qPrintable("colibri crashed or hung: " + args.join(' ').left(200)), __FILE__, __LINE__);
            return {};
        }
        if (r.exit_code == 0) {
            QTest::qFail(qPrintable("colibri exited 0 on bad input: " + args.join(' ').left(200)), __FILE__, __LINE__);
            return {};
        }
        const QStringList lines = QString::fromUtf8(r.err).split('\n', Qt::SkipEmptyParts);
        if (lines.size() != 1 || !lines[0].startsWith("colibri: ")) {
            QTest::qFail(qPrintable("expected one 'colibri: ' line, got: " + QString::fromUtf8(r.err).left(400)), __FILE__, __LINE__);
            return {};
        }
        return lines[0];
    }

    // A copy of the qwen2_moe reference directory with its config.json (and optionally more files) replaced.
    QString hf_copy(const QString& name, const QByteArray& config, const QString& family = "qwen2_moe") {
        const QString d = dir_.filePath(name);
        QDir().mkpath(d);
        const QString src = reference("hf/" + family + "/model/");
        write_all(d + "/config.json", config);
        QFile::copy(src + "generation_config.json", d + "/generation_config.json");
        QFile::link(src + "model.safetensors", d + "/model.safetensors");
        return d;
    }
    QByteArray config_with(const std::function<void(QJsonObject&)>& edit, const QString& family = "qwen2_moe") {
        QJsonObject cfg = read_json(reference("hf/" + family + "/model/config.json")).object();
        edit(cfg);
        return QJsonDocument(cfg).toJson();
    }
    // The Qwen3-tokenizer model with its section of `kind` replaced by `text` (padded with spaces to the
    // section's size), checksums and metadata resealed: only the content is hostile.
    QString qwen3_with(const QString& name, SectionKind kind, const QByteArray& text) {
        BinBytes b(read_all(qwen3_));
        const int i = b.find_section(kind);
        if (i < 0 || b.section(static_cast<uint32_t>(i)).size < static_cast<uint64_t>(text.size())) return {};
        QByteArray padded = text;
        padded.append(QByteArray(static_cast<qsizetype>(b.section(static_cast<uint32_t>(i)).size) - text.size(), ' '));
        b.rewrite_section(static_cast<uint32_t>(i), 0, padded);
        b.reseal();
        return write_all(dir_.filePath(name), b.bytes());
    }
    QStringList entries() const { return QDir(dir_.path()).entryList(QDir::Files | QDir::Hidden | QDir::System); }

    // Round 3: GGUF files laid out as llama.cpp requires them but for one thing (offsets that break the layout:
    // test_gguf's refused_files). The reference qwen2moe file rebuilt by write_gguf, with `edit` applied to its tensors.
    QString rebuilt_gguf(const QString& name, const std::function<void(std::vector<fuzz::GgufTensorData>&)>& edit) {
        const std::string src = read_all(QStringLiteral(COLIBRI_TEST_DATA_DIR "/gguf/qwen2moe-f32.gguf")).toStdString();
        const auto g = fuzz::parse_gguf_layout(reinterpret_cast<const uint8_t*>(src.data()), src.size());
        if (!g) return {};
        std::vector<fuzz::GgufTensorData> tensors = fuzz::gguf_tensors(src, *g);
        edit(tensors);
        return write_all(dir_.filePath(name), QByteArray::fromStdString(fuzz::write_gguf(src, *g, tensors, f32_bytes)));
    }
    static uint64_t f32_bytes(const fuzz::GgufTensorData& t) {
        uint64_t n = 4;
        for (uint64_t d : t.ne) n *= d;
        return n;
    }
    // Every *_exps stack of the reference file as one tensor per expert (older files' spelling).
    static void split_expert_stacks(std::vector<fuzz::GgufTensorData>& tensors) {
        std::vector<fuzz::GgufTensorData> out;
        const std::string stack = "_exps.weight";
        for (const fuzz::GgufTensorData& t : tensors) {
            if (!t.name.ends_with(stack)) {
                out.push_back(t);
                continue;
            }
            const uint64_t slice = f32_bytes(t) / t.ne[2];
            for (uint64_t e = 0; e < t.ne[2]; ++e)
                out.push_back({t.name.substr(0, t.name.size() - stack.size()) + "." + std::to_string(e) + ".weight", {t.ne[0], t.ne[1]}, t.type,
                               t.data.substr(e * slice, slice)});
        }
        tensors = std::move(out);
    }

    // One bound for the tokenizer, its config and the chat template (format.h, kMaxTextSectionBytes = 256 MiB),
    // applied by the converter, the loader and check alike.
    static constexpr qint64 kOverTextBound = (qint64(256) << 20) + 4096;


private slots:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        good_ = dir_.filePath("good.bin");
        const CliResult r = run_cli({"convert", reference("hf/qwen2_moe/model"), "-o", good_, "-q"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        const QString hf = dir_.filePath("qwen3-tiny");
        QVERIFY(make_model(hf, {"--family", "qwen2_moe", "--vocab", "151936", "--hidden", "32", "--layers", "2", "--heads", "2",
                                "--kv-heads", "1", "--experts", "4", "--top-k", "2", "--ffn", "32", "--shared-ffn", "32",
                                "--tokenizer", reference("tokenizers/qwen3")}));
        qwen3_ = dir_.filePath("qwen3-tiny.bin");
        const CliResult q = run_cli({"convert", hf, "-o", qwen3_, "-q"});
        QVERIFY2(q.exit_code == 0, q.err.constData());
        gguf_ = QStringLiteral(COLIBRI_TEST_DATA_DIR "/gguf/olmoe-f32.gguf");
        QVERIFY(QFile::exists(gguf_));
    }

    // ---------------------------------------------------------------- 1. stack overflows
    void deep_config_json() {
        // An array nested 150,000 deep: refused before anything recurses over it.
        const QByteArray deep = config_with([](QJsonObject&) {}).trimmed();
        QByteArray cfg = deep.left(deep.size() - 1) + ", \"x\": " + nested(150000, "[", "1", "]").toUtf8() + "}";
        const QString d = hf_copy("deep-config", cfg);
        QVERIFY(expect_failure({"convert", d, "-o", dir_.filePath("deep-config.bin")}).contains("nests deeper"));
        // generation_config.json too.
        const QString d2 = hf_copy("deep-gen", config_with([](QJsonObject&) {}));
        write_all(d2 + "/generation_config.json", "{\"eos_token_id\": " + nested(150000, "[", "1", "]").toUtf8() + "}");
        QVERIFY(expect_failure({"convert", d2, "-o", dir_.filePath("deep-gen.bin")}).contains("nests deeper"));
        QVERIFY(!QFile::exists(dir_.filePath("deep-config.bin")) && !QFile::exists(dir_.filePath("deep-gen.bin")));
    }

    void deep_tokenizer_sequences() {
        const QByteArray deep_tok = ("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"normalizer\": " +
                                     nested(30000, "{\"type\": \"Sequence\", \"normalizers\": [", "{\"type\": \"Lowercase\"}", "]}") + "}")
                                        .toUtf8();
        // convert, with tokenizer.json in the model directory.
        const QString d = hf_copy("deep-tok", config_with([](QJsonObject&) {}));
        write_all(d + "/tokenizer.json", deep_tok);
        QVERIFY(expect_failure({"convert", d, "-o", dir_.filePath("deep-tok.bin")}).contains("nests deeper"));
        // info, check and logits on a .bin that carries it (the section resealed, so only its content is hostile).
        for (const char* part : {"normalizer", "pre_tokenizer", "post_processor", "decoder"}) {
            const char* list = std::strcmp(part, "normalizer") == 0 ? "normalizers" : std::strcmp(part, "pre_tokenizer") == 0 ? "pretokenizers"
                               : std::strcmp(part, "post_processor") == 0                 ? "processors"
                                                                                          : "decoders";
            const QByteArray tok = (QString("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"%1\": ").arg(part) +
                                    nested(30000, QString("{\"type\": \"Sequence\", \"%1\": [").arg(list), "{\"type\": \"ByteLevel\"}", "]}") + "}")
                                       .toUtf8();
            const QString bin = qwen3_with(QString("deep-%1.bin").arg(part), SectionKind::TokenizerJson, tok);
            QVERIFY(!bin.isEmpty());
            QVERIFY(expect_failure({"info", bin}).contains("nests deeper"));
            QVERIFY(expect_failure({"logits", "-m", bin, "--tokens", "1,2"}).contains("nests deeper"));
            const CliResult c = run_cli({"check", bin});
            QVERIFY2(!c.crashed && c.exit_code == 1, c.err.constData());
            QVERIFY2(c.out.contains("nests deeper"), c.out.constData());
        }
    }

    // A chain of 20,000 '+' (or '|filter', '[0]', ...) in a GGUF's tokenizer.chat_template: convert keeps it,
    // and check and chat on the result report it instead of overflowing the stack (inside {% if false %} too).
    void deep_chat_template_through_gguf() {
        const QByteArray src = read_all(gguf_);
        QVERIFY(!src.isEmpty());
        QString chain = "1";
        for (int k = 0; k < 20000; ++k) chain += " + 1";
        QString filters = "x";
        for (int k = 0; k < 20000; ++k) filters += "|string";
        for (const QString& tpl : {"{{ " + chain + " }}", "{% if false %}{{ " + filters + " }}{% endif %}{{ messages[0]['content'] }}"}) {
            GgufEdit e;
            e.string("tokenizer.chat_template", tpl.toStdString());
            const QString gguf = write_all(dir_.filePath("deep-template.gguf"), e.apply(src));
            const QString bin = dir_.filePath("deep-template.bin");
            QFile::remove(bin);
            const CliResult conv = run_cli({"convert", gguf, "-o", bin, "-q"});
            QVERIFY2(conv.exit_code == 0 && !conv.crashed, conv.err.constData());
            const CliResult c = run_cli({"check", bin});
            QVERIFY2(!c.crashed && c.exit_code == 1, c.err.constData());
            QVERIFY2(c.out.contains("depth limit"), c.out.constData());
            const CliResult chat = run_cli({"chat", "-m", bin, "-n", "2"}, "hello\n");
            QVERIFY2(!chat.crashed, chat.err.constData());
            QVERIFY2(chat.err.contains("depth limit"), chat.err.constData());
        }
    }

    // ---------------------------------------------------------------- 2. hangs
    void fifo_as_a_path_does_not_block() {
        const QString fifo = dir_.filePath("model.fifo");
        QVERIFY(mkfifo(fifo.toLocal8Bit().constData(), 0644) == 0);
        const int kMs = 30000;  // each must answer at once; a blocked open would wait forever
        QVERIFY(expect_failure({"check", fifo}, {}, kMs).contains("not a regular file (a FIFO)"));
        QVERIFY(expect_failure({"info", fifo}, {}, kMs).contains("not a regular file (a FIFO)"));
        QVERIFY(expect_failure({"convert", fifo, "-o", dir_.filePath("fifo.bin")}, {}, kMs).contains("not a regular file (a FIFO)"));
        QVERIFY(expect_failure({"logits", "-m", fifo, "--tokens", "1"}, {}, kMs).contains("not a regular file (a FIFO)"));
        QVERIFY(expect_failure({"swap", "-m", good_, "--layer", "0", "--expert", "0", "--from", fifo, "-o", dir_.filePath("fifo.bin")}, {}, kMs)
                    .contains("not a regular file (a FIFO)"));
        // A FIFO as a file of a model directory.
        const QString d = hf_copy("fifo-config", config_with([](QJsonObject&) {}));
        QFile::remove(d + "/config.json");
        QVERIFY(mkfifo((d + "/config.json").toLocal8Bit().constData(), 0644) == 0);
        QVERIFY(expect_failure({"convert", d, "-o", dir_.filePath("fifo.bin")}, {}, kMs).contains("not a regular file (a FIFO)"));
        const QString d2 = hf_copy("fifo-tokenizer", config_with([](QJsonObject&) {}));
        QVERIFY(mkfifo((d2 + "/tokenizer.json").toLocal8Bit().constData(), 0644) == 0);
        QVERIFY(expect_failure({"convert", d2, "-o", dir_.filePath("fifo.bin")}, {}, kMs).contains("not a regular file (a FIFO)"));
        QVERIFY(!QFile::exists(dir_.filePath("fifo.bin")));
    }

    // ---------------------------------------------------------------- 3. memory
    // A 67 KB .bin.zst whose metadata frame inflates to 2 GiB: refused before it is inflated.
    void zstd_metadata_bomb() {
        const uint64_t kBomb = uint64_t(2) << 30;
        std::unique_ptr<ZSTD_CCtx, size_t (*)(ZSTD_CCtx*)> cctx(ZSTD_createCCtx(), ZSTD_freeCCtx);
        ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_compressionLevel, 1);
        ZSTD_CCtx_setPledgedSrcSize(cctx.get(), kBomb);
        std::vector<char> zeros(1 << 20, 0), out(ZSTD_CStreamOutSize());
        QByteArray frame;
        for (uint64_t done = 0; done < kBomb; done += zeros.size()) {
            ZSTD_inBuffer in{zeros.data(), zeros.size(), 0};
            const ZSTD_EndDirective mode = done + zeros.size() >= kBomb ? ZSTD_e_end : ZSTD_e_continue;
            size_t left = 1;
            while (in.pos < in.size || (mode == ZSTD_e_end && left != 0)) {
                ZSTD_outBuffer o{out.data(), out.size(), 0};
                left = ZSTD_compressStream2(cctx.get(), &o, &in, mode);
                QVERIFY(!ZSTD_isError(left));
                frame.append(out.data(), static_cast<qsizetype>(o.pos));
            }
        }
        ZstdHeader h{};
        std::memcpy(h.magic, kZstdMagic, sizeof(kZstdMagic));
        h.version_major = kZstdVersionMajor;
        h.frame_count = 1;
        h.image_size = kBomb;
        h.frame_table_offset = sizeof(ZstdHeader);
        FrameEntry f{sizeof(ZstdHeader) + sizeof(FrameEntry), static_cast<uint64_t>(frame.size()), 0, kBomb};
        h.frame_table_xxh64 = XXH64(&f, sizeof f, 0);
        h.header_xxh64 = XXH64(&h, sizeof h, 0);
        QByteArray file(reinterpret_cast<const char*>(&h), sizeof h);
        file.append(reinterpret_cast<const char*>(&f), sizeof f);
        file += frame;
        qInfo("bomb: %lld bytes inflating to %llu", static_cast<long long>(file.size()), static_cast<unsigned long long>(kBomb));
        QVERIFY(file.size() < 200 * 1024);
        const QString path = write_all(dir_.filePath("bomb.bin.zst"), file);
        for (const QStringList& args : {QStringList{"info", path}, QStringList{"logits", "-m", path, "--tokens", "1"}, QStringList{"check", path}}) {
            const Measured m = run_measured(args, 120);
            QVERIFY2(!m.crashed && m.exit_code != 0, m.err.constData());
            qInfo("%s: exit %d, peak RSS %ld MiB: %s", qPrintable(args[0]), m.exit_code, m.peak_rss_mib, m.err.trimmed().constData());
            QVERIFY2(m.peak_rss_mib < 1024, qPrintable(QString("%1 reached %2 MiB").arg(args[0]).arg(m.peak_rss_mib)));
        }
    }

    // A GGUF with an unused 67 MB u8 array (2^26 - 1 elements; the reader takes up to 2^26): converted without
    // turning each byte into a JSON value.
    void gguf_large_unused_array() {
        GgufEdit e;
        e.u8_array("colibri.test.unused", (uint64_t(1) << 26) - 1);
        const QString gguf = write_all(dir_.filePath("big-array.gguf"), e.apply(read_all(gguf_)));
        const QString out = dir_.filePath("big-array.bin");
        const Measured m = run_measured({"convert", gguf, "-o", out, "-q"}, 600);
        qInfo("convert with a 67 MiB unused array: exit %d, peak RSS %ld MiB", m.exit_code, m.peak_rss_mib);
        QVERIFY2(!m.crashed && m.exit_code == 0, m.err.constData());
        QVERIFY2(m.peak_rss_mib < 768, qPrintable(QString("peak RSS %1 MiB").arg(m.peak_rss_mib)));
        // The converted file loads and runs (check would also judge the GGUF's own chat template, whose role
        // markers this OLMoE vocabulary lacks: main's check calls that file invalid with or without the array).
        QCOMPARE(run_cli({"logits", "-m", out, "--tokens", "1,2"}).exit_code, 0);
    }

    // GLM-4.7-Flash as llama.cpp writes it (deepseek2) counts its multi-token-prediction layers in block_count and
    // says how many with nextn_predict_layers: they are not run, so a file that names one more block than it has
    // runs as the reference; a count that leaves no layer is refused.
    void gguf_deepseek2_nextn_layers_are_not_run() {
        const QByteArray file = read_all(QStringLiteral(COLIBRI_TEST_DATA_DIR "/gguf/glm4_moe_lite-f32.gguf"));
        auto u32 = [](uint32_t v) { return QByteArray(reinterpret_cast<const char*>(&v), 4); };
        const QString plain = dir_.filePath("lite.bin"), mtp = dir_.filePath("lite-mtp.bin");
        QCOMPARE(run_cli({"convert", write_all(dir_.filePath("lite.gguf"), file), "-o", plain, "-q"}).exit_code, 0);
        GgufEdit e;
        e.raw("deepseek2.block_count", 4, u32(4));
        e.raw("deepseek2.nextn_predict_layers", 4, u32(1));
        CliResult r = run_cli({"convert", write_all(dir_.filePath("lite-mtp.gguf"), e.apply(file)), "-o", mtp, "-q"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        QCOMPARE(run_cli({"logits", "-m", plain, "--tokens", "1,2,3", "--out", plain + ".f32"}).exit_code, 0);
        QCOMPARE(run_cli({"logits", "-m", mtp, "--tokens", "1,2,3", "--out", mtp + ".f32"}).exit_code, 0);
        QVERIFY(read_all(plain + ".f32") == read_all(mtp + ".f32"));
        GgufEdit all;
        all.raw("deepseek2.nextn_predict_layers", 4, u32(3));
        const QString none = dir_.filePath("lite-none.bin");
        const QString err = expect_failure({"convert", write_all(dir_.filePath("lite-none.gguf"), all.apply(file)), "-o", none});
        QVERIFY2(err.contains("nextn_predict_layers"), qPrintable(err));
        QVERIFY(!QFile::exists(none));
    }

    // ---------------------------------------------------------------- 4. output paths
    void device_and_symlink_targets_are_not_replaced() {
        const QString link = dir_.filePath("to-null.bin");
        QVERIFY(QFile::link("/dev/null", link));
        const QStringList model_writers[] = {
            {"convert", reference("hf/qwen2_moe/model"), "-o", link, "-q"},
            {"convert", reference("hf/qwen2_moe/model"), "-o", link + ".zst", "-q"},
            {"swap", "-m", good_, "--layer", "0", "--expert", "0", "--from", good_, "--from-expert", "1", "-o", link, "-q"},
        };
        QVERIFY(QFile::link("/dev/null", link + ".zst"));
        for (const QStringList& args : model_writers)
            QVERIFY(expect_failure(args).contains("not a regular file (a device): refusing to replace it"));
        QVERIFY(QFileInfo(link).isSymLink() && QFileInfo(link).symLinkTarget() == "/dev/null");
        QVERIFY(is_char_device("/dev/null"));
        // logits --out writes raw floats: through a link to a device (or a FIFO) that is what the user asked.
        const CliResult l = run_cli({"logits", "-m", good_, "--tokens", "1,2", "--out", link});
        QVERIFY2(l.exit_code == 0, l.err.constData());
        QVERIFY(QFileInfo(link).isSymLink() && is_char_device("/dev/null"));
        // A write error through a device says why.
        if (is_char_device("/dev/full"))
            QVERIFY(expect_failure({"logits", "-m", good_, "--tokens", "1,2", "--out", "/dev/full"}).contains("No space left on device"));
        // A device node made here, where the test may make one (root with CAP_MKNOD).
        const QString node = dir_.filePath("node.bin");
        if (mknod(node.toLocal8Bit().constData(), S_IFCHR | 0666, makedev(1, 3)) == 0) {
            QVERIFY(expect_failure({"convert", reference("hf/qwen2_moe/model"), "-o", node, "-q"}).contains("refusing to replace it"));
            QVERIFY(is_char_device(node));
        } else {
            qInfo("mknod not permitted here: the device-node case ran through the /dev/null link only");
        }
        // A symlink to a regular file is written through: the link stays, its target is replaced.
        const QString target = dir_.filePath("real-target.bin"), link2 = dir_.filePath("link-to-real.bin");
        write_all(target, "old");
        QVERIFY(QFile::link(target, link2));
        const CliResult c = run_cli({"convert", reference("hf/qwen2_moe/model"), "-o", link2, "-q"});
        QVERIFY2(c.exit_code == 0, c.err.constData());
        QVERIFY(QFileInfo(link2).isSymLink());
        QCOMPARE(read_all(target), read_all(good_));
    }

    // Two logits --out to one path used the same fixed PATH.tmp: now each writes its own temporary file. Large
    // outputs (64 positions x the Qwen3 vocabulary, 39 MB) so that the writes overlap.
    void concurrent_outputs_do_not_collide() {
        const QString out = dir_.filePath("shared.f32");
        QStringList ids;
        for (int k = 0; k < 64; ++k) ids << QString::number(100 + k * 7);
        const QStringList args{"logits", "-m", qwen3_, "--tokens", ids.join(','), "-t", "1"};
        std::vector<std::unique_ptr<QProcess>> procs;
        for (int k = 0; k < 8; ++k) {
            procs.push_back(std::make_unique<QProcess>());
            procs.back()->start(QStringLiteral(COLIBRI_CLI), args + QStringList{"--out", out});
        }
        for (auto& p : procs) {
            QVERIFY(p->waitForFinished(300000));
            QVERIFY2(p->exitStatus() == QProcess::NormalExit && p->exitCode() == 0, p->readAllStandardError().constData());
        }
        const QString one = dir_.filePath("alone.f32");
        QCOMPARE(run_cli(args + QStringList{"--out", one}).exit_code, 0);
        QCOMPARE(read_all(out), read_all(one));
        for (const QString& name : entries()) QVERIFY2(!name.startsWith("shared.f32.tmp"), qPrintable(name));
    }

    // kill -9 of convert --zstd, at several moments: what remains is never a complete model under any name.
    void killed_zstd_conversion_leaves_no_model() {
        const QString hf = dir_.filePath("kill-src");
        QVERIFY(make_model(hf, {"--family", "mixtral", "--layers", "4", "--hidden", "512", "--heads", "8", "--kv-heads", "2",
                                "--ffn", "1024", "--experts", "8", "--top-k", "2", "--vocab", "4096"}));
        const QString kill_dir = dir_.filePath("kill-out");
        QVERIFY(QDir().mkpath(kill_dir));
        const QString out = kill_dir + "/model.bin.zst";
        // How long a whole conversion takes here, then kill at fractions of that.
        const auto t0 = std::chrono::steady_clock::now();
        QCOMPARE(run_cli({"convert", hf, "-o", out, "-q"}).exit_code, 0);
        const double whole_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        qInfo("convert --zstd takes %.0f ms here", whole_ms);
        QFile::remove(out);
        for (double fraction : {0.1, 0.3, 0.5, 0.7, 0.85, 0.95}) {
            QProcess p;
            p.start(QStringLiteral(COLIBRI_CLI), {"convert", hf, "-o", out, "-q"});
            QVERIFY(p.waitForStarted());
            QThread::msleep(static_cast<unsigned long>(whole_ms * fraction));
            ::kill(static_cast<pid_t>(p.processId()), SIGKILL);
            p.waitForFinished();
            for (const QString& name : QDir(kill_dir).entryList(QDir::Files | QDir::Hidden)) {
                const QString path = kill_dir + "/" + name;
                const CliResult c = run_cli({"check", path, "-q"});
                QVERIFY2(c.exit_code != 0 || name == "model.bin.zst",
                         qPrintable(QString("after kill -9 at %1 of the run: %2 is a valid model").arg(fraction).arg(name)));
                QVERIFY2(!name.contains("uncompressed"), qPrintable(name));
                QFile::remove(path);
            }
        }
    }

    // ---------------------------------------------------------------- 5. wrong acceptance
    void converter_refuses_what_the_loader_refuses() {
        struct Row {
            const char* name;
            std::function<void(QJsonObject&)> edit;
            const char* must_mention;
        };
        const Row rows[] = {
            {"eps-zero", [](QJsonObject& c) { c["rms_norm_eps"] = 0; }, "rms_norm_eps"},
            {"eps-negative", [](QJsonObject& c) { c["rms_norm_eps"] = -1e-6; }, "rms_norm_eps"},
            {"eps-underflow", [](QJsonObject& c) { c["rms_norm_eps"] = 1e-50; }, "float32"},
            {"theta-zero", [](QJsonObject& c) { c["rope_theta"] = 0; }, "rope_theta"},
            {"head-dim-odd", [](QJsonObject& c) { c["head_dim"] = 1; }, "must be even"},
            {"window-zero", [](QJsonObject& c) { c["sliding_window"] = 0; c["use_sliding_window"] = true; }, "sliding_window"},
            {"bos-2^40", [](QJsonObject& c) { c["bos_token_id"] = 1099511627776.0; }, "bos_token_id"},
            {"eos-2^40", [](QJsonObject& c) { c["eos_token_id"] = 1099511627776.0; }, "eos_token_id"},
        };
        for (const Row& row : rows) {
            QByteArray cfg = config_with(row.edit);
            cfg.replace("1099511627776.0", "1099511627776");  // an integer in the file, as a real config would write it
            const QString out = dir_.filePath(QString(row.name) + ".bin");
            const QString err = expect_failure({"convert", hf_copy(row.name, cfg), "-o", out});
            QVERIFY2(err.contains(row.must_mention), qPrintable(QString(row.name) + ": " + err));
            QVERIFY(!QFile::exists(out));
        }
        // A window of 2^32 limits nothing: accepted, and the file loads.
        const QString out = dir_.filePath("window-2^32.bin");
        QByteArray cfg = config_with([](QJsonObject& c) { c["sliding_window"] = 4294967296.0; c["use_sliding_window"] = true; });
        cfg.replace("4294967296.0", "4294967296");
        const CliResult r = run_cli({"convert", hf_copy("window-2^32", cfg), "-o", out, "-q"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        QCOMPARE(run_cli({"logits", "-m", out, "--tokens", "1,2"}).exit_code, 0);
        // GGUF: an epsilon of 1e-300 is 0 as float32.
        GgufEdit e;
        e.f64("olmoe.attention.layer_norm_rms_epsilon", 1e-300);
        const QString gguf = write_all(dir_.filePath("tiny-eps.gguf"), e.apply(read_all(gguf_)));
        QVERIFY(expect_failure({"convert", gguf, "-o", dir_.filePath("tiny-eps.bin")}).contains("rms_norm_eps"));
    }

    // The hyper-parameters of the format-2.1 families (latent attention, groups, sliding windows, partial and
    // YaRN rotary embeddings, scaled and clamped experts): a hostile value in config.json is refused by convert,
    // and one in a .bin's header by the loader and check, with one line, never a crash in the forward pass.
    void new_family_hyper_parameters_are_bounded() {
        struct ConfigRow {
            const char* family;
            const char* name;
            std::function<void(QJsonObject&)> edit;
            const char* must_mention;
        };
        const auto yarn = [](double factor) {
            return QJsonObject{{"rope_type", "yarn"}, {"rope_theta", 10000.0}, {"factor", factor}, {"original_max_position_embeddings", 1024}};
        };
        const ConfigRow config_rows[] = {
            {"deepseek_v3", "ds-kv-lora-zero", [](QJsonObject& c) { c["kv_lora_rank"] = 0; }, "kv_lora_rank"},
            {"deepseek_v3", "ds-q-lora-huge", [](QJsonObject& c) { c["q_lora_rank"] = 1099511627776.0; }, "q_lora_rank"},
            {"deepseek_v3", "ds-rope-odd", [](QJsonObject& c) { c["qk_rope_head_dim"] = 7; }, "rotary_dim"},
            {"deepseek_v3", "ds-nope-zero", [](QJsonObject& c) { c["qk_nope_head_dim"] = 0; }, "qk_nope_head_dim"},
            {"deepseek_v3", "ds-v-head-huge", [](QJsonObject& c) { c["v_head_dim"] = 4294967296.0; }, "v_head_dim"},
            {"deepseek_v3", "ds-groups-uneven", [](QJsonObject& c) { c["n_group"] = 5; }, "n_group"},
            {"deepseek_v3", "ds-topk-group-zero", [](QJsonObject& c) { c["topk_group"] = 0; }, "topk_group"},
            {"deepseek_v3", "ds-topk-group-over", [](QJsonObject& c) { c["topk_group"] = 5; }, "topk_group"},
            {"deepseek_v3", "ds-groups-256", [](QJsonObject& c) { c["n_group"] = 256; }, "n_group"},
            {"deepseek_v3", "ds-scaling-negative", [](QJsonObject& c) { c["routed_scaling_factor"] = -2.5; }, "routed_scaling_factor"},
            {"deepseek_v3", "ds-scaling-1e300", [](QJsonObject& c) { c["routed_scaling_factor"] = 1e300; }, "float32"},
            {"deepseek_v3", "ds-shared-overflow", [](QJsonObject& c) { c["n_shared_experts"] = 2147483648.0; }, "n_shared_experts"},
            {"deepseek_v3", "ds-yarn-factor-1e300", [&](QJsonObject& c) { c["rope_parameters"] = yarn(1e300); }, "float32"},
            {"deepseek_v3", "ds-yarn-factor-half", [&](QJsonObject& c) { c["rope_parameters"] = yarn(0.5); }, "YaRN"},
            {"gpt_oss", "oss-window-zero", [](QJsonObject& c) { c["sliding_window"] = 0; }, "sliding_window"},
            {"gpt_oss", "oss-window-2^32", [](QJsonObject& c) { c["sliding_window"] = 4294967296.0; }, "sliding_window"},
            {"gpt_oss", "oss-limit-negative", [](QJsonObject& c) { c["swiglu_limit"] = -7; }, "swiglu_limit"},
            {"gpt_oss", "oss-limit-1e39", [](QJsonObject& c) { c["swiglu_limit"] = 1e39; }, "float32"},
            {"gpt_oss", "oss-layer-types-short", [](QJsonObject& c) { c["layer_types"] = QJsonArray{"sliding_attention"}; }, "layer_types"},
            {"gpt_oss", "oss-head-dim-odd", [](QJsonObject& c) { c["head_dim"] = 3; }, "rotary_dim"},
            {"qwen3_moe", "q3-partial-odd", [](QJsonObject& c) { c["partial_rotary_factor"] = 0.3; c["head_dim"] = 10; }, "rotary_dim"},
            {"qwen3_moe", "q3-partial-over-one", [](QJsonObject& c) { c["partial_rotary_factor"] = 2.0; }, "partial_rotary_factor"},
            {"qwen3_moe", "q3-partial-tiny", [](QJsonObject& c) { c["partial_rotary_factor"] = 1e-9; }, "partial_rotary_factor"},
            {"glm4_moe", "glm-theta-1e300", [](QJsonObject& c) { c["rope_theta"] = 1e300; c.remove("rope_parameters"); }, "float32"},
            {"glm4_moe", "glm-first-dense-over", [](QJsonObject& c) { c["first_k_dense_replace"] = 1000; }, "first_k_dense_replace"},
        };
        for (const ConfigRow& row : config_rows) {
            QByteArray cfg = config_with(row.edit, row.family);
            for (const char* big : {"1099511627776", "4294967296", "2147483648"}) cfg.replace(QByteArray(big) + ".0", big);
            const QString out = dir_.filePath(QString(row.name) + ".bin");
            const QString err = expect_failure({"convert", hf_copy(row.name, cfg, row.family), "-o", out});
            QVERIFY2(err.contains(row.must_mention), qPrintable(QString(row.name) + ": " + err));
            QVERIFY2(!QFile::exists(out), row.name);
        }

        // The same fields in a converted file's header (resealed, so only the value is hostile).
        struct HeaderRow {
            const char* family;
            const char* name;
            std::function<void(HyperParams&)> edit;
            const char* must_mention;  // nullptr: a harmless value, which must run
        };
        const float inf = INFINITY, nan = NAN;
        const HeaderRow header_rows[] = {
            {"deepseek_v3", "kv-lora-zero", [](HyperParams& h) { h.kv_lora_rank = 0; }, "kv_lora_rank"},
            {"deepseek_v3", "kv-lora-huge", [](HyperParams& h) { h.kv_lora_rank = 0x7fffffff; }, "colibri: "},
            {"deepseek_v3", "q-lora-zero", [](HyperParams& h) { h.q_lora_rank = 0; }, "colibri: "},
            {"deepseek_v3", "q-lora-huge", [](HyperParams& h) { h.q_lora_rank = 0xffffffff; }, "colibri: "},
            {"deepseek_v3", "v-head-zero", [](HyperParams& h) { h.v_head_dim = 0; }, "v_head_dim"},
            {"deepseek_v3", "v-head-huge", [](HyperParams& h) { h.v_head_dim = 0xffffffff; }, "colibri: "},
            {"deepseek_v3", "rotary-all", [](HyperParams& h) { h.rotary_dim = h.head_dim; }, "rotary_dim"},
            {"deepseek_v3", "rotary-huge", [](HyperParams& h) { h.rotary_dim = 0xfffffffe; }, "rotary_dim"},
            {"deepseek_v3", "head-dim-huge", [](HyperParams& h) { h.head_dim = 0x80000000; }, "colibri: "},
            {"deepseek_v3", "groups-uneven", [](HyperParams& h) { h.n_group = 3; }, "n_group"},
            {"deepseek_v3", "groups-255", [](HyperParams& h) { h.n_group = 255; }, "n_group"},
            {"deepseek_v3", "topk-group-zero", [](HyperParams& h) { h.topk_group = 0; }, "n_group"},
            {"deepseek_v3", "topk-group-over", [](HyperParams& h) { h.topk_group = 200; }, "n_group"},
            {"deepseek_v3", "scaling-inf", [=](HyperParams& h) { h.routed_scaling = inf; }, "routed_scaling"},
            {"deepseek_v3", "scaling-nan", [=](HyperParams& h) { h.routed_scaling = nan; }, "routed_scaling"},
            {"deepseek_v3", "yarn-factor-nan", [=](HyperParams& h) { h.rope_scaling = 1; h.rope_factor = nan; h.rope_original_max_position = 64; }, "rope_factor"},
            {"deepseek_v3", "yarn-factor-inf", [=](HyperParams& h) { h.rope_scaling = 1; h.rope_factor = inf; h.rope_original_max_position = 64; }, "rope_factor"},
            {"deepseek_v3", "yarn-beta-inf", [=](HyperParams& h) { h.rope_scaling = 1; h.rope_factor = 4; h.rope_original_max_position = 64; h.yarn_beta_fast = inf; }, "yarn_beta_fast"},
            {"deepseek_v3", "yarn-mscale-nan", [=](HyperParams& h) { h.rope_scaling = 1; h.rope_factor = 4; h.rope_original_max_position = 64; h.yarn_mscale_all_dim = nan; }, "yarn_mscale_all_dim"},
            {"deepseek_v3", "yarn-no-original", [](HyperParams& h) { h.rope_scaling = 1; h.rope_factor = 4; h.rope_original_max_position = 0; }, "YaRN"},
            {"deepseek_v3", "rope-scaling-unknown", [](HyperParams& h) { h.rope_scaling = 9; }, "rope scaling"},
            {"deepseek_v3", "scoring-unknown", [](HyperParams& h) { h.router_scoring = 7; }, "router scoring"},
            {"deepseek_v3", "yarn-beta-equal", [](HyperParams& h) { h.rope_scaling = 1; h.rope_factor = 4; h.rope_original_max_position = 64; h.yarn_beta_fast = h.yarn_beta_slow = 1; }, nullptr},
            {"gpt_oss", "window-zero", [](HyperParams& h) { h.sliding_window = 0; }, nullptr},
            {"gpt_oss", "window-huge", [](HyperParams& h) { h.sliding_window = 0xffffffff; }, nullptr},
            {"gpt_oss", "limit-nan", [=](HyperParams& h) { h.swiglu_limit = nan; }, "swiglu_limit"},
            {"gpt_oss", "limit-negative", [](HyperParams& h) { h.swiglu_limit = -1; }, "swiglu_limit"},
            {"gpt_oss", "head-dim-odd", [](HyperParams& h) { h.head_dim = 3; }, "rotary_dim"},
            {"gpt_oss", "kv-lora-set", [](HyperParams& h) { h.kv_lora_rank = 16; }, "kv_lora_rank"},
            {"gpt_oss", "kv-heads-three", [](HyperParams& h) { h.n_kv_heads = 3; }, "n_kv_heads"},
            {"gpt_oss", "experts-active-over", [](HyperParams& h) { h.n_experts_active = h.n_experts + 1; }, "active experts"},
            {"qwen3_moe", "partial-rotary-odd", [](HyperParams& h) { h.rotary_dim = 3; }, "rotary_dim"},
            {"qwen3_moe", "partial-rotary-over", [](HyperParams& h) { h.rotary_dim = h.head_dim + 2; }, "rotary_dim"},
            {"qwen3_moe", "partial-rotary-two", [](HyperParams& h) { h.rotary_dim = 2; }, nullptr},
            {"glm4_moe", "max-position-zero", [](HyperParams& h) { h.max_position = 0; }, nullptr},  // 0: not given, 4096
            {"glm4_moe", "clip-inf", [=](HyperParams& h) { h.clip_qkv = inf; }, "clip_qkv"},
        };
        QMap<QString, QByteArray> converted;
        for (const char* family : {"deepseek_v3", "gpt_oss", "qwen3_moe", "glm4_moe"}) {
            const QString out = dir_.filePath(QString(family) + "-ref.bin");
            const CliResult r = run_cli({"convert", reference(QString("hf/") + family + "/model"), "-o", out, "-q"});
            QVERIFY2(r.exit_code == 0, r.err.constData());
            converted[family] = read_all(out);
        }
        for (const HeaderRow& row : header_rows) {
            BinBytes b(converted[row.family]);
            FileHeader h = b.header();
            row.edit(h.hparams);
            b.set_header(h);
            b.reseal();
            const QString path = write_all(dir_.filePath(QString(row.family) + "-" + row.name + ".bin"), b.bytes());
            const QStringList run = {"logits", "-m", path, "--tokens", "1,2,3,4,5"};
            if (row.must_mention == nullptr) {
                const CliResult r = run_cli(run);
                QVERIFY2(!r.crashed && r.exit_code == 0, qPrintable(QString(row.name) + ": " + QString::fromUtf8(r.err)));
                continue;
            }
            const QString err = expect_failure(run);
            QVERIFY2(err.contains(row.must_mention), qPrintable(QString(row.name) + ": " + err));
            const CliResult c = run_cli({"check", path, "-q"});
            QVERIFY2(!c.crashed && c.exit_code == 1, qPrintable(QString(row.name) + ": check exited " + QString::number(c.exit_code)));
        }
    }

    // MiniMax-M2's and GLM-4.7-Flash's hub spellings: fields transformers 5.2 does not read are honoured where the
    // checkpoint depends on them (rotary_dim) and refused where they ask for something it does not run.
    void late_family_hub_fields_are_checked() {
        struct Row {
            const char* family;
            const char* name;
            std::function<void(QJsonObject&)> edit;
            const char* must_mention;
        };
        const Row rows[] = {
            {"minimax_m2", "mm-rotary-odd", [](QJsonObject& c) { c["rotary_dim"] = 15; }, "rotary_dim"},
            {"minimax_m2", "mm-rotary-over", [](QJsonObject& c) { c["rotary_dim"] = 64; }, "rotary_dim"},
            {"minimax_m2", "mm-rotary-factor-disagree", [](QJsonObject& c) { c["partial_rotary_factor"] = 0.25; }, "disagree"},
            {"minimax_m2", "mm-rotary-factor-1e30", [](QJsonObject& c) { c["partial_rotary_factor"] = 1e30; }, "partial_rotary_factor"},
            {"minimax_m2", "mm-lightning", [](QJsonObject& c) { c["attn_type_list"] = QJsonArray{0, 1}; }, "attn_type_list"},
            {"minimax_m2", "mm-attn-types-not-list", [](QJsonObject& c) { c["attn_type_list"] = 1; }, "attn_type_list"},
            {"minimax_m2", "mm-shared-expert", [](QJsonObject& c) { c["shared_intermediate_size"] = 32; }, "shared expert"},
            {"minimax_m2", "mm-softmax", [](QJsonObject& c) { c["scoring_func"] = "softmax"; }, "scoring_func"},
            {"minimax_m2", "mm-no-qk-norm", [](QJsonObject& c) { c["use_qk_norm"] = false; }, "use_qk_norm"},
            {"minimax_m2", "mm-qk-norm-per-head", [](QJsonObject& c) { c["qk_norm_type"] = "per_head"; }, "qk_norm_type"},
            {"minimax_m2", "mm-no-routing-bias", [](QJsonObject& c) { c["use_routing_bias"] = false; }, "use_routing_bias"},
            {"glm4_moe_lite", "gl-first-dense-two", [](QJsonObject& c) { c["first_k_dense_replace"] = 2; }, "first_k_dense_replace"},
            {"glm4_moe_lite", "gl-first-dense-over", [](QJsonObject& c) { c["first_k_dense_replace"] = 1000; }, "first_k_dense_replace"},
            {"glm4_moe_lite", "gl-layer-types-short", [](QJsonObject& c) { c["mlp_layer_types"] = QJsonArray{"dense"}; }, "mlp_layer_types"},
            {"glm4_moe_lite", "gl-layer-types-word", [](QJsonObject& c) { c["mlp_layer_types"] = QJsonArray{"dense", "moe", "sparse"}; }, "mlp_layer_types"},
            {"glm4_moe_lite", "gl-partial-rotary", [](QJsonObject& c) { c["partial_rotary_factor"] = 0.5; }, "partial_rotary_factor"},
            {"glm4_moe_lite", "gl-attention-bias", [](QJsonObject& c) { c["attention_bias"] = true; }, "attention_bias"},
            {"glm4_moe_lite", "gl-no-kv-lora", [](QJsonObject& c) { c.remove("kv_lora_rank"); }, "kv_lora_rank"},
        };
        for (const Row& row : rows) {
            QJsonObject cfg = read_json(reference(QString("hf/") + row.family + "/model/config.hub_style.json")).object();
            row.edit(cfg);
            const QString out = dir_.filePath(QString(row.name) + ".bin");
            const QString err = expect_failure({"convert", hf_copy(row.name, QJsonDocument(cfg).toJson(), row.family), "-o", out});
            QVERIFY2(err.contains(row.must_mention), qPrintable(QString(row.name) + ": " + err));
            QVERIFY2(!QFile::exists(out), row.name);
        }
        // A .bin of another family cannot claim latent attention, nor glm4_moe_lite go without it.
        const QString lite = dir_.filePath("lite.bin");
        QCOMPARE(run_cli({"convert", reference("hf/glm4_moe_lite/model"), "-o", lite, "-q"}).exit_code, 0);
        BinBytes b(read_all(lite));
        FileHeader h = b.header();
        h.hparams.kv_lora_rank = 0;
        b.set_header(h);
        b.reseal();
        const QString path = write_all(dir_.filePath("lite-no-latent.bin"), b.bytes());
        QVERIFY(expect_failure({"logits", "-m", path, "--tokens", "1,2,3"}).contains("kv_lora_rank"));
    }

    void numbers_are_not_narrowed() {
        QVERIFY(expect_failure({"swap", "-m", good_, "--layer", "0", "--expert", "0", "--from", good_, "--from-expert", "4294967297",
                                "-o", dir_.filePath("narrow.bin")})
                    .startsWith("colibri: usage"));
        QVERIFY(!QFile::exists(dir_.filePath("narrow.bin")));
    }

    void check_catches_overlaps_and_bad_numbers() {
        // Two tensors sharing bytes inside one section.
        BinBytes b(read_all(good_));
        const int q = b.tensor_index("layers.0.attn.q"), k = b.tensor_index("layers.0.attn.k");
        QVERIFY(q >= 0 && k >= 0);
        TensorEntry tk = b.tensor(static_cast<uint32_t>(k));
        tk.offset = b.tensor(static_cast<uint32_t>(q)).offset;
        b.set_tensor(static_cast<uint32_t>(k), tk);
        b.reseal();
        const QString overlap = write_all(dir_.filePath("tensor-overlap.bin"), b.bytes());
        CliResult c = run_cli({"check", overlap});
        QCOMPARE(c.exit_code, 1);
        QVERIFY2(c.out.contains("overlaps tensor"), c.out.constData());
        QVERIFY(expect_failure({"info", overlap}).contains("overlap"));
        // rms_eps infinite.
        BinBytes b2(read_all(good_));
        FileHeader h = b2.header();
        h.hparams.rms_eps = INFINITY;
        b2.set_header(h);
        b2.reseal();
        const QString inf = write_all(dir_.filePath("eps-inf.bin"), b2.bytes());
        c = run_cli({"check", inf});
        QCOMPARE(c.exit_code, 1);
        QVERIFY2(c.out.contains("rms_eps"), c.out.constData());
        QVERIFY(expect_failure({"logits", "-m", inf, "--tokens", "1"}).contains("rms_eps"));
    }

    void safetensors_overlaps_and_duplicates() {
        const QByteArray st = read_all(reference("hf/qwen2_moe/model/model.safetensors"));
        uint64_t len;
        std::memcpy(&len, st.constData(), 8);
        const QByteArray header = st.mid(8, static_cast<qsizetype>(len));
        QJsonObject h = QJsonDocument::fromJson(header).object();
        // Overlap: one tensor's range moved onto another's (same size, so only the overlap is wrong).
        QJsonObject a = h["model.layers.0.input_layernorm.weight"].toObject(), b = h["model.layers.0.post_attention_layernorm.weight"].toObject();
        b["data_offsets"] = a["data_offsets"];
        h["model.layers.0.post_attention_layernorm.weight"] = b;
        QByteArray nh = QJsonDocument(h).toJson(QJsonDocument::Compact);
        QVERIFY(nh.size() <= static_cast<qsizetype>(len));
        nh.append(QByteArray(static_cast<qsizetype>(len) - nh.size(), ' '));
        const QString d = hf_copy("st-overlap", read_all(reference("hf/qwen2_moe/model/config.json")));
        QFile::remove(d + "/model.safetensors");
        write_all(d + "/model.safetensors", st.left(8) + nh + st.mid(8 + static_cast<qsizetype>(len)));
        QVERIFY(expect_failure({"convert", d, "-o", dir_.filePath("st.bin")}).contains("overlap"));
        // A duplicate key: the same name twice in the header text.
        QByteArray dup = header;
        const QByteArray key = "\"model.norm.weight\"";
        const qsizetype at = dup.indexOf(key);
        QVERIFY(at > 0);
        const qsizetype end = dup.indexOf('}', at) + 1;
        const QByteArray entry = dup.mid(at, end - at);
        QByteArray with_dup = dup.left(dup.lastIndexOf('}')) + "," + entry + "}";
        QVERIFY(with_dup.size() >= dup.size());
        const uint64_t new_len = static_cast<uint64_t>(with_dup.size());
        QByteArray file(reinterpret_cast<const char*>(&new_len), 8);
        file += with_dup + st.mid(8 + static_cast<qsizetype>(len));
        const QString d2 = hf_copy("st-dup", read_all(reference("hf/qwen2_moe/model/config.json")));
        QFile::remove(d2 + "/model.safetensors");
        write_all(d2 + "/model.safetensors", file);
        QVERIFY(expect_failure({"convert", d2, "-o", dir_.filePath("st.bin")}).contains("twice"));
        QVERIFY(!QFile::exists(dir_.filePath("st.bin")));
    }

    // ---------------------------------------------------------------- round 3 (issue 31): files that lie
    // Twice the experts in one stack: 16 where expert_count says 8. The first half was used, the rest ignored.
    void gguf_expert_stack_with_more_experts() {
        const QString unchanged = rebuilt_gguf("rebuilt.gguf", [](auto&) {});
        const CliResult r = run_cli({"convert", unchanged, "-o", dir_.filePath("rebuilt.bin"), "-q"});
        QVERIFY2(r.exit_code == 0, r.err.constData());  // the helper lays the file out as llama.cpp does
        const QString doubled = rebuilt_gguf("doubled.gguf", [](std::vector<fuzz::GgufTensorData>& tensors) {
            for (fuzz::GgufTensorData& t : tensors)
                if (t.name == "blk.0.ffn_gate_exps.weight") {
                    const std::string own = t.data.substr(0, f32_bytes(t));
                    t.data = own + own;
                    t.ne[2] *= 2;
                }
        });
        const QString err = expect_failure({"convert", doubled, "-o", dir_.filePath("doubled.bin")});
        QVERIFY2(err.contains("blk.0.ffn_gate_exps.weight stacks 16 experts, the model has 8"), qPrintable(err));
        QVERIFY(!QFile::exists(dir_.filePath("doubled.bin")));
    }

    // One tensor per expert converts; with a ninth expert beside the model's eight it is refused.
    void gguf_expert_beyond_the_count() {
        const QString per_expert = rebuilt_gguf("per-expert.gguf", split_expert_stacks);
        const CliResult r = run_cli({"convert", per_expert, "-o", dir_.filePath("per-expert.bin"), "-q"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        const QString ninth = rebuilt_gguf("ninth-expert.gguf", [](std::vector<fuzz::GgufTensorData>& tensors) {
            split_expert_stacks(tensors);
            for (const fuzz::GgufTensorData& t : std::vector<fuzz::GgufTensorData>(tensors))
                if (t.name == "blk.1.ffn_up.0.weight") tensors.push_back({"blk.1.ffn_up.8.weight", t.ne, t.type, t.data});
        });
        const QString err = expect_failure({"convert", ninth, "-o", dir_.filePath("ninth.bin")});
        QVERIFY2(err.contains("tensor blk.1.ffn_up.8.weight is an expert beyond the model's 8"), qPrintable(err));
    }

    // Names and keys llama.cpp refuses: a tensor name of 64 bytes (ggml keeps 63 and its NUL), general.alignment of
    // another type than u32, a key given twice (the last one won), an array of arrays (skipped).
    void gguf_names_and_keys_llama_cpp_refuses_data() {
        QTest::addColumn<QString>("file");
        QTest::addColumn<QString>("message");
        QTest::newRow("64-byte tensor name") << "long-name" << "has a name of 64 bytes (at most 63)";
        QTest::newRow("alignment as a u64") << "align-u64" << "general.alignment is not a u32";
        QTest::newRow("key twice") << "key-twice" << "GGUF key 'general.name' appears twice";
        QTest::newRow("array of arrays") << "nested" << "GGUF metadata holds an array of 1 elements of type 9";
    }
    void gguf_names_and_keys_llama_cpp_refuses() {
        QFETCH(QString, file);
        QFETCH(QString, message);
        GgufEdit e;
        if (file == "align-u64") e.u64("general.alignment", 32);
        if (file == "key-twice") {
            e.string("general.name", "first");
            e.string("general.name", "second");
        }
        if (file == "nested") {
            QByteArray arrays;
            const uint32_t array_type = 9, u8_type = 0;
            const uint64_t one = 1;
            arrays.append(reinterpret_cast<const char*>(&array_type), 4).append(reinterpret_cast<const char*>(&one), 8);
            arrays.append(reinterpret_cast<const char*>(&u8_type), 4).append(reinterpret_cast<const char*>(&one), 8).append('\x01');
            e.raw("general.nested", 9, arrays);
        }
        const QString gguf = file == "long-name"
                                 ? rebuilt_gguf("long-name.gguf", [](std::vector<fuzz::GgufTensorData>& t) { t.back().name = std::string(64, 'x'); })
                                 : write_all(dir_.filePath(file + ".gguf"), e.apply(read_all(gguf_)));
        const QString err = expect_failure({"convert", gguf, "-o", dir_.filePath(file + ".bin")});
        QVERIFY2(err.contains(message), qPrintable(err));
    }

    // An expert table entry naming another expert's section (the expert cache and a .bin.zst read experts through
    // it) loaded; check called it invalid. Now the loader refuses it, in check's words.
    void bin_expert_entry_naming_another_section() {
        BinBytes b(read_all(good_));
        const int e0 = b.find_section(SectionKind::Expert, 0, 0), e1 = b.find_section(SectionKind::Expert, 0, 1);
        QVERIFY(e0 > 0 && e1 > 0);
        ExpertEntry x = b.expert(0);
        QCOMPARE(x.section, uint32_t(e0));
        x.section = static_cast<uint32_t>(e1);
        x.offset = b.section(static_cast<uint32_t>(e1)).offset;
        x.size = b.section(static_cast<uint32_t>(e1)).size;
        b.set_expert(0, x);
        b.reseal();
        const QString path = write_all(dir_.filePath("expert-entry-elsewhere.bin"), b.bytes());
        const QString err = expect_failure({"info", path});
        QVERIFY2(err.contains("expert table entry 0: L0 E0 refers to section #" + QString::number(e1) + " expert L0 E1"), qPrintable(err));
        QVERIFY(expect_failure({"logits", "-m", path, "--tokens", "1,2"}).contains("expert table entry 0"));
        const CliResult c = run_cli({"check", path});
        QCOMPARE(c.exit_code, 1);
        QVERIFY2(c.out.contains("expert table entry 0: L0 E0 refers to layer 0 expert 1"), c.out.constData());
    }

    // Two experts' gate projections trading places: each in the other's section, both inside one. It loaded with
    // the weights bound by name from the wrong sections; check called it invalid.
    void bin_tensor_in_another_experts_section() {
        BinBytes t(read_all(good_));
        const int e1 = t.find_section(SectionKind::Expert, 0, 1);
        const int g0 = t.tensor_index("layers.0.experts.0.gate"), g1 = t.tensor_index("layers.0.experts.1.gate");
        QVERIFY(e1 > 0 && g0 >= 0 && g1 >= 0);
        TensorEntry a = t.tensor(static_cast<uint32_t>(g0)), b = t.tensor(static_cast<uint32_t>(g1));
        std::swap(a.section, b.section);
        std::swap(a.offset, b.offset);
        t.set_tensor(static_cast<uint32_t>(g0), a);
        t.set_tensor(static_cast<uint32_t>(g1), b);
        t.reseal();
        const QString path = write_all(dir_.filePath("tensor-elsewhere.bin"), t.bytes());
        const QString err = expect_failure({"info", path});
        QVERIFY2(err.contains("tensor layers.0.experts.0.gate: lies in section #" + QString::number(e1) + " expert L0 E1, it belongs in layer 0 expert 0"),
                 qPrintable(err));
        const CliResult c = run_cli({"check", path});
        QCOMPARE(c.exit_code, 1);
        QVERIFY2(c.out.contains("tensor layers.0.experts.0.gate: lies in layer 0 expert 1"), c.out.constData());
    }

    // The converter refuses a larger tokenizer.json before reading it (a sparse file: no disk is used).
    void text_bound_in_the_converter() {
        const QString d = hf_copy("big-tokenizer", read_all(reference("hf/qwen2_moe/model/config.json")));
        QFile tok(d + "/tokenizer.json");
        QVERIFY(tok.open(QIODevice::WriteOnly) && tok.resize(kOverTextBound));
        tok.close();
        const QString err = expect_failure({"convert", d, "-o", dir_.filePath("big-tok.bin")});
        QVERIFY2(err.contains("tokenizer.json: too large (" + QString::number(kOverTextBound) + " bytes, at most 268435456)"), qPrintable(err));
        QVERIFY(!QFile::exists(dir_.filePath("big-tok.bin")));
    }

    // A .bin whose tokenizer section is the real tokenizer followed by spaces, 257 MiB in all: it loaded while check
    // called the file invalid; both refuse it now, in the same words.
    void text_bound_in_the_loader_and_check() {
        BinBytes b(read_all(qwen3_));
        const int i = b.find_section(SectionKind::TokenizerJson);
        QVERIFY(i > 0);
        SectionEntry s = b.section(static_cast<uint32_t>(i));
        const QByteArray text = b.bytes().mid(static_cast<qsizetype>(s.offset), static_cast<qsizetype>(s.size));
        const QByteArray spaces(1 << 20, ' ');
        XXH64_state_t* st = XXH64_createState();
        XXH64_reset(st, 0);
        XXH64_update(st, text.constData(), static_cast<size_t>(text.size()));
        for (qint64 k = kOverTextBound - text.size(); k > 0; k -= spaces.size())
            XXH64_update(st, spaces.constData(), static_cast<size_t>(std::min<qint64>(k, spaces.size())));
        s.xxh64 = XXH64_digest(st);
        XXH64_freeState(st);
        s.offset = static_cast<uint64_t>(b.bytes().size());  // the converter pads its files to 4096 bytes
        s.size = static_cast<uint64_t>(kOverTextBound);
        b.set_section(static_cast<uint32_t>(i), s);
        FileHeader h = b.header();
        h.file_size = s.offset + s.size;
        b.set_header(h);
        b.reseal();
        const QString big = dir_.filePath("big-tokenizer.bin");
        QFile out(big);
        QVERIFY(out.open(QIODevice::WriteOnly));
        QVERIFY(out.write(b.bytes()) == b.bytes().size() && out.write(text) == text.size());
        for (qint64 left = kOverTextBound - text.size(); left > 0; left -= spaces.size())
            QVERIFY(out.write(spaces.constData(), std::min<qint64>(left, spaces.size())) > 0);
        out.close();
        const QString err = expect_failure({"info", big});
        const QString why = QString::number(kOverTextBound) + " bytes, more than the 256 MiB a text section may hold";
        QVERIFY2(err.contains(why), qPrintable(err));
        const CliResult c = run_cli({"check", big});
        QFile::remove(big);
        QCOMPARE(c.exit_code, 1);
        QVERIFY2(c.out.contains(("tokenizer: " + why).toUtf8()), c.out.constData());
    }

    // nlohmann's parser takes a NUL byte for the end of the input: everything after one in a JSON file was dropped
    // without a word. Each JSON file of a model directory now refuses a NUL wherever it is.
    void json_file_with_a_nul_data() {
        QTest::addColumn<QString>("file");
        QTest::addColumn<QString>("message");
        QTest::newRow("config.json") << "config.json" << "config.json: holds a NUL byte at offset ";
        QTest::newRow("generation_config.json") << "generation_config.json" << "generation_config.json: holds a NUL byte at offset 19";
        QTest::newRow("tokenizer.json") << "tokenizer.json" << "tokenizer.json holds a NUL byte at offset ";
    }
    void json_file_with_a_nul() {
        QFETCH(QString, file);
        QFETCH(QString, message);
        const QByteArray config = read_all(reference("hf/qwen2_moe/model/config.json")).trimmed();
        const QByteArray nul(1, '\0');
        const QString d = hf_copy("nul-" + file, file == "config.json" ? config + nul + "{\"num_experts\": 3}" : config);
        if (file == "generation_config.json") write_all(d + "/generation_config.json", "{\"eos_token_id\": 2}" + nul + "{\"eos_token_id\": 7}");
        // The demo model's tokenizer fits the reference's 4096 rows: without the NUL it converts.
        if (file == "tokenizer.json")
            write_all(d + "/tokenizer.json", read_all(QStringLiteral(COLIBRI_SOURCE_DIR "/resources/demo_model/tokenizer.json")).trimmed() + nul + "{");
        const QString err = expect_failure({"convert", d, "-o", dir_.filePath("nul.bin")});
        QVERIFY2(err.contains(message), qPrintable(err));
        QVERIFY(!QFile::exists(dir_.filePath("nul.bin")));
    }

    // Inside a .bin: a tokenizer config with a NUL before its padding loaded as "{}".
    void json_section_with_a_nul() {
        const QString bin = qwen3_with("nul-config.bin", SectionKind::TokenizerConfig, "{}" + QByteArray(1, '\0') + "{\"bos_token\": 5}");
        QVERIFY(!bin.isEmpty());
        QVERIFY(expect_failure({"info", bin}).contains("tokenizer_config.json holds a NUL byte at offset 2"));
        const CliResult c = run_cli({"check", bin});
        QCOMPARE(c.exit_code, 1);
        QVERIFY2(c.out.contains("tokenizer_config.json holds a NUL byte at offset 2"), c.out.constData());
    }

    // generation_config.json's sampling defaults: checked at conversion (one line naming the field), carried into
    // the .bin as its own section, and that section, made hostile inside a sealed file, refused by the loader and
    // reported by check in the same words.
    void generation_config_sampling_is_checked() {
        const QString d = hf_copy("gen-sampling", read_all(reference("hf/qwen2_moe/model/config.json")));
        const QByteArray good = R"({"do_sample": true, "temperature": 0.6, "top_k": 20, "top_p": 0.95, "repetition_penalty": 1.05, "eos_token_id": 2})";
        QFile::remove(d + "/generation_config.json");
        write_all(d + "/generation_config.json", good);
        const QString bin = dir_.filePath("gen-sampling.bin");
        const CliResult c = run_cli({"convert", d, "-o", bin});
        QVERIFY2(c.exit_code == 0, c.err.constData());
        const QJsonObject info = QJsonDocument::fromJson(run_cli({"info", bin, "--json"}).out).object();
        QCOMPARE(info["sampling_defaults"].toString(), QStringLiteral("temperature 0.6, top-k 20, top-p 0.95, repetition penalty 1.05"));
        QCOMPARE(run_cli({"check", bin}).exit_code, 0);
        for (const auto& [text, why] : std::initializer_list<std::pair<QByteArray, QString>>{
                 {R"({"temperature": -1})", "temperature -1 is not in [0, 100]"},
                 {R"({"temperature": "hot"})", "temperature is not a number"},
                 {R"({"do_sample": "yes"})", "do_sample is not true or false"},
                 {R"({"top_k": 1e30})", "top_k is not a whole number"},
                 {R"({"top_k": -5})", "top_k -5 is not in [0, 2147483647]"},
                 {R"({"top_p": 1.5})", "top_p 1.5 is not in [0, 1]"},
                 {R"({"repetition_penalty": 0})", "repetition_penalty 0 is not in (0, 100]"},
                 {"[1, 2]", "the top level is not a JSON object"}}) {
            QFile::remove(d + "/generation_config.json");
            write_all(d + "/generation_config.json", text);
            const QString out = dir_.filePath("gen-bad.bin");
            QVERIFY2(expect_failure({"convert", d, "-o", out}).endsWith("generation_config.json: " + why), qPrintable(why));
            QVERIFY(!QFile::exists(out));
            // The same text inside a converted file: the loader refuses it, check names it.
            BinBytes b(read_all(bin));
            const int i = b.find_section(SectionKind::GenerationConfig);
            QVERIFY(i > 0);
            QVERIFY(b.section(static_cast<uint32_t>(i)).size >= static_cast<uint64_t>(text.size()));
            QByteArray padded = text;
            padded.append(QByteArray(static_cast<qsizetype>(b.section(static_cast<uint32_t>(i)).size) - text.size(), ' '));
            b.rewrite_section(static_cast<uint32_t>(i), 0, padded);
            b.reseal();
            const QString sealed = write_all(dir_.filePath("gen-sealed.bin"), b.bytes());
            QVERIFY(expect_failure({"info", sealed}).endsWith("generation config: " + why));
            const CliResult checked = run_cli({"check", sealed});
            QCOMPARE(checked.exit_code, 1);
            QVERIFY2(checked.out.contains(("generation config: " + why).toUtf8()), checked.out.constData());
        }
    }

    void sampling_values_are_checked() {
        for (const QStringList& bad : {QStringList{"--temperature", "nan"}, QStringList{"--temperature", "-1"}, QStringList{"--top-p", "-0.5"},
                                       QStringList{"--top-p", "nan"}, QStringList{"--min-p", "2"}, QStringList{"--repeat-penalty", "0"},
                                       QStringList{"--repeat-penalty", "inf"}, QStringList{"--top-k", "-3"}}) {
            const QString err = expect_failure(QStringList{"generate", "-m", good_, "--tokens", "1,2", "-n", "2"} + bad);
            QVERIFY2(err.contains(bad[0]), qPrintable(err));
            QVERIFY(expect_failure(QStringList{"chat", "-m", qwen3_} + bad, "hi\n").contains(bad[0]));
        }
    }

    // ---------------------------------------------------------------- 6. friendlier errors
    void generate_stops_at_the_context_limit() {
        // -c 8 with a 3-token prompt: positions 3..7 take generated tokens, then the context is full.
        CliResult r = run_cli({"generate", "-m", good_, "--tokens", "1,2,3", "-n", "20", "-c", "8", "--greedy", "--json"});
        QVERIFY2(r.exit_code == 0 && !r.crashed, r.err.constData());
        const QJsonObject j = QJsonDocument::fromJson(r.out).object();
        QCOMPARE(j["new_ids"].toArray().size(), 6);
        QCOMPARE(j["stop"].toString(), QString("context_full"));
        QVERIFY2(r.err.contains("context of 8 tokens is full"), r.err.constData());
        // The same ids as a run that was not cut short.
        const CliResult full = run_cli({"generate", "-m", good_, "--tokens", "1,2,3", "-n", "6", "--greedy", "--json"});
        QCOMPARE(QJsonDocument::fromJson(full.out).object()["new_ids"].toArray(), j["new_ids"].toArray());
        // Text output (a model with a tokenizer): printed, then the note.
        r = run_cli({"generate", "-m", qwen3_, "--prompt", "Hello", "-n", "50", "-c", "6", "--greedy"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        QVERIFY(r.out.size() > 1);  // the generated text, then a newline
        QVERIFY(r.err.contains("is full"));
        // A prompt that does not fit at all is an error that says so.
        QVERIFY(expect_failure({"generate", "-m", good_, "--tokens", "1,2,3,4", "-n", "2", "-c", "3"}).contains("does not fit"));
        // "context full (1 tokens)" became a sentence.
        const QString err = expect_failure({"logits", "-m", good_, "--tokens", "1,2", "-c", "1"});
        QVERIFY2(err.contains("context full") && !err.contains("1 tokens"), qPrintable(err));
    }

    void chat_survives_a_bad_line() {
        const QByteArray input = QByteArray("caf\xe9 \xff\xfe broken\n") + "hello\n";
        const CliResult r = run_cli({"chat", "-m", qwen3_, "-n", "3", "--greedy"}, input);
        QVERIFY2(r.exit_code == 0 && !r.crashed, r.err.constData());
        QVERIFY2(r.err.contains("not valid UTF-8"), r.err.constData());
        QVERIFY2(!r.out.trimmed().isEmpty(), "the second line got no reply");
    }

    void errors_say_it_once_and_say_why() {
        // check's template error: "chat template: " once.
        GgufEdit e;
        e.string("tokenizer.chat_template", "{{ raise_exception('no') }}");
        const QString gguf = write_all(dir_.filePath("raise.gguf"), e.apply(read_all(gguf_)));
        const QString bin = dir_.filePath("raise.bin");
        QCOMPARE(run_cli({"convert", gguf, "-o", bin, "-q"}).exit_code, 0);
        const CliResult c = run_cli({"check", bin});
        QCOMPARE(c.exit_code, 1);
        QVERIFY2(c.out.contains("chat template: does not render") && !c.out.contains("chat template: chat template"), c.out.constData());
        const CliResult chat = run_cli({"chat", "-m", bin, "-n", "2"}, "hi\n");
        QVERIFY2(chat.err.contains("colibri: chat: chat template: raise_exception: no") && !chat.err.contains("chat template: chat template"),
                 chat.err.constData());
        // A GGUF tensor with an empty name and no dimensions.
        QByteArray tiny("GGUF", 4);
        const uint32_t version = 3;
        const uint64_t n_tensors = 1, n_kv = 0, name_len = 0;
        const uint32_t n_dims = 0;
        tiny.append(reinterpret_cast<const char*>(&version), 4);
        tiny.append(reinterpret_cast<const char*>(&n_tensors), 8);
        tiny.append(reinterpret_cast<const char*>(&n_kv), 8);
        tiny.append(reinterpret_cast<const char*>(&name_len), 8);
        tiny.append(reinterpret_cast<const char*>(&n_dims), 4);
        tiny.append(QByteArray(32, '\0'));
        const QString err = expect_failure({"convert", write_all(dir_.filePath("noname.gguf"), tiny), "-o", dir_.filePath("noname.bin")});
        QVERIFY2(err.contains("GGUF tensor with an empty name has 0 dimensions"), qPrintable(err));
        // A config.json that is JSON, but an array.
        QVERIFY(expect_failure({"convert", hf_copy("array-config", "[1, 2]"), "-o", dir_.filePath("a.bin")}).contains("not a JSON object"));
        QVERIFY(expect_failure({"convert", hf_copy("broken-config", "{\"a\": "), "-o", dir_.filePath("a.bin")}).contains("not valid JSON"));
    }
};

QTEST_GUILESS_MAIN(TestHostile)
#include "test_hostile.moc"
