// `colibri serve` over HTTP, driven by curl (a client no one here wrote) and by hand-written requests on a raw
// socket: the endpoints, streaming (SSE, [DONE], include_usage), sampling parameters, logprobs, usage and
// timings, /health and /metrics, the API key, and every malformed request: bad JSON, wrong types, a huge
// max_tokens, an unknown model, a 10 MB body and a slowloris sender each get their 4xx or a timeout, never a
// 500 or a crash.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "../test_support.h"
#include "server_process.h"

using namespace colibri::test;

namespace {

const QString kDemo = QStringLiteral(COLIBRI_BUILD_DIR "/demo/demo.bin");

struct Reply {
    int status = 0;
    QByteArray body;
    QJsonObject json() const { return QJsonDocument::fromJson(body).object(); }
    QString error_type() const { return json()["error"].toObject()["type"].toString(); }
    QString error_code() const { return json()["error"].toObject()["code"].toString(); }
    QString error_param() const { return json()["error"].toObject()["param"].toString(); }
};

// One curl call; the status is the last line curl writes (-w).
Reply curl(const QString& url, const QStringList& extra, const QByteArray& body = {}) {
    QProcess p;
    QStringList args{"-sS", "-N", "--max-time", "300", "-w", "\n%{http_code}"};
    if (!body.isNull()) args << "-H" << "Content-Type: application/json" << "--data-binary" << "@-";
    p.start(QStringLiteral("curl"), args + extra + QStringList{url});
    p.waitForStarted();
    if (!body.isNull()) p.write(body);
    p.closeWriteChannel();
    p.waitForFinished(330000);
    QByteArray out = p.readAllStandardOutput();
    const qsizetype nl = out.lastIndexOf('\n');
    Reply r;
    r.status = out.mid(nl + 1).trimmed().toInt();
    r.body = out.left(nl);
    return r;
}

// The data lines of an SSE body, in order.
QList<QByteArray> events(const QByteArray& body) {
    QList<QByteArray> out;
    for (const QByteArray& line : body.split('\n'))
        if (line.startsWith("data: ")) out << line.mid(6);
    return out;
}

// `prefix`, then `filler` repeated `n` times, then `suffix`, compressed as gzip (or zlib, "deflate") without
// ever holding the whole text: a body of a few hundred kB that inflates to n bytes.
QByteArray compressed(const QByteArray& prefix, char filler, size_t n, const QByteArray& suffix, bool gzip = true) {
    z_stream z{};
    deflateInit2(&z, 9, Z_DEFLATED, gzip ? 31 : 15, 9, Z_DEFAULT_STRATEGY);
    QByteArray out;
    const QByteArray block(1 << 16, filler);
    auto feed = [&](const QByteArray& in, int flush) {
        z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.constData()));
        z.avail_in = static_cast<uInt>(in.size());
        do {
            char buf[1 << 16];
            z.next_out = reinterpret_cast<Bytef*>(buf);
            z.avail_out = sizeof buf;
            deflate(&z, flush);
            out.append(buf, qsizetype(sizeof buf - z.avail_out));
        } while (z.avail_out == 0);
    };
    feed(prefix, Z_NO_FLUSH);
    for (size_t done = 0; done < n; done += size_t(block.size())) feed(block.left(qsizetype(std::min<size_t>(block.size(), n - done))), Z_NO_FLUSH);
    feed(suffix, Z_FINISH);
    deflateEnd(&z);
    return out;
}

// A raw request's status line, headers and body, read until the server closes the connection.
struct RawReply {
    std::string text;
    bool closed = false;
    bool has(const std::string& s) const { return text.find(s) != std::string::npos; }
};
RawReply raw_exchange(int port, const std::string& request, int timeout_ms = 20000) {
    RawConnection c(port);
    RawReply r;
    if (!c.ok() || !c.send(request)) return r;
    r.text = c.receive(timeout_ms, &r.closed);
    return r;
}

}  // namespace

class TestServerHttp : public QObject {
    Q_OBJECT
    ServerProcess server_;
    QTemporaryDir dir_;

    Reply post(const QString& path, const QByteArray& body, const QStringList& extra = {}) { return curl(server_.url() + path, extra, body); }
    Reply get(const QString& path, const QStringList& extra = {}) { return curl(server_.url() + path, extra); }
    QByteArray chat(const QString& message, const QString& more = {}) {
        return QStringLiteral(R"({"model":"demo","messages":[{"role":"user","content":"%1"}]%2})").arg(message, more).toUtf8();
    }

    int cancelled_count() {
        static const QRegularExpression cancelled(QStringLiteral("outcome=\"cancelled\"\\} (\\d+)"));
        const auto m = cancelled.match(QString::fromUtf8(get("/metrics").body));
        return m.hasMatch() ? m.captured(1).toInt() : -1;
    }

private slots:
    void initTestCase() {
        QVERIFY2(QFile::exists(kDemo), "the build did not make the demo model");
        QVERIFY2(QProcess::execute(QStringLiteral("curl"), {"--version"}) == 0, "curl is not installed (tools/install-deps.sh)");
        QVERIFY2(server_.start({"-m", kDemo, "--slots", "2", "-c", "512", "-t", "2", "--timeout", "3", "--max-body", "1048576"}),
                 qPrintable(server_.error()));
    }
    void cleanupTestCase() { QCOMPARE(server_.stop(), 0); }

    void models_and_health() {
        const Reply models = get("/v1/models");
        QCOMPARE(models.status, 200);
        const QJsonArray data = models.json()["data"].toArray();
        QCOMPARE(data.size(), 1);
        QCOMPARE(data[0].toObject()["id"].toString(), QStringLiteral("demo"));
        QCOMPARE(data[0].toObject()["object"].toString(), QStringLiteral("model"));
        const Reply health = get("/health");
        QCOMPARE(health.status, 200);
        QCOMPARE(health.json()["status"].toString(), QStringLiteral("ok"));
    }

    void chat_whole_reply_with_usage_and_timings() {
        const Reply r = post("/v1/chat/completions", chat("Hello", R"(,"max_tokens":6,"seed":3,"temperature":0.8,"top_k":40,"top_p":0.9,"min_p":0.05,"repeat_penalty":1.1)"));
        QCOMPARE(r.status, 200);
        const QJsonObject o = r.json();
        QCOMPARE(o["object"].toString(), QStringLiteral("chat.completion"));
        QVERIFY(o["id"].toString().startsWith("chatcmpl-"));
        QCOMPARE(o["model"].toString(), QStringLiteral("demo"));
        const QJsonObject choice = o["choices"].toArray()[0].toObject();
        QCOMPARE(choice["message"].toObject()["role"].toString(), QStringLiteral("assistant"));
        QVERIFY(choice["message"].toObject()["content"].isString());
        const QString finish = choice["finish_reason"].toString();
        QVERIFY2(finish == "stop" || finish == "length", qPrintable(finish));
        const QJsonObject usage = o["usage"].toObject();
        QVERIFY(usage["prompt_tokens"].toInt() > 0);
        QVERIFY(usage["completion_tokens"].toInt() >= 1 && usage["completion_tokens"].toInt() <= 6);
        QCOMPARE(usage["total_tokens"].toInt(), usage["prompt_tokens"].toInt() + usage["completion_tokens"].toInt());
        const QJsonObject t = o["timings"].toObject();
        QCOMPARE(t["predicted_n"].toInt(), usage["completion_tokens"].toInt());
        QVERIFY(t["prompt_ms"].toDouble() > 0);
        QCOMPARE(t["prompt_n"].toInt() + t["cache_n"].toInt(), usage["prompt_tokens"].toInt());
    }

