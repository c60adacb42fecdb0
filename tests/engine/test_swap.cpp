// Expert hot-swap: replacing one expert's weights from another model while a session generates on another
// thread gives, afterwards, exactly the logits of a model built with that expert; the weights stay read-only
// except for the one copy; mismatched or damaged donors are refused without touching the model.
#include <sys/wait.h>
#include <unistd.h>

#include <QDir>
#include <QTemporaryDir>
#include <QtTest>
#include <algorithm>
#include <atomic>
#include <map>
#include <csignal>
#include <thread>

#include "../test_support.h"
#include "colibri/colibri.h"
#include "engine/core/model.h"
#include "engine/core/session.h"

using namespace colibri;
using namespace colibri::test;

namespace {

// Builds the HF directory `out` as a copy of `base` in which the tensors whose names contain `fragment` are taken
// from `donor`. make_model writes identical headers for identical shapes, so the tensors sit at the same
// offsets in both files and are copied byte for byte: an independent way to get "the model built with that
// expert", not through the engine's swap path.
bool splice_tensors(const QString& base, const QString& donor, const QString& fragment, const QString& out) {
    QDir().mkpath(out);
    for (const char* f : {"config.json", "generation_config.json"}) QFile::copy(base + "/" + f, out + "/" + f);
    QByteArray a = read_all(base + "/model.safetensors");
    const QByteArray b = read_all(donor + "/model.safetensors");
    if (a.size() != b.size() || a.size() < 8) return false;
    uint64_t header = 0;
    std::memcpy(&header, a.constData(), 8);
    if (a.mid(8, static_cast<qsizetype>(header)) != b.mid(8, static_cast<qsizetype>(header))) return false;
    const QJsonObject tensors = QJsonDocument::fromJson(a.mid(8, static_cast<qsizetype>(header))).object();
    int copied = 0;
    for (auto it = tensors.begin(); it != tensors.end(); ++it) {
        if (!it.key().contains(fragment)) continue;
        const QJsonArray range = it.value().toObject()["data_offsets"].toArray();
        const qsizetype begin = 8 + static_cast<qsizetype>(header) + range[0].toInteger();
        const qsizetype end = 8 + static_cast<qsizetype>(header) + range[1].toInteger();
        std::memcpy(a.data() + begin, b.constData() + begin, static_cast<size_t>(end - begin));
        ++copied;
    }
    write_all(out + "/model.safetensors", a);
    return copied == 3;  // gate, up, down
}

std::vector<float> logits_of(const Model& model, const std::vector<int32_t>& ids) {
    ThreadPool pool(2);
    Session s(model, pool);
    auto r = s.eval(std::span<const int32_t>(ids));
    return r ? std::vector<float>(r->begin(), r->end()) : std::vector<float>{};
}

std::unique_ptr<Model> load(const QString& path) {
    auto m = Model::load(path.toStdString());
    if (!m) qWarning("%s", m.message().c_str());
    return m ? std::move(m.value()) : nullptr;
}

// Runs fn in a child process; true when the child was killed by SIGSEGV (a write to read-only pages).
template <typename F>
bool segfaults(F fn) {
    const pid_t pid = fork();
    if (pid == 0) {
        std::signal(SIGSEGV, SIG_DFL);
        fn();
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV;
}

}  // namespace

class TestSwap : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    std::vector<int32_t> ids_{1, 17, 230, 3999, 42, 7, 1200, 64, 5, 2048, 300, 11};
    uint32_t expert_ = 0;  // the expert of layer 1 the test tokens use most: swapping it changes the logits

    QString ids_arg() const {
        QStringList p;
        for (int32_t i : ids_) p << QString::number(i);
        return p.join(',');
    }
    QString name(const char* fmt) const { return QString(fmt).arg(expert_); }

