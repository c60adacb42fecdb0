// The Studio attached to a real `colibri serve` on the demo model: a conversation of several turns, with the
// server serving another conversation in between, shows exactly the replies the server gives (asked directly,
// without the Studio), the same replies a local model gives, and a trace for every position the conversation
// holds. Earlier replies are encoded again in each next prompt, and need not come back as the tokens that were
// generated; the transcript must not change what they say (the Conversation's part of that is also checked alone).
// A server across ranks (a fake one) shows its placement on the heatmap and its ranks' timings in the profiler; one
// that lies about its ranks is refused with one line, never a crash.
#include <httplib.h>

#include <QLabel>
#include <QPlainTextEdit>
#include <mutex>
#include <thread>
#include <QPushButton>
#include <QTextBrowser>
#include <nlohmann/json.hpp>

#include "../server/server_process.h"
#include "engine/core/chat_prompt.h"
#include "engine/core/model.h"
#include "ui/models/model_summary.h"
#include "ui/views/chat_view.h"
#include "ui/views/heatmap_view.h"
#include "ui/views/main_window.h"
#include "ui/views/profiler_view.h"

#include <QCheckBox>
#include <QTabWidget>
#include "ui_test_support.h"

using namespace colibri;
using namespace colibri::studio;
using namespace colibri::test;

namespace {

const QString kDemo = QStringLiteral(COLIBRI_BUILD_DIR "/demo/demo.bin");
constexpr int kMaxTokens = 40;

// A request's JSON answer (null when there is none).
nlohmann::json ask(int port, const std::string& method, const std::string& path, const std::string& body) {
    RawConnection c(port);
    if (!c.ok() || !c.send(http_request(method, path, body))) return nullptr;
    bool closed = false;
    const std::string response = c.receive(120000, &closed);
    const size_t at = response.find("\r\n\r\n");
    return nlohmann::json::parse(at == std::string::npos ? std::string() : response.substr(at + 4), nullptr, false);
}

// The server's greedy reply to these messages, asked without the Studio (a plain non-streaming request).
QString server_reply(int port, const std::vector<std::pair<std::string, std::string>>& messages, int max_tokens) {
    const nlohmann::json models = ask(port, "GET", "/v1/models", "");
    if (!models.is_object() || !models.contains("data")) return QStringLiteral("<no model list>");
    nlohmann::json body{{"model", models["data"][0]["id"]}, {"max_tokens", max_tokens}, {"temperature", 0}, {"messages", nlohmann::json::array()}};
    for (const auto& [role, content] : messages) body["messages"].push_back({{"role", role}, {"content", content}});
    const nlohmann::json j = ask(port, "POST", "/v1/chat/completions", body.dump());
    if (!j.is_object() || !j.contains("choices")) return QStringLiteral("<not a completion: %1>").arg(QString::fromStdString(j.dump()));
    return QString::fromStdString(j["choices"][0]["message"].value("content", std::string()));
}

// The text the chat view shows for a reply: its tokens' text while it has a token range, else its content.
QString shown_text(const Conversation& c, const ConversationMessage& m) {
    if (m.first_token < 0) return m.content;
    QString text;
    for (int p = m.first_token; p < m.first_token + m.token_count; ++p) {
        const ConversationToken* t = c.token(p);
        if (t == nullptr) return QStringLiteral("<range beyond the tokens>");
        if (!t->end_of_turn) text += t->trace.text;
    }
    return text;
}

// An HTTP server on a free loopback port that answers /v1/models and /v1/chat/completions with whatever the
// test sets: a server that lies.
class FakeServer {
public:
    FakeServer() {
        http_.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
            std::lock_guard lock(mutex_);
            res.set_content(models_, "application/json");
        });
        http_.Post("/v1/chat/completions", [this](const httplib::Request&, httplib::Response& res) {
            std::lock_guard lock(mutex_);
            res.set_content(stream_, "text/event-stream");
        });
        port_ = http_.bind_to_any_port("127.0.0.1");
        thread_ = std::thread([this] { http_.listen_after_bind(); });
    }
    ~FakeServer() {
        http_.stop();
        thread_.join();
    }
    void answer(const std::string& models, const std::string& stream) {
        std::lock_guard lock(mutex_);
        models_ = models;
        stream_ = stream;
    }
    QString url() const { return QStringLiteral("http://127.0.0.1:%1").arg(port_); }

