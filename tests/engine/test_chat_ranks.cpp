// A conversation across ranks that are threads of this process (engine/core/session_mirror.h; under mpirun:
// tests/tools/mpi_ranks_test.sh runs `colibri chat` and a C API program): rank 0's session tells the others each
// operation and they follow (follow_slots). The chat service's turns on rank 0 are one process's token for token:
// prefix reuse, an edited conversation (a truncation; on a hybrid an evaluation again), lookup speculation's checks,
// a reset, the LUT router; with an idle pause past the wait limit (the heartbeat). A follower that stops answering
// while rank 0 is idle is noticed within the wait limit, and rank 0's next turn fails with one line.
#include <QElapsedTimer>
#include <QTemporaryDir>
#include <QtTest>
#include <atomic>
#include <thread>

#include "../test_support.h"
#include "../thread_ranks.h"
#include "engine/core/chat_service.h"
#include "engine/core/open_model.h"
#include "engine/core/session_follow.h"
#include "engine/core/session_mirror.h"
#include "engine/distributed/thread_group.h"

using namespace colibri;
using namespace colibri::test;

namespace {

const QString kDemo = QStringLiteral(COLIBRI_BUILD_DIR "/demo/demo.bin");
constexpr uint32_t kContext = 512;

// Each turn's generated ids.
using Replies = std::vector<std::vector<int32_t>>;

SamplerConfig greedy() {
    SamplerConfig c;
    c.greedy = true;
    return c;
}

// The conversation's next prompt: the demo model's through its chat template, a reference model's as ids.
struct Script {
    bool chat_template;
    std::vector<int32_t> prompt(const Model& model, const std::vector<std::string>& turns, const Replies& replies) const {
        if (chat_template) {
            std::vector<ChatMessage> messages;
            for (size_t i = 0; i < turns.size(); ++i) {
                if (i > 0) messages.push_back({"assistant", model.tokenizer()->decode(replies[i - 1], true)});
                messages.push_back({"user", turns[i]});
            }
            auto ids = chat_prompt_ids(model, messages);
            return ids ? ids.value() : std::vector<int32_t>{};
        }
        std::vector<int32_t> ids;  // a turn's "text" is its ids' seed: a few ids after what came before
        for (size_t i = 0; i < turns.size(); ++i) {
            if (i > 0) ids.insert(ids.end(), replies[i - 1].begin(), replies[i - 1].end());
            for (char c : turns[i]) ids.push_back(1 + static_cast<unsigned char>(c) % 90);
        }
        return ids;
    }
};

// The same turns on one process and on rank 0: a second turn on the first (prefix reuse, lookup drafts), an edited
// first turn (a truncation), `pause` (rank 0 idles past the wait limit), a reset, and a turn on the LUT router.
Result<Replies> converse(const Model& model, Session& session, const Script& script, const std::function<void()>& pause) {
    ChatService chat(model, session);
    Sampler sampler(greedy());
    auto lookup = make_drafter(SpeculateMode::Lookup, model);
    if (!lookup) return lookup.status();
    TurnOptions plain;
    plain.reply.max_tokens = 24;
    plain.reply.stop_ids = default_stop_ids(model);
    TurnOptions drafted = plain;
    drafted.drafter = lookup->get();
    Replies replies;
    const auto turn = [&](const std::vector<std::string>& turns, const Replies& before, const TurnOptions& options) -> Status {
        auto r = chat.run(script.prompt(model, turns, before), sampler, options);
        if (!r) return r.status();
        replies.push_back(r->tokens);
        return Status::ok();
    };
    COLIBRI_TRY(turn({"What is 23 plus 45?"}, {}, plain));
    COLIBRI_TRY(turn({"What is 23 plus 45?", "Who are you?"}, replies, drafted));
    pause();
    COLIBRI_TRY(turn({"What is 23 plus 46?"}, {}, plain));
    chat.reset();
    const bool lut = check_router_supports(model.rules().routing, RouterKind::Lut).is_ok();
    if (lut) session.set_router(RouterKind::Lut);
    COLIBRI_TRY(turn({"Which is larger, 17 or 71?"}, {}, drafted));
    if (lut) session.set_router(RouterKind::Exact);
    return replies;
}

Result<Replies> solo(const std::string& path, const Script& script) {
    auto model = Model::load(path);
    if (!model) return model.status();
    ThreadPool pool(1);
    Session session(*model.value(), pool, kContext);
    return converse(*model.value(), session, script, [] {});
}

// `ranks` threads, each with its own model on the file and a session, joined as the CLI's ranks are; rank 0 runs
// `lead` with its model, session and communicator, the others follow (unless silent). Each follower's status.
std::vector<Status> ranks_run(const std::string& path, uint32_t ranks, std::chrono::milliseconds limit,
                              const std::function<void(const Model&, Session&, Communicator&)>& lead, bool followers_silent = false) {
    return thread_ranks(path, ranks, limit, [&](uint32_t r, const Model& model, Communicator& comm) {
        ThreadPool pool(1);
        Session session(model, pool, kContext);
        if (r == 0) {
            lead(model, session, comm);
            return Status::ok();
        }
        Session* const sessions[] = {&session};
        return followers_silent ? Status::ok() : follow_slots(comm, sessions);
    });
}

}  // namespace

