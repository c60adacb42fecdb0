// The tune report's one schema: what kernels::tune_report_json writes (`colibri tune --json`),
// tools::parse_tune_report reads back field for field; anything else is refused with a one-line error that
// says where and why.
#include <QtTest>
#include <cmath>
#include <string>

#include "kernels/tuner.h"
#include "tools/tune_report.h"

using namespace colibri;

class TestTuneReport : public QObject {
    Q_OBJECT

private slots:
    void a_tuner_run_round_trips() {
        kernels::TuneOptions options;
        options.shapes = {{256, 256}};  // a multiple of every block type's size
        options.reps = 1;
        options.variants = {kernels::Variant::Scalar};
        const kernels::TuneReport report = kernels::run_tuner(options);
        QVERIFY(!report.results.empty());
        auto back = tools::parse_tune_report(kernels::tune_report_json(report));
        QVERIFY2(back.is_ok(), back.message().c_str());
        QCOMPARE(back->version, report.version);
        QCOMPARE(back->cpu_model, report.cpu_model);
        QCOMPARE(back->cpu_features, report.cpu_features);
        QCOMPARE(back->results.size(), report.results.size());
        for (size_t i = 0; i < report.results.size(); ++i) {
            const kernels::TuneResult& a = report.results[i];
            const kernels::TuneResult& b = back->results[i];
            QCOMPARE(b.op, a.op);
            QCOMPARE(b.type, a.type);
            QCOMPARE(b.variant, a.variant);
            QCOMPARE(b.rows, a.rows);
            QCOMPARE(b.cols, a.cols);
            QCOMPARE(b.ns_median, a.ns_median);  // nlohmann writes doubles that read back exactly
            QCOMPARE(b.gflops, a.gflops);
            QCOMPARE(b.gbps, a.gbps);
            QCOMPARE(b.chosen, a.chosen);
        }
        // And what it reads, written again, is the same text.
        QCOMPARE(kernels::tune_report_json(back.value()), kernels::tune_report_json(report));
    }

    void malformed_reports_are_one_line_errors() {
        const std::string ok = R"({"op":"matvec","type":"f16","variant":"avx2","rows":4096,"cols":4096,"ns_median":1e6})";
        auto with = [](const std::string& result) { return R"({"cpu":{"model":"x"},"results":[)" + result + "]}"; };
        const struct {
            std::string text;
            const char* why;
        } cases[] = {
            {"{ nope", "not JSON (at byte"},
            {"", "not JSON"},
            {"[]", "a tune report is a JSON object"},
            {R"({"results":[]})", "\"cpu\" is missing"},
            {R"({"cpu":[],"results":[]})", "\"cpu\" is of the wrong type"},
            {R"({"cpu":{"model":"x"}})", "\"results\" is missing"},
            {R"({"cpu":{},"results":[]})", "the report has no results"},
            {with("7"), "result 0: not an object"},
            {with(ok + R"(,{"op":"matvec","type":"f16","variant":"avx2","rows":"4096","cols":1,"ns_median":1})"), "result 1: \"rows\" is of the wrong type"},
            {with(R"({"op":"matvec","type":"f16","variant":"avx2","cols":1,"ns_median":1})"), "result 0: \"rows\" is missing"},
            {with(R"({"op":"transpose","type":"f16","variant":"avx2","rows":1,"cols":1,"ns_median":1})"), "result 0: unknown op 'transpose'"},
            {with(R"({"op":"matvec","type":"q9_9","variant":"avx2","rows":1,"cols":1,"ns_median":1})"), "result 0: unknown weight type 'q9_9'"},
            {with(R"({"op":"matvec","type":"f16","variant":"sse9","rows":1,"cols":1,"ns_median":1})"), "result 0: unknown kernel variant 'sse9'"},
            {with(R"({"op":"matvec","type":"f16","variant":"avx2","rows":0,"cols":1,"ns_median":1})"), "must be positive"},
            {with(R"({"op":"matvec","type":"f16","variant":"avx2","rows":1.5,"cols":1,"ns_median":1})"), "must be positive"},
            {with(R"({"op":"matvec","type":"f16","variant":"avx2","rows":1e300,"cols":1,"ns_median":1})"), "must be positive"},
            {with(R"({"op":"matvec","type":"f16","variant":"avx2","rows":1,"cols":1,"ns_median":-1})"), "must be positive"},
            {with(R"({"op":"matvec","type":"f16","variant":"avx2","rows":1,"cols":1,"ns_median":1,"gflops":"fast"})"), "\"gflops\" is of the wrong type"},
            {with(R"({"op":"matvec","type":"f16","variant":"avx2","rows":1,"cols":1,"ns_median":1,"chosen":1})"), "\"chosen\" is of the wrong type"},
            {std::string(100000, '[') + std::string(100000, ']'), "nested deeper than"},
        };
        for (const auto& c : cases) {
            auto r = tools::parse_tune_report(c.text);
            QVERIFY2(!r.is_ok(), c.why);
            QVERIFY2(r.message().find(c.why) != std::string::npos, r.message().c_str());
            QVERIFY2(r.message().find('\n') == std::string::npos, r.message().c_str());
        }
        // The derived figures and the choice flag may be left out; the rest is all there is.
        auto minimal = tools::parse_tune_report(with(ok));
        QVERIFY2(minimal.is_ok(), minimal.message().c_str());
        QCOMPARE(minimal->results.front().rows, size_t(4096));
        QCOMPARE(minimal->results.front().variant, kernels::Variant::Avx2);
        QVERIFY(!minimal->results.front().chosen);
    }
};

QTEST_MAIN(TestTuneReport)
#include "test_tune_report.moc"
