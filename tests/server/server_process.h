// `colibri serve` started by a test on a free loopback port (--port 0; the port is read from its first line on
// stderr), plus a bare HTTP/1.1 client over a socket for what libraries hide (slow senders, dropped streams).
#pragma once
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QRegularExpression>
#include <QString>
#include <QStringList>
#include <cstring>
#include <functional>
#include <string>

namespace colibri::test {

class ServerProcess {
public:
    // Starts the server with `args` after "serve"; false (and why in error()) when it does not come up.
    // child_setup runs in the child before the server starts (e.g. setrlimit).
    bool start(const QStringList& args, int timeout_ms = 300000, std::function<void()> child_setup = {}) {
        process_.setProcessChannelMode(QProcess::SeparateChannels);
        if (child_setup) process_.setChildProcessModifier(std::move(child_setup));
        process_.start(QStringLiteral(COLIBRI_CLI), QStringList{"serve", "--port", "0"} + args);
        if (!process_.waitForStarted()) return fail("did not start");
        static const QRegularExpression listening(QStringLiteral("listening on http://[^ ]*:(\\d+)"));
        QElapsedTimer clock;
        clock.start();
        while (clock.elapsed() < timeout_ms) {
            if (process_.state() != QProcess::Running) return fail("exited: " + QString::fromUtf8(err_ + process_.readAllStandardError()));
            process_.waitForReadyRead(200);
            err_ += process_.readAllStandardError();
            const auto m = listening.match(QString::fromUtf8(err_));
            if (m.hasMatch()) {
                port_ = m.captured(1).toInt();
                return true;
            }
        }
        return fail("no 'listening on' line: " + QString::fromUtf8(err_));
    }
    // SIGTERM, then the exit code (-1 when it crashed or hung).
    int stop(int timeout_ms = 60000) {
        if (process_.state() != QProcess::Running) return process_.exitStatus() == QProcess::NormalExit ? process_.exitCode() : -1;
        ::kill(static_cast<pid_t>(process_.processId()), SIGTERM);
        if (!process_.waitForFinished(timeout_ms)) {
            process_.kill();
            process_.waitForFinished();
            return -1;
        }
        err_ += process_.readAllStandardError();
        return process_.exitStatus() == QProcess::NormalExit ? process_.exitCode() : -1;
    }
    // SIGKILL: the server gets no chance to clean up.
    void kill_hard() {
        process_.kill();
        process_.waitForFinished();
    }
    ~ServerProcess() {
        if (process_.state() == QProcess::Running) stop();
    }
    bool running() { return process_.state() == QProcess::Running; }
    qint64 pid() const { return process_.processId(); }
    // A field of the server's /proc/PID/status in kB ("VmRSS", "VmHWM": its peak resident memory), -1 if absent.
    int64_t status_kb(const char* field) const {
        QFile f(QStringLiteral("/proc/%1/status").arg(pid()));
        if (!f.open(QIODevice::ReadOnly)) return -1;
        for (const QByteArray& line : f.readAll().split('\n'))
            if (line.startsWith(QByteArray(field) + ':')) return line.mid(qsizetype(std::strlen(field)) + 1).trimmed().split(' ').first().toLongLong();
        return -1;
    }
    int port() const { return port_; }
    QString url() const { return QStringLiteral("http://127.0.0.1:%1").arg(port_); }
    const QString& error() const { return error_; }
    QByteArray log() {
        err_ += process_.readAllStandardError();
        return err_;
    }

private:
    bool fail(const QString& why) {
        error_ = why;
        return false;
    }
    QProcess process_;
    QByteArray err_;
    QString error_;
    int port_ = 0;
};

// A TCP connection to 127.0.0.1:port for hand-written requests.
class RawConnection {
public:
    explicit RawConnection(int port) {
        fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(static_cast<uint16_t>(port));
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
            ::close(fd_);
            fd_ = -1;
        }
    }
    ~RawConnection() { close(); }
    bool ok() const { return fd_ >= 0; }
    bool send(const std::string& s) { return fd_ >= 0 && ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size()); }
    // Reads what arrives within timeout_ms, or until what arrived contains `until` (when not empty); *closed is
    // set when the peer closed the connection.
    std::string receive(int timeout_ms, bool* closed = nullptr, const std::string& until = {}) {
        std::string out;
        if (closed) *closed = false;
        QElapsedTimer clock;
        clock.start();
        while (fd_ >= 0 && clock.elapsed() < timeout_ms) {
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, 50) <= 0) continue;
            char buf[4096];
            const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
            if (n <= 0) {
                if (closed) *closed = true;
                break;
            }
            out.append(buf, static_cast<size_t>(n));
            if (!until.empty() && out.find(until) != std::string::npos) break;
        }
        return out;
    }
    void close() {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }

private:
    int fd_ = -1;
};

inline std::string http_request(const std::string& method, const std::string& path, const std::string& body,
                                const std::string& extra_headers = {}) {
    return method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\nConnection: close\r\n" + extra_headers + "\r\n" + body;
}

}  // namespace colibri::test
