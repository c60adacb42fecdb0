// The CLI contract of ARCHITECTURE.md: info, check, route --probs, generate --seed, the chat loop.
#include <QTemporaryDir>
#include <QtTest>

#include "../test_support.h"

using namespace colibri::test;

class TestCli : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    QString model_;

private slots:
    void initTestCase() {
        model_ = dir_.filePath("olmoe.bin");
        const CliResult r = run_cli({"convert", reference("hf/olmoe/model"), "-o", model_});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        QVERIFY(r.out.startsWith("wrote "));
    }

    void info_json() {
        const CliResult r = run_cli({"info", model_, "--json"});
        QCOMPARE(r.exit_code, 0);
        const QJsonObject o = QJsonDocument::fromJson(r.out).object();
        QCOMPARE(o["family"].toString(), QString("olmoe"));
        QCOMPARE(o["layers"].toInt(), 2);
        QCOMPARE(o["experts"].toInt(), 8);
        QCOMPARE(o["active_experts"].toInt(), 2);
        QCOMPARE(o["vocab_size"].toInt(), 4096);
        QCOMPARE(o["norm_topk_prob"].toBool(), false);
        QCOMPARE(o["tokenizer"].toString(), QString("none"));
    }

    void check_valid_and_damaged() {
        CliResult r = run_cli({"check", model_, "--json"});
        QCOMPARE(r.exit_code, 0);
        QJsonObject o = QJsonDocument::fromJson(r.out).object();
        QVERIFY(o["valid"].toBool());
        const QJsonArray sections = o["sections"].toArray();
        // metadata, embedding, 2 x (attention, router, 8 experts), output
        QCOMPARE(sections.size(), 1 + 1 + 2 * 10 + 1);
        qint64 expert_offset = -1;
        for (const auto& s : sections) {
            QVERIFY(s.toObject()["aligned"].toBool());
            QVERIFY(s.toObject()["checksum_ok"].toBool());
            if (s.toObject()["kind"] == "expert" && s.toObject()["layer"] == 1 && s.toObject()["expert"] == 6)
                expert_offset = s.toObject()["offset"].toInteger();
        }
        QVERIFY(expert_offset > 0);
        QByteArray bytes = read_all(model_);
        bytes[expert_offset + 100] = static_cast<char>(bytes[expert_offset + 100] ^ 0x10);
        const QString damaged = write_all(dir_.filePath("damaged.bin"), bytes);
        r = run_cli({"check", damaged});
        QCOMPARE(r.exit_code, 1);
        QVERIFY2(r.out.contains("layer 1 expert 6 (gate up down): xxh64 mismatch"), r.out.constData());
        r = run_cli({"check", damaged, "--json"});
        QCOMPARE(r.exit_code, 1);
        o = QJsonDocument::fromJson(r.out).object();
        QVERIFY(!o["valid"].toBool());
        QCOMPARE(o["problems"].toArray().size(), 1);
    }

    void route_probs_sum_to_one() {
        const CliResult r = run_cli({"route", "-m", model_, "--tokens", "1,2,3", "--json", "--probs"});
        QCOMPARE(r.exit_code, 0);
        const QJsonArray layers = QJsonDocument::fromJson(r.out).object()["layers"].toArray();
        QCOMPARE(layers.size(), 2);
        for (const auto& l : layers) {
            const QJsonArray probs = l.toObject()["probs"].toArray();
            QCOMPARE(probs.size(), 3);
            for (const auto& p : probs) {
                double sum = 0;
                for (const auto& v : p.toArray()) sum += v.toDouble();
                QVERIFY(std::fabs(sum - 1.0) < 1e-5);
            }
            // Experts in descending weight.
            for (const auto& w : l.toObject()["weights"].toArray()) QVERIFY(w.toArray()[0].toDouble() >= w.toArray()[1].toDouble());
        }
    }

    void seeded_generation_reproduces() {
        const QStringList args{"generate", "-m", model_, "--tokens", "1,5,9", "-n", "12", "--seed", "42",
                               "--temperature", "1.0", "--json"};
        // The tokens, not the whole JSON: its timing differs from run to run.
        const auto ids = [](const CliResult& r) { return QJsonDocument::fromJson(r.out).object()["new_ids"].toArray(); };
        const CliResult a = run_cli(args), b = run_cli(args);
        QCOMPARE(a.exit_code, 0);
        QCOMPARE(ids(a), ids(b));
        QCOMPARE(ids(a).size(), 12);
        QStringList other = args;
        other[other.indexOf("42")] = "43";
        QVERIFY(ids(run_cli(other)) != ids(a));
    }

    void logits_top_json() {
        const CliResult r = run_cli({"logits", "-m", model_, "--tokens", "1,2", "--top", "3", "--json"});
        QCOMPARE(r.exit_code, 0);
        const QJsonArray pos = QJsonDocument::fromJson(r.out).object()["positions"].toArray();
        QCOMPARE(pos.size(), 2);
        QCOMPARE(pos[0].toObject()["top_ids"].toArray().size(), 3);
    }

    // colibri eval: held-out dialogues scored through the chat template; its input is checked line by line.
    void eval_scores_and_requires() {
        const QString demo = QStringLiteral(COLIBRI_BUILD_DIR "/demo/demo.bin");
        const QString cases = write_all(dir_.filePath("cases.jsonl"),
            "{\"skill\": \"any\", \"prompt\": \"Hello\", \"expect_regex\": \"[\\\\s\\\\S]*\"}\n\n"
            "{\"skill\": \"never\", \"prompt\": \"Hi\", \"expect_regex\": \"^(?!)\"}\n");
        CliResult r = run_cli({"eval", "-m", demo, "--dialogues", cases, "-n", "8", "--json"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        const QJsonObject o = QJsonDocument::fromJson(r.out).object();
        const QJsonArray skills = o["skills"].toArray();
        QCOMPARE(skills.size(), 3);  // any, never, all
        QCOMPARE(skills[0].toObject()["accuracy"].toDouble(), 1.0);
        QCOMPARE(skills[1].toObject()["accuracy"].toDouble(), 0.0);
        QCOMPARE(skills[2].toObject()["cases"].toInt(), 2);
        QCOMPARE(o["replies"].toArray().size(), 2);
        QVERIFY(o["replies"].toArray()[0].toObject()["tokens"].toInt() <= 8);
        r = run_cli({"eval", "-m", demo, "--dialogues", cases, "-n", "8", "--require", "any=1", "--require", "never=0.5"});
        QCOMPARE(r.exit_code, 1);
        QVERIFY2(r.err.contains("colibri: eval: never accuracy 0.000 is below the required 0.500"), r.err.constData());
        QVERIFY(r.out.contains("skill"));  // the table is printed before the verdict
    }

    void eval_refuses_bad_input() {
        const QString demo = QStringLiteral(COLIBRI_BUILD_DIR "/demo/demo.bin");
        const QList<QPair<QByteArray, QByteArray>> bad{
            {"not json\n", "line 1: not a JSON object"},
            {"{\"skill\": \"a\", \"prompt\": \"x\"}\n", "line 1: field 'expect_regex' must be a string"},
            {"{\"skill\": \"a\", \"prompt\": 5, \"expect_regex\": \"x\"}\n", "field 'prompt' must be a string"},
            {"{\"skill\": \"a\", \"prompt\": \"x\", \"expect_regex\": \"(\"}\n", "not a valid regular expression"},
            {"\n\n", "no cases"},
        };
        for (const auto& [text, why] : bad) {
            const CliResult r = run_cli({"eval", "-m", demo, "--dialogues", write_all(dir_.filePath("bad.jsonl"), text)});
            QCOMPARE(r.exit_code, 1);
            QVERIFY2(r.err.startsWith("colibri: eval: ") && r.err.contains(why) && r.err.count('\n') == 1, r.err.constData());
        }
        CliResult r = run_cli({"eval", "-m", model_, "--dialogues", write_all(dir_.filePath("ok.jsonl"),
                               "{\"skill\": \"a\", \"prompt\": \"x\", \"expect_regex\": \"x\"}\n")});
        QCOMPARE(r.exit_code, 1);
        QVERIFY2(r.err.contains("no tokenizer"), r.err.constData());
        r = run_cli({"eval", "-m", demo, "--dialogues", dir_.filePath("ok.jsonl"), "--require", "a=2"});
        QCOMPARE(r.exit_code, 1);
        QVERIFY2(r.err.contains("--require 'a=2' is not SKILL=FRACTION"), r.err.constData());
    }
};

QTEST_GUILESS_MAIN(TestCli)
#include "test_cli.moc"