    QString model_path(const QString& name, const QString& type, bool zstd = false) {
        return dir_.filePath(name + "-" + type + (zstd ? ".bin.zst" : ".bin"));
    }

private slots:
    void initTestCase() {
        const QStringList shape{"--family", "mixtral", "--layers", "3", "--hidden", "128", "--ffn", "256"};
        QVERIFY(make_model(dir_.filePath("hf-a"), shape + QStringList{"--seed", "11"}));
        QVERIFY(make_model(dir_.filePath("hf-b"), shape + QStringList{"--seed", "12"}));
        QCOMPARE(run_cli({"convert", dir_.filePath("hf-a"), "-o", model_path("a", "f32"), "-q"}).exit_code, 0);
        const CliResult route = run_cli({"route", "-m", model_path("a", "f32"), "--tokens", ids_arg(), "--json"});
        std::map<int, int> uses;
        for (const auto& tok : QJsonDocument::fromJson(route.out).object()["layers"].toArray()[1].toObject()["experts"].toArray())
            for (const auto& e : tok.toArray()) ++uses[e.toInt()];
        QVERIFY(!uses.empty());
        expert_ = static_cast<uint32_t>(std::max_element(uses.begin(), uses.end(), [](auto& x, auto& y) { return x.second < y.second; })->first);
        const QString fragment = QString("layers.1.block_sparse_moe.experts.%1.").arg(expert_);
        QVERIFY(splice_tensors(dir_.filePath("hf-a"), dir_.filePath("hf-b"), fragment, dir_.filePath("hf-c")));
        for (const QString type : {"f32", "q8_0", "q4_k"}) {
            for (const QString name : {"a", "b", "c"})
                if (!QFile::exists(model_path(name, type))) QCOMPARE(run_cli({"convert", dir_.filePath("hf-" + name), "-o", model_path(name, type), "--type", type, "-q"})
                             .exit_code,
                         0);
            QCOMPARE(run_cli({"convert", dir_.filePath("hf-a"), "-o", model_path("a", type, true), "--type", type, "-q"}).exit_code,
                     0);
        }
    }

    // The swap happens while another thread generates on the same model; afterwards a fresh session's logits
    // equal those of model c bit for bit, and the generating thread saw only clean, finite logits throughout.
    void live_swap_equals_built_model_data() {
        QTest::addColumn<QString>("type");
        QTest::addColumn<bool>("zstd");
        for (const char* type : {"f32", "q8_0", "q4_k"}) {
            QTest::newRow(type) << type << false;
            QTest::newRow((std::string(type) + "/zst").c_str()) << type << true;
        }
    }
    void live_swap_equals_built_model() {
        QFETCH(QString, type);
        QFETCH(bool, zstd);
        auto a = load(model_path("a", type, zstd));
        auto c = load(model_path("c", type));
        QVERIFY(a && c);
        const std::vector<float> want = logits_of(*c, ids_);
        const std::vector<float> before = logits_of(*a, ids_);
        QVERIFY(!want.empty() && !before.empty());
        QVERIFY(before != want);  // the expert matters for these tokens
        auto donor = ModelFile::open(model_path("b", type).toStdString());
        QVERIFY(donor.is_ok());

        std::atomic<bool> stop{false};
        std::atomic<int> tokens{0}, failures{0};
        std::thread generator([&] {
            ThreadPool pool(1);
            Session s(*a, pool);
            int32_t t = 1;
            while (!stop.load()) {
                if (s.position() + 1 >= s.context()) s.reset();
                auto r = s.eval(t);
                if (!r || !std::all_of(r->begin(), r->end(), [](float v) { return std::isfinite(v); })) ++failures;
                t = (t * 31 + 7) % 4000 + 1;
                ++tokens;
            }
        });
        while (tokens.load() < 20) std::this_thread::yield();
        const Status s = a->swap_expert(1, expert_, *donor.value(), 1, expert_);
        const int at_swap = tokens.load();
        while (tokens.load() < at_swap + 20) std::this_thread::yield();
        stop = true;
        generator.join();
        QVERIFY2(s, s.message().c_str());
        QCOMPARE(failures.load(), 0);
        QVERIFY(logits_of(*a, ids_) == want);

        // The in-memory checksum follows the new contents, so the swapped section verifies.
        const TensorView* gate = a->file().find_tensor(name("layers.1.experts.%1.gate").toStdString());
        QVERIFY(gate && a->file().verify_section(gate->section));
    }

    // Weights are mapped read-only: a stray write faults, before and after a swap (the swap reopens exactly one
    // section for its copy and closes it again).
    void weights_stay_read_only() {
        auto a = load(model_path("a", "q8_0"));
        auto donor = ModelFile::open(model_path("b", "q8_0").toStdString());
        QVERIFY(a && donor.is_ok());
        auto poke = [&](const QString& tensor) {
            const TensorView* t = a->file().find_tensor(tensor.toStdString());
            QVERIFY(t);
            QVERIFY(segfaults([t] {
                volatile uint8_t* p = const_cast<uint8_t*>(static_cast<const uint8_t*>(t->data));
                *p = static_cast<uint8_t>(*p ^ 1);
            }));
        };
        poke(name("layers.1.experts.%1.gate"));
        poke(QString("layers.1.experts.%1.down").arg((expert_ + 1) % 8));
        poke("layers.0.attn.q");
        QVERIFY(a->swap_expert(1, expert_, *donor.value(), 1, expert_));
        poke(name("layers.1.experts.%1.gate"));
        poke(name("layers.1.experts.%1.down"));
        poke(QString("layers.1.experts.%1.up").arg((expert_ + 2) % 8));
    }