    void stream_matches_the_whole_reply() {
        // The same seeded request, streamed and not: the deltas add up to the whole reply; the stream starts with
        // the role, ends with a finish_reason chunk, the usage chunk (include_usage) and [DONE].
        const QByteArray more = R"(,"max_tokens":12,"seed":11)";
        const Reply whole = post("/v1/chat/completions", chat("Tell me about birds", more));
        QCOMPARE(whole.status, 200);
        const Reply stream = post("/v1/chat/completions", chat("Tell me about birds", more + R"(,"stream":true,"stream_options":{"include_usage":true})"));
        QCOMPARE(stream.status, 200);
        const QList<QByteArray> ev = events(stream.body);
        QVERIFY2(ev.size() >= 4, stream.body.constData());
        QCOMPARE(ev.last(), QByteArray("[DONE]"));
        const QJsonObject first = QJsonDocument::fromJson(ev[0]).object();
        QCOMPARE(first["object"].toString(), QStringLiteral("chat.completion.chunk"));
        QCOMPARE(first["choices"].toArray()[0].toObject()["delta"].toObject()["role"].toString(), QStringLiteral("assistant"));
        QString text, finish;
        int token_chunks = 0;
        for (int i = 0; i + 2 < ev.size(); ++i) {
            const QJsonObject c = QJsonDocument::fromJson(ev[i]).object();
            QVERIFY2(!c.isEmpty(), ev[i].constData());
            const QJsonObject choice = c["choices"].toArray()[0].toObject();
            text += choice["delta"].toObject()["content"].toString();
            if (!choice["finish_reason"].isNull()) finish = choice["finish_reason"].toString();
            else if (i > 0) ++token_chunks;
        }
        const QJsonObject usage_chunk = QJsonDocument::fromJson(ev[ev.size() - 2]).object();
        QVERIFY(usage_chunk["choices"].toArray().isEmpty());
        const QJsonObject whole_choice = whole.json()["choices"].toArray()[0].toObject();
        QCOMPARE(text, whole_choice["message"].toObject()["content"].toString());
        QCOMPARE(finish, whole_choice["finish_reason"].toString());
        QCOMPARE(usage_chunk["usage"].toObject()["completion_tokens"].toInt(), whole.json()["usage"].toObject()["completion_tokens"].toInt());
        // One chunk per generated token (its text may be empty: part of a character), the end-of-turn one aside.
        const int tokens = usage_chunk["usage"].toObject()["completion_tokens"].toInt();
        QCOMPARE(token_chunks, finish == QStringLiteral("stop") ? tokens - 1 : tokens);
    }

    void completions_with_text_ids_and_legacy_logprobs() {
        Reply r = post("/v1/completions", R"({"model":"demo","prompt":"Once upon a time","max_tokens":5,"seed":1,"logprobs":2})");
        QCOMPARE(r.status, 200);
        QJsonObject o = r.json();
        QCOMPARE(o["object"].toString(), QStringLiteral("text_completion"));
        const QJsonObject choice = o["choices"].toArray()[0].toObject();
        QVERIFY(choice["text"].isString());
        const QJsonObject lp = choice["logprobs"].toObject();
        const QJsonArray tokens = lp["tokens"].toArray(), logprobs = lp["token_logprobs"].toArray(), top = lp["top_logprobs"].toArray();
        QVERIFY(!tokens.isEmpty());
        QCOMPARE(logprobs.size(), tokens.size());
        QCOMPARE(top.size(), tokens.size());
        for (int i = 0; i < tokens.size(); ++i) {
            QVERIFY(logprobs[i].toDouble() <= 0.0);
            QCOMPARE(top[i].toObject().size() <= 2, true);
        }
        // A prompt of token ids works without the tokenizer.
        r = post("/v1/completions", R"({"model":"demo","prompt":[1,2,3,4],"max_tokens":3,"temperature":0})");
        QCOMPARE(r.status, 200);
        QVERIFY(r.json()["usage"].toObject()["prompt_tokens"].toInt() == 4);
    }

    void chat_logprobs_and_top_logprobs() {
        const Reply r = post("/v1/chat/completions", chat("Hi", R"(,"max_tokens":4,"temperature":0,"logprobs":true,"top_logprobs":3,"ignore_eos":true)"));
        QCOMPARE(r.status, 200);
        const QJsonArray content = r.json()["choices"].toArray()[0].toObject()["logprobs"].toObject()["content"].toArray();
        QCOMPARE(content.size(), 4);
        for (const auto& v : content) {
            const QJsonObject e = v.toObject();
            QVERIFY(e["logprob"].toDouble() <= 0.0);
            QVERIFY(e["bytes"].isArray());
            const QJsonArray top = e["top_logprobs"].toArray();
            QCOMPARE(top.size(), 3);
            // Greedy: the chosen token is the most likely one.
            QCOMPARE(top[0].toObject()["logprob"].toDouble(), e["logprob"].toDouble());
            QVERIFY(top[0].toObject()["logprob"].toDouble() >= top[1].toObject()["logprob"].toDouble());
        }
    }

    void seeds_reproduce_and_stop_strings_cut() {
        const QByteArray body = R"({"model":"demo","prompt":"The hummingbird","max_tokens":24,"seed":5,"ignore_eos":true})";
        const Reply a = post("/v1/completions", body), b = post("/v1/completions", body);
        QCOMPARE(a.status, 200);
        const QString text = a.json()["choices"].toArray()[0].toObject()["text"].toString();
        QCOMPARE(b.json()["choices"].toArray()[0].toObject()["text"].toString(), text);
        // A stop string taken from the middle of that reply ends the same request there.
        QVERIFY2(text.size() >= 6, qPrintable(text));
        qsizetype at = text.size() / 2;
        if (text[at].isLowSurrogate()) ++at;
        qsizetype len = 3;
        if (text[at + len - 1].isHighSurrogate()) ++len;
        const QString stop = text.mid(at, len);
        QJsonObject req = QJsonDocument::fromJson(body).object();
        req["stop"] = QJsonArray{stop};
        const QByteArray stopped_body = QJsonDocument(req).toJson(QJsonDocument::Compact);
        const Reply c = post("/v1/completions", stopped_body);
        QCOMPARE(c.status, 200);
        const QJsonObject choice = c.json()["choices"].toArray()[0].toObject();
        QCOMPARE(choice["finish_reason"].toString(), QStringLiteral("stop"));
        QCOMPARE(choice["text"].toString(), text.left(text.indexOf(stop)));
    }

