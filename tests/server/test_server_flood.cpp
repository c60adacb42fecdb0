// A bounded load test on loopback for the floods of issue 31 that used to starve or bloat `colibri serve`:
// idle TCP connections reopened every four seconds (they held every connection thread: other requests waited
// 8-10 s), and requests to made-up paths (each became a /metrics label: 264 MB after 600k). Under each flood a
// client's requests are answered within the latency measured before it in the same run, and the server's peak
// resident memory (VmHWM) stays within a bound. The server runs with a descriptor limit of 256, so the idle
// flood also passes its connection cap (128): waiting connections make room, and the client is still served.
#include <httplib.h>
#include <sys/resource.h>

#include <QtTest>
#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>

#include "../test_support.h"
#include "server_process.h"

using namespace colibri::test;

namespace {

const QString kDemo = QStringLiteral(COLIBRI_BUILD_DIR "/demo/demo.bin");

// A client's request on a fresh connection (the flood competes for connections): a one-token completion.
// Returns its latency in ms, or -1 when it failed.
int64_t timed_request(int port) {
    QElapsedTimer clock;
    clock.start();
    httplib::Client client("127.0.0.1", port);
    client.set_connection_timeout(30, 0);
    client.set_read_timeout(30, 0);
    auto res = client.Post("/v1/completions", R"({"model":"demo","prompt":[1,2,3],"max_tokens":1,"temperature":0})", "application/json");
    if (!res || res->status != 200) return -1;
    return clock.elapsed();
}

struct Latencies {
    std::vector<int64_t> ms;
    int failed = 0;
    int64_t median() const {
        if (ms.empty()) return -1;
        std::vector<int64_t> v = ms;
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    }
    int64_t max() const { return ms.empty() ? -1 : *std::max_element(ms.begin(), ms.end()); }
};

// n requests, one every `gap_ms`.
Latencies probe(int port, int n, int gap_ms) {
    Latencies l;
    for (int i = 0; i < n; ++i) {
        const int64_t ms = timed_request(port);
        if (ms < 0) ++l.failed;
        else l.ms.push_back(ms);
        std::this_thread::sleep_for(std::chrono::milliseconds(gap_ms));
    }
    return l;
}

}  // namespace