    // Refusals leave the model as it was.
    void mismatched_or_damaged_donor_is_refused() {
        auto a = load(model_path("a", "q8_0"));
        QVERIFY(a);
        const std::vector<float> before = logits_of(*a, ids_);
        auto other_type = ModelFile::open(model_path("b", "f32").toStdString());
        QVERIFY(other_type.is_ok());
        Status s = a->swap_expert(1, expert_, *other_type.value(), 1, expert_);
        QVERIFY(!s);
        QVERIFY2(QString::fromStdString(s.message()).contains("needs q8_0"), s.message().c_str());
        QVERIFY(!a->swap_expert(7, expert_, *other_type.value(), 1, expert_));
        QVERIFY(!a->swap_expert(1, 99, *other_type.value(), 1, expert_));

        // A donor whose expert section is damaged (a flipped byte in its weights).
        auto clean = ModelFile::open(model_path("b", "q8_0").toStdString());
        QVERIFY(clean.is_ok());
        const TensorView* t = clean.value()->find_tensor(name("layers.1.experts.%1.up").toStdString());
        QByteArray bytes = read_all(model_path("b", "q8_0"));
        bytes[static_cast<qsizetype>(t->offset + 100)] ^= 0x40;
        const QString damaged = write_all(dir_.filePath("damaged-donor.bin"), bytes);
        auto donor = ModelFile::open(damaged.toStdString());
        QVERIFY(donor.is_ok());
        s = a->swap_expert(1, expert_, *donor.value(), 1, expert_);
        QVERIFY(!s);
        QVERIFY2(QString::fromStdString(s.message()).contains("checksum mismatch"), s.message().c_str());
        QVERIFY(logits_of(*a, ids_) == before);
    }

    // `colibri swap` writes a file that validates and computes like model c; the C API swaps in place.
    void cli_and_c_api() {
        const QString out = dir_.filePath("swapped.bin"), out_zst = dir_.filePath("swapped.bin.zst");
        const QString ids = ids_arg();
        const QString e = QString::number(expert_);
        for (const QString& target : {out, out_zst}) {
            const CliResult r = run_cli({"swap", "-m", model_path("a", "q4_k"), "--layer", "1", "--expert", e, "--from",
                                         model_path("b", "q4_k"), "-o", target, "-q"});
            QVERIFY2(r.exit_code == 0, r.err.constData());
            QCOMPARE(run_cli({"check", target}).exit_code, 0);
            QCOMPARE(run_cli({"logits", "-m", target, "--tokens", ids, "--out", target + ".f32"}).exit_code, 0);
        }
        QCOMPARE(run_cli({"logits", "-m", model_path("c", "q4_k"), "--tokens", ids, "--out", dir_.filePath("c.f32")}).exit_code, 0);
        QVERIFY(read_all(out + ".f32") == read_all(dir_.filePath("c.f32")));
        QVERIFY(read_all(out_zst + ".f32") == read_all(dir_.filePath("c.f32")));
        // From another expert of the donor, and bad requests: exit 1, one line, no output file.
        QCOMPARE(run_cli({"swap", "-m", model_path("a", "q4_k"), "--layer", "1", "--expert", e, "--from", model_path("b", "q4_k"),
                          "--from-layer", "2", "--from-expert", "0", "-o", dir_.filePath("other.bin"), "-q"})
                     .exit_code,
                 0);
        const CliResult bad = run_cli({"swap", "-m", model_path("a", "q4_k"), "--layer", "1", "--expert", e, "--from",
                                       model_path("b", "f32"), "-o", dir_.filePath("bad.bin")});
        QCOMPARE(bad.exit_code, 1);
        QCOMPARE(bad.err.count('\n'), 1);
        QVERIFY(!QFile::exists(dir_.filePath("bad.bin")));

        colibri_model* m = colibri_model_open(model_path("a", "q4_k").toUtf8().constData());
        QVERIFY(m);
        QCOMPARE(colibri_model_swap_expert(m, 1, expert_, model_path("b", "q4_k").toUtf8().constData(), 1, expert_), 0);
        QCOMPARE(colibri_model_swap_expert(m, 1, expert_, model_path("b", "f32").toUtf8().constData(), 1, expert_), -1);
        QVERIFY2(QString(colibri_last_error()).contains(" needs "), colibri_last_error());
        colibri_session* s = colibri_session_new(m, 1, 0);
        std::vector<float> logits(static_cast<size_t>(colibri_model_vocab_size(m)));
        QCOMPARE(colibri_session_eval(s, ids_.data(), ids_.size(), logits.data()), 0);
        auto c = load(model_path("c", "q4_k"));
        QVERIFY(logits == logits_of(*c, ids_));
        colibri_session_free(s);
        colibri_model_close(m);
    }
};

QTEST_GUILESS_MAIN(TestSwap)
#include "test_swap.moc"
