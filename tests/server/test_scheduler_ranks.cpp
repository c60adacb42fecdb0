// The server's scheduler across ranks that are threads of this process (engine/core/session_mirror.h; under mpirun:
// tests/tools/mpi_ranks_test.sh): rank 0's Scheduler tells the other ranks every operation on its slots' sessions and
// they follow (follow_scheduler). Greedy replies are one process's token for token and log-probability for
// log-probability: jobs decoded together, slots reusing a cached prefix (a hybrid's truncation evaluates again),
// lookup speculation's checks. /v1/models names the ranks and the placement, and a traced job's positions carry each
// rank's expert time and the bytes exchanged per MoE layer, as the routing says they must be. An idle scheduler
// keeps its followers past their wait limit; destroying it stops them. A follower that stops answering fails the
// jobs and the scheduler within the wait limit, and it takes no more.
#include <QElapsedTimer>
#include <QTemporaryDir>
#include <QtTest>
#include <atomic>
#include <optional>
#include <thread>

#include "../test_support.h"
#include "../thread_ranks.h"
#include "engine/core/open_model.h"
#include "engine/distributed/thread_group.h"
#include "server/openai_api.h"
#include "server/scheduler.h"

using namespace colibri;
using namespace colibri::server;
using namespace colibri::test;

namespace {

// Per job its tokens and their log-probabilities (the model's own: bit-identical logits give the same floats).
using Replies = std::vector<std::vector<std::pair<int32_t, float>>>;

JobSpec greedy(std::vector<int32_t> prompt, SpeculateMode speculate = SpeculateMode::Off) {
    JobSpec spec;
    spec.prompt = std::move(prompt);
    spec.sampling.greedy = true;
    spec.reply.max_tokens = 16;
    spec.reply.top_logprobs = 0;
    spec.speculate = speculate;
    return spec;
}

// Lookup drafts whatever the model: token 5 biased to be every token, so the reply repeats the prompt's "8, 5" and
// then itself (checks that fail, then checks that pass); its log-probabilities stay the model's.
JobSpec repeating(std::vector<int32_t> prompt) {
    JobSpec spec = greedy(std::move(prompt), SpeculateMode::Lookup);
    spec.reply.logit_bias = {{5, 100.0f}};
    return spec;
}

// Two rounds of three jobs on two slots, each round submitted at once (steps evaluate both slots together, the third
// job waits for one); the second round's prompts extend the first's, so slots start from their cached prefix.
std::vector<std::vector<JobSpec>> rounds() {
    const std::vector<int32_t> a{1, 17, 42, 99, 5, 25, 3, 77, 8, 14, 64, 12}, b{30, 2, 9, 11, 40, 7, 3, 3, 21};
    std::vector<int32_t> looped;
    for (int i = 0; i < 4; ++i) looped.insert(looped.end(), {5, 6, 7, 8});
    std::vector<int32_t> a2 = a, b2 = b;
    a2.insert(a2.end(), {4, 4, 9});
    b2.insert(b2.end(), {1, 2});
    return {{greedy(a), greedy(b), greedy(looped, SpeculateMode::Lookup)},
            {greedy(b2, SpeculateMode::Lookup), greedy(a2), repeating(looped)}};
}

// Every job of a round submitted at once; their tokens, or the first error.
Result<Replies> serve(Scheduler& scheduler, const std::vector<JobSpec>& round) {
    std::vector<std::shared_ptr<JobQueue>> queues;
    for (const JobSpec& spec : round) {
        queues.push_back(std::make_shared<JobQueue>());
        if (!scheduler.submit(std::make_shared<Job>(spec, queues.back()))) return error("the scheduler refused a job");
    }
    Replies replies(round.size());
    QElapsedTimer timer;
    timer.start();
    for (size_t i = 0; i < queues.size(); ++i)
        for (;;) {
            if (timer.elapsed() > 120000) return error("no answer within 120 s");
            std::vector<JobEvent> events;
            const std::optional<JobOutcome> outcome = queues[i]->take(events, std::chrono::milliseconds(100));
            for (const JobEvent& e : events) replies[i].emplace_back(e.token.id, e.token.logprob.logprob);
            if (!outcome) continue;
            if (!outcome->error.empty()) return error(outcome->error);
            break;
        }
    return replies;
}

SchedulerOptions options(Communicator* ranks = nullptr) {
    SchedulerOptions o;
    o.slots = 2;
    o.context = 256;
    o.threads = 1;
    o.ranks = ranks;
    return o;
}

// One process: the reference.
Result<std::vector<Replies>> solo(const std::string& path) {
    auto model = Model::load(path);
    if (!model) return model.status();
    Scheduler scheduler(*model.value(), options());
    std::vector<Replies> out;
    for (const auto& round : rounds()) {
        auto r = serve(scheduler, round);
        if (!r) return r.status();
        out.push_back(std::move(r.value()));
    }
    return out;
}

// `ranks` threads, each with its own model on the file, joined as generate's ranks are; rank 0 runs `lead` with its
// model and communicator while the others follow. Returns each follower's status (rank 0's is ok).
std::vector<Status> ranks_run(const std::string& path, uint32_t ranks, std::chrono::milliseconds limit,
                              const std::function<void(const Model&, Communicator&)>& lead, bool followers_silent = false) {
    return thread_ranks(path, ranks, limit, [&](uint32_t r, const Model& model, Communicator& comm) {
        if (r == 0) {
            lead(model, comm);
            return Status::ok();
        }
        return followers_silent ? Status::ok() : follow_scheduler(model, options(&comm));
    });
}

}  // namespace