private:
    httplib::Server http_;
    std::mutex mutex_;
    std::string models_, stream_;
    int port_ = 0;
    std::thread thread_;
};

}  // namespace

using Turns = std::vector<std::pair<std::string, std::string>>;  // role, content

class TestUiRemote : public QObject {
    Q_OBJECT
    std::unique_ptr<MainWindow> window_;

    bool send(const QString& text, int max_tokens) { return send_and_wait(*window_, text, max_tokens); }

    // Every reply shows its own text; the conversation's tokens are the last prompt's tokens (as the engine
    // encodes these messages) followed by the last reply's; every position but the last sampled one has a trace
    // at its own place.
    void check_transcript(const QString& model_path, const Turns& turns, bool remote) {
        const Conversation& c = *window_->conversation();
        QCOMPARE(c.messages().size(), qsizetype(turns.size()));
        for (qsizetype i = 0; i < c.messages().size(); ++i) {
            const ConversationMessage& m = c.messages()[i];
            QCOMPARE(m.content, QString::fromStdString(turns[size_t(i)].second));
            if (m.role == QLatin1String("assistant")) {
                QCOMPARE(shown_text(c, m), m.content);
                QVERIFY2(m.first_token >= 0, "an earlier reply keeps clickable tokens when its text is among them");
            }
        }
        const QString shown = window_->chat_view()->transcript()->toPlainText();
        QVERIFY2(!shown.contains(QStringLiteral("<|im_end|>")), qPrintable(shown));

        auto model = Model::load(model_path.toStdString());
        QVERIFY(model.is_ok());
        std::vector<ChatMessage> prompt;
        for (size_t i = 0; i + 1 < turns.size(); ++i) prompt.push_back({turns[i].first, turns[i].second});
        auto ids = chat_prompt_ids(*model.value(), prompt);
        QVERIFY(ids.is_ok());
        const std::vector<int32_t> held = c.token_ids();
        QVERIFY(held.size() > ids->size());
        QCOMPARE(std::vector<int32_t>(held.begin(), held.begin() + std::ptrdiff_t(ids->size())), ids.value());
        const ConversationMessage& last = c.messages().back();
        QCOMPARE(last.first_token, int(ids->size()));
        QCOMPARE(last.first_token + last.token_count, c.size());
        // The server never evaluates the token it sampled last; a local model does.
        const int traced = remote ? c.size() - 1 : c.size();
        for (int p = 0; p < c.size(); ++p) {
            const ConversationToken* t = c.token(p);
            QCOMPARE(t->trace.position, p);
            QVERIFY2(t->evaluated == (p < traced), qPrintable(QStringLiteral("position %1 of %2").arg(p).arg(c.size())));
            if (p < traced) QVERIFY(!t->trace.routing.empty());
            if (p >= last.first_token) QVERIFY(t->trace.generated);
        }
    }

    // The ids a reply shows now.
    std::vector<int32_t> reply_ids(int message) const {
        const Conversation& c = *window_->conversation();
        const ConversationMessage& m = c.messages()[message];
        std::vector<int32_t> ids;
        for (int p = m.first_token; m.first_token >= 0 && p < m.first_token + m.token_count; ++p)
            if (!c.token(p)->end_of_turn) ids.push_back(c.token(p)->trace.token);
        return ids;
    }

    // Three turns on `model` served by colibri serve with one slot, another conversation served between the second
    // and the third: after each, the transcript against what the server answers when asked directly. Returns the
    // turns. re_encoded: whether some reply came back in a later prompt as other tokens than were generated.
    Turns remote_conversation(const QString& model, const QStringList& questions, int max_tokens, bool* re_encoded) {
        ServerProcess server;
        // One slot: another conversation takes the cache the Studio's conversation had.
        if (!server.start({"-m", model, "--slots", "1", "-t", "1", "-c", "512", "--quiet"})) {
            QTest::qFail(qPrintable(server.error()), __FILE__, __LINE__);
            return {};
        }
        QSignalSpy loaded(window_.get(), &MainWindow::modelLoaded);
        window_->connect_server(server.url());
        if (!wait_for(loaded, 1)) return {};
        Turns turns;
        *re_encoded = false;
        for (int q = 0; q < questions.size(); ++q) {
            if (q == 2) {
                const QString other = server_reply(server.port(), {{"user", "Name a colour."}}, max_tokens);
                if (other.startsWith(QLatin1Char('<'))) QTest::qFail(qPrintable(other), __FILE__, __LINE__);
            }
            turns.push_back({"user", questions[q].toStdString()});
            if (!send(questions[q], max_tokens)) return {};
            const std::vector<int32_t> before = q > 0 ? generated_ids_ : std::vector<int32_t>();
            const QString reply = server_reply(server.port(), turns, max_tokens);
            turns.push_back({"assistant", reply.toStdString()});
            check_transcript(model, turns, true);
            if (QTest::currentTestFailed()) return {};
            if (q > 0 && reply_ids(int(turns.size()) - 3) != before) *re_encoded = true;
            generated_ids_ = reply_ids(int(turns.size()) - 1);
        }
        if (server.stop() != 0) QTest::qFail("the server did not stop cleanly", __FILE__, __LINE__);
        return turns;
    }

