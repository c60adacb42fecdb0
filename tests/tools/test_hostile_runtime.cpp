// Hostile inputs, round 3 (issue 31), the runtime's part, end to end through the CLI: the tune cache read at
// every start and written by `colibri tune`, thread creation refused by a process or memory limit, tiny
// temperatures, and routing traces (sizes, FIFOs, traces of another model). Each was an abort, a hang, a
// clobbered or half-written file, or a wrong result; each must now be a clear one-line error (or a one-line
// warning where the command can go on) promptly, leaving the file system as it was.
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>
#include <cerrno>
#include <optional>
#include <string>
#include <vector>

#include "../test_support.h"
#include "kernels/registry.h"

using namespace colibri::test;

extern char** environ;

namespace {

// What a child runs under: extra environment, and the limits the hostile cases need (set after fork, so only
// the child has them).
struct ChildSetup {
    std::vector<std::string> env;        // "NAME=value", added to (or replacing) this process's environment
    std::optional<rlim_t> nproc;         // RLIMIT_NPROC: processes and threads of the child's user
    std::optional<rlim_t> fsize;         // RLIMIT_FSIZE, with SIGXFSZ ignored so a write fails with EFBIG
    std::optional<rlim_t> address_space, stack;  // RLIMIT_AS and RLIMIT_STACK (glibc's thread stack size)
    bool as_nobody = false;              // run as uid/gid 65534 (root only: RLIMIT_NPROC binds other users)
    QByteArray input;                    // stdin
    std::string program = COLIBRI_CLI;
};

// The CLI as a child process whose stderr can be watched while it runs (serve) and whose resources are seen.
class Child {
public:
    ~Child() {
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
        }
        for (int fd : {out_, err_})
            if (fd >= 0) ::close(fd);
    }

    bool start(const QStringList& args, const ChildSetup& setup = {}) {
        std::vector<std::string> storage{setup.program};
        for (const QString& a : args) storage.push_back(a.toStdString());
        std::vector<char*> argv;
        for (std::string& s : storage) argv.push_back(s.data());
        argv.push_back(nullptr);
        std::vector<std::string> env_storage;
        for (char** e = environ; *e != nullptr; ++e) {
            const std::string entry(*e);
            bool replaced = false;
            for (const std::string& mine : setup.env)
                replaced = replaced || entry.substr(0, entry.find('=') + 1) == mine.substr(0, mine.find('=') + 1);
            if (!replaced) env_storage.push_back(entry);
        }
        for (const std::string& mine : setup.env) env_storage.push_back(mine);
        std::vector<char*> envp;
        for (std::string& s : env_storage) envp.push_back(s.data());
        envp.push_back(nullptr);

        // `exec` closes its write end: start() returns once the CLI runs, so a signal sent after it reaches the CLI
        // and not this test's forked copy (whose handlers are QtTest's).
        int in[2], out[2], err[2], exec[2];
        if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0 || pipe2(exec, O_CLOEXEC) != 0) return false;
        pid_ = fork();
        if (pid_ < 0) return false;
        if (pid_ == 0) {  // only async-signal-safe calls until exec
            sigset_t none;
            sigemptyset(&none);
            sigprocmask(SIG_SETMASK, &none, nullptr);
            signal(SIGTERM, SIG_DFL);
            signal(SIGINT, SIG_DFL);
            dup2(in[0], 0);
            dup2(out[1], 1);
            dup2(err[1], 2);
            auto limit = [](int resource, rlim_t v) {
                const struct rlimit r{v, v};
                if (setrlimit(resource, &r) != 0) _exit(125);
            };
            if (setup.fsize) {
                signal(SIGXFSZ, SIG_IGN);
                limit(RLIMIT_FSIZE, *setup.fsize);
            }
            if (setup.address_space) limit(RLIMIT_AS, *setup.address_space);
            if (setup.stack) limit(RLIMIT_STACK, *setup.stack);
            if (setup.as_nobody) {
                if (setgroups(0, nullptr) != 0 || setgid(65534) != 0) _exit(125);
                if (setup.nproc) limit(RLIMIT_NPROC, *setup.nproc);
                if (setuid(65534) != 0) _exit(125);
            } else if (setup.nproc) {
                limit(RLIMIT_NPROC, *setup.nproc);
            }
            execve(setup.program.c_str(), argv.data(), envp.data());
            _exit(127);
        }
        ::close(in[0]);
        ::close(out[1]);
        ::close(err[1]);
        ::close(exec[1]);
        char ignored;
        while (::read(exec[0], &ignored, 1) < 0 && errno == EINTR) {
        }
        ::close(exec[0]);
        if (!setup.input.isEmpty()) (void)!::write(in[1], setup.input.constData(), static_cast<size_t>(setup.input.size()));
        ::close(in[1]);
        out_ = out[0];
        err_ = err[0];
        return true;
    }

    // Reads output until stderr holds `needle` (true), the child ends or timeout_ms pass (false). Both waits are
    // a release build's, scaled for a sanitized one.
    bool wait_for_err(const QByteArray& needle, int timeout_ms) {
        timeout_ms *= build_slowdown();
        QElapsedTimer clock;
        clock.start();
        while (!err.contains(needle)) {
            if (clock.elapsed() > timeout_ms || !pump(100)) return err.contains(needle);
        }
        return true;
    }

    // Waits for the end, killing the child after timeout_ms (timed_out then).
    void finish(int timeout_ms) {
        timeout_ms *= build_slowdown();
        QElapsedTimer clock;
        clock.start();
        while (pid_ > 0) {
            pump(20);
            int status = 0;
            struct rusage ru {};
            const pid_t r = wait4(pid_, &status, WNOHANG, &ru);
            if (r == pid_) {
                while (pump(0)) {
                }
                pid_ = -1;
                exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
                term_signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
                peak_rss_mib = ru.ru_maxrss / 1024;
                seconds = double(clock.elapsed()) / 1000.0;
                return;
            }
            if (clock.elapsed() > timeout_ms) {
                timed_out = true;
                ::kill(pid_, SIGKILL);
            }
        }
    }

    void send(int sig) {
        if (pid_ > 0) ::kill(pid_, sig);
    }

    // The lines of stderr that start with `prefix`.
    QStringList err_lines(const QString& prefix = {}) const {
        return QString::fromUtf8(err).split('\n', Qt::SkipEmptyParts).filter(QRegularExpression("^" + QRegularExpression::escape(prefix)));
    }

    int exit_code = -1, term_signal = 0;
    bool timed_out = false;
    long peak_rss_mib = 0;
    double seconds = 0;
    QByteArray out, err;

