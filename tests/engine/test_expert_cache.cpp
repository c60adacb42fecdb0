// Expert-cache policies (engine/cache/expert_slots.h) and their replay (tools/cache_sim.h, colibri cache-sim):
// hand-made traces whose hit rates are known exactly, Belady never beaten, and hostile traces.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <QTemporaryDir>
#include <QtTest>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <tuple>

#include "engine/cache/expert_slots.h"
#include "engine/core/model.h"
#include "engine/core/session.h"
#include "engine/core/thread_pool.h"
#include "../expert_cache_budget.h"
#include "../server/server_process.h"
#include "../test_support.h"
#include "tools/cache_sim.h"

using namespace colibri;
using namespace colibri::test;
using nlohmann::json;

namespace {

// A trace in route's format: per layer, per position, the chosen experts.
json trace_json(const std::vector<std::vector<std::vector<uint32_t>>>& layers, int n_experts = -1) {
    json l = json::array();
    for (size_t i = 0; i < layers.size(); ++i) l.push_back({{"layer", i}, {"experts", layers[i]}});
    json t{{"tokens", json::array()}, {"layers", l}};
    if (n_experts > 0) t["n_experts"] = n_experts;
    return t;
}

tools::RoutingTrace parse(const json& j) {
    auto t = tools::parse_routing_trace(j.dump());
    if (!t) qFatal("%s", t.message().c_str());
    return t.value();
}

// Top-1 trace: expert 0 every third token, between experts never seen again: 0,1,2,0,3,4,0,5,6,...
std::vector<std::vector<uint32_t>> hot_between_scans(uint32_t periods) {
    std::vector<std::vector<uint32_t>> p;
    for (uint32_t i = 0; i < periods; ++i) {
        p.push_back({0});
        p.push_back({2 * i + 1});
        p.push_back({2 * i + 2});
    }
    return p;
}

// Which experts each eval call used per layer, and what the cache said about it.
struct CacheObserver : TraceObserver {
    int call = 0;
    std::set<std::tuple<int, uint32_t, int32_t>> used;  // (call, layer, expert)
    ExpertCacheStats seen;
    void on_routing(const RoutingRecord& r) override {
        for (int32_t e : r.experts) used.insert({call, r.layer, e});
    }
    void on_cache(const CacheRecord& c) override {
        seen.hits += c.hits;
        seen.misses += c.misses;
        seen.bytes_read += c.bytes_read;
        seen.stall_ns += c.stall_ns;
        seen.prefetched += c.prefetched;
        seen.predicted += c.predicted;
        seen.predicted_right += c.predicted_right;
    }
};

// Logits after a 10-token chunk, then after each further token alone.
std::vector<std::vector<float>> run_logits(const Model& model, const std::vector<int32_t>& ids, TraceObserver* observer = nullptr,
                                           int* call = nullptr) {
    ThreadPool pool(2);
    SessionOptions o;
    Session s(model, pool, 0, o);
    s.set_observer(observer);
    std::vector<std::vector<float>> out;
    const size_t first = std::min<size_t>(10, ids.size());
    auto r = s.eval(std::span<const int32_t>(ids.data(), first));
    if (!r) qFatal("eval: %s", r.message().c_str());
    out.emplace_back(r->begin(), r->end());
    for (size_t i = first; i < ids.size(); ++i) {
        if (call) ++*call;
        auto t = s.eval(ids[i]);
        if (!t) qFatal("eval: %s", t.message().c_str());
        out.emplace_back(t->begin(), t->end());
    }
    return out;
}

// Pages of [begin, begin + bytes) of a mapping that are in memory.
size_t resident_pages(const uint8_t* begin, uint64_t bytes) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const auto at = reinterpret_cast<uintptr_t>(begin) / page * page;
    const size_t pages = (reinterpret_cast<uintptr_t>(begin) + bytes - at + page - 1) / page;
    std::vector<unsigned char> v(pages);
    if (mincore(reinterpret_cast<void*>(at), pages * page, v.data()) != 0) return pages;
    size_t n = 0;
    for (unsigned char b : v) n += b & 1;
    return n;
}

}  // namespace

class TestExpertCache : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

    QString write_trace(const QString& name, const QByteArray& text) { return write_all(dir_.filePath(name), text); }