    // The same questions to the same model opened here: the same replies, the same checks.
    void local_conversation(const QString& model, const Turns& expected, int max_tokens) {
        QSignalSpy loaded(window_.get(), &MainWindow::modelLoaded);
        window_->open_model(model);
        QVERIFY(wait_for(loaded, 1));
        Turns turns;
        for (size_t i = 0; i < expected.size(); i += 2) {
            turns.push_back(expected[i]);
            QVERIFY(send(QString::fromStdString(expected[i].second), max_tokens));
            turns.push_back({"assistant", window_->conversation()->messages().back().content.toStdString()});
            check_transcript(model, turns, false);
            if (QTest::currentTestFailed()) return;
        }
        QCOMPARE(turns, expected);  // the same engine, greedy: the same replies
    }

    std::vector<int32_t> generated_ids_;

private slots:
    void initTestCase() {
        QVERIFY2(QFile::exists(kDemo), "the build makes the demo model");
        MainWindowOptions options;
        options.persist_settings = false;
        window_ = std::make_unique<MainWindow>(options);
        window_->set_discard_question([](const QString&) { return DiscardAnswer::Discard; });
        window_->resize(1280, 720);
        window_->show();
        QVERIFY(QTest::qWaitForWindowExposed(window_.get()));
    }

    void cleanupTestCase() { window_.reset(); }

    // The Conversation alone, driven as a worker drives it: a reply generated as "7" "1" comes back in the next
    // prompt as "71"; while that pass runs the reply shows its text, afterwards its range is the new token.
    void an_earlier_reply_is_found_among_new_tokens() {
        Conversation c;
        auto trace = [](int position, int token, const QString& text) {
            TokenTrace t;
            t.position = position;
            t.token = token;
            t.text = text;
            return t;
        };
        c.add_user_message(QStringLiteral("Q"));
        c.begin_pass(0);
        c.add_trace(trace(0, 10, QStringLiteral("Q")));
        c.begin_reply(1);
        c.add_generated(1, 20, QStringLiteral("7"), false);
        c.add_generated(2, 21, QStringLiteral("1"), false);
        c.add_generated(3, 22, QString(), false);  // the first bytes of a character the next token completes
        c.add_trace(trace(3, 22, QStringLiteral("\u00c3")));
        QCOMPARE(c.token(3)->trace.text, QString());  // what was streamed stays: no stray bytes in the reply
        c.add_generated(4, 23, QStringLiteral("\u00e9"), false);
        c.add_generated(5, 99, QString(), true);
        c.add_trace(trace(5, 99, QStringLiteral("<|im_end|>")));
        QCOMPARE(c.token(5)->trace.text, QStringLiteral("<|im_end|>"));  // an end-of-turn token shows its piece
        c.finish_pass(6);
        c.finish_reply(QStringLiteral("71\u00e9"));
        QCOMPARE(c.messages().back().first_token, 1);
        QCOMPARE(c.messages().back().token_count, 5);

        c.add_user_message(QStringLiteral("N"));
        QSignalSpy messages_changed(&c, &Conversation::messagesChanged);
        c.begin_pass(1);
        c.add_trace(trace(1, 30, QStringLiteral("71")));  // the reply encoded again
        QCOMPARE(c.messages()[1].first_token, -1);          // meanwhile: its text, no tokens
        QVERIFY(messages_changed.count() >= 1);
        c.add_trace(trace(2, 23, QStringLiteral("\u00e9")));
        c.add_trace(trace(3, 99, QStringLiteral("<|im_end|>")));
        c.add_trace(trace(4, 11, QStringLiteral("N")));
        c.begin_reply(5);
        c.add_generated(5, 40, QStringLiteral("ok"), false);
        c.finish_pass(6);
        c.finish_reply(QStringLiteral("ok"));
        QCOMPARE(c.messages()[1].first_token, 1);
        QCOMPARE(c.messages()[1].token_count, 2);
        QCOMPARE(shown_text(c, c.messages()[1]), QStringLiteral("71\u00e9"));
        QCOMPARE(shown_text(c, c.messages()[3]), QStringLiteral("ok"));

        // A reply whose text the new tokens do not hold (a template that rewrites earlier replies) keeps its text.
        c.begin_pass(1);
        c.add_trace(trace(1, 31, QStringLiteral("seventy-one")));
        c.finish_pass(2);
        QCOMPARE(c.messages()[1].first_token, -1);
        QCOMPARE(shown_text(c, c.messages()[1]), QStringLiteral("71\u00e9"));
        QCOMPARE(c.messages()[3].first_token, -1);  // the later reply's tokens went too
    }

