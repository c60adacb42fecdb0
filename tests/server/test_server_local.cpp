// The local mode of `colibri serve` through libcolibri_client and colibri-client: the socket is 0660 and no memory
// has a name; replies equal HTTP's for the same request; cancelling, errors and a reused connection; each
// connection's memory its own; the API key, the body limit and the connection bounds; a second server on a live
// socket is refused, a stale one replaced; nothing is left behind after a stop.
#include <httplib.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>
#include <atomic>
#include <cmath>
#include <thread>

#include "../test_support.h"
#include "colibri_client.h"
#include "server_process.h"
#include "local_support.h"
#include "shared_mappings.h"

using namespace colibri::test;

namespace {

const QString kDemo = QStringLiteral(COLIBRI_BUILD_DIR "/demo/demo.bin");

// A request body made n bytes longer by a field the server ignores.
std::string padded(const std::string& body, size_t n) {
    return body.substr(0, body.size() - 1) + ",\"padding\":\"" + std::string(n, 'p') + "\"}";
}

// Calls f every 50 ms until it returns true or ms have passed; what it returned last.
template <typename F>
bool retry_for(int ms, F f) {
    QElapsedTimer clock;
    clock.start();
    for (;;) {
        if (f()) return true;
        if (clock.elapsed() > ms) return false;
        QThread::msleep(50);
    }
}

int connect_raw(const QByteArray& path) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.constData(), static_cast<size_t>(path.size()) + 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

mode_t mode_of(const QString& path) {
    struct stat st{};
    return ::stat(path.toUtf8().constData(), &st) == 0 ? st.st_mode : 0;
}

}  // namespace

class TestServerLocal : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    QString socket_, key_;
    ServerProcess server_;

    QString shm_path() const { return "/dev/shm/colibri-" + key_; }
    colibri_client* connect_or_null() { return connect_local(socket_); }
    std::string http_reply(const std::string& body) { return http_chat_text(server_.port(), body); }