private:
    // Moves what the child wrote into out/err; false once both pipes are at their end.
    bool pump(int timeout_ms) {
        pollfd fds[2] = {{out_, POLLIN, 0}, {err_, POLLIN, 0}};
        if (out_ < 0 && err_ < 0) return false;
        if (poll(fds, 2, timeout_ms) <= 0) return true;
        int* fd[2] = {&out_, &err_};
        QByteArray* into[2] = {&out, &err};
        for (int k = 0; k < 2; ++k) {
            if (*fd[k] < 0 || (fds[k].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
            char buf[65536];
            const ssize_t n = ::read(*fd[k], buf, sizeof buf);
            if (n > 0) {
                into[k]->append(buf, n);
            } else {
                ::close(*fd[k]);
                *fd[k] = -1;
            }
        }
        return out_ >= 0 || err_ >= 0;
    }

    pid_t pid_ = -1;
    int out_ = -1, err_ = -1;
};

// LeakSanitizer (the ASan tree) checks at exit from a thread of its own, which a process limit refuses.
const std::string kNoLeakCheck = "ASAN_OPTIONS=detect_leaks=0";

Child run(const QStringList& args, const ChildSetup& setup = {}, int timeout_ms = 120000) {
    Child c;
    if (c.start(args, setup)) c.finish(timeout_ms);
    return c;
}

// Peak resident memory below `mib`; not judged under AddressSanitizer, whose shadow and quarantine add their own.
bool rss_below(const Child& c, long mib) {
#ifdef COLIBRI_SANITIZED
    (void)c, (void)mib;
    return true;
#else
    return c.peak_rss_mib < mib;
#endif
}

bool is_fifo(const QString& path) {
    struct stat st {};
    return lstat(QFile::encodeName(path).constData(), &st) == 0 && S_ISFIFO(st.st_mode);
}
bool is_char_device(const QString& path) {
    struct stat st {};
    return stat(QFile::encodeName(path).constData(), &st) == 0 && S_ISCHR(st.st_mode);
}
// Names in `dir` that a commit may have left behind (PATH.tmp, PATH.tmp.XXXXXX).
QStringList temporaries(const QString& dir) {
    return QDir(dir).entryList(QDir::AllEntries | QDir::Hidden | QDir::System | QDir::NoDotAndDotDot).filter(".tmp");
}

// `colibri chat -m model` on a terminal (the history file is kept only there) with XDG_STATE_HOME=state and a
// file size limit when fsize > 0: types `line`, waits for the reply and the next prompt, ends with Ctrl-D.
// Returns what the terminal showed and the exit status; `hung` when no prompt came (a blocked open).
struct TerminalRun {
    QByteArray screen;
    int status = -1;
    bool hung = false;
};
TerminalRun chat_on_terminal(const QString& model, const QString& state, const QString& no_cache, const QByteArray& line, rlim_t fsize = 0) {
    TerminalRun run;
    int master = -1;
    const QByteArray state_dir = QFile::encodeName(state), cache = no_cache.toLocal8Bit(), model_path = QFile::encodeName(model);
    const pid_t pid = forkpty(&master, nullptr, nullptr, nullptr);
    if (pid < 0) return run;
    if (pid == 0) {
        setenv("XDG_STATE_HOME", state_dir.constData(), 1);
        setenv("TERM", "xterm", 1);
        putenv(const_cast<char*>(cache.constData()));
        if (fsize > 0) {
            signal(SIGXFSZ, SIG_IGN);
            const struct rlimit r{fsize, fsize};
            setrlimit(RLIMIT_FSIZE, &r);
        }
        execl(COLIBRI_CLI, COLIBRI_CLI, "chat", "-m", model_path.constData(), "-n", "2", "--greedy", static_cast<char*>(nullptr));
        _exit(127);
    }
    const auto pump = [&] {
        pollfd fd{master, POLLIN, 0};
        if (poll(&fd, 1, 100) <= 0) return true;
        char buf[4096];
        const ssize_t n = ::read(master, buf, sizeof buf);
        if (n <= 0) return false;
        run.screen.append(buf, n);
        return true;
    };
    const auto wait_for = [&](const QByteArray& needle, qsizetype count) {
        QElapsedTimer clock;
        clock.start();
        while (run.screen.count(needle) < count && clock.elapsed() < 30000)
            if (!pump()) break;
        return run.screen.count(needle) >= count;
    };
    if (wait_for("> ", 1)) {
        (void)!::write(master, line.constData(), static_cast<size_t>(line.size()));
        (void)!::write(master, "\r", 1);
        wait_for("tokens/s", 1);
        wait_for("> ", 2);
        (void)!::write(master, "\x04", 1);
    } else {
        run.hung = true;
        ::kill(pid, SIGKILL);
    }
    QElapsedTimer clock;
    clock.start();
    pid_t ended = 0;
    while ((ended = waitpid(pid, &run.status, WNOHANG)) == 0 && clock.elapsed() < 30000) pump();
    if (ended == 0) {
        ::kill(pid, SIGKILL);
        waitpid(pid, &run.status, 0);
        run.hung = true;
    }
    ::close(master);
    return run;
}

}  // namespace