class TestServerFlood : public QObject {
    Q_OBJECT

private slots:
    void floods_do_not_starve_or_bloat_the_server() {
        QVERIFY2(QFile::exists(kDemo), "the build did not make the demo model");
        ServerProcess server;
        const bool started = server.start({"-m", kDemo, "--slots", "2", "-c", "256", "-t", "2", "--quiet"}, 300000, [] {
            rlimit r{256, 256};
            ::setrlimit(RLIMIT_NOFILE, &r);
        });
        QVERIFY2(started, qPrintable(server.error()));
        const int port = server.port();
        const int64_t slack = 1000 * build_slowdown();  // ms a request may take beyond the baseline's slowest

        probe(port, 5, 0);  // warm up
        const Latencies base = probe(port, 20, 50);
        QCOMPARE(base.failed, 0);
        const int64_t hwm_before = server.status_kb("VmHWM");

        // 1. Idle flood: 300 connections that send nothing and 60 that send half a request head, all closed and
        // reopened every 4 s (as the report did), while the client makes 20 requests half a second apart.
        std::atomic<bool> stop{false};
        std::atomic<int> opened{0};
        std::thread flood([&] {
            while (!stop) {
                std::vector<std::unique_ptr<RawConnection>> connections;
                for (int i = 0; i < 360; ++i) {
                    auto c = std::make_unique<RawConnection>(port);
                    if (!c->ok()) continue;
                    ++opened;
                    if (i % 6 == 0) c->send("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-");
                    connections.push_back(std::move(c));
                }
                for (int t = 0; t < 40 && !stop; ++t) std::this_thread::sleep_for(std::chrono::milliseconds(100));
            }
        });
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        const Latencies idle = probe(port, 20, 500);
        stop = true;
        flood.join();
        QVERIFY(opened.load() >= 360 * 2);

        // 2. Label flood: at least 20,000 requests to made-up paths from 4 keep-alive clients, while the client measures.
        // Each labeler sends at least 5,000 and goes on until the client has measured 5 times under the flood (a quiet
        // machine answered all 20,000 before the client's fifth request, 200 ms apart).
        std::atomic<int> sent{0}, requested{0}, probes{0};
        std::vector<std::thread> labelers;
        for (int t = 0; t < 4; ++t)
            labelers.emplace_back([&, t] {
                httplib::Client client("127.0.0.1", port);
                client.set_keep_alive(true);
                for (int i = 0; i < 50000 && (i < 5000 || probes.load() < 5); ++i) {
                    ++requested;
                    if (auto res = client.Get("/flood/" + std::to_string(t) + "/" + std::to_string(i) + "?q=" + std::to_string(i)); res) ++sent;
                }
            });
        std::atomic<bool> labels_done{false};
        Latencies labels;
        std::thread prober([&] {
            while (!labels_done) {
                const int64_t ms = timed_request(port);
                if (ms < 0) ++labels.failed;
                else labels.ms.push_back(ms);
                ++probes;
                std::this_thread::sleep_for(std::chrono::milliseconds(200));
            }
        });
        for (auto& t : labelers) t.join();
        labels_done = true;
        prober.join();
        const int64_t hwm_after = server.status_kb("VmHWM");

        httplib::Client client("127.0.0.1", port);
        auto metrics = client.Get("/metrics");
        QVERIFY(metrics && metrics->status == 200);
        const QString text = QString::fromStdString(metrics->body);
        const qsizetype request_lines = text.count(QStringLiteral("\ncolibri_requests_total{"));
        static const QRegularExpression evicted(QStringLiteral("colibri_http_connections_closed_total\\{reason=\"evicted\"\\} (\\d+)"));
        const auto ev = evicted.match(text);

        qInfo("client latency, median / max ms: %lld / %lld alone, %lld / %lld under the idle flood (%d connections opened), "
              "%lld / %lld under the label flood (%d requests, %lld request-counter lines, /metrics %lld bytes); "
              "connections evicted at the cap: %s; peak resident memory %lld -> %lld kB",
              qlonglong(base.median()), qlonglong(base.max()), qlonglong(idle.median()), qlonglong(idle.max()), opened.load(),
              qlonglong(labels.median()), qlonglong(labels.max()), sent.load(), qlonglong(request_lines), qlonglong(metrics->body.size()),
              ev.hasMatch() ? qPrintable(ev.captured(1)) : "?", qlonglong(hwm_before), qlonglong(hwm_after));

        QCOMPARE(idle.failed, 0);
        QCOMPARE(labels.failed, 0);
        QVERIFY(labels.ms.size() >= 5);
        QVERIFY2(idle.max() <= base.max() + slack, qPrintable(QStringLiteral("idle flood: %1 ms").arg(idle.max())));
        QVERIFY2(labels.max() <= base.max() + slack, qPrintable(QStringLiteral("label flood: %1 ms").arg(labels.max())));
        QVERIFY2(ev.hasMatch() && ev.captured(1).toLongLong() > 0, "the idle flood never reached the connection cap");
        QCOMPARE(sent.load(), requested.load());
        QVERIFY(sent.load() >= 20000);
        QVERIFY2(!text.contains("/flood/"), "a made-up path became a label");
        QVERIFY2(request_lines <= 20, qPrintable(QString::number(request_lines)));
        QVERIFY2(metrics->body.size() < 64 * 1024, qPrintable(QString::number(metrics->body.size())));
        // Memory: the floods leave the peak within 48 MB (sanitizers keep freed memory a while).
        QVERIFY2(hwm_after - hwm_before < 48 * 1024 * (build_slowdown() > 1 ? 8 : 1),
                 qPrintable(QStringLiteral("peak resident memory %1 -> %2 kB").arg(hwm_before).arg(hwm_after)));

        QCOMPARE(server.stop(), 0);
    }
};

QTEST_GUILESS_MAIN(TestServerFlood)
#include "test_server_flood.moc"