    // The issue's conversation on the demo model: each reply ends with its end-of-turn token, which the server
    // evaluates only with the next turn's prompt.
    void the_remote_transcript_is_the_servers_replies() {
        const QStringList questions{QStringLiteral("Which is larger, 17 or 71?"), QStringLiteral("What is 23 plus 45?"),
                                    QStringLiteral("What is 9 times 3?")};
        bool re_encoded = false;
        const Turns turns = remote_conversation(kDemo, questions, kMaxTokens, &re_encoded);
        if (QTest::currentTestFailed()) return;
        QCOMPARE(turns.size(), size_t(6));
        QCOMPARE(turns[1].second, std::string("71 is larger than 17."));
        local_conversation(kDemo, turns, kMaxTokens);
    }

    // Random weights (the suites' model): a reply is tokens its own text does not encode back to, so each next
    // prompt holds an earlier reply as other tokens; the transcript still says what the server said.
    void a_reply_encoded_again_keeps_its_text() {
        const QString model = QStringLiteral(COLIBRI_UI_TEST_MODEL);
        const QStringList questions{QStringLiteral("Hello there"), QStringLiteral("Tell me more"), QStringLiteral("And then?")};
        bool re_encoded = false;
        const Turns turns = remote_conversation(model, questions, 10, &re_encoded);
        if (QTest::currentTestFailed()) return;
        QVERIFY2(re_encoded, "the case this test is for: a reply that came back as other tokens");
        local_conversation(model, turns, 10);
    }