class TestHostileRuntime : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;
    QString model_;  // a small random mixtral with the demo tokenizer and chat template
    QString no_cache_;  // COLIBRI_TUNE_CACHE for runs that must not read the user's cache

    // Runs that must not read the user's tune cache.
    ChildSetup clean() const {
        ChildSetup s;
        s.env = {no_cache_.toStdString()};
        return s;
    }

    // A command that must fail cleanly: exactly one "colibri: " line and nothing else on stderr, non-zero exit,
    // no crash, no hang (a blocked open or a lost thread would run into the timeout).
    static QString one_error_line(const Child& c, const QString& what) {
        if (c.timed_out || c.term_signal != 0) {
            QTest::qFail(qPrintable(what + ": crashed or hung (signal " + QString::number(c.term_signal) + "): " + c.err.left(400)), __FILE__, __LINE__);
            return {};
        }
        const QStringList lines = QString::fromUtf8(c.err).split('\n', Qt::SkipEmptyParts);
        if (c.exit_code == 0 || lines.size() != 1 || !lines[0].startsWith("colibri: ")) {
            QTest::qFail(qPrintable(what + ": expected one 'colibri: ' line and a failure, got exit " + QString::number(c.exit_code) + ": " +
                                    c.err.left(400)),
                         __FILE__, __LINE__);
            return {};
        }
        return lines[0];
    }