class TestSchedulerRanks : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

    std::string convert(const QString& family) { return converted_reference(dir_, family); }

private Q_SLOTS:  // QT_NO_KEYWORDS: SchedulerOptions has a member named slots
    void replies_are_one_process_s_data() {
        QTest::addColumn<QString>("family");
        QTest::addColumn<uint32_t>("ranks");
        QTest::newRow("mixtral, 2 ranks") << "mixtral" << 2u;
        QTest::newRow("mixtral, 3 ranks") << "mixtral" << 3u;
        QTest::newRow("qwen3_next (hybrid), 2 ranks") << "qwen3_next" << 2u;
    }
    void replies_are_one_process_s() {
        QFETCH(QString, family);
        QFETCH(uint32_t, ranks);
        const std::string path = convert(family);
        auto want = solo(path);
        QVERIFY2(want, want.message().c_str());
        std::vector<Replies> got;
        Status led;
        uint32_t counted = 0;
        uint64_t drafted = 0;
        // A 1 s wait limit and an idle pause of 2.5 s between the rounds: the heartbeat keeps the followers.
        const std::vector<Status> followed = ranks_run(path, ranks, std::chrono::milliseconds(1000), [&](const Model& model, Communicator& comm) {
            Scheduler scheduler(model, options(&comm));
            for (const auto& round : rounds()) {
                if (!got.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(2500));
                auto r = serve(scheduler, round);
                if (!r) return void(led = r.status());
                got.push_back(std::move(r.value()));
            }
            counted = scheduler.stats().ranks;
            drafted = scheduler.stats().drafted;
        });
        QVERIFY2(led, led.message().c_str());
        for (const Status& s : followed) QVERIFY2(s, s.message().c_str());  // each stopped when the scheduler went
        QVERIFY(got == want.value());
        QCOMPARE(want.value()[0][0].size(), size_t(16));
        QCOMPARE(counted, ranks);
        QVERIFY(drafted > 0);  // lookup's checks were mirrored too
    }

    void models_and_traces_name_the_ranks() {
        const std::string path = convert("mixtral");
        nlohmann::json models, whole;
        Status led;
        const std::vector<Status> followed = ranks_run(path, 2, std::chrono::milliseconds(60000), [&](const Model& model, Communicator& comm) {
            const ServedModel served{&model, "mixtral", {}, 0, 256};
            models = models_list(served);
            Scheduler scheduler(model, options(&comm));
            ApiRequest request;
            request.endpoint = Endpoint::Completions;
            request.spec = greedy({3, 1, 4, 1, 5, 9, 2, 6});
            request.spec.reply.max_tokens = 6;
            request.spec.trace = request.trace = true;
            auto queue = std::make_shared<JobQueue>();
            if (!scheduler.submit(std::make_shared<Job>(request.spec, queue))) return void(led = error("refused"));
            ResponseBuilder builder(request, served, "cmpl-1", 0);
            for (;;) {
                std::vector<JobEvent> events;
                const std::optional<JobOutcome> outcome = queue->take(events, std::chrono::milliseconds(100));
                for (const JobEvent& e : events) builder.add(e);
                if (!outcome) continue;
                if (!outcome->error.empty()) return void(led = error(outcome->error));
                whole = builder.whole(*outcome);
                break;
            }
        });
        QVERIFY2(led, led.message().c_str());
        for (const Status& s : followed) QVERIFY2(s, s.message().c_str());

        // The placement is round-robin: expert e of every MoE layer on rank e % 2.
        const nlohmann::json& meta = models["data"][0]["meta"];
        QCOMPARE(meta["ranks"].get<int>(), 2);
        QCOMPARE(meta["placement"]["ranks"].get<int>(), 2);
        const nlohmann::json& layers = meta["placement"]["layers"];
        QCOMPARE(layers.size(), meta["moe_layers"].size());
        const int experts = meta["experts"].get<int>(), hidden = meta["hidden_size"].get<int>();
        for (const nlohmann::json& l : meta["moe_layers"]) {
            const nlohmann::json& holders = layers[std::to_string(l.get<int>())];
            QCOMPARE(int(holders.size()), experts);
            for (int e = 0; e < experts; ++e) QCOMPARE(holders[size_t(e)].get<int>(), e % 2);
        }
        // Every traced position: per MoE layer both ranks' time and the bytes; a decoded token (a chunk of one) sent
        // rank 0's experts' rows and received rank 1's.
        const nlohmann::json& trace = whole["colibri"]["trace"];
        QVERIFY(trace.size() >= 8 + 5);
        for (const nlohmann::json& p : trace) {
            const nlohmann::json& ranks = p["ranks"];
            QCOMPARE(ranks.size(), p["routing"].size());
            for (size_t i = 0; i < ranks.size(); ++i) {
                const nlohmann::json& r = ranks[i];
                QCOMPARE(r["layer"], p["routing"][i]["layer"]);
                QCOMPARE(r["experts_ns"].size(), size_t(2));
                QCOMPARE(r["bytes"].get<uint64_t>(), r["bytes_sent"].get<uint64_t>() + r["bytes_received"].get<uint64_t>());
                if (!p["generated"].get<bool>()) continue;
                uint64_t mine = 0, theirs = 0;
                for (const nlohmann::json& e : p["routing"][i]["experts"]) (e.get<int>() % 2 == 0 ? mine : theirs) += uint64_t(hidden) * 4;
                QCOMPARE(r["bytes_sent"].get<uint64_t>(), mine);
                QCOMPARE(r["bytes_received"].get<uint64_t>(), theirs);
                QVERIFY(r["experts_ns"][0].get<uint64_t>() > 0 && r["experts_ns"][1].get<uint64_t>() > 0 && r["exchange_ns"].get<uint64_t>() > 0);
            }
        }

        // One process: ranks 1, no placement, no rank timings.
        auto model = Model::load(path);
        QVERIFY(model);
        const nlohmann::json alone = models_list(ServedModel{model.value().get(), "mixtral", {}, 0, 256});
        QCOMPARE(alone["data"][0]["meta"]["ranks"].get<int>(), 1);
        QVERIFY(!alone["data"][0]["meta"].contains("placement"));
    }

    void a_silent_follower_stops_the_scheduler() {
        const std::string path = convert("mixtral");
        std::atomic<bool> told{false};
        Result<Replies> r = Replies{};
        Status lost;
        bool refused_after = false;
        qint64 elapsed = 0;
        ranks_run(path, 2, std::chrono::milliseconds(300), [&](const Model& model, Communicator& comm) {
            SchedulerOptions o = options(&comm);
            o.on_ranks_lost = [&] { told = true; };
            Scheduler scheduler(model, o);
            QElapsedTimer timer;
            timer.start();
            r = serve(scheduler, {greedy({1, 2, 3})});
            elapsed = timer.elapsed();
            lost = scheduler.lost();
            refused_after = !scheduler.submit(std::make_shared<Job>(greedy({4}), std::make_shared<JobQueue>()));
        }, true);
        QVERIFY(!r);
        QCOMPARE(QString::fromStdString(r.message()), QString("rank 0: another rank did not answer within 0.3 s (it stopped or died)"));
        QCOMPARE(QString::fromStdString(lost.message()), QString::fromStdString(r.message()));
        QVERIFY(told);
        QVERIFY(refused_after);
        QVERIFY(elapsed < 10000);
    }

    void lost_ranks_are_named() {
        ThreadGroup group(3);
        Communicator& comm = group.rank(0);
        comm.set_wait_limit(std::chrono::milliseconds(2000));
        const uint32_t one[] = {2}, two[] = {1, 2};
        QCOMPARE(QString::fromStdString(comm.peer_lost(one).message()), QString("rank 0: rank 2 did not answer within 2 s (it stopped or died)"));
        QCOMPARE(QString::fromStdString(comm.peer_lost(two).message()), QString("rank 0: ranks 1 and 2 did not answer within 2 s (it stopped or died)"));
    }
};

QTEST_GUILESS_MAIN(TestSchedulerRanks)
#include "test_scheduler_ranks.moc"