private slots:
    void initTestCase() {
        QVERIFY2(QFile::exists(kDemo), "the build did not make the demo model");
        socket_ = dir_.filePath("colibri.sock");
        key_ = QStringLiteral("test-%1").arg(QCoreApplication::applicationPid());
        QVERIFY2(server_.start({"-m", kDemo, "--slots", "2", "-c", "512", "-t", "2", "--socket", socket_, "--shm-key", key_, "--quiet"}),
                 qPrintable(server_.error()));
    }

    // The socket is 0660; no shared memory has a name anyone could open (each connection's is a memfd).
    void the_socket_is_0660_and_no_memory_has_a_name() {
        const mode_t sock = mode_of(socket_);
        QVERIFY(S_ISSOCK(sock));
        QCOMPARE(sock & 0777, mode_t(0660));
        colibri_client* c = connect_or_null();
        QVERIFY(c != nullptr);
        QVERIFY(!QFile::exists(shm_path()));
        colibri_client_close(c);
    }

    void replies_equal_https_for_the_same_request() {
        const std::string body = R"({"model":"demo","messages":[{"role":"user","content":"Hello there"}],"max_tokens":10,"seed":9,"logprobs":true})";
        char error[256];
        colibri_client* c = colibri_client_connect(socket_.toUtf8().constData(), error, sizeof error);
        QVERIFY2(c != nullptr, error);
        Collected got;
        colibri_client_result r;
        QCOMPARE(colibri_client_request(c, "chat", body.c_str(), collect, &got, &r), 0);
        QCOMPARE(r.status, 200);
        QCOMPARE(r.completion_tokens, uint32_t(got.tokens.size()));
        QVERIFY(r.prompt_tokens > 0);
        QVERIFY(std::string(r.finish_reason) == "stop" || std::string(r.finish_reason) == "length");
        for (float lp : got.logprobs) QVERIFY(!std::isnan(lp) && lp <= 0.0f);

        httplib::Client http("127.0.0.1", server_.port());
        http.set_read_timeout(300, 0);
        auto res = http.Post("/v1/chat/completions", body, "application/json");
        QVERIFY(res && res->status == 200);
        const QJsonObject j = QJsonDocument::fromJson(QByteArray::fromStdString(res->body)).object();
        QCOMPARE(QString::fromStdString(got.text), j["choices"].toArray()[0].toObject()["message"].toObject()["content"].toString());
        QCOMPARE(int(r.completion_tokens), j["usage"].toObject()["completion_tokens"].toInt());

        // The connection serves more requests: a completion from token ids, then the same chat again (seeded, so
        // the same text; its prompt now cached in a slot).
        Collected ids;
        QCOMPARE(colibri_client_request(c, "completions", R"({"prompt":[1,2,3],"max_tokens":4,"temperature":0,"ignore_eos":true})", collect, &ids, &r), 0);
        QCOMPARE(ids.tokens.size(), size_t(4));
        QCOMPARE(std::string(r.finish_reason), std::string("length"));
        Collected again;
        QCOMPARE(colibri_client_request(c, "chat", body.c_str(), collect, &again, &r), 0);
        QCOMPARE(again.text, got.text);
        colibri_client_close(c);
    }

    void cancelling_and_errors() {
        char error[256];
        colibri_client* c = colibri_client_connect(socket_.toUtf8().constData(), error, sizeof error);
        QVERIFY2(c != nullptr, error);
        Collected some;
        some.cancel_after = 3;
        colibri_client_result r;
        QCOMPARE(colibri_client_request(c, "chat", R"({"messages":[{"role":"user","content":"go"}],"max_tokens":400,"ignore_eos":true})", collect,
                                        &some, &r),
                 0);
        QCOMPARE(std::string(r.finish_reason), std::string("cancelled"));
        QVERIFY2(r.completion_tokens < 100, qPrintable(QString::number(r.completion_tokens)));
        // Errors come back as statuses and messages; the connection stays usable.
        QCOMPARE(colibri_client_request(c, "chat", "{not json", nullptr, nullptr, &r), -1);
        QVERIFY2(r.status == 400, qPrintable(QStringLiteral("%1: %2").arg(r.status).arg(r.error)));
        QVERIFY(QString(r.error).contains("JSON"));
        QCOMPARE(colibri_client_request(c, "chat", R"({"messages":[{"role":"user","content":"x"}],"max_tokens":100000})", nullptr, nullptr, &r), -1);
        QCOMPARE(r.status, 400);
        QCOMPARE(colibri_client_request(c, "chat", R"({"model":"other","messages":[{"role":"user","content":"x"}]})", nullptr, nullptr, &r), -1);
        QCOMPARE(r.status, 404);
        QCOMPARE(colibri_client_request(c, "embeddings", "{}", nullptr, nullptr, &r), -1);
        QCOMPARE(r.status, 400);
        Collected ok;
        QCOMPARE(colibri_client_request(c, "chat", R"({"messages":[{"role":"user","content":"x"}],"max_tokens":2})", collect, &ok, &r), 0);
        colibri_client_close(c);
        QVERIFY(colibri_client_connect(dir_.filePath("nothing.sock").toUtf8().constData(), error, sizeof error) == nullptr);
        QVERIFY(QString(error).contains("nothing.sock"));
    }

    // Each connection gets memory of its own: read-only but for one small page, in no file others could open by
    // name, shared with no other connection; its reply is not in another connection's memory, live or after it
    // closed, and another connection writing all it can does not change it.
    void each_connection_sees_only_its_own_reply() {
        const auto before = shared_mappings();
        colibri_client* a = connect_or_null();
        QVERIFY(a != nullptr);
        const auto with_a = shared_mappings();
        colibri_client* b = connect_or_null();
        QVERIFY(b != nullptr);
        const auto a_maps = added_mappings(before, with_a), b_maps = added_mappings(with_a, shared_mappings());
        QVERIFY(!a_maps.empty() && !b_maps.empty());
        for (const auto* maps : {&a_maps, &b_maps}) {
            int writable = 0;
            for (const SharedMapping& m : *maps) {
                QVERIFY2(!m.path.starts_with("/dev/shm/"), m.path.c_str());
                if (!m.writable) continue;
                ++writable;
                QVERIFY2(m.size() <= 4096, qPrintable(QStringLiteral("a writable mapping of %1 bytes: %2").arg(m.size()).arg(m.path.c_str())));
            }
            QVERIFY(writable <= 1);
        }
        for (const SharedMapping& x : a_maps)
            for (const SharedMapping& y : b_maps) QVERIFY2(x.inode != y.inode, "two connections share memory");

        // B writes everything it may write while A's request runs.
        std::atomic<bool> done{false};
        std::thread scribbler([&] {
            uint8_t v = 0;
            while (!done)
                for (const SharedMapping& m : b_maps)
                    if (m.writable) std::memset(reinterpret_cast<void*>(m.start), ++v, m.size());
        });
        const std::string body = R"({"model":"demo","messages":[{"role":"user","content":"Tell me a story"}],"max_tokens":48,"seed":5,"ignore_eos":true})";
        Collected got;
        colibri_client_result r;
        const int rc = colibri_client_request(a, "chat", body.c_str(), collect, &got, &r);
        done = true;
        scribbler.join();
        QVERIFY2(rc == 0, r.error);
        const std::string expected = http_reply(body);
        QVERIFY2(got.text == expected, (got.text + "\n-- HTTP --\n" + expected).c_str());
        QVERIFY2(long_pieces(got) >= 5, got.text.c_str());
        for (const SharedMapping& m : b_maps) QCOMPARE(leaked_pieces(got, mapping_bytes(m)), 0);
        colibri_client_close(a);
        const auto with_b = shared_mappings();
        colibri_client* c = connect_or_null();
        QVERIFY(c != nullptr);
        for (const SharedMapping& m : added_mappings(with_b, shared_mappings())) QCOMPARE(leaked_pieces(got, mapping_bytes(m)), 0);
        for (const SharedMapping& m : b_maps) QCOMPARE(leaked_pieces(got, mapping_bytes(m)), 0);
        colibri_client_close(b);
        colibri_client_close(c);
    }

    // --api-key and --max-body hold on the socket as over HTTP.
    void the_api_key_and_the_body_limit() {
        ServerProcess keyed;
        const QString socket = dir_.filePath("keyed.sock");
        QVERIFY2(keyed.start({"-m", kDemo, "--slots", "1", "-c", "256", "-t", "1", "--socket", socket, "--shm-key", key_ + "k", "--api-key",
                              "sesame", "--max-body", "6000000", "--quiet"}),
                 qPrintable(keyed.error()));
        const QByteArray path = socket.toUtf8();
        const char* small = R"({"messages":[{"role":"user","content":"x"}],"max_tokens":2})";
        char error[256] = {};
        colibri_client_result r{};
        // No key, a wrong key: refused when connecting or at the first request.
        for (const char* key : {static_cast<const char*>(nullptr), "sesame2"}) {
            if (key) ::setenv("COLIBRI_API_KEY", key, 1);
            else ::unsetenv("COLIBRI_API_KEY");
            colibri_client* c = colibri_client_connect(path.constData(), error, sizeof error);
            QString why = error;
            if (c != nullptr) {
                QCOMPARE(colibri_client_request(c, "chat", small, nullptr, nullptr, &r), -1);
                QCOMPARE(r.status, 401);
                why = r.error;
                colibri_client_close(c);
            }
            QVERIFY2(why.contains("API key"), qPrintable(why));
        }
        ::setenv("COLIBRI_API_KEY", "sesame", 1);
        colibri_client* c = colibri_client_connect(path.constData(), error, sizeof error);
        ::unsetenv("COLIBRI_API_KEY");
        QVERIFY2(c != nullptr, error);
        QCOMPARE(colibri_client_request(c, "chat", small, nullptr, nullptr, &r), 0);
        // The server's --max-body decides, not a limit of the transport: 5 MiB pass, 7 MB get 413.
        const std::string big = padded(R"({"messages":[{"role":"user","content":"x"}],"max_tokens":2})", 5u << 20);
        QVERIFY2(colibri_client_request(c, "chat", big.c_str(), nullptr, nullptr, &r) == 0, qPrintable(QStringLiteral("%1 %2").arg(r.status).arg(r.error)));
        const std::string huge = padded(R"({"messages":[{"role":"user","content":"x"}]})", 7000000);
        QCOMPARE(colibri_client_request(c, "chat", huge.c_str(), nullptr, nullptr, &r), -1);
        QCOMPARE(r.status, 413);
        colibri_client_close(c);
    }

    // Connections that stay idle, or never say hello, are closed after the idle timeout and free their place; a
    // user holds at most --socket-per-user of them.
    void idle_connections_do_not_hold_every_place() {
        ServerProcess bounded;
        const QString socket = dir_.filePath("bounded.sock");
        QVERIFY2(bounded.start({"-m", kDemo, "--slots", "1", "-c", "256", "-t", "1", "--socket", socket, "--shm-key", key_ + "i", "--timeout", "2",
                                "--socket-connections", "4", "--socket-per-user", "3", "--socket-idle", "2", "--quiet"}),
                 qPrintable(bounded.error()));
        const QByteArray path = socket.toUtf8();
        char error[256] = {};
        std::vector<colibri_client*> held;
        for (int i = 0; i < 3; ++i) {
            held.push_back(colibri_client_connect(path.constData(), error, sizeof error));
            QVERIFY2(held.back() != nullptr, error);
        }
        QVERIFY(colibri_client_connect(path.constData(), error, sizeof error) == nullptr);
        QVERIFY2(QString(error).contains("per user"), error);
        // After the idle timeout the places are free again, and the idle clients reconnect by themselves. (The
        // server notices a close within its poll tick: the checks retry for a few seconds.)
        const int settle_ms = 5000 * build_slowdown();
        std::vector<colibri_client*> fresh;
        const auto connect_one = [&] {
            colibri_client* c = colibri_client_connect(path.constData(), error, sizeof error);
            if (c != nullptr) fresh.push_back(c);
            return c != nullptr;
        };
        QThread::msleep(2000);
        for (int i = 0; i < 3; ++i) QVERIFY2(retry_for(settle_ms, connect_one), error);
        for (colibri_client* c : fresh) colibri_client_close(c);
        fresh.clear();
        colibri_client_result r{};
        const char* small = R"({"messages":[{"role":"user","content":"x"}],"max_tokens":2})";
        for (colibri_client* c : held)
            QVERIFY2(retry_for(settle_ms, [&] { return colibri_client_request(c, "chat", small, nullptr, nullptr, &r) == 0; }), r.error);
        for (colibri_client* c : held) colibri_client_close(c);
        // Sockets that connect and say nothing hold a place for --timeout only.
        std::vector<int> mute;
        const auto open_mute = [&] {  // accepted: the server waits for a hello (a refusal would come at once)
            const int fd = connect_raw(path);
            pollfd p{fd, POLLIN, 0};
            if (fd >= 0 && ::poll(&p, 1, 200) == 0) mute.push_back(fd);
            else if (fd >= 0) ::close(fd);
            return !mute.empty() && mute.back() == fd;
        };
        for (int i = 0; i < 3; ++i) QVERIFY(retry_for(settle_ms, open_mute));
        QVERIFY(!connect_one());
        QVERIFY2(QString(error).contains("per user"), error);
        QThread::msleep(2000);
        QVERIFY2(retry_for(settle_ms, connect_one), error);
        for (colibri_client* c : fresh) colibri_client_close(c);
        for (int fd : mute) ::close(fd);
    }

    // Options that cannot work are refused before the model loads, with one line.
    void bad_local_options_are_refused() {
        const QList<std::pair<QStringList, QString>> cases = {
            {{"--socket-connections", "4", "--socket-per-user", "5"}, "--socket-per-user must not exceed --socket-connections"},
            {{"--socket-connections", "5000"}, "--socket-connections must be between 1 and 4096"},
            {{"--socket-idle", "0"}, "--socket-idle must be at least 1 second"},
        };
        for (const auto& [extra, message] : cases) {
            const CliResult r = run_cli(QStringList{"serve", "-m", "/nonexistent.bin", "--socket", dir_.filePath("bad.sock")} + extra);
            QCOMPARE(r.exit_code, 1);
            QCOMPARE(QString::fromUtf8(r.err).trimmed(), "colibri: serve: " + message);
        }
        const CliResult r = run_cli({"serve", "-m", kDemo, "--shm-key", "x"});
        QVERIFY2(r.exit_code != 0 && r.err.startsWith("colibri: serve: --shm-key"), r.err.constData());
        const CliResult slash = run_cli({"serve", "-m", kDemo, "--port", "0", "--socket", dir_.filePath("bad.sock"), "--shm-key", "a/b"});
        QVERIFY2(slash.exit_code != 0 && slash.err.contains("colibri: serve: --shm-key: 1 to 200 characters"), slash.err.constData());
    }

    void the_cli_client() {
        QProcess p;
        p.start(QStringLiteral(COLIBRI_BUILD_DIR "/bin/colibri-client"), {"--socket", socket_, "-n", "5", "--seed", "3", "Hi there"});
        QVERIFY(p.waitForFinished(300000));
        QCOMPARE(p.exitCode(), 0);
        const QByteArray err = p.readAllStandardError();
        QVERIFY2(err.contains("generated"), err.constData());
        p.start(QStringLiteral(COLIBRI_BUILD_DIR "/bin/colibri-client"), {"--socket", socket_, "--body", "[]"});
        QVERIFY(p.waitForFinished(300000));
        QCOMPARE(p.exitCode(), 1);
        QVERIFY(p.readAllStandardError().startsWith("colibri-client: 400: "));
    }

    void a_live_socket_is_refused() {
        ServerProcess second;
        QVERIFY(!second.start({"-m", kDemo, "--slots", "1", "-c", "128", "-t", "1", "--socket", socket_, "--shm-key", key_ + "b"}, 120000));
        QVERIFY2(second.error().contains("another server is listening"), qPrintable(second.error()));
        QVERIFY(server_.running());
    }

    void a_stop_leaves_nothing_behind() {
        QCOMPARE(server_.stop(), 0);
        QVERIFY2(!QFile::exists(socket_), "the socket was left behind");
        QVERIFY2(!QFile::exists(shm_path()), "the shared memory was left behind");
    }

    void a_killed_servers_socket_is_replaced() {
        // SIGKILL gives no chance to clean up: the socket stays (the connections' memory goes with the process),
        // and the next server on the same path takes it over.
        ServerProcess killed;
        QVERIFY(killed.start({"-m", kDemo, "--slots", "1", "-c", "128", "-t", "1", "--socket", socket_, "--shm-key", key_}));
        killed.kill_hard();
        QVERIFY(QFile::exists(socket_) && !QFile::exists(shm_path()));
        ServerProcess next;
        QVERIFY2(next.start({"-m", kDemo, "--slots", "1", "-c", "128", "-t", "1", "--socket", socket_, "--shm-key", key_}), qPrintable(next.error()));
        char error[256];
        colibri_client* c = colibri_client_connect(socket_.toUtf8().constData(), error, sizeof error);
        QVERIFY2(c != nullptr, error);
        Collected got;
        colibri_client_result r;
        QCOMPARE(colibri_client_request(c, "chat", R"({"messages":[{"role":"user","content":"x"}],"max_tokens":2})", collect, &got, &r), 0);
        colibri_client_close(c);
        QCOMPARE(next.stop(), 0);
        QVERIFY(!QFile::exists(socket_) && !QFile::exists(shm_path()));
    }
};

QTEST_GUILESS_MAIN(TestServerLocal)
#include "test_server_local.moc"