class TestChatRanks : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

    std::string model_path(const QString& name) { return name == "demo" ? kDemo.toStdString() : converted_reference(dir_, name); }

private slots:
    void initTestCase() { QVERIFY2(QFile::exists(kDemo), "the build did not make the demo model"); }

    void turns_are_one_process_s_data() {
        QTest::addColumn<QString>("model");
        QTest::addColumn<uint32_t>("ranks");
        QTest::newRow("demo, 2 ranks") << "demo" << 2u;
        QTest::newRow("demo, 3 ranks") << "demo" << 3u;
        QTest::newRow("qwen3_next (hybrid), 2 ranks") << "qwen3_next" << 2u;
    }
    void turns_are_one_process_s() {
        QFETCH(QString, model);
        QFETCH(uint32_t, ranks);
        const std::string path = model_path(model);
        const Script script{model == "demo"};
        auto want = solo(path, script);
        QVERIFY2(want, want.message().c_str());
        QCOMPARE(want->size(), size_t(4));
        for (const auto& reply : want.value()) QVERIFY(!reply.empty());
        Result<Replies> got = Replies{};
        Status stopped;
        uint32_t position = 0;
        // A 400 ms wait limit and a pause of 1.2 s between two turns: the heartbeat keeps the followers.
        const std::vector<Status> followed = ranks_run(path, ranks, std::chrono::milliseconds(400), [&](const Model& m, Session& session, Communicator& comm) {
            SessionMirror mirror(&comm);
            session.set_mirror(&mirror, 0);
            if (Status s = mirror.start_heartbeat(); !s) return void(got = s);
            got = converse(m, session, script, [] { std::this_thread::sleep_for(std::chrono::milliseconds(1200)); });
            position = session.position();
            stopped = mirror.stop();
            session.set_mirror(nullptr);
        });
        QVERIFY2(got, got.message().c_str());
        QVERIFY2(stopped, stopped.message().c_str());
        for (const Status& s : followed) QVERIFY2(s, s.message().c_str());  // each returned at rank 0's stop
        QVERIFY(got.value() == want.value());
        QVERIFY(position > 0);
    }

    void a_silent_follower_is_noticed_while_idle() {
        const std::string path = model_path("demo");
        std::atomic<bool> told{false};
        qint64 noticed = -1;
        Result<TurnResult> turn = TurnResult{};
        Status stopped = error("not stopped");
        ranks_run(path, 2, std::chrono::milliseconds(300), [&](const Model& m, Session& session, Communicator& comm) {
            SessionMirror mirror(&comm);
            session.set_mirror(&mirror, 0);
            QElapsedTimer timer;
            timer.start();
            if (!mirror.start_heartbeat([&] { told = true; })) return;
            while (!told && timer.elapsed() < 10000) std::this_thread::sleep_for(std::chrono::milliseconds(10));
            noticed = timer.elapsed();
            ChatService chat(m, session);
            Sampler sampler(greedy());
            TurnOptions options;
            options.reply.max_tokens = 4;
            const int32_t prompt[] = {1, 2, 3};
            turn = chat.run(prompt, sampler, options);
            stopped = mirror.stop();
            session.set_mirror(nullptr);
        }, true);
        QVERIFY(told);
        QVERIFY2(noticed < 2000, qPrintable(QString::number(noticed)));
        QVERIFY(!turn);
        QCOMPARE(QString::fromStdString(turn.message()), QString("rank 0: another rank did not answer within 0.3 s (it stopped or died)"));
        QCOMPARE(QString::fromStdString(stopped.message()), QString::fromStdString(turn.message()));
    }
};

QTEST_GUILESS_MAIN(TestChatRanks)
#include "test_chat_ranks.moc"
