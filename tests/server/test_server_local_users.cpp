// Two users on one local socket: this test (root) is user A; colibri-test-intruder runs as a second uid that is a
// member of the socket's group (user B) and tries what a hostile member would. B must not read A's replies, live
// or finished, must not write into them or disturb them, must not hold every connection, and gets no memory it
// could write but its own client page. A uid outside the group cannot connect at all.
// Needs root (to take another uid); exits 77 (skipped) with a message where that is not possible.
#include <pwd.h>
#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <QTemporaryDir>
#include <QtTest>

#include "../test_support.h"
#include "colibri_client.h"
#include "local_support.h"
#include "server_process.h"

using namespace colibri::test;

namespace {

const QString kDemo = QStringLiteral(COLIBRI_BUILD_DIR "/demo/demo.bin");
const QString kIntruder = QStringLiteral(COLIBRI_INTRUDER);

// A uid and a gid no account uses: user B, and the group of a stranger.
uid_t unused_uid() {
    for (uid_t u = 61000; u < 65000; ++u)
        if (::getpwuid(u) == nullptr) return u;
    return 64999;
}
gid_t unused_gid() {
    for (gid_t g = 61000; g < 65000; ++g)
        if (::getgrgid(g) == nullptr) return g;
    return 64999;
}

}  // namespace

class TestServerLocalUsers : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    QString socket_;
    ServerProcess server_;
    uid_t b_uid_ = unused_uid();
    gid_t stranger_gid_ = unused_gid();

    // The intruder as user B: its own primary group, and the socket's group (the server's, root's) as a member.
    QStringList b_args(const QString& mode, const QStringList& more = {}) const {
        return QStringList{QString::number(b_uid_), QString::number(stranger_gid_), QString::number(::getegid()), socket_, mode} + more;
    }
    static bool run(QProcess& p, const QStringList& args, int timeout_ms = 120000) {
        p.start(kIntruder, args);
        return p.waitForFinished(timeout_ms) && p.exitStatus() == QProcess::NormalExit;
    }
    Collected request(colibri_client* c, const std::string& body) {
        Collected r;
        colibri_client_result res{};
        if (colibri_client_request(c, "chat", body.c_str(), collect, &r, &res) != 0) r.text = std::string("(failed: ") + res.error + ")";
        return r;
    }
    std::string http_reply(const std::string& body) { return http_chat_text(server_.port(), body); }
    colibri_client* connect_a() { return connect_local(socket_); }