    // A trace extension's positions 0.. with the request's prompt first, and at each one the routing that
    // `colibri route` gives for the same tokens outside the server.
    static void check_trace(const QJsonArray& trace, const QString& prompt, int generated) {
        QCOMPARE(trace.size(), int(prompt.count(',')) + 1 + generated - 1);  // every generated token but the last
        QStringList ids;
        for (int i = 0; i < trace.size(); ++i) {
            const QJsonObject t = trace[i].toObject();
            QCOMPARE(t["position"].toInt(), i);
            QVERIFY(!t["timings"].toArray().isEmpty());
            ids << QString::number(t["token"].toInt());
        }
        QVERIFY(ids.join(',').startsWith(prompt + ','));
        QProcess route;
        route.start(QStringLiteral(COLIBRI_CLI), {"route", "-m", kDemo, "-t", "1", "--tokens", ids.join(','), "--json"});
        QVERIFY(route.waitForFinished(60000));
        QCOMPARE(route.exitCode(), 0);
        const QJsonArray layers = QJsonDocument::fromJson(route.readAllStandardOutput()).object()["layers"].toArray();
        QVERIFY(!layers.isEmpty());
        for (int i = 0; i < trace.size(); ++i) {
            const QJsonArray routing = trace[i].toObject()["routing"].toArray();
            QCOMPARE(routing.size(), layers.size());
            for (int l = 0; l < layers.size(); ++l) {
                const QJsonObject got = routing[l].toObject(), want = layers[l].toObject();
                QCOMPARE(got["layer"].toInt(), want["layer"].toInt());
                QCOMPARE(got["experts"].toArray(), want["experts"].toArray()[i].toArray());
                const QJsonArray gw = got["weights"].toArray(), ww = want["weights"].toArray()[i].toArray();
                QCOMPARE(gw.size(), ww.size());
                for (int k = 0; k < gw.size(); ++k) QCOMPARE(float(gw[k].toDouble()), float(ww[k].toDouble()));
            }
        }
    }

    void trace_extension_matches_colibri_route() {
        // "colibri": {"trace": true} on a whole reply and on a stream (whose chunks carry the positions evaluated
        // since the previous one). Each prompt starts with a token no other request uses, so no slot holds a
        // prefix of it and every position is traced.
        const QString whole_prompt = QStringLiteral("3999,17,250,1023,77,3"), stream_prompt = QStringLiteral("3998,17,250,1023,77,3");
        auto body = [](const QString& prompt, const char* more) {
            return QStringLiteral(R"({"model":"demo","prompt":[%1],"max_tokens":5,"temperature":0,"ignore_eos":true,"colibri":{"trace":true}%2})")
                .arg(prompt, more).toUtf8();
        };
        const Reply whole = post("/v1/completions", body(whole_prompt, ""));
        QCOMPARE(whole.status, 200);
        check_trace(whole.json()["colibri"].toObject()["trace"].toArray(), whole_prompt, 5);
        if (QTest::currentTestFailed()) return;

        const Reply stream = post("/v1/completions", body(stream_prompt, R"(,"stream":true)"));
        QCOMPARE(stream.status, 200);
        QJsonArray streamed;
        int chunks_with_trace = 0;
        for (const QByteArray& e : events(stream.body)) {
            if (e == "[DONE]") continue;
            const QJsonArray part = QJsonDocument::fromJson(e).object()["colibri"].toObject()["trace"].toArray();
            chunks_with_trace += part.isEmpty() ? 0 : 1;
            for (const QJsonValue& t : part) streamed.append(t);
        }
        QVERIFY(chunks_with_trace >= 2);  // the prompt's positions with the first token, then one per token
        check_trace(streamed, stream_prompt, 5);
    }

    void a_burst_of_connections_is_accepted_at_once() {
        // 64 clients connecting at the same moment all complete the TCP handshake at once. With httplib's backlog
        // of 5, SYNs beyond it were dropped and those clients waited a second for the retransmission.
        constexpr int kClients = 64;
        std::vector<int64_t> ms(kClients, -1);
        std::atomic<int> ready{0};
        std::vector<std::thread> threads;
        for (int i = 0; i < kClients; ++i)
            threads.emplace_back([&, i] {
                ++ready;
                while (ready.load() < kClients) std::this_thread::yield();
                QElapsedTimer clock;
                clock.start();
                RawConnection c(server_.port());
                if (c.ok()) ms[size_t(i)] = clock.elapsed();
            });
        for (auto& t : threads) t.join();
        const int64_t slowest = *std::max_element(ms.begin(), ms.end());
        QVERIFY2(std::find(ms.begin(), ms.end(), -1) == ms.end(), "a connection failed");
        QVERIFY2(slowest < 900, qPrintable(QStringLiteral("the slowest connect took %1 ms").arg(slowest)));
        QCOMPARE(get("/health").status, 200);
    }

    void metrics_in_prometheus_text() {
        post("/v1/chat/completions", chat("count", R"(,"max_tokens":2)"));
        const Reply m = get("/metrics");
        QCOMPARE(m.status, 200);
        const QString text = QString::fromUtf8(m.body);
        for (const char* name : {"colibri_requests_total", "colibri_generated_tokens_total", "colibri_queue_depth", "colibri_decode_tokens_per_second",
                                 "colibri_expert_activations_total", "colibri_prompt_tokens_total"})
            QVERIFY2(text.contains(QStringLiteral("# TYPE %1 ").arg(name)), name);
        QVERIFY(text.contains(QStringLiteral("colibri_requests_total{endpoint=\"/v1/chat/completions\",status=\"200\"}")));
        static const QRegularExpression expert(QStringLiteral("colibri_expert_activations_total\\{model=\"demo\",layer=\"\\d+\",expert=\"\\d+\"\\} [1-9]"));
        QVERIFY(expert.match(text).hasMatch());
        // Every sample line is NAME{labels} VALUE or NAME VALUE.
        static const QRegularExpression sample(QStringLiteral("^[a-z_]+(\\{[^}]*\\})? [-+0-9.eE]+$"));
        for (const QString& line : text.split('\n', Qt::SkipEmptyParts))
            if (!line.startsWith('#')) QVERIFY2(sample.match(line).hasMatch(), qPrintable(line));
    }

    // ---- malformed requests: one test each ----

    void bad_json_is_400() {
        const Reply r = post("/v1/chat/completions", R"({"model":"demo","messages":[{"role":"user","content":"hi"})");
        QCOMPARE(r.status, 400);
        QCOMPARE(r.error_type(), QStringLiteral("invalid_request_error"));
        QVERIFY(r.json()["error"].toObject()["message"].toString().contains("JSON"));
        QCOMPARE(post("/v1/chat/completions", "[1,2,3]").status, 400);
        QCOMPARE(post("/v1/chat/completions", QByteArray(100000, '[')).status, 400);  // nesting bound
        QCOMPARE(post("/v1/chat/completions", QByteArray("")).status, 400);
    }

