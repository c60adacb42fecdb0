// The local mode of `colibri serve` through libcolibri_client and colibri-client: the socket is 0660 and the
// shared memory 0600; replies equal HTTP's for the same request; cancelling, errors and a reused connection;
// a second server on a live socket is refused, a stale one replaced; nothing is left behind after a stop.
#include <httplib.h>
#include <sys/stat.h>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>

#include "../test_support.h"
#include "colibri_client.h"
#include "server_process.h"

using namespace colibri::test;

namespace {

const QString kDemo = QStringLiteral(COLIBRI_BUILD_DIR "/demo/demo.bin");

struct Collected {
    std::string text;
    std::vector<int32_t> tokens;
    std::vector<float> logprobs;
    int cancel_after = -1;
};

int collect(int32_t token, const char* text, size_t length, float logprob, void* user) {
    auto* c = static_cast<Collected*>(user);
    c->text.append(text, length);
    c->tokens.push_back(token);
    c->logprobs.push_back(logprob);
    return c->cancel_after < 0 || static_cast<int>(c->tokens.size()) < c->cancel_after;
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

private slots:
    void initTestCase() {
        QVERIFY2(QFile::exists(kDemo), "the build did not make the demo model");
        socket_ = dir_.filePath("colibri.sock");
        key_ = QStringLiteral("test-%1").arg(QCoreApplication::applicationPid());
        QVERIFY2(server_.start({"-m", kDemo, "--slots", "2", "-c", "512", "-t", "2", "--socket", socket_, "--shm-key", key_, "--quiet"}),
                 qPrintable(server_.error()));
    }

    void permissions_are_0660_and_0600() {
        const mode_t sock = mode_of(socket_), shm = mode_of(shm_path());
        QVERIFY(S_ISSOCK(sock));
        QCOMPARE(sock & 0777, mode_t(0660));
        QVERIFY(S_ISREG(shm));
        QCOMPARE(shm & 0777, mode_t(0600));
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

    void a_killed_servers_socket_and_memory_are_replaced() {
        // SIGKILL gives no chance to clean up: the socket and the shared memory stay, and the next server on
        // the same names takes them over.
        ServerProcess killed;
        QVERIFY(killed.start({"-m", kDemo, "--slots", "1", "-c", "128", "-t", "1", "--socket", socket_, "--shm-key", key_}));
        killed.kill_hard();
        QVERIFY(QFile::exists(socket_) && QFile::exists(shm_path()));
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
