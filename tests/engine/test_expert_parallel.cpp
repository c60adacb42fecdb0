// Expert parallelism inside the session (engine/distributed/): ranks that are threads of this process, each with its
// own mapping of the file, computing only the experts the placement gives it and exchanging the outputs. The logits
// are bit for bit one process's for every family, rank count and placement (replicated experts included), for a
// prompt, the decode after it and a batched step; a rank never reads an expert it does not hold; a rank that stops
// answering turns into an error within the wait limit; a placement that does not fit the model is refused, naming
// what is wrong. (tests/tools/mpi_ranks_test.sh runs the same under mpirun.)
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTemporaryFile>
#include <QtTest>
#include <algorithm>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <unistd.h>

#include "../test_support.h"
#include "../thread_ranks.h"
#include "engine/core/model.h"
#include "engine/core/session.h"
#include "engine/distributed/expert_parallel.h"
#include "engine/distributed/thread_group.h"

using namespace colibri;
using namespace colibri::test;

namespace {

// Each rank's logits after the prompt, after each decoded token (greedy) and after a batched step of two sessions.
struct RankRun {
    std::vector<float> logits;
    Status status;
    ExchangeStats stats;
};

int32_t argmax(std::span<const float> v) { return int32_t(std::max_element(v.begin(), v.end()) - v.begin()); }

// Every RankTiming a session reports, and its routing (which says whose rows each token's experts are).
struct RankRecorder final : TraceObserver {
    struct Record {
        uint32_t layer, position;
        std::vector<uint64_t> experts_ns;
        uint64_t exchange_ns, bytes, sent, received;
    };
    std::vector<Record> records;
    std::map<std::pair<uint32_t, uint32_t>, std::vector<int32_t>> routing;  // (layer, position): the experts
    void on_rank_timing(const RankTiming& r) override {
        records.push_back({r.layer, r.position, {r.experts_ns.begin(), r.experts_ns.end()}, r.exchange_ns, r.bytes, r.bytes_sent, r.bytes_received});
    }
    void on_routing(const RoutingRecord& r) override { routing[{r.layer, r.position}].assign(r.experts.begin(), r.experts.end()); }
};

// observers (rank 0's, or one process's): for the decoded session and the other one of the batched step.
Status evaluate(const Model& model, const std::vector<int32_t>& ids, RankRun& out, RankRecorder* observers = nullptr) {
    ThreadPool pool(1);
    SessionOptions options;
    options.chunk = 16;  // several chunks, one of them partial
    Session s(model, pool, 128, options), other(model, pool, 128, options);
    if (observers != nullptr) s.set_observer(&observers[0]), other.set_observer(&observers[1]);
    auto r = s.eval(ids);
    if (!r) return r.status();
    out.logits.assign(r->begin(), r->end());
    for (int step = 0; step < 4; ++step) {
        auto d = s.eval(argmax(s.logits()));
        if (!d) return d.status();
        out.logits.insert(out.logits.end(), d->begin(), d->end());
    }
    COLIBRI_TRY(other.eval(std::span<const int32_t>(ids).first(5)).status());
    const int32_t next[1] = {argmax(s.logits())};
    const Session::BatchPart parts[2] = {{&s, next}, {&other, std::span<const int32_t>(ids).subspan(5, 3)}};
    COLIBRI_TRY(Session::eval_batch(parts));
    out.logits.insert(out.logits.end(), s.logits().begin(), s.logits().end());
    out.logits.insert(out.logits.end(), other.logits().begin(), other.logits().end());
    out.stats = s.exchange_stats();
    return Status::ok();
}

// One process: the reference.
RankRun solo(const std::string& path, const std::vector<int32_t>& ids, RankRecorder* observers = nullptr) {
    RankRun run;
    auto m = Model::load(path);
    if (!m) return RankRun{{}, m.status(), {}};
    run.status = evaluate(*m.value(), ids, run, observers);
    return run;
}

// `ranks` threads, each with its own Model on the file, joined as generate's ranks join (tests/thread_ranks.h);
// placement_json (empty: round-robin) spreads the experts; rank 0's sessions observed by `observers` when given.
std::vector<RankRun> ranks_run(const std::string& path, uint32_t ranks, const std::vector<int32_t>& ids, const std::string& placement_json = {},
                               RankRecorder* observers = nullptr) {
    QTemporaryFile placement;  // --placement reads a file
    if (!placement_json.empty() && (!placement.open() || placement.write(placement_json.data(), qint64(placement_json.size())) < 0 || !placement.flush()))
        return std::vector<RankRun>(ranks, RankRun{{}, error("cannot write the placement file"), {}});
    std::vector<RankRun> runs(ranks);
    const std::vector<Status> statuses =
        thread_ranks(path, ranks, std::chrono::milliseconds(120000), [&](uint32_t r, const Model& model, Communicator&) {
            return evaluate(model, ids, runs[r], r == 0 ? observers : nullptr);
        }, placement_json.empty() ? std::string() : placement.fileName().toStdString());
    for (uint32_t r = 0; r < ranks; ++r) runs[r].status = statuses[r];
    return runs;
}

bool bit_equal(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// A placement for `ranks` that differs from round-robin: expert 0 of every MoE layer on every rank (replicated, its
// rows split), the others dealt in reverse.
std::string replicated_placement(const Model& model, uint32_t ranks) {
    const PlacementShape shape = model.placement_shape();
    QJsonObject layers;
    for (size_t l = 0; l < shape.moe.size(); ++l) {
        if (!shape.moe[l]) continue;
        QJsonArray experts;
        QJsonArray all;
        for (uint32_t r = 0; r < ranks; ++r) all.append(int(r));
        experts.append(all);
        for (uint32_t e = 1; e < shape.n_experts; ++e) experts.append(int((ranks - 1) - e % ranks));
        layers[QString::number(l)] = experts;
    }
    return QJsonDocument(QJsonObject{{"ranks", int(ranks)}, {"layers", layers}}).toJson().toStdString();
}

// Whether page `addr` of this process is mapped (present in its page table): /proc/self/pagemap's bit 63.
bool page_present(int pagemap, const void* addr) {
    const auto page = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(addr)) / uint64_t(sysconf(_SC_PAGESIZE));
    uint64_t entry = 0;
    if (pread(pagemap, &entry, sizeof entry, off_t(page * sizeof entry)) != sizeof entry) return false;
    return (entry >> 63) & 1u;
}

}  // namespace