private slots:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        // Readable by the unprivileged user of the thread-limit cases.
        QVERIFY(QFile::setPermissions(dir_.path(), QFileDevice::ReadOwner | QFileDevice::WriteOwner | QFileDevice::ExeOwner | QFileDevice::ReadOther |
                                                       QFileDevice::ExeOther | QFileDevice::ReadGroup | QFileDevice::ExeGroup));
        const QString hf = dir_.filePath("hf");
        QVERIFY(make_model(hf, {"--family", "mixtral", "--vocab", "4096", "--hidden", "64", "--layers", "2", "--heads", "2", "--kv-heads", "1",
                                "--experts", "4", "--top-k", "2", "--ffn", "64", "--seed", "3", "--tokenizer",
                                QStringLiteral(COLIBRI_SOURCE_DIR "/resources/demo_model")}));
        model_ = dir_.filePath("model.bin");
        const CliResult r = run_cli({"convert", hf, "-o", model_, "-q"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        no_cache_ = "COLIBRI_TUNE_CACHE=" + dir_.filePath("no-such-cache.json");
    }

    // ---------------------------------------------------------------- item 7: reading the tune cache
    // A directory, a FIFO, bytes that are not JSON, JSON of the wrong types or a file too large at the cache's
    // path: every command goes on with the default kernels and says so in one warning line (they aborted on an
    // uncaught stream exception; a FIFO would have blocked every start).
    void a_bad_tune_cache_costs_only_the_choice() {
        const QString d = dir_.filePath("bad-cache");
        QVERIFY(QDir().mkpath(d + "/a-directory"));
        QVERIFY(mkfifo(QFile::encodeName(d + "/a-fifo").constData(), 0644) == 0);
        write_all(d + "/garbage", QByteArray("\x00\xff\xfe{\"entries\"", 14));
        write_all(d + "/wrong-types", "{\"entries\": [{\"cpu\": 5, \"version\": [1], \"choice\": 7}], \"format\": {}}");
        {
            QFile big(d + "/too-large");
            QVERIFY(big.open(QIODevice::WriteOnly) && big.resize(qint64(64) << 20));  // sparse
        }
        const QString chat_input = "hello\n";
        const QStringList all_commands[] = {
            {"info", model_},
            {"logits", "-m", model_, "--tokens", "1,2", "--top", "1"},
            {"generate", "-m", model_, "--tokens", "1,2", "-n", "2", "--greedy"},
            {"bench", "-m", model_, "-p", "4", "-n", "4", "-r", "1", "--bandwidth-mib", "8"},
            {"route", "-m", model_, "--tokens", "1,2", "--json"},
            {"chat", "-m", model_, "-n", "2", "--greedy"},
        };
        for (const QString kind : {"a-directory", "a-fifo", "garbage", "wrong-types", "too-large"}) {
            ChildSetup setup;
            setup.env = {("COLIBRI_TUNE_CACHE=" + d + "/" + kind).toStdString()};
            setup.input = chat_input.toUtf8();
            const bool warns = kind != "wrong-types";  // a well-formed cache without a usable entry is no news
            for (const QStringList& args : all_commands) {
                if (kind != "a-directory" && args[0] != "generate" && args[0] != "info") continue;  // every command once is enough
                const Child c = run(args, setup, 60000);
                const QString what = kind + ": " + args[0];
                QVERIFY2(!c.timed_out && c.term_signal == 0 && c.exit_code == 0, qPrintable(what + ": exit " + QString::number(c.exit_code) + " signal " +
                                                                                             QString::number(c.term_signal) + ": " + c.err.left(600)));
                const QStringList warnings = c.err_lines("colibri: warning: ");
                QCOMPARE(warnings.size(), warns ? 1 : 0);
                if (warns) {
                    QVERIFY2(warnings[0].startsWith("colibri: warning: tune cache " + d + "/" + kind + ": ") &&
                                 warnings[0].endsWith("the default kernels are used"),
                             qPrintable(warnings[0]));
                }
                QVERIFY2(!c.err.contains("terminate"), c.err.constData());
            }
        }
        // serve starts, answers nothing wrong, and stops on SIGTERM, with the same one warning.
        Child s;
        ChildSetup setup;
        setup.env = {("COLIBRI_TUNE_CACHE=" + d + "/a-directory").toStdString()};
        QVERIFY(s.start({"serve", "-m", model_, "--port", "0", "--slots", "1", "-t", "1"}, setup));
        QVERIFY2(s.wait_for_err("listening", 60000), s.err.constData());
        s.send(SIGTERM);
        s.finish(30000);
        QVERIFY2(!s.timed_out && s.exit_code == 0, s.err.constData());
        QCOMPARE(s.err_lines("colibri: warning: tune cache").size(), 1);
        QVERIFY(QFileInfo(d + "/a-directory").isDir() && is_fifo(d + "/a-fifo"));
    }

    // ---------------------------------------------------------------- item 7: writing the tune cache
    // `colibri tune` commits its file: what is not a regular file is refused (a directory, a FIFO, a device node
    // or a link to one stays as it was), a symlink to a file is written through, a planted PATH.tmp link is never
    // followed, and a full disk leaves the old cache and no temporary file.
    void tune_commits_its_cache_safely() {
        const QString d = dir_.filePath("tune");
        QVERIFY(QDir().mkpath(d));
        auto tune = [&](const QString& cache, const ChildSetup& extra = {}) {
            ChildSetup setup = extra;
            setup.env.push_back(("COLIBRI_TUNE_CACHE=" + cache).toStdString());
            // One variant: what is tested is how the cache is committed, not the measurements (every variant took
            // about 50 s a run under ASan, 8 runs here).
            return run({"tune", "--quick", "--json", "--variants", colibri::kernels::variant_name(colibri::kernels::supported_variants().back())}, setup,
                       300000);
        };
        // A directory, a FIFO, a link to /dev/null and (where this process may make one) a device node.
        QVERIFY(QDir().mkpath(d + "/dir.json"));
        QVERIFY(mkfifo(QFile::encodeName(d + "/fifo.json").constData(), 0644) == 0);
        QVERIFY(QFile::link("/dev/null", d + "/null-link.json"));
        QStringList refused{"dir.json", "fifo.json", "null-link.json"};
        const QString node = d + "/node.json";
        if (mknod(QFile::encodeName(node).constData(), S_IFCHR | 0666, makedev(1, 3)) == 0) refused << "node.json";
        else qInfo("mknod not permitted here: the device-node case runs through the link to /dev/null only");
        for (const QString& name : refused) {
            const Child c = tune(d + "/" + name);
            const QString err = one_error_line(c, name);
            // One line (tune does not read the cache it rewrites): the path and why.
            QVERIFY2(err.contains(d + "/" + name) && err.contains("not a regular file") && err.contains("refusing to replace it"), qPrintable(err));
            QVERIFY(c.out.contains("\"results\""));  // the measurements are still printed
        }
        QVERIFY(QFileInfo(d + "/dir.json").isDir() && is_fifo(d + "/fifo.json"));
        QVERIFY(QFileInfo(d + "/null-link.json").isSymLink() && QFileInfo(d + "/null-link.json").symLinkTarget() == "/dev/null");
        QVERIFY(is_char_device("/dev/null"));
        if (refused.contains("node.json")) QVERIFY(is_char_device(node));

        // A planted PATH.tmp link to a file someone wants overwritten: untouched, the cache written beside it.
        const QString victim = write_all(d + "/victim", "precious");
        QVERIFY(QFile::link(victim, d + "/tune.json.tmp"));
        Child c = tune(d + "/tune.json");
        QVERIFY2(c.exit_code == 0, c.err.constData());
        QCOMPARE(read_all(victim), QByteArray("precious"));
        QVERIFY(QFileInfo(d + "/tune.json.tmp").isSymLink());
        QVERIFY(QFileInfo(d + "/tune.json").isFile() && !QFileInfo(d + "/tune.json").isSymLink());
        const QByteArray cache = read_all(d + "/tune.json");
        QVERIFY(QJsonDocument::fromJson(cache).object()["entries"].isArray());

        // Through a link to a regular file: the link stays, its target is the cache.
        write_all(d + "/real.json", "old");
        QVERIFY(QFile::link(d + "/real.json", d + "/link.json"));
        c = tune(d + "/link.json");
        QVERIFY2(c.exit_code == 0, c.err.constData());
        QVERIFY(QFileInfo(d + "/link.json").isSymLink());
        QVERIFY(QJsonDocument::fromJson(read_all(d + "/real.json")).object()["entries"].isArray());
        QCOMPARE(temporaries(d), QStringList{"tune.json.tmp"});

        // A full disk: a tmpfs that the old cache and a filler fill, where this process may mount one; and a
        // file size limit (RLIMIT_FSIZE) everywhere. The old cache stays whole and no temporary file is left.
        const QString small = d + "/small-disk";
        QVERIFY(QDir().mkpath(small));
        if (::mount("tmpfs", QFile::encodeName(small).constData(), "tmpfs", MS_NOSUID | MS_NODEV, "size=16k") == 0) {
            struct Unmount {
                QString at;
                ~Unmount() { ::umount2(QFile::encodeName(at).constData(), MNT_DETACH); }
            } unmount{small};
            write_all(small + "/tune.json", cache);
            QByteArray filler(16 << 10, 'x');
            QFile f(small + "/filler");
            QVERIFY(f.open(QIODevice::WriteOnly));
            while (f.write(filler.constData(), 4096) == 4096 && f.flush()) {
            }
            f.close();
            c = tune(small + "/tune.json");
            const QString err = one_error_line(c, "tmpfs full");
            QVERIFY2(err.contains("No space left on device"), qPrintable(err));
            QCOMPARE(read_all(small + "/tune.json"), cache);
            QCOMPARE(temporaries(small), QStringList());
        } else {
            qInfo("mounting a tmpfs is not permitted here: the full disk is simulated with RLIMIT_FSIZE only");
        }
        ChildSetup fsize;
        fsize.fsize = 512;  // smaller than one entry
        c = tune(d + "/tune.json", fsize);
        const QString err = one_error_line(c, "RLIMIT_FSIZE");
        QVERIFY2(err.contains("File too large"), qPrintable(err));
        QCOMPARE(read_all(d + "/tune.json"), cache);
        QCOMPARE(temporaries(d), QStringList{"tune.json.tmp"});
    }

    // ---------------------------------------------------------------- item 7: every file written commits
    // The chat's history (kept on a terminal) was opened by libedit itself: a FIFO there blocked the chat's start,
    // and a save on a full disk truncated the history. Now a non-file is left alone with a warning, and a save
    // commits as every output does: the old history stays whole when the new one cannot be written.
    void chat_history_is_read_and_written_safely() {
        const QString state = dir_.filePath("state-fifo");
        QVERIFY(QDir().mkpath(state + "/colibri"));
        QVERIFY(mkfifo(QFile::encodeName(state + "/colibri/chat_history").constData(), 0644) == 0);
        TerminalRun r = chat_on_terminal(model_, state, no_cache_, "hello there");
        QVERIFY2(!r.hung && WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, r.screen.constData());
        QVERIFY2(r.screen.contains("chat history " + QFile::encodeName(state) + "/colibri/chat_history: not a regular file (a FIFO)"),
                 r.screen.constData());
        QVERIFY(is_fifo(state + "/colibri/chat_history"));

        const QString full = dir_.filePath("state-full");
        QVERIFY(QDir().mkpath(full + "/colibri"));
        const QString history = full + "/colibri/chat_history";
        r = chat_on_terminal(model_, full, no_cache_, "first line");
        QVERIFY2(!r.hung && WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, r.screen.constData());
        const QByteArray saved = read_all(history);
        QVERIFY2(saved.contains("first"), saved.constData());
        // A file size limit below what the next save needs: the save fails, says so once, the old file stays.
        r = chat_on_terminal(model_, full, no_cache_, "a second line, long enough not to fit under the limit", saved.size() + 8);
        QVERIFY2(!r.hung && WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, r.screen.constData());
        QVERIFY2(r.screen.contains("File too large; not saved from now on"), r.screen.constData());
        QCOMPARE(read_all(history), saved);
        QCOMPARE(temporaries(full + "/colibri"), QStringList());
    }

    // colibri-make-model wrote config.json, generation_config.json and the tokenizer files with plain streams: a
    // FIFO there blocked it, a link to a device was written through, a failed write went unnoticed.
    void make_model_commits_its_files() {
        ChildSetup setup = clean();
        setup.program = COLIBRI_BUILD_DIR "/bin/colibri-make-model";
        const QStringList args{"--family", "mixtral", "--vocab", "4096", "--hidden", "64", "--layers", "1", "--heads", "2", "--kv-heads", "1",
                               "--experts", "4", "--top-k", "2", "--ffn", "64", "--tokenizer", QStringLiteral(COLIBRI_SOURCE_DIR "/resources/demo_model")};
        for (const char* name : {"config.json", "generation_config.json", "tokenizer.json"}) {
            const QString out = dir_.filePath(QString("make-fifo-") + name);
            QVERIFY(QDir().mkpath(out));
            QVERIFY(mkfifo(QFile::encodeName(out + "/" + name).constData(), 0644) == 0);
            const Child c = run(QStringList{"-o", out} + args, setup, 60000);
            QVERIFY2(!c.timed_out && c.exit_code == 1, c.err.constData());
            QVERIFY2(c.err.startsWith("colibri-make-model: " + (out + "/" + name).toUtf8() + ": not a regular file (a FIFO): refusing to replace it"),
                     c.err.constData());
            QVERIFY(is_fifo(out + "/" + name));
            QVERIFY(!QFile::exists(out + "/model.safetensors"));
        }
        const QString out = dir_.filePath("make-null");
        QVERIFY(QDir().mkpath(out));
        QVERIFY(QFile::link("/dev/null", out + "/config.json"));
        const Child c = run(QStringList{"-o", out, "--config-only"} + args, setup, 60000);
        QVERIFY2(c.exit_code == 1 && c.err.contains("not a regular file (a device): refusing to replace it"), c.err.constData());
        QVERIFY(QFileInfo(out + "/config.json").isSymLink() && is_char_device("/dev/null"));
    }

    // ---------------------------------------------------------------- item 8: threads refused
    // A process limit (RLIMIT_NPROC, binding a user other than root: the unprivileged "nobody" when this runs as
    // root) refuses the worker threads: generate -t N fails with one line (it died of "terminate called without
    // an active exception"), and serve fails before it says it listens (it printed "listening" and then served
    // nobody) or, where every thread starts, listens and stops on SIGTERM.
    void refused_threads_are_a_clean_error() {
        ChildSetup limited;
        limited.env = {no_cache_.toStdString(), kNoLeakCheck};
        if (geteuid() == 0) {
            limited.as_nobody = true;
        } else {
            qInfo("not root: RLIMIT_NPROC applies to this user's own processes, so only the limit of 1 is tried");
        }
        limited.nproc = 1;
        // With -t 1 nothing but the main thread runs: it works under the limit (so the limit is what fails -t 4).
        Child c = run({"generate", "-m", model_, "--tokens", "1,2", "-n", "2", "--greedy", "-t", "1"}, limited);
        if (c.exit_code == 125 || c.exit_code == 127) QSKIP("cannot run the CLI under a process limit here");
        QVERIFY2(c.exit_code == 0, c.err.constData());
        c = run({"generate", "-m", model_, "--tokens", "1,2", "-n", "2", "--greedy", "-t", "4"}, limited);
        QString err = one_error_line(c, "generate -t 4");
        QVERIFY2(err.startsWith("colibri: generate: cannot start 3 worker threads: Resource temporarily unavailable"), qPrintable(err));

        const QList<rlim_t> limits = geteuid() == 0 ? QList<rlim_t>{1, 2, 3, 5, 40} : QList<rlim_t>{1};
        for (rlim_t n : limits) {
            limited.nproc = n;
            Child s;
            QVERIFY(s.start({"serve", "-m", model_, "--port", "0", "--slots", "1", "-t", "2"}, limited));
            s.finish(60000);
            err = one_error_line(s, QString("serve under %1 processes").arg(n));
            QVERIFY2(err.startsWith("colibri: serve: cannot start ") && err.contains("Resource temporarily unavailable"), qPrintable(err));
            QVERIFY(!s.err.contains("listening"));
        }
        if (geteuid() == 0) {  // enough for every thread: it serves, and a SIGTERM stops it
            limited.nproc = 200;
            Child s;
            QVERIFY(s.start({"serve", "-m", model_, "--port", "0", "--slots", "1", "-t", "2"}, limited));
            QVERIFY2(s.wait_for_err("listening", 60000), s.err.constData());
            s.send(SIGTERM);
            s.finish(30000);
            QVERIFY2(!s.timed_out && s.exit_code == 0 && s.err.contains("stopped"), s.err.constData());
        }
    }

    // SIGTERM is honoured at any moment of serve's life: while it loads and starts (the default action, or a clean
    // stop once its signal thread runs) and right after it says it listens (a stop before httplib's listen loop
    // had begun was lost, and the server ran on).
    void serve_always_honours_sigterm() {
        for (int delay_ms : {0, 5, 20, 50, 100, -1}) {
            Child s;
            QVERIFY(s.start({"serve", "-m", model_, "--port", "0", "--slots", "1", "-t", "2"}, clean()));
            if (delay_ms < 0) QVERIFY2(s.wait_for_err("listening", 60000), s.err.constData());
            else QTest::qWait(delay_ms);
            s.send(SIGTERM);
            s.finish(30000);
            const QString what = QString("SIGTERM after %1 ms: exit %2, signal %3: ").arg(delay_ms).arg(s.exit_code).arg(s.term_signal) + s.err;
            QVERIFY2(!s.timed_out, qPrintable(what));
            QVERIFY2((s.term_signal == SIGTERM) || (s.term_signal == 0 && s.exit_code == 0), qPrintable(what));
        }
    }

    // The same through a memory limit, which binds root too: each thread reserves a stack of RLIMIT_STACK, so a
    // 512 MiB stack under a 3 GiB address space leaves room for the process but not for eight threads.
    void threads_refused_for_memory() {
#ifdef COLIBRI_SANITIZED
        QSKIP("AddressSanitizer reserves terabytes of address space: RLIMIT_AS cannot be applied");
#endif
        ChildSetup limited;
        limited.env = {no_cache_.toStdString(), kNoLeakCheck};
        limited.stack = rlim_t(512) << 20;
        limited.address_space = rlim_t(3) << 30;
        Child c = run({"generate", "-m", model_, "--tokens", "1,2", "-n", "2", "--greedy", "-t", "1"}, limited);
        QVERIFY2(c.exit_code == 0, c.err.constData());
        c = run({"generate", "-m", model_, "--tokens", "1,2", "-n", "2", "--greedy", "-t", "8"}, limited);
        const QString err = one_error_line(c, "generate -t 8 under RLIMIT_AS");
        QVERIFY2(err.startsWith("colibri: generate: cannot start 7 worker threads: Resource temporarily unavailable"), qPrintable(err));
        Child s;
        QVERIFY(s.start({"serve", "-m", model_, "--port", "0", "--slots", "1", "-t", "1"}, limited));
        s.finish(60000);
        const QString serve_err = one_error_line(s, "serve under RLIMIT_AS");
        QVERIFY2(serve_err.startsWith("colibri: serve: cannot start "), qPrintable(serve_err));
    }

    // ---------------------------------------------------------------- item 9: temperatures
    // Temperatures of 1e-39 and below gave token 0 every time: they pick what greedy picks.
    void tiny_temperatures_are_greedy() {
        const QStringList base{"generate", "-m", model_, "--tokens", "5,6,7", "-n", "8", "--json", "--seed", "3"};
        const Child greedy = run(base + QStringList{"--greedy"}, clean());
        QVERIFY2(greedy.exit_code == 0, greedy.err.constData());
        const QJsonArray expected = QJsonDocument::fromJson(greedy.out).object()["new_ids"].toArray();
        QCOMPARE(expected.size(), 8);
        for (const char* t : {"1e-39", "1e-45", "1e-30", "1e-6"}) {
            const Child c = run(base + QStringList{"--temperature", t}, clean());
            QVERIFY2(c.exit_code == 0, c.err.constData());
            QCOMPARE(QJsonDocument::fromJson(c.out).object()["new_ids"].toArray(), expected);
        }
    }

    // ---------------------------------------------------------------- item 9: routing traces
    // A 71-byte trace declaring 10^8 experts took 3.8 GB and 52 s; an undeclared id of a million set the count
    // too. Both are refused at once, in little memory.
    void routing_trace_sizes_are_bounded() {
        const QString huge = write_all(dir_.filePath("huge-experts.json"), "{\"n_experts\": 100000000, \"layers\": [{\"layer\": 0, \"experts\": [[0]]}]}");
        QVERIFY(QFileInfo(huge).size() < 80);
        Child c = run({"cache-sim", huge});
        QString err = one_error_line(c, "10^8 experts");
        QVERIFY2(err.contains("\"n_experts\" 100000000 is more than a model can have (4096)"), qPrintable(err));
        qInfo("10^8 experts: %.2f s, peak RSS %ld MiB", c.seconds, c.peak_rss_mib);
        QVERIFY(c.seconds < 10 * build_slowdown() && rss_below(c, 256));
        const QString big_id = write_all(dir_.filePath("big-id.json"), "{\"layers\": [{\"layer\": 0, \"experts\": [[999999]]}]}");
        c = run({"cache-sim", big_id});
        err = one_error_line(c, "id 999999");
        QVERIFY2(err.contains("expert 999999 out of range (a model has at most 4096 experts)"), qPrintable(err));
        QVERIFY(c.seconds < 10 * build_slowdown() && rss_below(c, 256));
        // A trace's memory is that of its ids, not of a parsed document: 26 MB of top-1 choices took about 40 times
        // its size (4 GB for 100 MB); read as a stream into flat lists it needs about 4 times.
        QByteArray many = "{\"layers\": [{\"layer\": 0, \"experts\": [[0]";
        many.reserve(26 << 20);
        while (many.size() < (26 << 20)) many += ",[1],[2],[3],[0]";
        many += "]}]}";
        const QString big = write_all(dir_.filePath("many-positions.json"), many);
        many.clear();
        c = run({"cache-sim", big, "--slots", "1", "--json"});
        QVERIFY2(c.exit_code == 0, c.err.constData());
        qInfo("26 MB of top-1 choices: %.2f s, peak RSS %ld MiB", c.seconds, c.peak_rss_mib);
        QVERIFY2(rss_below(c, 160), qPrintable(QString::number(c.peak_rss_mib)));
        // At the bound, a sweep of every slot count stays quick.
        const QString at_bound = write_all(dir_.filePath("at-bound.json"), "{\"n_experts\": 4096, \"layers\": [{\"layer\": 0, \"experts\": [[0], [4095]]}]}");
        c = run({"cache-sim", at_bound, "--json"});
        QVERIFY2(c.exit_code == 0, c.err.constData());
        QVERIFY(c.seconds < 30 * build_slowdown());
    }

    // A FIFO (or any non-regular file) given as a trace is refused instead of waited on, for cache-sim's trace,
    // its --pin-trace and --hot-trace.
    void fifo_traces_do_not_hang() {
        const QString fifo = dir_.filePath("trace.fifo");
        QVERIFY(mkfifo(QFile::encodeName(fifo).constData(), 0644) == 0);
        const QString good = write_all(dir_.filePath("small-trace.json"), "{\"layers\": [{\"layer\": 0, \"experts\": [[1, 2], [3, 0]]}]}");
        const ChildSetup setup = clean();
        for (const QStringList& args : {QStringList{"cache-sim", fifo}, QStringList{"cache-sim", good, "--pin-trace", fifo},
                                        QStringList{"logits", "-m", model_, "--tokens", "1,2", "--ram-budget", "64M", "--cache-policy", "pinned",
                                                    "--hot-trace", fifo},
                                        QStringList{"cache-sim", dir_.path()}}) {
            const Child c = run(args, setup, 30000);
            const QString err = one_error_line(c, args.join(' '));
            QVERIFY2(err.contains("not a regular file (a FIFO)") || err.contains("not a regular file (a directory)"), qPrintable(err));
        }
        QVERIFY(is_fifo(fifo));
    }

    // --hot-trace must be a trace of the model it pins experts for: the same experts per layer and per token, and
    // layers that are the model's MoE layers. Each mismatch names itself.
    void hot_trace_must_fit_the_model() {
        const ChildSetup setup = clean();
        const Child route = run({"route", "-m", model_, "--tokens", "1,2,3", "--json"}, setup);
        QVERIFY2(route.exit_code == 0, route.err.constData());
        const QJsonObject trace = QJsonDocument::fromJson(route.out).object();
        const QStringList pinned{"logits", "-m", model_, "--tokens", "1,2", "--ram-budget", "64M", "--cache-policy", "pinned", "--hot-trace"};
        const QString own = write_all(dir_.filePath("own-trace.json"), route.out);
        const Child ok = run(pinned + QStringList{own}, setup);
        QVERIFY2(ok.exit_code == 0, ok.err.constData());

        struct Mismatch {
            const char* name;
            std::function<void(QJsonObject&)> edit;
            const char* says;
        };
        const Mismatch mismatches[] = {
            {"more-experts", [](QJsonObject& t) { t["n_experts"] = 64; }, "routes over 64 experts per layer, the model has 4"},
            {"layer-past", [](QJsonObject& t) {
                 QJsonArray layers = t["layers"].toArray();
                 QJsonObject l = layers[0].toObject();
                 l["layer"] = 7;
                 layers[0] = l;
                 t["layers"] = layers;
             }, "layer 7 is past the model's 2 layers"},
            {"top-1", [](QJsonObject& t) {
                 QJsonArray layers;
                 for (const auto& v : t["layers"].toArray()) {
                     QJsonObject l = v.toObject();
                     QJsonArray experts;
                     for (const auto& choice : l["experts"].toArray()) experts.append(QJsonArray{choice.toArray()[0]});
                     l["experts"] = experts;
                     layers.append(l);
                 }
                 t["layers"] = layers;
             }, "chooses 1 experts per token, the model 2"},
        };
        for (const Mismatch& m : mismatches) {
            QJsonObject t = trace;
            m.edit(t);
            const QString path = write_all(dir_.filePath(QString("trace-%1.json").arg(m.name)), QJsonDocument(t).toJson());
            const Child c = run(pinned + QStringList{path}, setup);
            const QString err = one_error_line(c, m.name);
            QVERIFY2(err.startsWith("colibri: logits: --hot-trace: " + path + ": not a trace of this model: ") && err.contains(m.says), qPrintable(err));
        }
    }
};

QTEST_GUILESS_MAIN(TestHostileRuntime)
#include "test_hostile_runtime.moc"