    // A server across 2 ranks as colibri serve describes one (/v1/models' ranks and placement, the trace's rank
    // timings, docs/SERVER.md): the heatmap colours its experts by rank (expert 0 of layer 0 replicated), the
    // profiler's Ranks tab shows the timings; then hostile descriptions and streams are one line each, no crash.
    void a_server_across_ranks_shows_its_ranks() {
        FakeServer fake;
        const std::string meta = R"("meta": {"family": "mixtral", "layers": 2, "moe_layers": [0, 1], "experts": 4,
            "active_experts": 2, "hidden_size": 8, "vocab_size": 16, "context": 64, "max_position": 64, "tokenizer": true,
            "chat_template": true, "ranks": 2, "placement": {"ranks": 2, "layers": {"0": [[0, 1], 1, 0, 1], "1": [0, 1, 0, 1]}}})";
        auto position = [](int p, bool generated, const std::string& ranks) {
            // The generated position holds the token the first chunk sampled (5).
            return R"({"position": )" + std::to_string(p) + R"(, "token": )" + std::to_string(generated ? 5 : p + 1) + R"(, "text": "x", "generated": )" +
                   (generated ? "true" : "false") +
                   R"(, "routing": [{"layer": 0, "experts": [0, 1], "weights": [0.5, 0.5], "probs": [0.4, 0.4, 0.1, 0.1]},
                                   {"layer": 1, "experts": [2, 3], "weights": [0.5, 0.5], "probs": [0.1, 0.1, 0.4, 0.4]}],
                      "timings": [{"layer": 0, "attention_ns": 1000, "router_ns": 100, "experts_ns": 3000},
                                  {"layer": 1, "attention_ns": 1000, "router_ns": 100, "experts_ns": 3000}], "ranks": )" + ranks + "}";
        };
        const std::string good_ranks = R"([{"layer": 0, "experts_ns": [1000, 2500], "exchange_ns": 900, "bytes": 64, "bytes_sent": 32, "bytes_received": 32},
                                            {"layer": 1, "experts_ns": [1200, 2000], "exchange_ns": 700, "bytes": 64, "bytes_sent": 32, "bytes_received": 32}])";
        auto stream = [&](const std::string& ranks) {
            return R"(data: {"choices": [{"index": 0, "delta": {"content": "a"}}], "colibri": {"token": 5, "position": 2, "end_of_turn": false, "trace": [)" +
                   position(0, false, good_ranks) + ", " + position(1, false, good_ranks) + "]}}\n\n" +
                   R"(data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}], "colibri": {"trace": [)" + position(2, true, ranks) +
                   "]}}\n\ndata: [DONE]\n\n";
        };
        fake.answer(R"({"data": [{"id": "fake", )" + meta + "}]}", stream(good_ranks));
        QSignalSpy loaded(window_.get(), &MainWindow::modelLoaded), refused(window_.get(), &MainWindow::modelLoadFailed);
        window_->connect_server(fake.url());
        QVERIFY2(wait_for(loaded, 1), refused.isEmpty() ? "no answer" : qPrintable(refused.at(0).at(1).toString()));
        QVERIFY(window_->summary_model()->value(QStringLiteral("ranks")).startsWith(QStringLiteral("2 processes")));
        HeatmapView* heat = window_->heatmap_view();
        QVERIFY(!heat->by_rank_box()->isHidden() && heat->by_rank_box()->isChecked());
        QCOMPARE(heat->heatmap_model()->placement().holders_of(0, 0), QVector<int>({0, 1}));
        QCOMPARE(heat->heatmap_model()->placement().holders_of(1, 3), QVector<int>({1}));
        ProfilerView* profiler = window_->profiler_view();
        QVERIFY(profiler->tabs()->isTabVisible(profiler->ranks_tab()));

        QSignalSpy finished(window_->chat(), &ChatController::finished);
        window_->chat_view()->input()->setPlainText(QStringLiteral("Hello"));
        QTest::mouseClick(window_->chat_view()->send_button(), Qt::LeftButton);
        QVERIFY(wait_for(finished, 1));
        const ConversationToken* t = window_->conversation()->token(2);
        QVERIFY(t != nullptr && t->trace.ranks.size() == 2);
        QCOMPARE(t->trace.ranks[1].experts_ns, std::vector<uint64_t>({1200, 2000}));
        heat->refresh();
        const QModelIndex replicated = heat->heatmap_model()->index(0, 0), held = heat->heatmap_model()->index(0, 1);
        QVERIFY(replicated.data(HeatmapModel::ReplicatedRole).toBool());
        QCOMPARE(replicated.data(HeatmapModel::RankRole).toInt(), -1);
        QCOMPARE(held.data(HeatmapModel::RankRole).toInt(), 1);
        QVERIFY(held.data(Qt::ToolTipRole).toString().contains(QStringLiteral("on rank 1")));
        profiler->refresh();
        const RankTimeModel* ranks = profiler->rank_model();
        QCOMPARE(ranks->rowCount(), 2);
        QCOMPARE(ranks->index(0, RankTimeModel::FirstRank + 1).data(Qt::EditRole).toDouble(), 2.5);
        QCOMPARE(ranks->index(1, ranks->slowest_column()).data().toString(), QStringLiteral("rank 1"));
        QCOMPARE(ranks->index(0, ranks->bytes_column()).data(Qt::EditRole).toDouble(), 64.0);
        QVERIFY2(profiler->rank_summary()->text().contains(QStringLiteral("2 ranks, 3 tokens: 128 B exchanged per token")),
                 qPrintable(profiler->rank_summary()->text()));

        // Descriptions colibri serve never gives: refused at connect with one line, the fake model stays.
        const std::string shape = R"("family": "mixtral", "layers": 2, "moe_layers": [0, 1], "experts": 4, "active_experts": 2)";
        const std::pair<std::string, QString> bad_models[] = {
            {R"("ranks": 100000)", QStringLiteral("100000 ranks")},
            {R"("ranks": 0)", QStringLiteral("0 ranks")},
            {R"("ranks": 2.5)", QStringLiteral("not a count")},
            {R"("ranks": 2, "placement": {"ranks": 2, "layers": {"0": [0, 1, 0]}})", QStringLiteral("lists 3 experts, the model has 4")},
            {R"("ranks": 2, "placement": {"ranks": 2, "layers": {"0": [0, 1, 0, 7]}})", QStringLiteral("names 7, not a rank of 2")},
            {R"("ranks": 2, "placement": {"ranks": 2, "layers": {"0": [0, 1, 0, [0, 0, 0]]}})", QStringLiteral("not a rank of 2")},
            {R"("ranks": 2, "placement": {"ranks": 2, "layers": {"0": [0, 1, 0, []]}})", QStringLiteral("on no rank")},
            {R"("ranks": 2, "placement": {"ranks": 2, "layers": {"7": [0, 1, 0, 1]}})", QStringLiteral("not an MoE layer")},
            {R"("ranks": 2, "placement": {"ranks": 3, "layers": {}})", QStringLiteral("other ranks")},
            {R"("ranks": 2, "placement": [0, 1])", QStringLiteral("no layers")},
        };
        const QString label = window_->model_label()->text();
        for (const auto& [extra, why] : bad_models) {
            fake.answer(R"({"data": [{"id": "x", "meta": {)" + shape + ", " + extra + "}}]}", "");
            QSignalSpy failed(window_.get(), &MainWindow::modelLoadFailed);
            window_->connect_server(fake.url());
            QVERIFY(wait_for(failed, 1));
            const QString message = failed.at(0).at(1).toString();
            QVERIFY2(message.contains(why) && !message.contains(QLatin1Char('\n')), qPrintable(message));
            QCOMPARE(window_->model_label()->text(), label);
        }

        // Rank timings colibri serve never sends: the reply fails with one line, Send stays usable.
        const std::pair<std::string, QString> bad_streams[] = {
            {R"([{"layer": 0, "experts_ns": [1, 2, 3], "exchange_ns": 1, "bytes": 1, "bytes_sent": 1, "bytes_received": 0}])", QStringLiteral("rank timings of 3 ranks, the server has 2")},
            {R"([{"layer": 0, "experts_ns": [1, -2], "exchange_ns": 1, "bytes": 1, "bytes_sent": 1, "bytes_received": 0}])", QStringLiteral("not an unsigned number")},
            {R"([{"layer": 0, "experts_ns": [1, 2], "exchange_ns": 1e300, "bytes": 1, "bytes_sent": 1, "bytes_received": 0}])", QStringLiteral("exchange_ns is not")},
            {R"([{"layer": 0, "experts_ns": [1, 2]}])", QStringLiteral("exchange_ns is not")},
            {"[" + std::string(R"({"layer": 0, "experts_ns": [1, 2], "exchange_ns": 1, "bytes": 1, "bytes_sent": 1, "bytes_received": 0},)") + "7]", QStringLiteral("wrong shape")},
            {"[{}, {}, {}]", QStringLiteral("rank timings of 3 layers")},
            {R"({"layer": 0})", QStringLiteral("not a list")},
        };
        fake.answer(R"({"data": [{"id": "fake", )" + meta + "}]}", "");
        window_->connect_server(fake.url());
        QVERIFY(wait_for(loaded, 2));
        for (const auto& [ranks_json, why] : bad_streams) {
            fake.answer(R"({"data": [{"id": "fake", )" + meta + "}]}", stream(ranks_json));
            QSignalSpy failed(window_->chat(), &ChatController::failed);
            window_->chat_view()->input()->setPlainText(QStringLiteral("Hello"));
            QTest::mouseClick(window_->chat_view()->send_button(), Qt::LeftButton);
            QVERIFY(wait_for(failed, 1));
            const QString message = failed.at(0).at(0).toString();
            QVERIFY2(message.contains(why) && !message.contains(QLatin1Char('\n')), qPrintable(message.left(300)));
            QVERIFY(window_->chat_view()->send_button()->isEnabled());
        }
        // Rank timings from a server that said it runs alone.
        const std::string alone = R"("meta": {"family": "mixtral", "layers": 2, "moe_layers": [0, 1], "experts": 4, "active_experts": 2,
            "hidden_size": 8, "vocab_size": 16, "context": 64, "max_position": 64, "tokenizer": true, "chat_template": true})";
        fake.answer(R"({"data": [{"id": "fake", )" + alone + "}]}", stream(good_ranks));
        window_->connect_server(fake.url());
        QVERIFY(wait_for(loaded, 3));
        QVERIFY(heat->by_rank_box()->isHidden());
        QVERIFY(!profiler->tabs()->isTabVisible(profiler->ranks_tab()));
        QSignalSpy failed(window_->chat(), &ChatController::failed);
        window_->chat_view()->input()->setPlainText(QStringLiteral("Hello"));
        QTest::mouseClick(window_->chat_view()->send_button(), Qt::LeftButton);
        QVERIFY(wait_for(failed, 1));
        QVERIFY2(failed.at(0).at(0).toString().contains(QStringLiteral("from a server of one rank")), qPrintable(failed.at(0).at(0).toString()));
    }

    // A server that sends what colibri serve never sends: a model description of the wrong types or sizes is
    // refused at connect (the model open stays), a stream chunk of the wrong shape or size fails the reply with a
    // message; nothing crashes and Send stays usable.
    void a_server_that_lies_is_an_error_not_a_crash() {
        QSignalSpy loaded(window_.get(), &MainWindow::modelLoaded);
        window_->open_model(QStringLiteral(COLIBRI_UI_TEST_MODEL));
        QVERIFY(wait_for(loaded, 1));
        const QString label = window_->model_label()->text();
        FakeServer fake;
        const std::string good_meta = R"("meta": {"family": "mixtral", "layers": 2, "moe_layers": [0, 1], "experts": 4,
            "active_experts": 2, "hidden_size": 8, "vocab_size": 16, "context": 64, "max_position": 64, "tokenizer": true,
            "chat_template": true})";
        const std::pair<std::string, QString> bad_models[] = {
            {R"({"data": [{"id": 5, )" + good_meta + "}]}", QStringLiteral("wrong type")},
            {R"({"data": [{"id": "x", "meta": {"moe_layers": ["a"], "layers": 2, "experts": 4, "active_experts": 2}}]})", QStringLiteral("wrong type")},
            {R"({"data": [{"id": "x", "meta": {"moe_layers": [0], "layers": 2, "experts": 1000000000, "active_experts": 2}}]})", QStringLiteral("1000000000 experts")},
            {R"({"data": [{"id": "x", "meta": {"moe_layers": [7], "layers": 2, "experts": 4, "active_experts": 2}}]})", QStringLiteral("MoE layer 7")},
        };
        for (const auto& [models, why] : bad_models) {
            fake.answer(models, "");
            QSignalSpy failed(window_.get(), &MainWindow::modelLoadFailed);
            window_->connect_server(fake.url());
            QVERIFY(wait_for(failed, 1));
            QVERIFY2(failed.at(0).at(1).toString().contains(why), qPrintable(failed.at(0).at(1).toString()));
            QCOMPARE(window_->model_label()->text(), label);
        }

        fake.answer(R"({"data": [{"id": "fake", )" + good_meta + "}]}", "");
        window_->connect_server(fake.url());
        QVERIFY(wait_for(loaded, 2));
        const std::pair<std::string, QString> bad_streams[] = {
            {R"(data: {"choices": [{"index": 0, "delta": {"content": "a"}}], "colibri": {"token": 1, "position": 3, "trace": [7]}})" "\n\n",
             QStringLiteral("wrong shape")},
            {R"(data: {"choices": [{"index": 0, "delta": {"content": "a"}}], "colibri": {"token": 1, "position": 2147483647, "trace": []}})" "\n\n",
             QStringLiteral("out of range")},
            {R"(data: {"error": "not an object"})" "\n\n", QStringLiteral("wrong shape")},
            {"data: " + std::string(size_t(17) << 20, 'x'), QStringLiteral("larger than 16 MiB")},
        };
        for (const auto& [stream, why] : bad_streams) {
            fake.answer(R"({"data": [{"id": "fake", )" + good_meta + "}]}", stream);
            QSignalSpy failed(window_->chat(), &ChatController::failed);
            window_->chat_view()->input()->setPlainText(QStringLiteral("Hello"));
            QTest::mouseClick(window_->chat_view()->send_button(), Qt::LeftButton);
            QVERIFY(wait_for(failed, 1));
            QVERIFY2(failed.at(0).at(0).toString().contains(why), qPrintable(failed.at(0).at(0).toString().left(300)));
            QVERIFY(window_->chat_view()->send_button()->isEnabled());
        }
    }
};

QTEST_MAIN(TestUiRemote)
#include "test_ui_remote.moc"