    void wrong_types_are_400_naming_the_field() {
        struct Case {
            const char* body;
            const char* param;
        };
        for (const Case& c : {Case{R"({"model":"demo","messages":"hi"})", "messages"},
                              Case{R"({"model":"demo","messages":[{"role":"user","content":"hi"}],"max_tokens":"ten"})", "max_tokens"},
                              Case{R"({"model":"demo","messages":[{"role":"user","content":"hi"}],"temperature":"hot"})", "temperature"},
                              Case{R"({"model":"demo","messages":[{"role":"user","content":"hi"}],"temperature":5})", "temperature"},
                              Case{R"({"model":"demo","messages":[{"role":"user","content":"hi"}],"stream":"yes"})", "stream"},
                              Case{R"({"model":"demo","messages":[{"role":"user","content":"hi"}],"stop":[1,2]})", "stop"},
                              Case{R"({"model":"demo","messages":[{"role":"user","content":"hi"}],"top_logprobs":50,"logprobs":true})", "top_logprobs"},
                              Case{R"({"model":"demo","messages":[{"role":"wizard","content":"hi"}]})", "messages[0].role"},
                              Case{R"({"model":"demo","messages":[{"role":"user","content":{"a":1}}]})", "messages[0].content"},
                              Case{R"({"model":"demo","messages":[]})", "messages"},
                              Case{R"({"model":7,"messages":[{"role":"user","content":"hi"}]})", "model"},
                              Case{R"({"model":"demo","messages":[{"role":"user","content":"hi"}],"n":3})", "n"},
                              Case{R"({"model":"demo","prompt":{"x":1}})", "prompt"}}) {
            const QString path = QByteArray(c.body).contains("prompt") ? "/v1/completions" : "/v1/chat/completions";
            const Reply r = post(path, c.body);
            QVERIFY2(r.status == 400, c.body);
            QCOMPARE(r.error_type(), QStringLiteral("invalid_request_error"));
            QVERIFY2(r.error_param() == c.param, qPrintable(r.error_param() + " for " + c.body));
        }
    }

    void huge_max_tokens_is_400() {
        for (const char* n : {"1000000", "9000000000000000000", "0", "-5"}) {
            const Reply r = post("/v1/chat/completions", chat("hi", QStringLiteral(R"(,"max_tokens":%1)").arg(n)));
            QVERIFY2(r.status == 400, n);
            QCOMPARE(r.error_param(), QStringLiteral("max_tokens"));
        }
        const Reply r = post("/v1/chat/completions", chat("hi", R"(,"max_tokens":1000000)"));
        QCOMPARE(r.error_code(), QStringLiteral("context_length_exceeded"));
        QVERIFY(r.json()["error"].toObject()["message"].toString().contains("512"));
    }