private slots:
    void lru_evicts_least_recent() {
        ExpertSlots s(CachePolicy::Lru, 8, 2);
        for (uint32_t e : {0u, 1u}) {
            s.begin_group();
            QVERIFY(!s.access(e)->hit);
        }
        s.begin_group();
        QVERIFY(s.access(0)->hit);
        s.begin_group();
        const auto a = s.access(2);  // 1 is the least recent
        QVERIFY(a && !a->hit);
        QCOMPARE(a->evicted, 1);
        QCOMPARE(s.slot_of(1), ExpertSlots::kNone);
        QCOMPARE(s.expert_in(a->slot), 2);
    }

    void open_group_is_never_evicted() {
        ExpertSlots s(CachePolicy::Lru, 8, 2);
        s.begin_group();
        QVERIFY(s.access(0));
        QVERIFY(s.access(1));
        QVERIFY(!s.access(2));  // both slots hold experts the group still needs
        s.begin_group();
        const auto a = s.access(2);
        QVERIFY(a);
        QCOMPARE(a->evicted, 0);
    }

    void pinned_experts_keep_their_slots() {
        const std::vector<uint32_t> pins{5, 6};
        ExpertSlots s(CachePolicy::Pinned, 8, 3, pins);
        QVERIFY(s.pinned(5) && s.pinned(6) && !s.pinned(0));
        s.begin_group();
        QVERIFY(!s.access(5)->hit);  // pinned experts load on first use, into their own slot
        for (uint32_t e : {0u, 1u, 2u, 3u}) {
            s.begin_group();
            QCOMPARE(s.access(e)->hit, false);
        }
        s.begin_group();
        QVERIFY(s.access(5)->hit);
        // At most slots - 1 pins: one slot always serves the rest.
        const std::vector<uint32_t> many{0, 1, 2, 3};
        ExpertSlots t(CachePolicy::Pinned, 8, 3, many);
        QVERIFY(t.pinned(0) && t.pinned(1) && !t.pinned(2));
    }

    void hot_set_orders_by_use_then_id() {
        const std::vector<uint64_t> counts{3, 7, 0, 7, 1};
        QCOMPARE(hot_set(counts, 3), (std::vector<uint32_t>{1, 3, 0}));
        QCOMPARE(hot_set(counts, 10), (std::vector<uint32_t>{1, 3, 0, 4}));  // unused experts are not pinned
    }

    // 0,1,2,0,3,4,... (5 periods, 15 accesses) with 2 slots: LRU always evicts 0 before it returns (0 hits);
    // LFRU keeps it once it has been used twice (hits at its 3rd, 4th, 5th use); pinned (hot set {0}) and Belady
    // miss it once only (4 hits).
    void exact_hit_rates_hot_between_scans() {
        const tools::RoutingTrace t = parse(trace_json({hot_between_scans(5)}));
        QCOMPARE(t.n_experts, 11u);
        QCOMPARE(t.top_k, 1u);
        QCOMPARE(tools::replay(t, CachePolicy::Lru, 2, t).hits, uint64_t(0));
        QCOMPARE(tools::replay(t, CachePolicy::Lfru, 2, t).hits, uint64_t(3));
        QCOMPARE(tools::replay(t, CachePolicy::Pinned, 2, t).hits, uint64_t(4));
        QCOMPARE(tools::replay_belady(t, 2).hits, uint64_t(4));
        QCOMPARE(tools::replay_belady(t, 2).accesses, uint64_t(15));
    }

    // A cycle over slots + 1 experts: LRU misses every time; Belady hits on 0,1,2,0,1,2,0,1,2 (2 slots) three times:
    // 0m 1m 2m(evicts 1) 0h 1m(evicts 0) 2h 0m(evicts 2) 1h 2m.
    void lru_on_a_cycle() {
        std::vector<std::vector<uint32_t>> cyc;
        for (int r = 0; r < 3; ++r)
            for (uint32_t e : {0u, 1u, 2u}) cyc.push_back({e});
        const tools::RoutingTrace t = parse(trace_json({cyc}));
        QCOMPARE(tools::replay(t, CachePolicy::Lru, 2, t).hits, uint64_t(0));
        QCOMPARE(tools::replay_belady(t, 2).hits, uint64_t(3));
        // With a slot per expert only the first use of each misses, under every policy.
        for (CachePolicy p : {CachePolicy::Lru, CachePolicy::Lfru, CachePolicy::Pinned})
            QCOMPARE(tools::replay(t, p, 3, t).hits, uint64_t(6));
        QCOMPARE(tools::replay_belady(t, 3).hits, uint64_t(6));
    }

    // Per layer and overall: two layers with different patterns are counted apart.
    void per_layer_counts() {
        std::vector<std::vector<uint32_t>> same(15, std::vector<uint32_t>{3});
        const tools::RoutingTrace t = parse(trace_json({hot_between_scans(5), same}, 16));
        const tools::ReplayResult r = tools::replay(t, CachePolicy::Lru, 2, t);
        QCOMPARE(r.layers.size(), size_t(2));
        QCOMPARE(r.layers[0].hits, uint64_t(0));
        QCOMPARE(r.layers[0].accesses, uint64_t(15));
        QCOMPARE(r.layers[1].hits, uint64_t(14));  // one cold miss, then every use hits
        QCOMPARE(r.layers[1].accesses, uint64_t(15));
        QCOMPARE(r.hits, uint64_t(14));
        QCOMPARE(r.accesses, uint64_t(30));
    }

    // Belady's optimum is never beaten, at any slot count, on random top-2 traces of several skews.
    void belady_is_never_beaten() {
        std::mt19937 rng(7);
        for (double skew : {0.0, 1.0, 2.0}) {
            std::vector<double> w(16);
            for (size_t e = 0; e < w.size(); ++e) w[e] = 1.0 / std::pow(double(e + 1), skew);
            std::discrete_distribution<uint32_t> pick(w.begin(), w.end());
            std::vector<std::vector<std::vector<uint32_t>>> layers(3);
            for (auto& l : layers)
                for (int p = 0; p < 300; ++p) {
                    const uint32_t a = pick(rng);
                    uint32_t b = pick(rng);
                    while (b == a) b = pick(rng);
                    l.push_back({a, b});
                }
            const tools::RoutingTrace t = parse(trace_json(layers, 16));
            for (uint32_t n_slots = 2; n_slots <= 16; ++n_slots) {
                const tools::ReplayResult best = tools::replay_belady(t, n_slots);
                for (CachePolicy p : {CachePolicy::Lru, CachePolicy::Lfru, CachePolicy::Pinned}) {
                    const tools::ReplayResult r = tools::replay(t, p, n_slots, t);
                    QCOMPARE(r.accesses, best.accesses);
                    for (size_t li = 0; li < r.layers.size(); ++li)
                        QVERIFY2(r.layers[li].hits <= best.layers[li].hits,
                                 qPrintable(QString("%1 at %2 slots beat Belady").arg(r.policy.c_str()).arg(n_slots)));
                }
            }
        }
    }

    void slot_counts() {
        const tools::RoutingTrace t = parse(trace_json({{{0, 1}, {2, 3}}}, 16));
        QCOMPARE(tools::parse_slot_counts("2..4", t).value(), (std::vector<uint32_t>{2, 3, 4}));
        QCOMPARE(tools::parse_slot_counts("8,4,8", t).value(), (std::vector<uint32_t>{4, 8}));
        QCOMPARE(tools::default_slot_counts(t), (std::vector<uint32_t>{2, 4, 8, 12}));
        for (const char* bad : {"1", "17", "1..3", "4..2", "x", "", "2,,3", "3..", "99999999999"})
            QVERIFY2(!tools::parse_slot_counts(bad, t), bad);
    }

    // The CLI replays the same numbers, as text and JSON, with the hot set learned from another trace.
    void cli_replay() {
        const QString path = write_trace("scan.json", QByteArray::fromStdString(trace_json({hot_between_scans(5)}).dump()));
        CliResult r = run_cli({"cache-sim", path, "--slots", "2", "--json"});
        QCOMPARE(r.exit_code, 0);
        const json j = json::parse(r.out.toStdString());
        QCOMPARE(j["pinned_from"].get<std::string>(), std::string("in-sample"));
        std::map<std::string, uint64_t> hits;
        for (const json& run : j["runs"]) hits[run["policy"].get<std::string>()] = run["hits"].get<uint64_t>();
        QCOMPARE(hits["lru"], uint64_t(0));
        QCOMPARE(hits["lfru"], uint64_t(3));
        QCOMPARE(hits["pinned"], uint64_t(4));
        QCOMPARE(hits["belady"], uint64_t(4));
        QCOMPARE(j["runs"][0]["layers"][0]["accesses"].get<uint64_t>(), uint64_t(15));

        // A hot set learned from a trace in which expert 1 is the hot one: pinned loses its advantage.
        std::vector<std::vector<uint32_t>> other(6, std::vector<uint32_t>{1});
        const QString pin = write_trace("pin.json", QByteArray::fromStdString(trace_json({other}, 11).dump()));
        r = run_cli({"cache-sim", path, "--slots", "2", "--pin-trace", pin, "--json"});
        QCOMPARE(r.exit_code, 0);
        const json pinned_elsewhere = json::parse(r.out.toStdString());  // named: a range-for over a temporary's member dangles
        for (const json& run : pinned_elsewhere["runs"])
            if (run["policy"] == "pinned") QCOMPARE(run["hits"].get<uint64_t>(), uint64_t(0));

        r = run_cli({"cache-sim", path, "--slots", "2..3"});
        QCOMPARE(r.exit_code, 0);
        QVERIFY2(r.out.contains("slots per layer 2") && r.out.contains("slots per layer 3"), r.out.constData());
        QVERIFY(r.out.contains("all          0.0%    20.0%    26.7%    26.7%"));
    }

    // colibri route --json's output is what cache-sim reads.
    void route_then_replay() {
        const QString model = dir_.filePath("olmoe.bin");
        QCOMPARE(run_cli({"convert", reference("hf/olmoe/model"), "-o", model}).exit_code, 0);
        CliResult r = run_cli({"route", "-m", model, "--tokens", "1,5,9,5,1,7,3,2,5,9,1", "--json"});
        QCOMPARE(r.exit_code, 0);
        const QString trace = write_trace("route.json", r.out);
        const json route = json::parse(r.out.toStdString());
        const uint32_t k = static_cast<uint32_t>(route["layers"][0]["experts"][0].size());
        r = run_cli({"cache-sim", trace, "--json"});
        QCOMPARE(r.exit_code, 0);
        const json j = json::parse(r.out.toStdString());
        QCOMPARE(j["n_experts"], route["n_experts"]);
        QCOMPARE(j["top_k"].get<uint32_t>(), k);
        QCOMPARE(j["layers"].get<size_t>(), route["layers"].size());
        for (const json& run : j["runs"])
            QCOMPARE(run["accesses"].get<uint64_t>(), uint64_t(11) * k * route["layers"].size());
    }

    // Replay with prediction, exactly: one slot, top-1, experts 0,1,2,3. A right prediction is read in before its
    // token, so every access hits; a wrong one evicts the expert the token needs, so none does.
    void prediction_replay_exact() {
        const std::vector<std::vector<uint32_t>> actual{{0}, {1}, {2}, {3}};
        for (bool right : {true, false}) {
            json t = trace_json({actual}, 5);
            json guess = json::array();
            for (uint32_t e = 0; e < 4; ++e) guess.push_back(json::array({right ? e : e + 1}));
            t["layers"][0]["predicted"] = guess;
            const tools::RoutingTrace trace = parse(t);
            QVERIFY(trace.has_predictions());
            const tools::ReplayResult plain = tools::replay(trace, CachePolicy::Lru, 1, trace);
            const tools::ReplayResult ahead = tools::replay(trace, CachePolicy::Lru, 1, trace, true);
            QCOMPARE(plain.hits, uint64_t(0));
            QCOMPARE(ahead.policy, std::string("lru+prediction"));
            QCOMPARE(ahead.hits, right ? uint64_t(4) : uint64_t(0));
            QCOMPARE(ahead.prefetched, uint64_t(4));
            const auto acc = tools::prediction_accuracy(trace);
            QCOMPARE(acc.size(), size_t(1));
            QCOMPARE(acc[0].right, right ? uint64_t(4) : uint64_t(0));
            QCOMPARE(acc[0].chosen, uint64_t(4));
        }
        // A prediction per position or none; each one as well-formed as a choice.
        for (const char* bad : {R"([[0]])", R"([[0],[1],[2],[9]])", R"([[0],[1],[2],[2,3]])", R"("no")"}) {
            json t = trace_json({actual}, 5);
            t["layers"][0]["predicted"] = json::parse(bad);
            QVERIFY2(!tools::parse_routing_trace(t.dump()), bad);
        }
    }

    // route --predict on the trained demo model: predictions for every MoE layer but the first, which cache-sim
    // replays as lru+prediction and scores.
    void route_predict_then_replay() {
        const QString demo = QStringLiteral(COLIBRI_BUILD_DIR "/demo/demo.bin");
        CliResult r = run_cli({"route", "-m", demo, "--prompt", "What is 23 plus 45? The word cat is spelled backwards as tac.",
                               "--predict", "--json"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        const json route = json::parse(r.out.toStdString());
        for (size_t l = 0; l < route["layers"].size(); ++l)  // the first MoE layer from the embeddings
            QCOMPARE(route["layers"][l]["predicted"].size(), route["layers"][l]["experts"].size());
        const QString trace = write_trace("demo-predict.json", r.out);
        r = run_cli({"cache-sim", trace, "--slots", "4", "--json"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        const json j = json::parse(r.out.toStdString());
        QCOMPARE(j["runs"].size(), size_t(5));
        QCOMPARE(j["runs"][4]["policy"].get<std::string>(), std::string("lru+prediction"));
        QCOMPARE(j["prediction"]["layers"].size(), route["layers"].size());
        QVERIFY(j["prediction"]["accuracy"].get<double>() > 0.0);
        r = run_cli({"cache-sim", trace, "--slots", "4"});
        QVERIFY2(r.out.contains("lru+prediction") && r.out.contains("prediction (each layer's router"), r.out.constData());
    }

    // Logits with a RAM budget of a few slots per layer are bit-identical to the mapped model's, for every
    // policy and family, with and without prefetch, over a chunked prompt (more experts than slots: several
    // groups) and single tokens.
    void budget_logits_bit_identical_data() {
        QTest::addColumn<QString>("family");
        for (const char* f : {"mixtral", "qwen2_moe", "olmoe", "qwen3_moe", "gpt_oss", "deepseek_v3", "glm4_moe"})
            QTest::newRow(f) << QString(f);
        QTest::newRow("generated-16x2") << QString("generated");
    }
    void budget_logits_bit_identical() {
        QFETCH(QString, family);
        const QString path = dir_.filePath(family + ".bin");
        std::vector<int32_t> ids;
        if (family == "generated") {
            const QString hf = dir_.filePath("gen-hf");
            QVERIFY(make_model(hf, {"--family", "mixtral", "--vocab", "300", "--hidden", "64", "--layers", "3", "--heads", "4",
                                    "--kv-heads", "2", "--experts", "16", "--top-k", "2", "--ffn", "96", "--seed", "5"}));
            QCOMPARE(run_cli({"convert", hf, "-o", path, "-q"}).exit_code, 0);
            std::mt19937 rng(3);
            for (int i = 0; i < 24; ++i) ids.push_back(static_cast<int32_t>(rng() % 300));
        } else {
            const CliResult r = run_cli({"convert", reference("hf/" + family + "/model"), "-o", path, "-q"});
            QVERIFY2(r.exit_code == 0, r.err.constData());
            for (const auto& v : read_json(reference("hf/" + family + "/ref/input_ids.json")).array()) ids.push_back(v.toInt());
        }
        auto plain = Model::load(path.toStdString());
        QVERIFY2(plain, plain.message().c_str());
        const auto want = run_logits(*plain.value(), ids);
        const auto& hp = plain.value()->hparams();
        const uint32_t k = hp.n_experts_active;

        std::vector<std::vector<uint32_t>> hot(hp.n_layers);  // a hot set that is not the real one: pins must not matter
        for (auto& h : hot)
            for (uint32_t e = hp.n_experts; e-- > 0;) h.push_back(e);
        for (uint32_t n_slots : {k, k + 1, std::max(k, hp.n_experts / 2)}) {
            for (CachePolicy policy : {CachePolicy::Lru, CachePolicy::Lfru, CachePolicy::Pinned})
            for (bool prefetch : {false, true}) {
                auto m = Model::load(path.toStdString());
                QVERIFY(m);
                ExpertCacheConfig c;
                c.ram_budget = budget_for(path.toStdString(), n_slots);
                c.policy = policy;
                c.hot_experts = hot;
                c.prefetch = prefetch;
                QVERIFY2(m.value()->use_expert_cache(c), "use_expert_cache");
                const ExpertCache& cache = *m.value()->expert_cache();
                QCOMPARE(cache.slots_per_layer(), n_slots);
                QVERIFY(cache.resident_bytes() + uint64_t(n_slots) * cache.slot_bytes() * m.value()->moe_layer_count() <= c.ram_budget);
                CacheObserver obs;
                const auto got = run_logits(*m.value(), ids, &obs, &obs.call);
                QCOMPARE(got.size(), want.size());
                for (size_t i = 0; i < got.size(); ++i)
                    QVERIFY2(std::memcmp(got[i].data(), want[i].data(), got[i].size() * sizeof(float)) == 0,
                             qPrintable(QString("%1 slots %2 prefetch %3: logits differ at step %4")
                                            .arg(cache_policy_name(policy)).arg(n_slots).arg(prefetch).arg(i)));
                // Every expert an eval used at a layer was one hit or one miss; each miss and each expert read
                // ahead read its section.
                const ExpertCacheStats t = cache.total_stats();
                QCOMPARE(t.hits + t.misses, uint64_t(obs.used.size()));
                QVERIFY(t.misses + t.prefetched >= uint64_t(n_slots));
                QVERIFY(t.bytes_read >= (t.misses + t.prefetched) * (cache.slot_bytes() - 4095));
                QCOMPARE(obs.seen.hits, t.hits);
                QCOMPARE(obs.seen.misses, t.misses);
                QCOMPARE(obs.seen.bytes_read, t.bytes_read);
                QCOMPARE(obs.seen.prefetched, t.prefetched);
                QCOMPARE(obs.seen.predicted, t.predicted);
                QCOMPARE(obs.seen.predicted_right, t.predicted_right);
                QVERIFY(t.predicted_right <= t.predicted);
                // The live state (the Studio's cache view): every read that completed is one load, every load
                // beyond the slots' first fills evicted someone, and what is resident was loaded.
                std::vector<ExpertSlotState> state(hp.n_experts);
                for (uint32_t l = 0; l < hp.n_layers; ++l) {
                    if (!m.value()->layers()[l].is_moe) continue;
                    cache.layer_state(l, state);
                    const ExpertCacheStats ls = cache.layer_stats(l);
                    uint64_t loads = 0, ahead = 0, evictions = 0, resident = 0, pinned = 0;
                    for (const ExpertSlotState& e : state) {
                        loads += e.loads;
                        ahead += e.read_ahead;
                        QVERIFY(e.read_ahead <= e.loads);
                        evictions += e.evictions;
                        resident += e.resident;
                        pinned += e.pinned;
                        QVERIFY(!e.loading);  // nothing is read ahead between evaluations
                        if (e.resident) QVERIFY(e.loads >= 1);
                        QVERIFY(e.heat >= 0.0);
                    }
                    QCOMPARE(loads, ls.misses + ls.prefetched);
                    QCOMPARE(ahead, ls.prefetched);
                    QVERIFY(resident <= n_slots);
                    QCOMPARE(evictions, loads - resident);
                    QCOMPARE(pinned, policy == CachePolicy::Pinned ? uint64_t(n_slots - k) : uint64_t(0));
                }
                if (!prefetch) {
                    QCOMPARE(t.prefetched, uint64_t(0));
                    QCOMPARE(t.predicted, uint64_t(0));
                } else {
                    // Every MoE layer was predicted at every eval: the first from the embeddings, the others one
                    // MoE layer ahead.
                    QCOMPARE(t.predicted, uint64_t(obs.used.size()));
                }
            }
        }
    }

    // On the trained demo model (routing with structure) the next layer's router on the current hidden state names
    // most of the next layer's experts: far above chance (top-2 of 16: 1/8), as the published figures for trained
    // MoE models lead one to expect; and prefetch turns those into hits, fewer reads the computation waits for.
    void prediction_on_the_demo_model() {
        const std::string demo = COLIBRI_BUILD_DIR "/demo/demo.bin";
        auto plain = Model::load(demo);
        QVERIFY2(plain, plain.message().c_str());
        auto ids = plain.value()->tokenizer()->encode(
            "The quick brown fox jumps over the lazy dog. What is 23 plus 45? Tell me a fortune about the sea.");
        QVERIFY(ids);
        const auto& hp = plain.value()->hparams();
        ExpertCacheStats with[2];
        for (bool prefetch : {false, true}) {
            auto m = Model::load(demo);
            QVERIFY(m);
            ExpertCacheConfig c;
            c.ram_budget = budget_for(demo, hp.n_experts / 4);
            c.prefetch = prefetch;
            QVERIFY(m.value()->use_expert_cache(c));
            run_logits(*m.value(), ids.value());
            with[prefetch] = m.value()->expert_cache()->total_stats();
        }
        const ExpertCacheStats& p = with[1];
        QVERIFY(p.predicted > 0);
        const double accuracy = double(p.predicted_right) / double(p.predicted);
        const double chance = double(hp.n_experts_active) / hp.n_experts;
        QVERIFY2(accuracy > 3 * chance, qPrintable(QString("prediction accuracy %1, chance %2").arg(accuracy).arg(chance)));
        QVERIFY(p.prefetched > 0);
        QVERIFY2(p.misses < with[0].misses, qPrintable(QString("misses %1 with prefetch, %2 without").arg(p.misses).arg(with[0].misses)));
    }

    // With a budget the experts' pages of the mapping are never touched: reads go to the slots, not the page cache.
    void experts_stay_out_of_the_mapping() {
        const QString src = dir_.filePath("mincore-hf");
        QVERIFY(make_model(src, {"--family", "mixtral", "--vocab", "300", "--hidden", "128", "--layers", "2", "--heads", "4",
                                 "--kv-heads", "2", "--experts", "8", "--top-k", "2", "--ffn", "1024", "--seed", "9"}));
        const QString path = dir_.filePath("mincore.bin");
        QCOMPARE(run_cli({"convert", src, "-o", path, "-q"}).exit_code, 0);
        const uint64_t budget = budget_for(path.toStdString(), 3);
        const int fd = ::open(path.toLocal8Bit().constData(), O_RDONLY);
        QVERIFY(fd >= 0);
        fdatasync(fd);
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        ::close(fd);
        {  // a second mapping, only to see whether this file system lets pages go
            const int probe = ::open(path.toLocal8Bit().constData(), O_RDONLY);
            const off_t size = lseek(probe, 0, SEEK_END);
            void* map = mmap(nullptr, size_t(size), PROT_READ, MAP_PRIVATE, probe, 0);
            const size_t held = resident_pages(static_cast<const uint8_t*>(map), uint64_t(size));
            munmap(map, size_t(size));
            ::close(probe);
            if (held != 0) QSKIP("this file system keeps the file's pages in memory after POSIX_FADV_DONTNEED");
        }
        auto m = Model::load(path.toStdString());
        QVERIFY(m);
        const ModelFile& file = m.value()->file();
        // What every token uses keeps its 2 MiB pages with a budget, so a folio of it may cover the ends of expert
        // sections in the same 2 MiB block; the experts' pages beyond those blocks must never be read.
        constexpr uint64_t kBlock = uint64_t(2) << 20;
        const auto sections = file.sections();
        std::set<uint64_t> shared_blocks;
        std::set<uint32_t> expert_sections;
        for (const format::ExpertEntry& e : file.experts()) expert_sections.insert(e.section);
        for (uint32_t i = 0; i < sections.size(); ++i)
            if (!expert_sections.count(i) && sections[i].size > 0)
                for (uint64_t b = sections[i].offset / kBlock; b <= (sections[i].offset + sections[i].size - 1) / kBlock; ++b)
                    shared_blocks.insert(b);
        const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
        size_t checked = 0;  // expert pages outside the shared blocks
        auto expert_pages = [&] {
            size_t n = 0;
            checked = 0;
            for (uint32_t i : expert_sections)
                for (uint64_t off = sections[i].offset; off < sections[i].offset + sections[i].size; off += page) {
                    if (shared_blocks.count(off / kBlock)) continue;
                    ++checked;
                    n += resident_pages(file.data() + off, 1);
                }
            return n;
        };
        ExpertCacheConfig c;
        c.ram_budget = budget;
        QVERIFY(m.value()->use_expert_cache(c));
        // Loading may have read a large folio across a section border before the advice; evaluating adds nothing.
        const size_t after_load = expert_pages();
        qInfo("expert pages outside the shared 2 MiB blocks: %zu, in memory after load: %zu", checked, after_load);
        QVERIFY(checked > 0);  // the model is large enough for the check to mean something
        run_logits(*m.value(), {1, 17, 42, 99, 5, 250, 3, 77, 8, 140, 64, 12});
        QVERIFY(m.value()->expert_cache()->total_stats().misses > 0);
        QVERIFY2(expert_pages() <= after_load, qPrintable(QString("%1 expert pages after eval, %2 before").arg(expert_pages()).arg(after_load)));
    }

    // What a budget refuses: too small for top_k slots; and an expert hot-swap while it is on.
    void budget_refusals() {
        const QString path = dir_.filePath("olmoe-refuse.bin");
        QCOMPARE(run_cli({"convert", reference("hf/olmoe/model"), "-o", path, "-q"}).exit_code, 0);
        auto m = Model::load(path.toStdString());
        QVERIFY(m);
        const uint32_t k = m.value()->hparams().n_experts_active;
        ExpertCacheConfig c;
        c.ram_budget = budget_for(path.toStdString(), k) - 1;
        const Status s = m.value()->use_expert_cache(c);
        QVERIFY(!s);
        QVERIFY2(QString::fromStdString(s.message()).contains("too small"), s.message().c_str());
        c.ram_budget = budget_for(path.toStdString(), k);
        QVERIFY(m.value()->use_expert_cache(c));
        QVERIFY(!m.value()->use_expert_cache(c));  // once only
        auto donor = ModelFile::open(path.toStdString());
        QVERIFY(donor);
        QVERIFY(!m.value()->swap_expert(0, 0, *donor.value(), 0, 1));
    }

    // From a .bin.zst a miss reads the expert's frame and decompresses it into the slot: the same logits as the
    // plain file's, with and without prefetch; a damaged expert frame fails the eval with a one-line error.
    void zst_experts_decompressed_into_slots() {
        const QString plain_path = dir_.filePath("olmoe-z.bin"), zst = dir_.filePath("olmoe-z.bin.zst");
        QCOMPARE(run_cli({"convert", reference("hf/olmoe/model"), "-o", plain_path, "-q"}).exit_code, 0);
        QCOMPARE(run_cli({"convert", reference("hf/olmoe/model"), "-o", zst, "--zstd", "-q"}).exit_code, 0);
        std::vector<int32_t> ids;
        for (const auto& v : read_json(reference("hf/olmoe/ref/input_ids.json")).array()) ids.push_back(v.toInt());
        auto plain = Model::load(plain_path.toStdString());
        QVERIFY(plain);
        const auto want = run_logits(*plain.value(), ids);
        const uint32_t k = plain.value()->hparams().n_experts_active;
        for (bool prefetch : {false, true}) {
            auto z = Model::load(zst.toStdString());
            QVERIFY2(z, z.message().c_str());
            ExpertCacheConfig c;
            c.ram_budget = budget_for(zst.toStdString(), k + 1);
            c.prefetch = prefetch;
            const Status s = z.value()->use_expert_cache(c);
            QVERIFY2(s, s.message().c_str());
            const auto got = run_logits(*z.value(), ids);
            QCOMPARE(got.size(), want.size());
            for (size_t i = 0; i < got.size(); ++i)
                QVERIFY2(std::memcmp(got[i].data(), want[i].data(), got[i].size() * sizeof(float)) == 0, qPrintable(QString("step %1").arg(i)));
            const ExpertCacheStats t = z.value()->expert_cache()->total_stats();
            QVERIFY(t.misses > 0);
            QVERIFY(!z.value()->expert_cache()->direct_io());  // frames are read buffered
        }

        // Damage every expert's frame (the frame table stays valid, so the file still opens).
        QByteArray bytes = read_all(zst);
        {
            auto file = ModelFile::open(zst.toStdString());
            QVERIFY(file);
            for (const format::ExpertEntry& e : file.value()->experts()) {
                const format::FrameEntry* f = file.value()->stored_frame(e.section);
                QVERIFY(f != nullptr);
                const auto at = qsizetype(f->stored_offset + f->stored_size / 2);
                bytes[at] = char(bytes[at] ^ 0x5a);
            }
        }
        const QString bad = dir_.filePath("olmoe-z-bad.bin.zst");
        write_all(bad, bytes);
        auto z = Model::load(bad.toStdString());
        QVERIFY2(z, z.message().c_str());
        ExpertCacheConfig c;
        c.ram_budget = budget_for(zst.toStdString(), k + 1);
        QVERIFY(z.value()->use_expert_cache(c));
        ThreadPool pool(2);
        Session session(*z.value(), pool, 0, SessionOptions{});
        Status failed = Status::ok();
        for (int32_t id : ids) {
            auto r = session.eval(id);
            if (!r) {
                failed = r.status();
                break;
            }
        }
        QVERIFY2(!failed, "a damaged expert frame was not noticed");
        QVERIFY2(QString::fromStdString(failed.message()).contains("zstd"), failed.message().c_str());
    }

    // The CLI: --ram-budget gives the same logits file; route --json reports the cache per layer; bad options
    // are one-line errors.
    void cli_budget() {
        const QString path = dir_.filePath("olmoe-cli.bin");
        QCOMPARE(run_cli({"convert", reference("hf/olmoe/model"), "-o", path, "-q"}).exit_code, 0);
        const QString ids = ids_arg(read_json(reference("hf/olmoe/ref/input_ids.json")).array());
        const QString plain = dir_.filePath("plain.f32"), budgeted = dir_.filePath("budgeted.f32");
        CliResult r = run_cli({"logits", "-m", path, "--tokens", ids, "--out", plain});
        QCOMPARE(r.exit_code, 0);
        const QString budget = QString::number(budget_for(path.toStdString(), 3));
        for (const char* policy : {"lru", "lfru"}) {
            r = run_cli({"logits", "-m", path, "--tokens", ids, "--out", budgeted, "--ram-budget", budget, "--cache-policy", policy});
            QVERIFY2(r.exit_code == 0, r.err.constData());
            QCOMPARE(read_all(budgeted), read_all(plain));
        }
        // pinned, with the hot set learned from a routing trace
        r = run_cli({"route", "-m", path, "--tokens", ids, "--json"});
        QCOMPARE(r.exit_code, 0);
        const QString trace = write_trace("olmoe-route.json", r.out);
        r = run_cli({"logits", "-m", path, "--tokens", ids, "--out", budgeted, "--ram-budget", budget, "--cache-policy", "pinned",
                     "--hot-trace", trace});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        QCOMPARE(read_all(budgeted), read_all(plain));

        r = run_cli({"route", "-m", path, "--tokens", ids, "--json", "--ram-budget", budget});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        const json j = json::parse(r.out.toStdString());
        QCOMPARE(j["expert_cache"]["slots_per_layer"].get<uint32_t>(), 3u);
        uint64_t hits = 0, misses = 0;
        for (const json& l : j["layers"])
            for (const json& c : l["cache"]) {
                hits += c["hits"].get<uint64_t>();
                misses += c["misses"].get<uint64_t>();
            }
        QCOMPARE(hits, j["expert_cache"]["hits"].get<uint64_t>());
        QCOMPARE(misses, j["expert_cache"]["misses"].get<uint64_t>());
        QVERIFY(misses > 0);

        const std::vector<QStringList> bad{
            {"--ram-budget", "lots"}, {"--ram-budget", "0"}, {"--ram-budget", "1"}, {"--ram-budget", "3X"},
            {"--ram-budget", budget, "--cache-policy", "fifo"}, {"--ram-budget", budget, "--cache-policy", "pinned"},
            {"--ram-budget", budget, "--cache-policy", "pinned", "--hot-trace", dir_.filePath("none.json")},
            {"--hot-trace", trace}};
        for (const QStringList& extra : bad) {
            r = run_cli(QStringList{"logits", "-m", path, "--tokens", "1,2"} + extra);
            QVERIFY2(!r.crashed && r.exit_code == 1 && r.err.startsWith("colibri: logits: ") && r.err.count('\n') == 1 && r.out.isEmpty(),
                     qPrintable(extra.join(' ') + ": " + r.err));
        }
    }

    // `colibri serve` and `colibri bench` take the RAM budget as every command does (a size, or a share of the
    // model file): bench's decoded tokens and served greedy completions with their log-probabilities are those
    // without a budget; bad budgets are one-line errors.
    void serve_and_bench_budget() {
        const QString hf = dir_.filePath("budget-hf"), path = dir_.filePath("budget.bin");
        QVERIFY(make_model(hf, {"--family", "mixtral", "--vocab", "256", "--hidden", "64", "--layers", "2", "--experts", "8",
                                "--top-k", "2", "--ffn", "256", "--embedding-init", "4", "--seed", "3"}));
        QCOMPARE(run_cli({"convert", hf, "-o", path, "-q"}).exit_code, 0);
        // Half of this file is 3 slots per layer of 8 experts, the same budget as the byte form.
        const QString bytes = QString::number(budget_for(path.toStdString(), 3));
        const QStringList budgets{"50%", bytes};

        const QStringList bench{"bench", "-m", path, "-t", "2", "-p", "8", "-n", "16", "--reps", "1", "--json", "--bandwidth-mib", "16"};
        CliResult r = run_cli(bench);
        QVERIFY2(r.exit_code == 0, r.err.constData());
        const json plain = json::parse(r.out.toStdString());
        QCOMPARE(plain["decoded"].size(), size_t(16));
        QVERIFY(!plain.contains("expert_cache"));
        for (const QString& budget : budgets) {
            r = run_cli(bench + QStringList{"--ram-budget", budget});
            QVERIFY2(r.exit_code == 0, r.err.constData());
            const json b = json::parse(r.out.toStdString());
            QCOMPARE(b["decoded"], plain["decoded"]);
            QCOMPARE(b["expert_cache"]["slots_per_layer"].get<uint32_t>(), 3u);
            QVERIFY(b["expert_cache"]["misses"].get<uint64_t>() > 0);
        }

        const std::string body = R"({"model":"budget","prompt":[1,20,30,40,50,60,7,8],"max_tokens":12,"temperature":0,)"
                                 R"("logprobs":3,"ignore_eos":true})";
        const auto complete = [&](const QStringList& extra, QByteArray* log) -> json {
            ServerProcess server;
            if (!server.start(QStringList{"-m", path, "-t", "2", "--slots", "2", "-c", "64", "-q"} + extra)) {
                qWarning("%s", qPrintable(server.error()));
                return {};
            }
            RawConnection c(server.port());
            if (!c.send(http_request("POST", "/v1/completions", body))) return {};
            const std::string reply = c.receive(120000 * build_slowdown());
            if (log) *log = server.log();
            const size_t at = reply.find("\r\n\r\n");
            if (reply.rfind("HTTP/1.1 200", 0) != 0 || at == std::string::npos) {
                qWarning("%s", reply.c_str());
                return {};
            }
            return json::parse(reply.substr(at + 4), nullptr, false)["choices"];
        };
        const json want = complete({}, nullptr);
        QVERIFY(want.is_array() && want.size() == 1);
        QCOMPARE(want[0]["logprobs"]["token_logprobs"].size(), size_t(12));
        for (const QString& budget : budgets) {
            QByteArray log;
            const json got = complete({"--ram-budget", budget}, &log);
            QCOMPARE(got, want);
            QVERIFY2(log.contains("expert cache: lru, 3 slots per layer"), log.constData());
        }

        const std::vector<QStringList> bad{{"--ram-budget", "lots"}, {"--ram-budget", "0"},   {"--ram-budget", "3X"},
                                           {"--ram-budget", "150%"}, {"--ram-budget", "0%"},  {"--ram-budget", "1"},
                                           {"--ram-budget", "1%"},   {"--ram-budget", "50%", "--cache-policy", "fifo"},
                                           {"--hot-trace", path}};
        for (const char* command : {"serve", "bench"}) {
            for (const QStringList& extra : bad) {
                QStringList args{command, "-m", path};
                if (QString(command) == "serve") args << "--port" << "0";  // were the budget taken, no fixed port
                r = run_cli(args + extra);
                const QByteArray prefix = QByteArray("colibri: ") + command + ": ";
                QVERIFY2(!r.crashed && r.exit_code == 1 && r.err.startsWith(prefix) && r.err.count('\n') == 1 && r.out.isEmpty(),
                         qPrintable(QString(command) + " " + extra.join(' ') + ": " + r.err));
            }
        }
    }

    void hostile_traces() {
        const std::vector<std::pair<const char*, QByteArray>> bad{
            {"empty", ""},
            {"not json", "{\"layers\": [ {"},
            {"array", "[1,2,3]"},
            {"no layers", "{\"tokens\": [1]}"},
            {"empty layers", "{\"layers\": []}"},
            {"layer not object", "{\"layers\": [7]}"},
            {"no layer id", "{\"layers\": [{\"experts\": [[1]]}]}"},
            {"negative id", "{\"layers\": [{\"layer\": 0, \"experts\": [[-1]]}]}"},
            {"float id", "{\"layers\": [{\"layer\": 0, \"experts\": [[1.5]]}]}"},
            {"string id", "{\"layers\": [{\"layer\": 0, \"experts\": [[\"a\"]]}]}"},
            {"duplicate expert", "{\"layers\": [{\"layer\": 0, \"experts\": [[1, 1]]}]}"},
            {"k changes", "{\"layers\": [{\"layer\": 0, \"experts\": [[1, 2], [3]]}]}"},
            {"empty choice", "{\"layers\": [{\"layer\": 0, \"experts\": [[]]}]}"},
            {"no positions", "{\"layers\": [{\"layer\": 0, \"experts\": []}]}"},
            {"out of range", "{\"n_experts\": 4, \"layers\": [{\"layer\": 0, \"experts\": [[4]]}]}"},
            {"huge id", "{\"layers\": [{\"layer\": 0, \"experts\": [[4000000000]]}]}"},
            {"layers differ", "{\"layers\": [{\"layer\": 0, \"experts\": [[1]]}, {\"layer\": 1, \"experts\": [[1], [2]]}]}"},
            {"layer twice", "{\"layers\": [{\"layer\": 0, \"experts\": [[1]]}, {\"layer\": 0, \"experts\": [[1]]}]}"},
            {"zero experts", "{\"n_experts\": 0, \"layers\": [{\"layer\": 0, \"experts\": [[0]]}]}"},
            {"deep", QByteArray(100000, '[') + QByteArray(100000, ']')},
        };
        for (const auto& [what, text] : bad) {
            const QString path = write_trace("bad.json", text);
            const CliResult r = run_cli({"cache-sim", path});
            QVERIFY2(!r.crashed, what);
            QVERIFY2(r.exit_code == 1, what);
            QVERIFY2(r.out.isEmpty(), what);
            QVERIFY2(r.err.startsWith("colibri: cache-sim: ") && r.err.count('\n') == 1, (QByteArray(what) + ": " + r.err).constData());
        }
        const QString good = write_trace("good.json", "{\"layers\": [{\"layer\": 0, \"experts\": [[1, 2], [3, 4]]}]}");
        for (const QStringList& args : {QStringList{"--slots", "1"}, QStringList{"--slots", "9"}, QStringList{"--slots", "a..b"},
                                        QStringList{"--pin-trace", dir_.filePath("missing.json")}}) {
            const CliResult r = run_cli(QStringList{"cache-sim", good} + args);
            QVERIFY2(r.exit_code == 1 && r.err.startsWith("colibri: cache-sim: ") && r.err.count('\n') == 1, r.err.constData());
        }
        const CliResult missing = run_cli({"cache-sim", dir_.filePath("nothing.json")});
        QVERIFY(missing.exit_code == 1 && missing.err.startsWith("colibri: cache-sim: "));
    }
};

QTEST_GUILESS_MAIN(TestExpertCache)
#include "test_expert_cache.moc"
