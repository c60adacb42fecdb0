// A bounded load test on loopback: 8 concurrent clients x 25 requests mixing streams, whole replies, seeds and a
// mid-stream disconnect per client, against a server with 4 slots. Zero lost or garbled responses; every seeded
// response identical to the same request run alone; the disconnects cancelled; the server answering afterwards.
#include <httplib.h>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QtTest>
#include <atomic>
#include <mutex>
#include <thread>

#include "../test_support.h"
#include "server_process.h"

using namespace colibri::test;

namespace {

const QString kDemo = QStringLiteral(COLIBRI_BUILD_DIR "/demo/demo.bin");
constexpr int kClients = 8, kRequests = 25, kSeeds = 6;

struct Outcome {
    bool ok = false;
    QString text, finish, problem;
    int completion_tokens = -1;
};

// The request of client c's i-th call: kinds rotate so that every client mixes them.
enum class Kind { SeededWhole, SeededStream, GreedyWhole, Stream, Disconnect };
Kind kind_of(int c, int i) {
    if (i == 7) return Kind::Disconnect;
    switch ((c + i) % 4) {
        case 0: return Kind::SeededWhole;
        case 1: return Kind::SeededStream;
        case 2: return Kind::GreedyWhole;
        default: return Kind::Stream;
    }
}

std::string seeded_body(int seed, bool stream) {
    return "{\"model\":\"demo\",\"messages\":[{\"role\":\"user\",\"content\":\"Question number " + std::to_string(seed) +
           "\"}],\"max_tokens\":" + std::to_string(6 + seed % 5) + ",\"seed\":" + std::to_string(1000 + seed) +
           ",\"temperature\":0.9,\"top_p\":0.95" + (stream ? ",\"stream\":true,\"stream_options\":{\"include_usage\":true}" : "") + "}";
}

// One request; whole replies are parsed as JSON, streams as SSE (every chunk JSON, [DONE] last, content joined).
Outcome run(int port, const std::string& body, bool stream, int drop_after_chunks = -1) {
    httplib::Client client("127.0.0.1", port);
    client.set_read_timeout(300, 0);
    client.set_write_timeout(30, 0);
    Outcome o;
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/chat/completions";
    req.body = body;
    req.set_header("Content-Type", "application/json");
    std::string received;
    int chunks = 0;
    if (stream) {
        req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
            received.append(data, n);
            chunks += static_cast<int>(std::count(data, data + n, '\n')) / 2;
            return drop_after_chunks < 0 || chunks < drop_after_chunks;
        };
    }
    auto res = client.send(req);
    if (drop_after_chunks >= 0) {
        o.ok = chunks >= drop_after_chunks;
        if (!o.ok) o.problem = "the dropped stream ended before it was dropped";
        return o;
    }
    if (!res) {
        o.problem = QStringLiteral("no response: %1").arg(httplib::to_string(res.error()).c_str());
        return o;
    }
    if (res->status != 200) {
        o.problem = QStringLiteral("status %1: %2").arg(res->status).arg(QString::fromStdString(res->body));
        return o;
    }
    if (!stream) {
        const QJsonObject j = QJsonDocument::fromJson(QByteArray::fromStdString(res->body)).object();
        const QJsonObject choice = j["choices"].toArray()[0].toObject();
        if (j["object"].toString() != "chat.completion" || !choice["message"].toObject()["content"].isString()) {
            o.problem = "garbled reply: " + QString::fromStdString(res->body);
            return o;
        }
        o.text = choice["message"].toObject()["content"].toString();
        o.finish = choice["finish_reason"].toString();
        o.completion_tokens = j["usage"].toObject()["completion_tokens"].toInt(-1);
        o.ok = true;
        return o;
    }
    const QList<QByteArray> lines = QByteArray::fromStdString(received).split('\n');
    QList<QByteArray> data;
    for (const QByteArray& l : lines)
        if (l.startsWith("data: ")) data << l.mid(6);
    if (data.isEmpty() || data.last() != "[DONE]" || data.count("[DONE]") != 1) {
        o.problem = "the stream does not end with one [DONE]: " + QString::fromStdString(received).right(300);
        return o;
    }
    for (int i = 0; i + 1 < data.size(); ++i) {
        const QJsonObject c = QJsonDocument::fromJson(data[i]).object();
        if (c.isEmpty() || c["object"].toString() != "chat.completion.chunk") {
            o.problem = "garbled chunk: " + QString::fromUtf8(data[i]);
            return o;
        }
        const QJsonArray choices = c["choices"].toArray();
        if (!choices.isEmpty()) {
            o.text += choices[0].toObject()["delta"].toObject()["content"].toString();
            if (!choices[0].toObject()["finish_reason"].isNull()) o.finish = choices[0].toObject()["finish_reason"].toString();
        }
        if (c.contains("usage")) o.completion_tokens = c["usage"].toObject()["completion_tokens"].toInt(-1);
    }
    o.ok = !o.finish.isEmpty();
    if (!o.ok) o.problem = "the stream has no finish_reason";
    return o;
}

}  // namespace