private slots:
    void initTestCase() {
        QVERIFY2(QFile::exists(kDemo), "the build did not make the demo model");
        // The socket's directory must be reachable by B; the socket itself is 0660 root:root.
        QVERIFY(::chmod(dir_.path().toUtf8().constData(), 0755) == 0);
        socket_ = dir_.filePath("colibri.sock");
        QVERIFY2(server_.start({"-m", kDemo, "--slots", "2", "-c", "512", "-t", "2", "--socket", socket_, "--shm-key",
                                QStringLiteral("users-%1").arg(QCoreApplication::applicationPid()), "--socket-connections", "6",
                                "--socket-per-user", "3", "--quiet"}),
                 qPrintable(server_.error()));
    }

    void a_stranger_cannot_connect() {
        QProcess p;
        QVERIFY(run(p, {QString::number(b_uid_), QString::number(stranger_gid_), "-", socket_, "connect"}));
        const QByteArray out = p.readAllStandardOutput();
        QVERIFY2(out.startsWith("refused: ") && out.contains("Permission denied"), out.constData());
        QProcess member;
        QVERIFY(run(member, b_args("connect")));
        QCOMPARE(member.readAllStandardOutput(), QByteArray("connected\n"));
    }

    // B reads every byte it can: its own connection's memory, /dev/shm, the server's open files. None of A's
    // replies is there: not the one of a connection still open, nor of one that closed.
    void a_member_cannot_read_anothers_reply() {
        colibri_client* live = connect_a();
        QVERIFY(live != nullptr);
        const Collected open_reply = request(live, R"({"model":"demo","messages":[{"role":"user","content":"Tell me a story"}],"max_tokens":48,"seed":11,"ignore_eos":true})");
        colibri_client* gone = connect_a();
        QVERIFY(gone != nullptr);
        const Collected closed_reply = request(gone, R"({"messages":[{"role":"user","content":"Another one"}],"max_tokens":48,"seed":12,"ignore_eos":true})");
        colibri_client_close(gone);
        QVERIFY2(open_reply.pieces.size() == 48 && closed_reply.pieces.size() == 48, (open_reply.text + closed_reply.text).c_str());

        QProcess p;
        QVERIFY(run(p, b_args("snoop", {QString::number(server_.pid())})));
        QCOMPARE(p.exitCode(), 0);
        const QByteArray seen = p.readAllStandardOutput();
        const QByteArray denied = p.readAllStandardError();
        QVERIFY2(!seen.isEmpty(), "B read nothing at all: the probe did not work");
        QCOMPARE(leaked_pieces(open_reply, seen.toStdString()), 0);
        QCOMPARE(leaked_pieces(closed_reply, seen.toStdString()), 0);
        QVERIFY2(denied.contains("/fd: Permission denied"), denied.constData());
        colibri_client_close(live);
    }

    // B writes all it can while A's request runs: A's reply is the one HTTP gives for the same request.
    void a_member_cannot_write_or_disturb_anothers_reply() {
        colibri_client* a = connect_a();
        QVERIFY(a != nullptr);
        QProcess b;
        b.start(kIntruder, b_args("scribble"));
        QVERIFY(b.waitForReadyRead(60000));
        QCOMPARE(b.readLine(), QByteArray("scribbling\n"));
        const std::string body = R"({"model":"demo","messages":[{"role":"user","content":"Write a poem"}],"max_tokens":64,"seed":21,"ignore_eos":true})";
        const Collected during = request(a, body);
        const Collected again = request(a, body);
        b.closeWriteChannel();
        QVERIFY(b.waitForFinished(60000));
        const QByteArray report = b.readAllStandardOutput();
        QVERIFY2(report.startsWith("made 0 read-only mappings writable; "), report.constData());
        const std::string expected = http_reply(body);
        QCOMPARE(during.text, expected);
        QCOMPARE(again.text, expected);
        colibri_client_close(a);
    }

    // By hand, with the descriptors the server passed: the reply segment cannot be written, remapped writable,
    // reopened writable, truncated, grown or punched; the client page (B's own) cannot change size.
    void the_reply_segment_is_read_only_for_its_client() {
        QProcess p;
        QVERIFY(run(p, b_args("raw")));
        const QByteArray out = p.readAllStandardOutput();
        QCOMPARE(p.exitCode(), 0);
        QVERIFY2(out.contains("map the reply segment readable: ALLOWED"), out.constData());
        QCOMPARE(out.count("ALLOWED"), 1);
        QCOMPARE(out.count("refused"), 9);
    }

    // B opens as many connections as it can and keeps them: it gets its share (3), and A still connects.
    void a_member_cannot_hold_every_connection() {
        QProcess b;
        b.start(kIntruder, b_args("hold", {"10"}));
        QVERIFY(b.waitForReadyRead(60000));
        const QByteArray line = b.readLine();
        QVERIFY2(line.startsWith("held 3; refused: ") && line.contains("per user"), line.constData());
        std::vector<colibri_client*> mine;
        QElapsedTimer clock;  // connections of the tests before may take a moment to close
        clock.start();
        while (mine.size() < 3 && clock.elapsed() < 5000 * build_slowdown()) {
            char error[256];
            if (colibri_client* c = colibri_client_connect(socket_.toUtf8().constData(), error, sizeof error)) mine.push_back(c);
            else QThread::msleep(50);
        }
        QCOMPARE(mine.size(), size_t(3));
        const Collected r = request(mine.front(), R"({"messages":[{"role":"user","content":"x"}],"max_tokens":3})");
        QVERIFY2(r.pieces.size() == 3, r.text.c_str());
        for (colibri_client* c : mine) colibri_client_close(c);
        b.closeWriteChannel();
        QVERIFY(b.waitForFinished(60000));
    }

    void cleanupTestCase() { QCOMPARE(server_.stop(), 0); }
};

int main(int argc, char** argv) {
    if (::geteuid() != 0) {
        std::printf("test_server_local_users skipped: it runs a client as a second uid, which needs root (CI runs it as root)\n");
        return 77;
    }
    QProcess probe;
    probe.start(kIntruder, {QString::number(unused_uid()), QString::number(unused_gid()), "-", "/nonexistent", "probe"});
    if (!probe.waitForFinished(60000) || probe.exitStatus() != QProcess::NormalExit || probe.exitCode() != 0) {
        std::printf("test_server_local_users skipped: %s could not take a second uid: %s\n", qPrintable(kIntruder),
                    probe.readAllStandardOutput().trimmed().constData());
        return 77;
    }
    QCoreApplication app(argc, argv);
    TestServerLocalUsers test;
    return QTest::qExec(&test, argc, argv);
}

#include "test_server_local_users.moc"
