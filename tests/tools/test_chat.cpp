// `colibri chat` on the demo model the build makes: streaming replies per turn, /reset, EOF exits cleanly;
// and the demo model's logits are the same for -t 1 and -t 2.
#include <QtTest>

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
        // The README's first transcript: the trained demo model adds, and its reply ends by itself at
        // <|im_end|> well before the token limit.
        const CliResult r = run_cli({"chat", "--greedy", "-n", "64"}, "What is 23 plus 45?\nWhat is 71 minus 28?\n");
        QVERIFY2(!r.crashed && r.exit_code == 0, r.err.constData());
        const QList<QByteArray> replies = r.out.trimmed().split('\n');
        QCOMPARE(replies.size(), 2);
        // Each reply ends with its answer's sentence: the line is complete, so generation stopped there.
        QVERIFY2(replies[0].endsWith("So 23 plus 45 is 68."), r.out.constData());
        QVERIFY2(replies[1].endsWith("So 71 minus 28 is 43."), r.out.constData());
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
