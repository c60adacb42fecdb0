// The trained demo model the build makes from resources/demo_model: parity with the PyTorch forward pass of its
// training script (training/demo_model/train.py, run on the same f16 weights in f32), and its held-out skills
// measured through the engine (`colibri eval`), as docs/DEMO_MODEL.md reports them.
#include <QtTest>
#include <cmath>

#include "../test_support.h"

using namespace colibri::test;

static const QString kDemo = QStringLiteral(COLIBRI_BUILD_DIR "/demo/demo.bin");
static const QString kRef = QStringLiteral(COLIBRI_TEST_DATA_DIR "/demo_model/");
static const QString kHeldOut = QStringLiteral(COLIBRI_SOURCE_DIR "/resources/demo_model/heldout.jsonl");

class TestDemoModel : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() { QVERIFY2(QFile::exists(kDemo), "the build did not make the demo model"); }

    void logits_match_pytorch() {
        const QString ids = ids_arg(read_json(kRef + "input_ids.json").array());
        const QString out = QStringLiteral(COLIBRI_BUILD_DIR "/demo-parity.f32");
        const CliResult r = run_cli({"logits", "-m", kDemo, "--tokens", ids, "--out", out});
        QVERIFY2(r.exit_code == 0 && !r.crashed, r.err.constData());
        const std::vector<float> got = read_f32(out), want = read_f32(kRef + "logits.f32");
        QVERIFY(!want.empty());
        QCOMPARE(got.size(), want.size());
        double max_diff = 0.0;
        for (size_t i = 0; i < got.size(); ++i) max_diff = std::max(max_diff, std::fabs(double(got[i]) - double(want[i])));
        qInfo("demo model: max |dlogit| against PyTorch = %.3g over %zu logits", max_diff, got.size());
        QVERIFY2(max_diff <= 1e-3, qPrintable(QString("max |dlogit| %1 > 1e-3").arg(max_diff)));
    }

    void routing_matches_pytorch() {
        const QString ids = ids_arg(read_json(kRef + "input_ids.json").array());
        const CliResult r = run_cli({"route", "-m", kDemo, "--tokens", ids, "--json"});
        QVERIFY2(r.exit_code == 0 && !r.crashed, r.err.constData());
        const QJsonArray got = QJsonDocument::fromJson(r.out).object()["layers"].toArray();
        const QJsonArray want = read_json(kRef + "router.json").object()["layers"].toArray();
        QCOMPARE(got.size(), want.size());
        double max_w = 0.0, min_margin = 1.0;
        int tokens = 0;
        for (int l = 0; l < want.size(); ++l) {
            const QJsonObject g = got[l].toObject(), w = want[l].toObject();
            const QJsonArray ge = g["experts"].toArray(), we = w["experts"].toArray();
            const QJsonArray gw = g["weights"].toArray(), ww = w["weights"].toArray();
            const QJsonArray margin = w["margin"].toArray();
            QCOMPARE(ge.size(), we.size());
            for (int t = 0; t < we.size(); ++t, ++tokens) {
                min_margin = std::min(min_margin, margin[t].toDouble());
                QVERIFY2(ge[t].toArray() == we[t].toArray(), qPrintable(QString("layer %1 token %2: experts differ").arg(l).arg(t)));
                for (int k = 0; k < ww[t].toArray().size(); ++k)
                    max_w = std::max(max_w, std::fabs(gw[t].toArray()[k].toDouble() - ww[t].toArray()[k].toDouble()));
            }
        }
        qInfo("demo model: %d routing decisions identical, max |dweight| %.3g, smallest top-2/3rd margin %.3g", tokens,
              max_w, min_margin);
        QVERIFY(max_w <= 1e-4);
    }

    void greedy_generation_matches_pytorch() {
        const QJsonObject ref = read_json(kRef + "generate.json").object();
        const CliResult r = run_cli({"generate", "-m", kDemo, "--tokens", ids_arg(ref["prompt_ids"].toArray()), "-n", "16",
                                     "--greedy", "--json"});
        QVERIFY2(r.exit_code == 0 && !r.crashed, r.err.constData());
        QCOMPARE(QJsonDocument::fromJson(r.out).object()["new_ids"].toArray(), ref["new_ids"].toArray());
    }

    // Held-out dialogues the training never saw, greedy through the chat template. The floors sit a few points
    // under the accuracies docs/DEMO_MODEL.md reports, so that they fail when the model or the engine breaks.
    // Sanitized builds evaluate every 8th dialogue (the same code paths; the accuracies are the release tree's to
    // check: 851 dialogues took 205 s of the CI's ASan run) and keep only the stop-by-itself bound.
    void held_out_skills() {
        QTemporaryDir dir;
        QString dialogues = kHeldOut;
        if (kSanitized) {
            const QList<QByteArray> lines = read_all(kHeldOut).split('\n');
            QByteArray sample;
            for (qsizetype i = 0; i < lines.size(); i += 8) sample += lines[i] + '\n';
            dialogues = dir.filePath("heldout-sample.jsonl");
            write_all(dialogues, sample);
        }
        const CliResult r = run_cli({"eval", "-m", kDemo, "--dialogues", dialogues, "--json"});
        QVERIFY2(r.exit_code == 0 && !r.crashed, r.err.constData());
        const QJsonArray skills = QJsonDocument::fromJson(r.out).object()["skills"].toArray();
        // Measured (docs/DEMO_MODEL.md): arithmetic 97.8 % (sums 99.5 %, differences 96.2 %), compare 99 %,
        // backwards 31.5 %, weekday 2 of 11, country 11 % (asked in a wording never trained), fortune 100 %. Weekday
        // has no floor: it was not learnt.
        const QHash<QString, double> floors{{"arithmetic", 0.95}, {"compare", 0.96}, {"backwards", 0.27},
                                            {"weekday", 0.0}, {"country", 0.07}, {"fortune", 1.0}};
        QCOMPARE(skills.size(), floors.size() + 1);  // and "all"
        bool arithmetic_seen = false;
        for (const auto& v : skills) {
            const QJsonObject s = v.toObject();
            const QString name = s["skill"].toString();
            const int cases = s["cases"].toInt(), stopped = s["stopped"].toInt();
            qInfo("%-10s %4d cases, accuracy %5.1f %%, stopped by itself %d", qPrintable(name), cases,
                  100.0 * s["accuracy"].toDouble(), stopped);
            if (name == "all") continue;
            QVERIFY2(floors.contains(name), qPrintable(name));
            arithmetic_seen |= name == "arithmetic" && (kSanitized ? cases > 0 : cases == 400);
            if (!kSanitized) QVERIFY2(s["accuracy"].toDouble() >= floors[name], qPrintable(name + " below its floor"));
            // Replies end with the end-of-turn token: generation stops by itself.
            QVERIFY2(stopped >= cases * 95 / 100, qPrintable(name + ": replies that did not stop"));
        }
        QVERIFY(arithmetic_seen);  // the bar: >= 90 % of 400 held-out sums and differences
        // Differences as well as sums: the self-description claims both.
        int sums = 0, sums_right = 0, differences = 0, differences_right = 0;
        for (const auto& v : QJsonDocument::fromJson(r.out).object()["replies"].toArray()) {
            const QJsonObject reply = v.toObject();
            if (reply["skill"].toString() != QLatin1String("arithmetic")) continue;
            const bool minus = reply["prompt"].toString().contains(QLatin1String(" minus "));
            (minus ? differences : sums) += 1;
            (minus ? differences_right : sums_right) += reply["correct"].toBool() ? 1 : 0;
        }
        QVERIFY(sums > 0 && differences > 0);
        qInfo("sums %d of %d, differences %d of %d", sums_right, sums, differences_right, differences);
        if (!kSanitized) {
            QVERIFY2(sums_right >= sums * 96 / 100, "sums below their floor");
            QVERIFY2(differences_right >= differences * 93 / 100, "differences below their floor");
        }
    }

    // "What can you do?" is a new user's first question: the answer names only skills it has held out (>= 90 %),
    // not the ones it was trained on and does not do (spelling backwards, weekdays, country codes).
    void self_description_claims_only_what_it_does() {
        QTemporaryDir dir;
        QByteArray questions;
        for (const char* q : {"What can you do?", "Who are you?", "help"})
            questions += QJsonDocument(QJsonObject{{"skill", "about"}, {"prompt", q}, {"expect_regex", "fortune\\.$"}}).toJson(QJsonDocument::Compact) + '\n';
        const QString dialogues = dir.filePath("about.jsonl");
        write_all(dialogues, questions);
        const CliResult r = run_cli({"eval", "-m", kDemo, "--dialogues", dialogues, "--json"});
        QVERIFY2(r.exit_code == 0 && !r.crashed, r.err.constData());
        const QJsonArray replies = QJsonDocument::fromJson(r.out).object()["replies"].toArray();
        QCOMPARE(replies.size(), 3);
        for (const auto& v : replies) {
            const QString reply = v.toObject()["reply"].toString();
            QVERIFY2(reply.contains(QLatin1String("add and subtract numbers below 100")) && reply.contains(QLatin1String("which of two numbers is larger")) &&
                         reply.endsWith(QLatin1String("tell you a fortune.")),
                     qPrintable(reply));
            for (const char* unclaimed : {"backwards", "country", "day"}) QVERIFY2(!reply.contains(QLatin1String(unclaimed)), qPrintable(reply));
        }
    }
};

QTEST_GUILESS_MAIN(TestDemoModel)
#include "test_demo_model.moc"