class TestExpertParallel : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

    QString convert(const QString& family) {
        const QString path = dir_.filePath(family + ".bin");
        if (QFile::exists(path)) return path;
        const CliResult r = run_cli({"convert", reference("hf/" + family + "/model"), "-o", path, "--type", "q8_0", "-q"});
        if (r.exit_code != 0) qWarning("convert: %s", r.err.constData());
        return path;
    }

    std::vector<int32_t> prompt(uint32_t vocab) {
        std::mt19937 rng(11);
        std::vector<int32_t> ids(37);
        for (int32_t& id : ids) id = static_cast<int32_t>(rng() % vocab);
        return ids;
    }

private slots:
    void logits_equal_one_process_data() {
        QTest::addColumn<QString>("family");
        // Every family of the reference set: shared experts (qwen2_moe gated, deepseek_v3, glm4_moe, qwen3_next),
        // biased experts (gpt_oss), hybrids (qwen3_next, qwen3_5_moe), latent attention (deepseek_v3).
        for (const char* family : {"mixtral", "qwen2_moe", "olmoe", "qwen3_moe", "gpt_oss", "deepseek_v3", "glm4_moe", "qwen3_next", "qwen3_5_moe",
                                   "minimax_m2", "glm4_moe_lite"})
            QTest::newRow(family) << QString(family);
    }

    void logits_equal_one_process() {
        QFETCH(QString, family);
        const std::string path = convert(family).toStdString();
        auto model = Model::load(path);
        QVERIFY2(model, model.message().c_str());
        const std::vector<int32_t> ids = prompt(model.value()->hparams().vocab_size);
        const RankRun want = solo(path, ids);
        QVERIFY2(want.status, want.status.message().c_str());
        QCOMPARE(want.stats.exchanges, uint64_t(0));
        struct Case {
            uint32_t ranks;
            bool replicated;
        };
        for (const Case c : {Case{2, false}, Case{3, false}, Case{3, true}, Case{4, false}}) {
            const std::string placement = c.replicated ? replicated_placement(*model.value(), c.ranks) : std::string();
            const std::vector<RankRun> got = ranks_run(path, c.ranks, ids, placement);
            for (uint32_t r = 0; r < c.ranks; ++r) {
                const QByteArray where = QString("%1 ranks%2, rank %3").arg(c.ranks).arg(c.replicated ? " (replicated)" : "").arg(r).toUtf8();
                QVERIFY2(got[r].status, (where + ": " + got[r].status.message().c_str()).constData());
                QVERIFY2(bit_equal(got[r].logits, want.logits), where.constData());
                // Every MoE layer of every step exchanged, and each rank sent a part of the rows.
                QVERIFY2(got[r].stats.exchanges > 0 && got[r].stats.bytes_received > 0, where.constData());
            }
        }
    }

    void rank_timings_reach_the_observer() {
        // Rank 0 observed, 2 ranks round-robin (expert e on rank e % 2): a RankTiming per token and MoE layer, every
        // rank's expert time in it, and the bytes of the rows each rank computed by the routing; the logits stay one
        // process's, and one process reports none.
        const std::string path = convert("qwen2_moe").toStdString();  // a shared expert too: every rank computes it
        auto model = Model::load(path);
        QVERIFY2(model, model.message().c_str());
        const format::HyperParams& hp = model.value()->hparams();
        const std::vector<int32_t> ids = prompt(hp.vocab_size);
        RankRecorder alone[2];
        const RankRun want = solo(path, ids, alone);
        QVERIFY2(want.status, want.status.message().c_str());
        QVERIFY(!alone[0].routing.empty());
        QVERIFY(alone[0].records.empty() && alone[1].records.empty());
        RankRecorder seen[2];
        const std::vector<RankRun> got = ranks_run(path, 2, ids, {}, seen);
        for (const RankRun& r : got) QVERIFY2(r.status, r.status.message().c_str());
        QVERIFY(bit_equal(got[0].logits, want.logits));
        QVERIFY(bit_equal(got[1].logits, want.logits));

        const uint64_t row_bytes = uint64_t(hp.hidden_size) * sizeof(float);
        uint64_t sent = 0, received = 0, want_sent = 0, want_received = 0;
        std::map<std::pair<uint32_t, uint32_t>, uint64_t> rank_ns;  // (layer, rank): summed over the tokens
        for (int i = 0; i < 2; ++i) {
            const RankRecorder& rec = seen[i];
            // One record per evaluated (MoE layer, position): exactly the routed ones.
            std::map<std::pair<uint32_t, uint32_t>, int> count;
            for (const RankRecorder::Record& r : rec.records) ++count[{r.layer, r.position}];
            QCOMPARE(count.size(), rec.routing.size());
            for (const auto& [key, experts] : rec.routing) {
                QVERIFY2(count[key] == 1, qPrintable(QString("layer %1 position %2: %3 records").arg(key.first).arg(key.second).arg(count[key])));
                for (int32_t e : experts) (e % 2 == 0 ? want_sent : want_received) += row_bytes;
            }
            for (const RankRecorder::Record& r : rec.records) {
                QCOMPARE(r.experts_ns.size(), size_t(2));
                QCOMPARE(r.bytes, r.sent + r.received);
                sent += r.sent;
                received += r.received;
                for (uint32_t k = 0; k < 2; ++k) rank_ns[{r.layer, k}] += r.experts_ns[k];
                // A decoded token is a chunk of its own: its record is the layer's whole exchange.
                if (i == 0 && r.position >= ids.size() && r.position < ids.size() + 4) {
                    const std::vector<int32_t>& experts = rec.routing.at({r.layer, r.position});
                    const auto mine = uint64_t(std::count_if(experts.begin(), experts.end(), [](int32_t e) { return e % 2 == 0; }));
                    QCOMPARE(r.sent, mine * row_bytes);
                    QCOMPARE(r.received, (experts.size() - mine) * row_bytes);
                    QVERIFY(r.experts_ns[0] > 0 && r.experts_ns[1] > 0 && r.exchange_ns > 0);
                }
            }
        }
        // Over the whole run the chunks' shares add up to the rows each rank computed.
        QCOMPARE(sent, want_sent);
        QCOMPARE(received, want_received);
        QCOMPARE(rank_ns.size(), size_t(2) * model.value()->moe_layer_count());
        for (const auto& [key, ns] : rank_ns) QVERIFY2(ns > 0, qPrintable(QString("layer %1 rank %2").arg(key.first).arg(key.second)));
    }

    void a_rank_reads_only_its_experts() {
        // Experts of 1.5 MB (f32): each rank's own mapping; rank 0 holds experts 0-3 of every layer, rank 1 4-7. The
        // pages of rank 1's experts that share no 2 MiB block with rank 0's or with what every rank reads (a large
        // folio or fault-around near a border) are never in rank 0's page table.
        const QString src = dir_.filePath("pages-hf");
        QVERIFY(make_model(src, {"--family", "mixtral", "--vocab", "300", "--hidden", "128", "--layers", "2", "--heads", "4",
                                 "--kv-heads", "2", "--experts", "8", "--top-k", "2", "--ffn", "1024", "--seed", "9"}));
        const QString path = dir_.filePath("pages.bin");
        QCOMPARE(run_cli({"convert", src, "-o", path, "-q"}).exit_code, 0);
        const std::string placement = R"({"ranks": 2, "layers": {"0": [0,0,0,0,1,1,1,1], "1": [0,0,0,0,1,1,1,1]}})";
        ThreadGroup group(2);
        std::vector<std::unique_ptr<Model>> models(2);
        std::vector<RankRun> runs(2);
        std::vector<std::unique_ptr<ExpertParallel>> parallel(2);
        for (uint32_t r = 0; r < 2; ++r) {
            auto m = Model::load(path.toStdString());
            QVERIFY(m);
            models[r] = std::move(m.value());
            auto p = ExpertPlacement::parse(placement, 2, models[r]->placement_shape());
            QVERIFY2(p, p.message().c_str());
            parallel[r] = std::make_unique<ExpertParallel>(ExpertParallel{&group.rank(r), std::move(p.value())});
            models[r]->set_expert_parallel(parallel[r].get());
        }
        const std::vector<int32_t> ids = prompt(300);
        std::vector<std::thread> threads;
        for (uint32_t r = 0; r < 2; ++r) threads.emplace_back([&, r] { runs[r].status = evaluate(*models[r], ids, runs[r]); });
        for (std::thread& t : threads) t.join();
        QVERIFY2(runs[0].status && runs[1].status, (runs[0].status.message() + runs[1].status.message()).c_str());
        QVERIFY(bit_equal(runs[0].logits, solo(path.toStdString(), ids).logits));

        const ModelFile& file = models[0]->file();
        constexpr uint64_t kBlock = uint64_t(2) << 20;
        const auto sections = file.sections();
        std::set<uint64_t> near_mine;  // 2 MiB blocks rank 0 may read: its experts' and every section not an expert's
        std::vector<uint32_t> theirs;
        std::set<uint32_t> expert_sections;
        for (const format::ExpertEntry& e : file.experts()) {
            expert_sections.insert(e.section);
            if (e.expert >= 4) theirs.push_back(e.section);
        }
        for (uint32_t i = 0; i < sections.size(); ++i) {
            if (sections[i].size == 0 || std::find(theirs.begin(), theirs.end(), i) != theirs.end()) continue;
            for (uint64_t b = sections[i].offset / kBlock; b <= (sections[i].offset + sections[i].size - 1) / kBlock; ++b) near_mine.insert(b);
        }
        const int pagemap = ::open("/proc/self/pagemap", O_RDONLY);
        QVERIFY(pagemap >= 0);
        const size_t page = size_t(sysconf(_SC_PAGESIZE));
        size_t checked = 0, present = 0, mine_present = 0;
        for (uint32_t i : theirs)
            for (uint64_t off = sections[i].offset; off < sections[i].offset + sections[i].size; off += page) {
                if (near_mine.count(off / kBlock)) continue;
                ++checked;
                present += page_present(pagemap, file.data() + off);
            }
        for (const format::ExpertEntry& e : file.experts())
            if (e.expert < 4)
                for (uint64_t off = sections[e.section].offset; off < sections[e.section].offset + sections[e.section].size; off += page)
                    mine_present += page_present(pagemap, file.data() + off);
        ::close(pagemap);
        qInfo("rank 1's expert pages checked in rank 0's mapping: %zu, present: %zu; rank 0's own present: %zu", checked, present, mine_present);
        QVERIFY(checked > 0);
        QVERIFY(mine_present > 0);  // the check can see a read page
        QCOMPARE(present, size_t(0));
    }

    void a_silent_rank_is_an_error_in_bounded_time() {
        const std::string path = convert("olmoe").toStdString();
        ThreadGroup group(2);
        auto m = Model::load(path);
        QVERIFY(m);
        Communicator& comm = group.rank(0);
        comm.set_wait_limit(std::chrono::milliseconds(300));
        ExpertParallel parallel{&comm, ExpertPlacement::round_robin(2, m.value()->placement_shape())};
        m.value()->set_expert_parallel(&parallel);
        ThreadPool pool(1);
        Session s(*m.value(), pool, 64);
        QElapsedTimer timer;
        timer.start();
        auto r = s.eval(std::vector<int32_t>{1, 2, 3});  // rank 1 never takes part
        QVERIFY(!r);
        QVERIFY2(QString::fromStdString(r.message()).contains("rank 0: another rank did not answer within 0.3 s (it stopped or died)"), r.message().c_str());
        QVERIFY(timer.elapsed() < 10000);
        QVERIFY(comm.broken());
        QVERIFY(!s.eval(std::vector<int32_t>{4}));  // and stays so, at once
    }

    void ranks_with_other_models_are_refused() {
        ThreadGroup group(2);
        const PlacementShape shape{4, {true, true}};
        const ExpertPlacement p = ExpertPlacement::round_robin(2, shape);
        Status got[2];
        std::thread other([&] { got[1] = agree_before_start(group.rank(1), 0xBEEF, &p); });
        got[0] = agree_before_start(group.rank(0), 0xCAFE, &p);
        other.join();
        for (const Status& s : got) {
            QVERIFY(!s);
            QVERIFY2(QString::fromStdString(s.message()).contains("rank 1 opened another model file than rank 0"), s.message().c_str());
        }
        const ExpertPlacement other_placement = ExpertPlacement::round_robin(2, PlacementShape{4, {true, false}});
        std::thread again([&] { got[1] = agree_before_start(group.rank(1), 7, &other_placement); });
        got[0] = agree_before_start(group.rank(0), 7, &p);
        again.join();
        QVERIFY2(QString::fromStdString(got[0].message()).contains("another expert placement"), got[0].message().c_str());
        // A rank that could not open its model stops the others at once.
        std::thread failed([&] { got[1] = agree_before_start(group.rank(1), 0, nullptr); });
        got[0] = agree_before_start(group.rank(0), 7, &p);
        failed.join();
        QVERIFY2(QString::fromStdString(got[0].message()).contains("rank 1 could not open the model"), got[0].message().c_str());
        QVERIFY(!got[1]);
    }

    void placement_refusals_data() {
        QTest::addColumn<QString>("json");
        QTest::addColumn<QString>("why");
        QTest::newRow("not json") << "{" << "not a JSON object";
        QTest::newRow("ranks") << R"({"ranks": 3})" << "written for 3 ranks, this run has 2";
        QTest::newRow("no ranks") << R"({"layers": {}})" << "\"ranks\" must be the number of ranks";
        QTest::newRow("too many experts") << R"({"ranks": 2, "layers": {"0": [0,1,0,1,0]}})" << "layer 0 places 5 experts, the model has 4";
        QTest::newRow("layer past the model") << R"({"ranks": 2, "layers": {"7": [0,1,0,1]}})" << "layer 7: the model has 3 layers";
        QTest::newRow("dense layer") << R"({"ranks": 2, "layers": {"1": [0,1,0,1]}})" << "layer 1 is not an MoE layer";
        QTest::newRow("rank out of range") << R"({"ranks": 2, "layers": {"0": [0,1,2,1]}})" << "layer 0 expert 2: 2 is not a rank in [0, 2)";
        QTest::newRow("negative rank") << R"({"ranks": 2, "layers": {"0": [0,-1,0,1]}})" << "layer 0 expert 1: -1 is not a rank";
        QTest::newRow("no holder") << R"({"ranks": 2, "layers": {"0": [0,[],0,1]}})" << "layer 0 expert 1 has no rank";
        QTest::newRow("layer name") << R"({"ranks": 2, "layers": {"x": [0,1,0,1]}})" << "layer \"x\" is not a layer number";
        QTest::newRow("deep") << QString(200, '[') << "nested too deeply";
    }

    void placement_refusals() {
        QFETCH(QString, json);
        QFETCH(QString, why);
        const PlacementShape shape{4, {true, false, true}};
        auto p = ExpertPlacement::parse(json.toStdString(), 2, shape);
        QVERIFY(!p);
        QVERIFY2(QString::fromStdString(p.message()).contains(why), p.message().c_str());
    }

    void placement_command() {
        // colibri placement from a route trace: a file --placement reads back, each rank's share printed; what does
        // not fit is one line and a non-zero exit, and no file.
        const QString model = convert("olmoe"), trace = dir_.filePath("olmoe-trace.json"), out = dir_.filePath("olmoe-placement.json");
        const CliResult route = run_cli({"route", "-m", model, "--tokens", "1,2,3,4,5,6,7,8,9,10", "--json"});
        QCOMPARE(route.exit_code, 0);
        write_all(trace, route.out);
        const CliResult ok = run_cli({"placement", "-m", model, "--trace", trace, "--ranks", "3", "--replicate", "2", "-o", out});
        QVERIFY2(ok.exit_code == 0, ok.err.constData());
        QVERIFY2(ok.out.startsWith("rank 0: ") && ok.out.contains("\nrank 2: ") && ok.out.contains("% of the expert work (round-robin: "), ok.out.constData());
        auto m = Model::load(model.toStdString());
        QVERIFY(m);
        auto read = ExpertPlacement::read(out.toStdString(), 3, m.value()->placement_shape());
        QVERIFY2(read, read.message().c_str());
        struct Refusal {
            QStringList args;
            const char* why;
        };
        const QString other = dir_.filePath("other.json");
        for (const Refusal& r : {Refusal{{"--ranks", "0"}, "--ranks must be in [1, 64]"},
                                 Refusal{{"--ranks", "2", "--replicate", "999"}, "--replicate 999: the model has"},
                                 Refusal{{"--ranks", "2", "--trace", write_all(dir_.filePath("bad-trace.json"), "{\"layers\": 3}")}, "bad-trace.json"}}) {
            QStringList args{"placement", "-m", model, "-o", other};
            if (!r.args.contains("--trace")) args << "--trace" << trace;
            const CliResult got = run_cli(args + r.args);
            QCOMPARE(got.exit_code, 1);
            QVERIFY2(got.err.startsWith("colibri: placement: ") && got.err.contains(r.why) && got.err.count('\n') == 1, got.err.constData());
            QVERIFY(!QFile::exists(other));
        }
    }

    void placement_shares_and_balance() {
        const PlacementShape shape{4, {true, false, true}};
        auto p = ExpertPlacement::parse(R"({"ranks": 3, "layers": {"0": [[0,1,2],1,[0,2],2]}})", 3, shape);
        QVERIFY2(p, p.message().c_str());
        // Expert 0's 7 rows split 2/2/3 in rank order; expert 2's 5 rows 2/3 between ranks 0 and 2.
        QCOMPARE(p->share(0, 0, 0, 7).begin, 0u);
        QCOMPARE(p->share(0, 0, 0, 7).count, 2u);
        QCOMPARE(p->share(0, 0, 1, 7).begin, 2u);
        QCOMPARE(p->share(0, 0, 2, 7).count, 3u);
        QCOMPARE(p->share(0, 2, 1, 5).count, 0u);
        QCOMPARE(p->share(0, 2, 2, 5).begin, 2u);
        // Layer 2 was left out: round-robin.
        QVERIFY(p->holds(2, 3, 0) && p->holds(2, 1, 1));
        // Written and read back, the same.
        auto again = ExpertPlacement::parse(p->to_json(), 3, shape);
        QVERIFY(again);
        QCOMPARE(again->to_json(), p->to_json());
        // From heat: the hottest expert replicated, the rest on the least loaded rank, hottest first.
        const std::vector<std::vector<uint64_t>> heat{{100, 10, 30, 20}, {}, {1, 1, 1, 1}};
        const ExpertPlacement b = ExpertPlacement::balanced(2, shape, heat, 1);
        QCOMPARE(b.holders(0, 0), uint64_t(3));
        QVERIFY(b.holds(0, 2, 0) && b.holds(0, 3, 1) && b.holds(0, 1, 1));
        const std::vector<double> shares = b.expected_shares(heat);
        QCOMPARE(shares.size(), size_t(2));
        QVERIFY(std::abs(shares[0] + shares[1] - 1.0) < 1e-12);
        QVERIFY(std::abs(shares[0] - shares[1]) < 0.1);
        // Two equally hot experts that round-robin already puts on different ranks: replicating one and placing the
        // other would load one rank 3:1, so the layer stays round-robin.
        const std::vector<std::vector<uint64_t>> pair{{4, 0, 0, 4}, {}, {}};
        const ExpertPlacement kept = ExpertPlacement::balanced(2, shape, pair, 1);
        QCOMPARE(kept.to_json(), ExpertPlacement::round_robin(2, shape).to_json());
        const std::vector<double> even = kept.expected_shares(pair);
        QVERIFY(std::abs(even[0] - 0.5) < 1e-12);
    }
};

QTEST_GUILESS_MAIN(TestExpertParallel)
#include "test_expert_parallel.moc"
