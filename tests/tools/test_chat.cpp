// `colibri chat` on the demo model the build makes: streaming replies per turn, /reset, EOF exits cleanly,
// commands, statistics, Ctrl-C and line editing on a pseudo-terminal; and the demo model's logits are the same
// for -t 1 and -t 2. The demo model's own sampling defaults (its generation_config.json: greedy) are used when no
// sampler option is given, and `colibri start` picks the Studio or this chat by the display.
#include <QtTest>
#include <poll.h>
#include <pty.h>
#include <termios.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../test_support.h"

using namespace colibri::test;

static const QString kDemo = QStringLiteral(COLIBRI_BUILD_DIR "/demo/demo.bin");

class TestChat : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() { QVERIFY2(QFile::exists(kDemo), "the build did not make the demo model"); }

    void demo_model_is_self_contained() {
        const CliResult r = run_cli({"info", kDemo, "--json"});
        QCOMPARE(r.exit_code, 0);
        const QJsonObject o = QJsonDocument::fromJson(r.out).object();
        QCOMPARE(o["tokenizer"].toString(), QString("byte-level BPE"));
        QVERIFY(o["chat_template"].toBool());
        QCOMPARE(run_cli({"check", kDemo}).exit_code, 0);
    }

    void reset_gives_the_same_reply_again() {
        // Greedy: after /reset the same message must produce the same reply as in a fresh conversation.
        const CliResult r = run_cli({"chat", "-n", "12", "--greedy"}, "Hello there!\n/reset\nHello there!\n");
        QVERIFY2(!r.crashed && r.exit_code == 0, r.err.constData());
        const QList<QByteArray> replies = r.out.split('\n');
        QVERIFY2(replies.size() >= 2, r.out.constData());
        QVERIFY(!replies[0].isEmpty());
        QCOMPARE(replies[1], replies[0]);
        QVERIFY(r.err.contains("(conversation reset)"));
    }

    void multi_turn_reuses_the_prefix() {
        // Turns after the first evaluate only the new tokens on top of the cached conversation; that must give
        // exactly what re-evaluating the whole conversation gives.
        const QByteArray input = "First question\nSecond question\nThird one, longer than the others\n";
        const CliResult reuse = run_cli({"chat", "-n", "6", "--greedy", "-m", kDemo}, input);
        const CliResult fresh = run_cli({"chat", "-n", "6", "--greedy", "-m", kDemo, "--no-prefix-cache"}, input);
        QVERIFY2(reuse.exit_code == 0 && fresh.exit_code == 0, reuse.err.constData());
        QCOMPARE(reuse.out.count('\n'), 3);
        QCOMPARE(reuse.out, fresh.out);
    }

    void full_context_is_reported_and_reset_recovers() {
        const CliResult r = run_cli({"chat", "-m", kDemo, "-c", "24", "-n", "8", "--greedy"},
                                    "Tell me a very long story about a hummingbird that travels across the sea\n/reset\nHi\n");
        QCOMPARE(r.exit_code, 0);
        QVERIFY2(r.err.contains("colibri: chat: conversation would exceed the context of 24 tokens"), r.err.constData());
        QCOMPARE(r.out.count('\n'), 1);  // only the reply after /reset
    }

    void readme_transcript_answers_and_stops() {
        // The README's first transcript, typed into the README's command as it stands (the default reply limit
        // and context included): the trained demo model adds, and its reply ends by itself at <|im_end|>.
        const CliResult r = run_cli({"chat", "--greedy"}, "What is 23 plus 45?\nWhat is 71 minus 28?\n");
        QVERIFY2(!r.crashed && r.exit_code == 0, r.err.constData());
        const QList<QByteArray> replies = r.out.trimmed().split('\n');
        QCOMPARE(replies.size(), 2);
        // Each reply ends with its answer's sentence: the line is complete, so generation stopped there.
        QVERIFY2(replies[0].endsWith("So 23 plus 45 is 68."), r.out.constData());
        QVERIFY2(replies[1].endsWith("So 71 minus 28 is 43."), r.out.constData());
        QCOMPARE(r.err.count("tokens/s; prompt"), 2);
        QVERIFY2(!r.err.contains("reached --max-tokens"), r.err.constData());
    }

    void commands_blank_lines_and_statistics() {
        // /help lists the commands; an unknown /command is refused, not sent to the model; blank lines are
        // ignored; // sends a message that starts with /; every reply is followed by its tokens/s on stderr;
        // /exit ends the chat before the line after it.
        const CliResult r = run_cli({"chat", "-m", kDemo, "-n", "4", "--greedy"},
                                    "/help\n\n   \n/bogus argument\nHello\n\t\n//slash message\n/exit\nnever sent\n");
        QVERIFY2(!r.crashed && r.exit_code == 0, r.err.constData());
        QVERIFY2(r.err.contains("/reset") && r.err.contains("/swap") && r.err.contains("/exit"), r.err.constData());
        QVERIFY2(r.err.contains("colibri: chat: unknown command '/bogus'"), r.err.constData());
        static const QRegularExpression stats(QStringLiteral("\\[(\\d+) tokens?, [0-9.]+ tokens/s; prompt (\\d+) tokens?, [0-9.]+ tokens/s; reached --max-tokens\\]"));
        QCOMPARE(r.err.count("tokens/s; prompt"), 2);  // Hello and /slash message
        auto it = stats.globalMatch(QString::fromUtf8(r.err));
        int lines = 0;
        while (it.hasNext()) {
            const auto m = it.next();
            QCOMPARE(m.captured(1).toInt(), 4);
            QVERIFY(m.captured(2).toInt() > 0);
            ++lines;
        }
        QCOMPARE(lines, 2);
        QCOMPARE(r.out.count('\n'), 2);
    }

    void ctrl_c_stops_the_reply_not_the_program() {
        // Each message asks for up to 4000 tokens of a random model; Ctrl-C (SIGINT) stops each reply once it
        // streams, and the program goes on to the next message.
        QProcess p;
        p.start(QStringLiteral(COLIBRI_CLI), {"chat", "-m", QStringLiteral(COLIBRI_CHAT_RANDOM_MODEL), "-c", "4096",
                                              "-n", "4000", "--greedy", "--ignore-eos"});
        QVERIFY(p.waitForStarted());
        QByteArray err;
        for (const char* message : {"Tell me a long story\n", "Another one\n"}) {
            p.write(message);
            QByteArray out;
            QElapsedTimer clock;
            clock.start();
            while (out.size() < 8 && clock.elapsed() < 120000) {
                p.waitForReadyRead(200);
                out += p.readAllStandardOutput();
                err += p.readAllStandardError();
            }
            QVERIFY2(out.size() >= 8, "no reply streamed");
            QCOMPARE(::kill(static_cast<pid_t>(p.processId()), SIGINT), 0);
            // The reply ends with its statistics line, marked stopped.
            const qsizetype stopped = err.count("; stopped]");
            clock.restart();
            while (err.count("; stopped]") == stopped && clock.elapsed() < 60000 && p.state() == QProcess::Running) {
                p.waitForReadyRead(200);
                p.readAllStandardOutput();
                err += p.readAllStandardError();
            }
            QVERIFY2(err.count("; stopped]") == stopped + 1, err.constData());
        }
        p.closeWriteChannel();
        QVERIFY(p.waitForFinished(60000));
        err += p.readAllStandardError();
        QCOMPARE(p.exitStatus(), QProcess::NormalExit);
        QCOMPARE(p.exitCode(), 0);
        QCOMPARE(err.count("tokens/s; prompt"), 2);
        QVERIFY2(!err.contains("reached --max-tokens"), err.constData());
    }

    void line_editing_and_history_on_a_terminal() {
        // On a terminal the chat reads through libedit: the up arrow recalls the last line (sent again, so a
        // second reply), Ctrl-C at the prompt clears the line being typed without ending the program, and the
        // history outlives the run (a new run's up arrow finds it).
        QTemporaryDir state;
        QVERIFY(state.isValid());
        const QByteArray history = QFile::encodeName(state.path()) + "/colibri/chat_history";
        for (int run = 0; run < 2; ++run) {
            int master = -1;
            const pid_t pid = forkpty(&master, nullptr, nullptr, nullptr);
            QVERIFY(pid >= 0);
            if (pid == 0) {
                setenv("XDG_STATE_HOME", QFile::encodeName(state.path()).constData(), 1);
                setenv("TERM", "xterm", 1);
                execl(COLIBRI_CLI, COLIBRI_CLI, "chat", "-m", COLIBRI_BUILD_DIR "/demo/demo.bin", "-n", "6", "--greedy",
                      static_cast<char*>(nullptr));
                _exit(127);
            }
            QByteArray screen;
            // Reads what the chat shows for up to 200 ms; false at the end of the terminal's output.
            const auto pump = [&]() {
                pollfd fd{master, POLLIN, 0};
                if (poll(&fd, 1, 200) <= 0) return true;
                char buf[4096];
                const ssize_t n = read(master, buf, sizeof buf);
                if (n <= 0) return false;
                screen.append(buf, n);
                return true;
            };
            // Reads what the chat shows until `needle` has appeared `count` times (or 60 s pass).
            const auto wait_for = [&](const QByteArray& needle, qsizetype count) {
                QElapsedTimer clock;
                clock.start();
                while (screen.count(needle) < count && clock.elapsed() < 60000)
                    if (!pump()) break;
                return screen.count(needle) >= count;
            };
            const auto type = [&](const QByteArray& keys) { QCOMPARE(write(master, keys.constData(), keys.size()), keys.size()); };
            // The prompt shows only once the line editor has the terminal in edit mode: out of canonical mode, so
            // that keys typed at the prompt are the editor's at once, and with ISIG off, so that Ctrl-C reaches it as
            // a key rather than as a signal that could land between two of its reads and be lost. (Drawn before the
            // switch, keys typed at it met a cooked terminal: echoed twice, and a Ctrl-D there became an end-of-file
            // mark that edit mode read as a NUL key, so the chat never ended.)
            const auto at_prompt = [&]() {
                termios mode{};
                return tcgetattr(master, &mode) == 0 && (mode.c_lflag & (ICANON | ISIG)) == 0;
            };
            QVERIFY2(wait_for("> ", 1), screen.constData());
            QVERIFY(at_prompt());
            if (run == 0) {
                type("What is 2 plus 3?\r");
                QVERIFY2(wait_for("tokens/s; prompt", 1), screen.constData());
                QVERIFY2(wait_for("> ", 2), screen.constData());
                QVERIFY(at_prompt());
            }
            type("\x1b[A\r");  // up arrow: the last line again, sent
            QVERIFY2(wait_for("tokens/s; prompt", run == 0 ? 2 : 1), screen.constData());
            // The prompt after that reply (counting prompts would not do: the up arrow redraws the line, prompt and all).
            QElapsedTimer reply;
            reply.start();
            while (screen.lastIndexOf("> ") < screen.lastIndexOf("tokens/s; prompt") && reply.elapsed() < 60000)
                if (!pump()) break;
            QVERIFY2(screen.lastIndexOf("> ") > screen.lastIndexOf("tokens/s; prompt"), screen.constData());
            QVERIFY(at_prompt());
            type("never sent");
            QVERIFY2(wait_for("never sent", screen.count("never sent") + 1), screen.constData());
            const qsizetype prompts = screen.count("> ");
            type("\x03");  // Ctrl-C at the prompt: the typed text is dropped, the chat goes on
            QVERIFY2(wait_for("> ", prompts + 1), screen.constData());
            QVERIFY2(screen.contains("never sent^C"), screen.constData());
            QVERIFY(at_prompt());
            type("\x04");  // Ctrl-D on an empty line: the end
            int status = 0;
            pid_t ended = 0;
            QElapsedTimer clock;
            clock.start();
            while ((ended = waitpid(pid, &status, WNOHANG)) == 0 && clock.elapsed() < 30000) pump();  // drain the terminal
            if (ended == 0) kill(pid, SIGKILL), waitpid(pid, &status, 0);
            close(master);
            QVERIFY2(ended == pid, ("Ctrl-D did not end the chat: " + screen).constData());
            QVERIFY2(WIFEXITED(status) && WEXITSTATUS(status) == 0, screen.constData());
            QCOMPARE(screen.count("tokens/s; prompt"), run == 0 ? 2 : 1);
            QVERIFY2(!screen.contains("never sent\r\n["), screen.constData());
        }
        QFile saved(QString::fromLocal8Bit(history));
        QVERIFY2(saved.open(QIODevice::ReadOnly), history.constData());
        const QByteArray lines = saved.readAll();
        // libedit's history file encodes blanks (What\\040is...): look for words.
        QVERIFY2(lines.contains("What") && lines.contains("plus"), lines.constData());
        QVERIFY2(!lines.contains("never"), lines.constData());
    }

    // The demo model ships generation_config.json with do_sample false: the build's conversion carries it into
    // the .bin, and generate/chat decode greedily unless the user asks for sampling.
    void the_models_sampling_defaults_are_used() {
        const QJsonObject info = QJsonDocument::fromJson(run_cli({"info", kDemo, "--json"}).out).object();
        QCOMPARE(info["sampling_defaults"].toString(), QStringLiteral("greedy"));
        QCOMPARE(info["format_version"].toString(), QStringLiteral("2.4"));
        auto ids = [](const QStringList& extra) {
            // A prose prompt the model continues for a dozen tokens (the fine-tuned model ends "Once upon a time" after 7).
            const CliResult r = run_cli(QStringList{"generate", "-m", kDemo, "--prompt", "The wise man said", "-n", "24", "--json"} + extra);
            return r.exit_code == 0 ? QJsonDocument::fromJson(r.out).object()["new_ids"].toArray() : QJsonArray{};
        };
        const QJsonArray greedy = ids({"--greedy"});
        QVERIFY(greedy.size() >= 8);  // it may end its reply before -n
        // No sampler option: greedy whatever the seed (Colibri's own default, temperature 0.8, would sample).
        for (const char* seed : {"1", "2"}) QCOMPARE(ids({"--seed", seed}), greedy);
        // An option the user gives wins over the model's default: sampling at temperature 1.5 strays from greedy.
        bool strayed = false;
        for (const char* seed : {"1", "2", "3", "4"}) strayed = strayed || ids({"--seed", seed, "--temperature", "1.5"}) != greedy;
        QVERIFY(strayed);
        // chat too: the same replies with and without --greedy.
        const QByteArray input = "Hello there!\nWhat is 12 plus 30?\n";
        const CliResult plain = run_cli({"chat", "-n", "40", "--seed", "7"}, input);
        const CliResult forced = run_cli({"chat", "-n", "40", "--greedy"}, input);
        QVERIFY2(plain.exit_code == 0 && forced.exit_code == 0, plain.err.constData());
        QCOMPARE(plain.out, forced.out);
        // --help says so.
        for (const char* command : {"chat", "generate"}) {
            const QByteArray help = run_cli({command, "--help"}).out;
            QVERIFY2(help.contains("take the model's defaults from its generation_config.json"), help.constData());
        }
    }

    // `colibri start`: the Studio on the demo model with a display, the terminal chat without one (saying so).
    void start_opens_the_studio_or_the_terminal_chat() {
        const QByteArray display = qgetenv("DISPLAY"), wayland = qgetenv("WAYLAND_DISPLAY");
        qunsetenv("DISPLAY");
        qunsetenv("WAYLAND_DISPLAY");
        const CliResult none = run_cli({"start", "--dry-run"});
        QCOMPARE(none.exit_code, 0);
        QCOMPARE(none.out, QByteArray(COLIBRI_CLI " chat -m ") + kDemo.toUtf8() + "\n");
        QCOMPARE(none.err, QByteArray("colibri: start: no display ($DISPLAY and $WAYLAND_DISPLAY are not set): starting the chat in "
                                      "this terminal instead of Colibri Studio\n"));
        // Really: the README's first question, answered in the terminal with the model's default (greedy) sampling.
        const CliResult chat = run_cli({"start"}, "What is 23 plus 45?\n");
        QVERIFY2(chat.exit_code == 0 && !chat.crashed, chat.err.constData());
        QVERIFY(chat.err.startsWith("colibri: start: no display"));
        QVERIFY2(chat.out.trimmed().endsWith("So 23 plus 45 is 68."), chat.out.constData());
        qputenv("WAYLAND_DISPLAY", "wayland-0");
        const CliResult shown = run_cli({"start", "--dry-run"});
        QCOMPARE(shown.exit_code, 0);
        if (QFile::exists(QStringLiteral(COLIBRI_BUILD_DIR "/bin/colibri-studio"))) {
            QCOMPARE(shown.out, QByteArray(COLIBRI_BUILD_DIR "/bin/colibri-studio ") + kDemo.toUtf8() + "\n");
            QVERIFY(shown.err.isEmpty());
        } else {
            QVERIFY(shown.err.contains("Colibri Studio was not built"));
        }
        const CliResult terminal = run_cli({"start", "--dry-run", "--terminal"});
        QVERIFY(terminal.out.contains(" chat -m "));
        QVERIFY(terminal.err.contains("--terminal was given"));
        const CliResult missing = run_cli({"start", "-m", "/no/such/model.bin"});
        QCOMPARE(missing.exit_code, 1);
        QVERIFY2(missing.err.startsWith("colibri: start: /no/such/model.bin: no such file"), missing.err.constData());
        if (display.isEmpty()) qunsetenv("DISPLAY");
        else qputenv("DISPLAY", display);
        if (wayland.isEmpty()) qunsetenv("WAYLAND_DISPLAY");
        else qputenv("WAYLAND_DISPLAY", wayland);
    }

    void eof_exits_cleanly() {
        const CliResult r = run_cli({"chat", "-m", kDemo}, {});
        QCOMPARE(r.exit_code, 0);
        QVERIFY(!r.crashed);
    }

    void demo_logits_independent_of_threads() {
        QByteArray first;
        for (const char* t : {"1", "2"}) {
            const QString out = QStringLiteral(COLIBRI_BUILD_DIR "/demo-logits-t") + t + ".f32";
            const CliResult r = run_cli({"logits", "-m", kDemo, "--prompt", "The quick brown fox jumps over the lazy dog", "-t", t, "--out", out});
            QCOMPARE(r.exit_code, 0);
            const QByteArray b = read_all(out);
            QVERIFY(b.size() >= 4096 * 4);  // at least one row of the demo vocabulary
            if (first.isEmpty()) first = b;
            QVERIFY(b == first);
        }
    }
};

QTEST_GUILESS_MAIN(TestChat)
#include "test_chat.moc"