class TestServerLoad : public QObject {
    Q_OBJECT

private slots:
    void eight_clients_times_twenty_five_requests() {
        QVERIFY2(QFile::exists(kDemo), "the build did not make the demo model");
        ServerProcess server;
        QVERIFY2(server.start({"-m", kDemo, "--slots", "4", "-c", "512", "-t", "2", "--quiet"}), qPrintable(server.error()));
        const int port = server.port();

        // Each seeded request alone first: the reference its loaded runs must reproduce.
        std::vector<Outcome> alone(kSeeds);
        for (int s = 0; s < kSeeds; ++s) {
            alone[s] = run(port, seeded_body(s, false), false);
            QVERIFY2(alone[s].ok, qPrintable(alone[s].problem));
        }

        std::mutex mutex;
        QStringList problems;
        std::atomic<int> done{0}, dropped{0}, compared{0};
        std::vector<std::thread> clients;
        for (int c = 0; c < kClients; ++c) {
            clients.emplace_back([&, c] {
                for (int i = 0; i < kRequests; ++i) {
                    const Kind k = kind_of(c, i);
                    const int seed = (c * kRequests + i) % kSeeds;
                    Outcome o;
                    switch (k) {
                        case Kind::SeededWhole: o = run(port, seeded_body(seed, false), false); break;
                        case Kind::SeededStream: o = run(port, seeded_body(seed, true), true); break;
                        case Kind::GreedyWhole:
                            o = run(port, R"({"model":"demo","messages":[{"role":"user","content":"Greedy )" + std::to_string(i) +
                                              R"("}],"max_tokens":5,"temperature":0})", false);
                            break;
                        case Kind::Stream:
                            o = run(port, R"({"model":"demo","messages":[{"role":"user","content":"Stream )" + std::to_string(c) +
                                              R"("}],"max_tokens":8,"stream":true})", true);
                            break;
                        case Kind::Disconnect:
                            o = run(port, R"({"model":"demo","messages":[{"role":"user","content":"Long"}],"max_tokens":300,"ignore_eos":true,"stream":true})",
                                    true, 3);
                            ++dropped;
                            break;
                    }
                    std::lock_guard lock(mutex);
                    if (!o.ok) {
                        problems << QStringLiteral("client %1 request %2: %3").arg(c).arg(i).arg(o.problem);
                    } else if (k == Kind::SeededWhole || k == Kind::SeededStream) {
                        ++compared;
                        if (o.text != alone[seed].text || o.finish != alone[seed].finish || o.completion_tokens != alone[seed].completion_tokens)
                            problems << QStringLiteral("client %1 request %2 (seed %3): '%4' (%5 tokens) differs from '%6' (%7) alone")
                                            .arg(c).arg(i).arg(seed).arg(o.text).arg(o.completion_tokens).arg(alone[seed].text)
                                            .arg(alone[seed].completion_tokens);
                    }
                    ++done;
                }
            });
        }
        for (auto& t : clients) t.join();
        QVERIFY2(problems.isEmpty(), qPrintable(problems.join('\n')));
        QCOMPARE(done.load(), kClients * kRequests);
        QVERIFY(compared.load() >= kClients * kRequests / 3);
        qInfo("%d requests, %d compared with the same request alone, %d dropped mid-stream", done.load(), compared.load(), dropped.load());

        // Still answering: health, and a seeded request gives its reference again.
        httplib::Client client("127.0.0.1", port);
        auto health = client.Get("/health");
        QVERIFY(health && health->status == 200);
        const Outcome again = run(port, seeded_body(0, false), false);
        QVERIFY2(again.ok && again.text == alone[0].text, qPrintable(again.problem + again.text));
        // The dropped streams were cancelled, not run to their 300 tokens (the server notices within a step or two).
        static const QRegularExpression cancelled(QStringLiteral("outcome=\"cancelled\"\\} (\\d+)"));
        int seen = -1;
        QElapsedTimer clock;
        clock.start();
        while (seen != dropped.load() && clock.elapsed() < 60000) {
            auto metrics = client.Get("/metrics");
            QVERIFY(metrics && metrics->status == 200);
            const auto m = cancelled.match(QString::fromStdString(metrics->body));
            QVERIFY(m.hasMatch());
            seen = m.captured(1).toInt();
            if (seen != dropped.load()) QTest::qWait(200);
        }
        QCOMPARE(seen, dropped.load());
        // The slots were decoded together: forward passes evaluated several sequences' tokens at once.
        auto metrics = client.Get("/metrics");
        QVERIFY(metrics && metrics->status == 200);
        auto counter = [&](const char* name) {
            const QRegularExpression re(QStringLiteral("\\n%1\\{[^}]*\\} (\\d+)").arg(name));
            const auto m = re.match(QString::fromStdString(metrics->body));
            return m.hasMatch() ? m.captured(1).toDouble() : -1.0;
        };
        const double passes = counter("colibri_forward_passes_total"), batched = counter("colibri_batched_tokens_total");
        QVERIFY2(passes > 0 && batched / passes > 1.5, qPrintable(QStringLiteral("%1 tokens in %2 passes").arg(batched).arg(passes)));
        qInfo("%.0f tokens in %.0f forward passes: %.2f per pass", batched, passes, batched / passes);
        QCOMPARE(server.stop(), 0);
    }
};

QTEST_GUILESS_MAIN(TestServerLoad)
#include "test_server_load.moc"