    void unknown_model_is_404() {
        const Reply r = post("/v1/chat/completions", R"({"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]})");
        QCOMPARE(r.status, 404);
        QCOMPARE(r.error_code(), QStringLiteral("model_not_found"));
        QCOMPARE(post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"hi"}]})").status, 400);  // no model
        const Reply route = get("/v1/engines");
        QCOMPARE(route.status, 404);
        QCOMPARE(route.error_type(), QStringLiteral("invalid_request_error"));
    }

    void body_of_10_mb_is_413() {
        // (Plain literals: moc misreads a raw string that ends in a brace.)
        QByteArray big = "{\"model\":\"demo\",\"messages\":[{\"role\":\"user\",\"content\":\"";
        big += QByteArray(10 << 20, 'a');
        big += "\"}]}";
        const Reply r = post("/v1/chat/completions", big);
        QCOMPARE(r.status, 413);
        QCOMPARE(r.error_type(), QStringLiteral("invalid_request_error"));
        QCOMPARE(get("/health").status, 200);
    }

    void slowloris_is_cut_off_and_others_are_served() {
        // One byte of headers per second: the request must arrive whole within --timeout (3 s), so the server
        // closes the connection; meanwhile other requests are answered.
        RawConnection slow(server_.port());
        QVERIFY(slow.ok());
        QVERIFY(slow.send("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"));
        QElapsedTimer clock;
        clock.start();
        bool closed = false;
        const std::string trickle = "X-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
        for (size_t i = 0; i < trickle.size() && !closed; ++i) {
            slow.send(trickle.substr(i, 1));
            slow.receive(1000, &closed);
            if (i == 1) QCOMPARE(get("/health").status, 200);
        }
        QVERIFY2(closed, "the server kept a slowloris connection open");
        QVERIFY2(clock.elapsed() < 20000, qPrintable(QString::number(clock.elapsed())));
        // A client that connects and sends nothing is closed too.
        RawConnection silent(server_.port());
        silent.receive(15000, &closed);
        QVERIFY(closed);
    }

    void api_key_is_required_when_set() {
        ServerProcess keyed;
        QVERIFY2(keyed.start({"-m", kDemo, "--slots", "1", "-c", "256", "-t", "1", "--api-key", "s3cret", "--api-key", "other"}), qPrintable(keyed.error()));
        const QString url = keyed.url();
        const QByteArray body = chat("hi", R"(,"max_tokens":1)");
        Reply r = curl(url + "/v1/chat/completions", {}, body);
        QCOMPARE(r.status, 401);
        QCOMPARE(r.error_code(), QStringLiteral("invalid_api_key"));
        r = curl(url + "/v1/chat/completions", {"-H", "Authorization: Bearer wrong"}, body);
        QCOMPARE(r.status, 401);
        QCOMPARE(curl(url + "/v1/models", {}).status, 401);
        QCOMPARE(curl(url + "/health", {}).status, 200);
        r = curl(url + "/v1/chat/completions", {"-H", "Authorization: Bearer s3cret"}, body);
        QCOMPARE(r.status, 200);
        QCOMPARE(curl(url + "/v1/models", {"-H", "Authorization: Bearer other"}).status, 200);
        QCOMPARE(curl(url + "/v1/models", {"-H", "Authorization: Bearer s3cre"}).status, 401);
        QCOMPARE(curl(url + "/v1/models", {"-H", "Authorization: s3cret"}).status, 401);
        // Without the key nothing tells which paths exist; and unknown paths stay one label on /metrics.
        QCOMPARE(curl(url + "/v1/nothing/" + QString::number(1), {}).status, 401);
        QCOMPARE(curl(url + "/v1/nothing/" + QString::number(2), {}).status, 401);
        const QString metrics = QString::fromUtf8(curl(url + "/metrics", {"-H", "Authorization: Bearer s3cret"}).body);
        QVERIFY2(!metrics.contains("/v1/nothing"), qPrintable(metrics));
        QVERIFY(metrics.contains(QStringLiteral("colibri_requests_total{endpoint=\"other\",status=\"401\"} 2")));
        // A refused request of 1.5 MB on a kept-alive connection: the answer arrives whole, says the connection
        // closes, and nothing of the unread body is taken for a next request.
        const std::string big = std::string(R"({"model":"demo","prompt":")") + std::string(1500000, 'a') + "\"" + "}";
        const RawReply refused = raw_exchange(keyed.port(), "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                                            "Content-Length: " + std::to_string(big.size()) + "\r\nConnection: keep-alive\r\n\r\n" + big);
        QVERIFY2(refused.has("HTTP/1.1 401 ") && refused.has("Connection: close\r\n") && refused.has("invalid_api_key"), refused.text.substr(0, 300).c_str());
        QVERIFY(refused.closed);
        QVERIFY2(refused.text.find("HTTP/1.1", 5) == std::string::npos, refused.text.substr(0, 600).c_str());
        QCOMPARE(keyed.stop(), 0);
    }

    static int cached_tokens(const Reply& r) { return r.json()["usage"].toObject()["prompt_tokens_details"].toObject()["cached_tokens"].toInt(-1); }

    void prefix_cache_is_per_api_key() {
        // One slot, two keys: a prompt prefix cached for one key does not serve the other, so no client learns
        // from cached_tokens (or the prompt's time) what another sent. --share-prefix-cache opts in to sharing.
        const QByteArray body = chat("A secret prompt that only alpha knows about, long enough to cache", R"(,"max_tokens":1,"temperature":0)");
        auto as = [&](const ServerProcess& s, const char* key) {
            return curl(s.url() + "/v1/chat/completions", {"-H", QStringLiteral("Authorization: Bearer %1").arg(key)}, body);
        };
        for (bool shared : {false, true}) {
            ServerProcess keyed;
            QStringList args{"-m", kDemo, "--slots", "1", "-c", "256", "-t", "1", "--api-key", "alpha", "--api-key", "beta", "--quiet"};
            if (shared) args << "--share-prefix-cache";
            QVERIFY2(keyed.start(args), qPrintable(keyed.error()));
            const Reply first = as(keyed, "alpha"), again = as(keyed, "alpha"), other = as(keyed, "beta"), other_again = as(keyed, "beta");
            for (const Reply* r : {&first, &again, &other, &other_again}) QCOMPARE(r->status, 200);
            QCOMPARE(cached_tokens(first), 0);
            QVERIFY(cached_tokens(again) > 0);  // reuse within a key
            if (shared) QVERIFY(cached_tokens(other) > 0);
            else QCOMPARE(cached_tokens(other), 0);
            QVERIFY(cached_tokens(other_again) > 0);
            // The same tokens either way.
            QCOMPARE(other.json()["choices"].toArray()[0].toObject()["message"].toObject()["content"].toString(),
                     first.json()["choices"].toArray()[0].toObject()["message"].toObject()["content"].toString());
            QCOMPARE(keyed.stop(), 0);
        }
    }

    // A Gated DeltaNet hybrid (qwen3_next) behind the server: a slot whose KV cache and recurrent states are reused
    // (a prompt that extends the last one, the same prompt again as a regenerate does, an edited earlier turn that
    // rewinds to a state checkpoint) replies token for token as a fresh server that reads the whole prompt does.
    void hybrid_slot_reuse_gives_what_a_fresh_server_gives() {
        const QString model = dir_.filePath("qwen3_next.bin");
        const CliResult converted = run_cli({"convert", reference("hf/qwen3_next/model"), "-o", model, "-q"});
        QVERIFY2(converted.exit_code == 0, converted.err.constData());
        const QStringList args{"-m", model, "--slots", "1", "-c", "512", "-t", "1", "--quiet"};
        struct Turn {
            QList<int> tokens;
            int cached = -1;
        };
        // Greedy, 12 tokens; the ids come from the stream's "colibri" extension (this model has no tokenizer).
        auto ask = [](const ServerProcess& s, const QList<int>& prompt) {
            QStringList ids;
            for (int t : prompt) ids << QString::number(t);
            const QByteArray body = QStringLiteral(R"({"model":"qwen3_next","prompt":[%1],"max_tokens":12,"temperature":0,"ignore_eos":true,)"
                                                   R"("stream":true,"stream_options":{"include_usage":true},"colibri":{"trace":true}})")
                                        .arg(ids.join(',')).toUtf8();
            const Reply r = curl(s.url() + "/v1/completions", {}, body);
            Turn turn;
            if (r.status != 200) return turn;
            for (const QByteArray& e : events(r.body)) {
                if (e == "[DONE]") continue;
                const QJsonObject chunk = QJsonDocument::fromJson(e).object();
                if (chunk.contains("colibri")) turn.tokens << chunk["colibri"].toObject()["token"].toInt(-1);
                if (chunk.contains("usage")) turn.cached = chunk["usage"].toObject()["prompt_tokens_details"].toObject()["cached_tokens"].toInt(-1);
            }
            return turn;
        };
        QList<int> first;
        for (int i = 0; i < 70; ++i) first << 1 + (37 * i) % 4000;  // longer than one prefill chunk of 64
        ServerProcess reused;
        QVERIFY2(reused.start(args), qPrintable(reused.error()));
        const Turn t1 = ask(reused, first);
        QCOMPARE(t1.tokens.size(), 12);
        const QList<int> second = first + t1.tokens + QList<int>{5, 17, 29, 41, 53};
        const QList<int> edited = first.mid(0, 40) + QList<int>{7, 8, 9};
        const Turn t2 = ask(reused, second), t3 = ask(reused, second), t4 = ask(reused, edited);
        QCOMPARE(reused.stop(), 0);
        // What the slot reused: the first turn but its last token (sampled, never evaluated), all of the regenerated
        // prompt but the token that gives the first logits, and the edited turn's 40 unchanged tokens.
        QCOMPARE(t1.cached, 0);
        QCOMPARE(t2.cached, int(first.size()) + 11);
        QCOMPARE(t3.cached, int(second.size()) - 1);
        QCOMPARE(t4.cached, 40);
        QCOMPARE(t3.tokens, t2.tokens);
        for (const auto& [prompt, got] : {std::pair{second, t2}, std::pair{edited, t4}}) {
            ServerProcess fresh;
            QVERIFY2(fresh.start(args), qPrintable(fresh.error()));
            const Turn expected = ask(fresh, prompt);
            QCOMPARE(fresh.stop(), 0);
            QCOMPARE(expected.cached, 0);
            QCOMPARE(expected.tokens.size(), 12);
            QCOMPARE(got.tokens, expected.tokens);
        }
    }

    // "speculate": the same reply as without, greedy and seeded, also while another slot decodes beside it in the
    // same batch; drafts are checked and kept (metrics); a bad value is a 400 naming the field.
    void speculate_gives_the_same_reply() {
        auto metric = [this](const char* name) {
            const QRegularExpression re(QString("%1\\{[^}]*\\} (\\d+)").arg(name));
            const auto m = re.match(QString::fromUtf8(get("/metrics").body));
            return m.hasMatch() ? m.captured(1).toLongLong() : -1;
        };
        const qint64 drafted0 = metric("colibri_speculative_drafted_total"), accepted0 = metric("colibri_speculative_accepted_total");
        QVERIFY(drafted0 >= 0 && accepted0 >= 0);
        const QString prompt = "One two three four five six. One two three four five six. One two three four five six. One two";
        for (const QString& sampling : {QString(R"("temperature":0)"), QString(R"("temperature":1,"seed":9)")}) {
            auto body = [&](const QString& mode) {
                return QStringLiteral(R"({"model":"demo","prompt":"%1","max_tokens":48,"ignore_eos":true,%2,"speculate":"%3"})")
                    .arg(prompt, sampling, mode).toUtf8();
            };
            const Reply plain = post("/v1/completions", body("off"));
            QCOMPARE(plain.status, 200);
            // The speculative request with a plain one beside it in the other slot.
            Reply spec, other;
            std::thread beside([&] { other = post("/v1/completions", body("off")); });
            spec = post("/v1/completions", body("lookup"));
            beside.join();
            QCOMPARE(spec.status, 200);
            const QString text = plain.json()["choices"].toArray()[0].toObject()["text"].toString();
            QCOMPARE(spec.json()["choices"].toArray()[0].toObject()["text"].toString(), text);
            QCOMPARE(other.json()["choices"].toArray()[0].toObject()["text"].toString(), text);
        }
        QVERIFY(metric("colibri_speculative_drafted_total") > drafted0);
        QVERIFY(metric("colibri_speculative_accepted_total") > accepted0);
    }

    void bad_speculate_is_400() {
        for (const char* value : {R"("fast")", R"(3)", R"("LOOKUP")", R"("mtp")"}) {
            const Reply r = post("/v1/chat/completions", chat("hi", QString(R"(,"speculate":%1)").arg(value)));
            QCOMPARE(r.status, 400);
            QCOMPARE(r.error_param(), QStringLiteral("speculate"));
        }
        const Reply mtp = post("/v1/chat/completions", chat("hi", R"(,"speculate":"mtp")"));
        QVERIFY(mtp.json()["error"].toObject()["message"].toString().contains("no multi-token-prediction head"));
    }

    void dropped_stream_is_cancelled_and_the_server_goes_on() {
        // A long stream whose client leaves after the first chunks: the job is cancelled (metrics), and the next
        // requests are served.
        RawConnection c(server_.port());
        QVERIFY(c.ok());
        const std::string body = R"({"model":"demo","messages":[{"role":"user","content":"go"}],"max_tokens":400,"stream":true,"ignore_eos":true})";
        QVERIFY(c.send(http_request("POST", "/v1/chat/completions", body)));
        // Leave at the first token's chunk (the demo model makes the 400 tokens in well under a second).
        const std::string head = c.receive(30000, nullptr, "\"content\":\"");
        QVERIFY2(head.find("200") != std::string::npos && head.find("data: ") != std::string::npos, head.c_str());
        c.close();
        QElapsedTimer clock;
        clock.start();
        static const QRegularExpression cancelled(QStringLiteral("outcome=\"cancelled\"\\} ([1-9]\\d*)"));
        bool seen = false;
        while (!seen && clock.elapsed() < 60000) {
            seen = cancelled.match(QString::fromUtf8(get("/metrics").body)).hasMatch();
            if (!seen) QTest::qWait(200);
        }
        QVERIFY2(seen, "the dropped stream was not cancelled");
        QCOMPARE(post("/v1/chat/completions", chat("still there?", R"(,"max_tokens":2)")).status, 200);
    }

    void dropped_whole_request_is_cancelled_and_only_it() {
        // A client that hangs up while it waits for a whole (not streamed) reply: its job is cancelled, and a
        // seeded request running beside it in the other slot gives what it gives alone.
        const QByteArray seeded = chat("beside", R"(,"max_tokens":40,"seed":9,"ignore_eos":true)");
        const Reply alone = post("/v1/chat/completions", seeded);
        QCOMPARE(alone.status, 200);
        const int before = cancelled_count();
        RawConnection c(server_.port());
        QVERIFY(c.ok());
        const std::string body = R"({"model":"demo","messages":[{"role":"user","content":"wait"}],"max_tokens":400,"ignore_eos":true})";
        QVERIFY(c.send(http_request("POST", "/v1/chat/completions", body)));
        Reply beside;
        std::thread other([&] { beside = post("/v1/chat/completions", seeded); });
        // Hang up at once: the demo model makes the 400 tokens in well under a second. The request is read from
        // the socket's buffer all the same; the server finds the client gone while the reply is generated.
        QTest::qWait(20);
        c.close();
        other.join();
        QCOMPARE(beside.status, 200);
        QCOMPARE(beside.json()["choices"].toArray()[0].toObject()["message"].toObject()["content"].toString(),
                 alone.json()["choices"].toArray()[0].toObject()["message"].toObject()["content"].toString());
        QElapsedTimer clock;
        clock.start();
        while (cancelled_count() == before && clock.elapsed() < 60000) QTest::qWait(200);
        QCOMPARE(cancelled_count(), before + 1);
    }

    // ---- issue 31: bodies, methods, honest fields, fixed metric labels ----

    void gzip_bodies_are_limited_after_inflating() {
        // A valid gzip or deflate body works; a gzip bomb (a few hundred kB inflating to 64 MiB) gets 413 after
        // --max-body (1 MiB) inflated, with the server's peak memory barely moving, two bombs at once.
        const QByteArray small = chat("compressed", R"(,"max_tokens":2)");
        Reply r = post("/v1/chat/completions", compressed(small, ' ', 0, ""), {"-H", "Content-Encoding: gzip"});
        QCOMPARE(r.status, 200);
        r = post("/v1/chat/completions", compressed(small, ' ', 0, "", false), {"-H", "Content-Encoding: deflate"});
        QCOMPARE(r.status, 200);

        const QByteArray bomb = compressed("{\"model\":\"demo\",\"messages\":[{\"role\":\"user\",\"content\":\"", 'a', size_t(64) << 20, "\"}]}");
        QVERIFY2(bomb.size() < 512 * 1024, qPrintable(QString::number(bomb.size())));
        const int64_t before = server_.status_kb("VmHWM");
        QVERIFY(before > 0);
        Reply a, b;
        std::thread other([&] { a = post("/v1/chat/completions", bomb, {"-H", "Content-Encoding: gzip"}); });
        b = post("/v1/chat/completions", bomb, {"-H", "Content-Encoding: gzip"});
        other.join();
        const int64_t grew_kb = server_.status_kb("VmHWM") - before;
        QCOMPARE(a.status, 413);
        QCOMPARE(b.status, 413);
        QCOMPARE(b.error_code(), QStringLiteral("request_too_large"));
        QVERIFY2(grew_kb < 64 * 1024, qPrintable(QStringLiteral("peak resident memory grew by %1 kB").arg(grew_kb)));
        qInfo("two 64 MiB gzip bombs of %lld kB: 413, peak memory +%lld kB", qlonglong(bomb.size() / 1024), qlonglong(grew_kb));
    }

    void chunked_bodies_are_limited_and_codings_checked() {
        // A chunked body has no Content-Length to refuse up front: it is cut at --max-body as it arrives.
        QByteArray big = "{\"model\":\"demo\",\"messages\":[{\"role\":\"user\",\"content\":\"";
        big += QByteArray(4 << 20, 'a');
        big += "\"}]}";
        Reply r = post("/v1/chat/completions", big, {"-H", "Transfer-Encoding: chunked"});
        QCOMPARE(r.status, 413);
        // Codings the server does not inflate are refused, not read as if plain.
        const QByteArray plain = chat("hi", R"(,"max_tokens":1)");
        for (const char* coding : {"br", "zstd", "gzip, gzip", "compress"}) {
            r = post("/v1/chat/completions", plain, {"-H", QStringLiteral("Content-Encoding: %1").arg(coding)});
            QVERIFY2(r.status == 415, coding);
            QCOMPARE(r.error_code(), QStringLiteral("unsupported_media_type"));
        }
        // Garbage that claims to be gzip is a 400.
        r = post("/v1/chat/completions", "this is not gzip at all", {"-H", "Content-Encoding: gzip"});
        QCOMPARE(r.status, 400);
        QCOMPARE(get("/health").status, 200);
    }

    void nul_byte_in_the_body_is_400() {
        // nlohmann's parser stops at a NUL byte: what follows it must not be silently dropped.
        QByteArray body = chat("hi", R"(,"max_tokens":1)");
        body += QByteArray(1, '\0') + "trailing garbage";
        Reply r = post("/v1/chat/completions", body);
        QCOMPARE(r.status, 400);
        QVERIFY2(r.json()["error"].toObject()["message"].toString().contains("NUL"), r.body.constData());
        r = post("/v1/completions", QByteArray("{\"model\":\"demo\",\"prompt\":\"a") + QByteArray(1, '\0') + "b\",\"max_tokens\":1}");
        QCOMPARE(r.status, 400);
    }

    void tiny_temperature_is_greedy() {
        // 1e-39 is a float denormal: dividing logits by it overflowed, and the reply came back empty. Below
        // 1e-4 a temperature is greedy (docs/SERVER.md), so these replies equal temperature 0's.
        const QString more = R"(,"max_tokens":8,"ignore_eos":true,"seed":4,"temperature":%1)";
        const Reply greedy = post("/v1/chat/completions", chat("Tell me a story", more.arg("0")));
        QCOMPARE(greedy.status, 200);
        const QString text = greedy.json()["choices"].toArray()[0].toObject()["message"].toObject()["content"].toString();
        QVERIFY(!text.isEmpty());
        for (const char* t : {"1e-39", "1e-45", "1e-30", "0.00001"}) {
            const Reply r = post("/v1/chat/completions", chat("Tell me a story", more.arg(t)));
            QVERIFY2(r.status == 200, t);
            QCOMPARE(r.json()["usage"].toObject()["completion_tokens"].toInt(), 8);
            QCOMPARE(r.json()["choices"].toArray()[0].toObject()["message"].toObject()["content"].toString(), text);
        }
    }

    // The generated tokens of a whole completions reply with the trace extension (all but the last one).
    QList<int> generated_tokens(const QByteArray& more) {
        const Reply r = post("/v1/completions", QStringLiteral(R"({"model":"demo","prompt":[3997,17,250],"temperature":0,"ignore_eos":true,"colibri":{"trace":true}%1})").arg(QString::fromUtf8(more)).toUtf8());
        QList<int> out;
        if (r.status != 200) return {-r.status};
        for (const QJsonValue& t : r.json()["colibri"].toObject()["trace"].toArray())
            if (t.toObject()["generated"].toBool()) out << t.toObject()["token"].toInt();
        return out;
    }

    void logit_bias_steers_sampling() {
        // +100 makes a token the greedy choice at every step; -100 bans the token greedy decoding picks.
        const QList<int> forced = generated_tokens(R"(,"max_tokens":5,"logit_bias":{"500":100})");
        QCOMPARE(forced, (QList<int>{500, 500, 500, 500}));
        const QList<int> plain = generated_tokens(R"(,"max_tokens":3)");
        QCOMPARE(plain.size(), 2);
        QVERIFY(plain[0] != 500);
        const QList<int> banned = generated_tokens(QStringLiteral(R"(,"max_tokens":3,"logit_bias":{"%1":-100})").arg(plain[0]).toUtf8());
        QCOMPARE(banned.size(), 2);
        QVERIFY2(banned[0] != plain[0], qPrintable(QString::number(banned[0])));
        // Sampled too, and on chat.
        QCOMPARE(post("/v1/chat/completions", chat("hi", R"(,"max_tokens":2,"seed":1,"logit_bias":{"7":5.5,"12":-1})")).status, 200);
        // Validated as OpenAI does: token ids of the vocabulary, biases in [-100, 100].
        for (const char* bad : {R"("logit_bias":{"abc":1})", R"("logit_bias":{"1":101})", R"("logit_bias":{"1":-100.5})", R"("logit_bias":{"99999999":1})",
                                R"("logit_bias":{"-1":1})", R"("logit_bias":{"1":"x"})", R"("logit_bias":[1,2])", R"("logit_bias":{"1":true})"}) {
            const Reply r = post("/v1/chat/completions", chat("hi", QStringLiteral(",\"max_tokens\":1,%1").arg(bad)));
            QVERIFY2(r.status == 400, bad);
            QVERIFY2(r.error_param() == QStringLiteral("logit_bias"), bad);
        }
    }

    void unsupported_fields_are_400_not_ignored() {
        struct Case {
            const char* more;
            const char* param;
        };
        for (const Case& c : {Case{R"("tools":[{"type":"function","function":{"name":"f"}}])", "tools"},
                              Case{R"("tool_choice":"required")", "tool_choice"},
                              Case{R"("tool_choice":{"type":"function","function":{"name":"f"}})", "tool_choice"},
                              Case{R"("functions":[{"name":"f"}])", "functions"},
                              Case{R"("function_call":{"name":"f"})", "function_call"},
                              Case{R"("response_format":{"type":"json_object"})", "response_format"},
                              Case{R"("response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{}}})", "response_format"},
                              Case{R"("response_format":"json")", "response_format"},
                              Case{R"("best_of":2)", "best_of"},
                              Case{R"("modalities":["text","audio"])", "modalities"},
                              Case{R"("audio":{"voice":"alloy","format":"wav"})", "audio"}}) {
            const Reply r = post("/v1/chat/completions", chat("hi", QStringLiteral(",\"max_tokens\":1,%1").arg(c.more)));
            QVERIFY2(r.status == 400, c.more);
            QVERIFY2(r.error_param() == c.param, qPrintable(r.error_param() + " for " + c.more));
        }
        const Reply tool_history = post("/v1/chat/completions", R"({"model":"demo","max_tokens":1,"messages":[{"role":"user","content":"hi"},
            {"role":"assistant","content":null,"tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{}"}}]}]})");
        QCOMPARE(tool_history.status, 400);
        QCOMPARE(tool_history.error_param(), QStringLiteral("messages[1]"));
        // What does not change the reply is accepted.
        const Reply ok = post("/v1/chat/completions", chat("hi", R"(,"max_tokens":1,"response_format":{"type":"text"},"tool_choice":"none","tools":[],"user":"u1","modalities":["text"])"));
        QCOMPARE(ok.status, 200);
        QCOMPARE(post("/v1/completions", R"({"model":"demo","prompt":"hi","max_tokens":1,"best_of":1})").status, 200);
        QCOMPARE(post("/v1/completions", R"({"model":"demo","prompt":"hi","max_tokens":1,"best_of":3})").status, 400);
    }

    void wrong_method_is_405_with_allow() {
        struct Case {
            const char* method;
            const char* path;
            const char* allow;
        };
        for (const Case& c : {Case{"GET", "/v1/chat/completions", "POST"}, Case{"PUT", "/v1/completions", "POST"}, Case{"GET", "/completions", "POST"},
                              Case{"POST", "/v1/models", "GET, HEAD"}, Case{"DELETE", "/health", "GET, HEAD"}, Case{"POST", "/metrics", "GET, HEAD"},
                              Case{"PATCH", "/v1/models/demo", "GET, HEAD"}}) {
            const RawReply r = raw_exchange(server_.port(), http_request(c.method, c.path, "{}"));
            QVERIFY2(r.has("HTTP/1.1 405 "), (std::string(c.method) + " " + c.path + ": " + r.text).c_str());
            QVERIFY2(r.has(std::string("Allow: ") + c.allow + "\r\n"), r.text.c_str());
            QVERIFY2(r.has("\"code\":\"method_not_allowed\""), r.text.c_str());
        }
        // HEAD on a GET path is answered; an unknown path stays 404 whatever the method.
        QVERIFY(raw_exchange(server_.port(), http_request("HEAD", "/health", "")).has("HTTP/1.1 200 "));
        QVERIFY(raw_exchange(server_.port(), http_request("POST", "/v1/nothing", "{}")).has("HTTP/1.1 404 "));
        // A refused request's body is not read: the whole answer still arrives, and the connection closes after it
        // (the client asked to keep it alive).
        const std::string body(300000, 'x');
        const RawReply big = raw_exchange(server_.port(), "POST /v1/models HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) +
                                                              "\r\nConnection: keep-alive\r\n\r\n" + body);
        QVERIFY2(big.has("HTTP/1.1 405 ") && big.has("Connection: close\r\n") && big.has("method_not_allowed"), big.text.substr(0, 400).c_str());
        QVERIFY(big.closed);
    }

    void expect_100_continue_is_answered_before_the_body() {
        // A client that waits for "100 Continue" before sending its body: the server takes the request head alone.
        RawConnection c(server_.port());
        const std::string body = R"({"model":"demo","prompt":[5,6],"max_tokens":1})";
        QVERIFY(c.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nExpect: 100-continue\r\n"
                       "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n"));
        QElapsedTimer clock;
        clock.start();
        const std::string interim = c.receive(3000, nullptr, "\r\n\r\n");
        QVERIFY2(interim.starts_with("HTTP/1.1 100 "), interim.c_str());
        QVERIFY(clock.elapsed() < 2000);
        QVERIFY(c.send(body));
        const std::string reply = c.receive(30000, nullptr, "\"usage\"");
        QVERIFY2(reply.find("HTTP/1.1 200 ") != std::string::npos, reply.c_str());
    }

    void metrics_labels_are_a_fixed_set() {
        // Every path used to become a label: 300 made-up paths now add none ("other" counts them).
        for (int i = 0; i < 300; ++i) {
            RawConnection c(server_.port());
            QVERIFY(c.send(http_request(i % 2 ? "GET" : "POST", "/made-up/" + std::to_string(i), "{}")));
            c.receive(5000, nullptr, "\r\n\r\n");
        }
        const QString text = QString::fromUtf8(get("/metrics").body);
        QVERIFY2(!text.contains("/made-up/"), "an unknown path became a label");
        QVERIFY(text.contains(QStringLiteral("colibri_requests_total{endpoint=\"other\",status=\"404\"}")));
        static const QRegularExpression label(QStringLiteral("colibri_requests_total\\{endpoint=\"([^\"]*)\""));
        const QStringList allowed{"/health", "/metrics", "/v1/models", "/v1/models/:model", "/v1/chat/completions", "/v1/completions",
                                  "/chat/completions", "/completions", "other"};
        for (auto it = label.globalMatch(text); it.hasNext();) {
            const QString l = it.next().captured(1);
            QVERIFY2(allowed.contains(l), qPrintable(l));
        }
    }

    void gauges_are_fresh_when_idle() {
        // The active-slot gauge drops when the last reply ends, not at the next request; the decode rate falls to
        // 0 once the server has been idle for its 10 s window.
        QCOMPARE(post("/v1/chat/completions", chat("gauge", R"(,"max_tokens":20,"ignore_eos":true)")).status, 200);
        auto gauge = [&](const char* name) {
            const QRegularExpression re(QStringLiteral("\n%1\\{[^}]*\\} ([-+0-9.eE]+)").arg(name));
            const auto m = re.match(QString::fromUtf8(get("/metrics").body));
            return m.hasMatch() ? m.captured(1).toDouble() : -1.0;
        };
        QElapsedTimer clock;
        clock.start();
        double active = gauge("colibri_active_slots");
        while (active != 0.0 && clock.elapsed() < 2000) {
            QTest::qWait(50);
            active = gauge("colibri_active_slots");
        }
        QCOMPARE(active, 0.0);
        QVERIFY(gauge("colibri_decode_tokens_per_second") > 0.0);
        QTest::qWait(10500);
        QCOMPARE(gauge("colibri_decode_tokens_per_second"), 0.0);
    }

    void no_request_gets_a_500() {
        // Statuses answered so far, as /metrics counts them: none is a 5xx.
        const QString text = QString::fromUtf8(get("/metrics").body);
        static const QRegularExpression five(QStringLiteral("colibri_requests_total\\{[^}]*status=\"5\\d\\d\"\\}"));
        QVERIFY2(!five.match(text).hasMatch(), qPrintable(text));
        QVERIFY(server_.running());
    }
};

QTEST_GUILESS_MAIN(TestServerHttp)
#include "test_server_http.moc"
