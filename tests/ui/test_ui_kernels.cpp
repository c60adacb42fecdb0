// The kernels view: `colibri tune --json` reports from two machines imported and compared side by side on a
// log axis with value labels, reports that are not tune reports refused with a reason, the auto-tuner
// (kernels/tuner.h) run from the view with progress, its report added and its choice cached, and cancel that
// keeps the finished measurements; and the comparison end to end: the same prompt and decode on the suites'
// model with every variant this machine runs, side by side, kept between sessions and exported, and the
// chat's own kernel choice.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <thread>

#include <QComboBox>
#include <QPushButton>
#include <QLabel>
#include <QProgressBar>
#include <QTableView>

#include "kernels/tuner.h"
#include "ui/tune_runner.h"
#include "ui/views/bar_chart.h"
#include "ui/views/kernels_view.h"
#include "ui/views/main_window.h"
#include "kernels/registry.h"
#include "ui_test_support.h"

using namespace colibri;
using namespace colibri::studio;
using namespace colibri::test;

namespace {

struct Row {
    const char* op;
    const char* type;
    int rows, cols;
    const char* variant;
    double ns;
    bool chosen;
};

// Other load on the machine, started and stopped by the test: one spinning child process per CPU (the
// comparison's load watch counts only other processes, so threads of the test itself would not do).
class LoadGenerator {
public:
    LoadGenerator() {
        const unsigned n = std::max(1u, std::thread::hardware_concurrency());
        for (unsigned i = 0; i < n; ++i) {
            const pid_t pid = fork();
            if (pid == 0) {
                // A test that dies before its destructor runs (a crash, ctest's timeout) must not leave a core
                // spinning for the rest of the run: the child dies with its parent.
                ::prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (::getppid() == 1) ::_exit(0);
                for (volatile uint64_t spin = 0;; spin = spin + 1) {
                }
            }
            if (pid > 0) children_.push_back(pid);
        }
    }
    ~LoadGenerator() {
        for (pid_t pid : children_) kill(pid, SIGKILL);
        for (pid_t pid : children_) waitpid(pid, nullptr, 0);
    }
    size_t size() const { return children_.size(); }

private:
    std::vector<pid_t> children_;
};

// A run of the comparison made by hand, with its decode rate's repetitions.
KernelRun made_run(kernels::Variant v, std::vector<double> decode) {
    KernelRun r;
    r.variant = v;
    r.report.prompt_tps = tools::Spread::of({100, 101, 99});
    r.report.decode_tps = tools::Spread::of(std::move(decode));
    r.report.decode_layers = {tools::LayerTimes{0, 10, 1, 20, 0}};
    r.report.decode_lm_head_us = 5;
    r.report.decode_token_us = 40;
    r.decoded = {1, 2, 3};
    return r;
}

// The machine's load between two synthetic /proc/stat snapshots of 2 CPUs (200 ticks; this process 40 of them,
// others `other_ticks`), in every run.
KernelComparison made_comparison(const QString& when, uint64_t other_ticks, std::vector<KernelRun> runs) {
    KernelComparison c;
    c.model = QStringLiteral("/models/demo.bin");
    c.threads = 2;
    c.prompt_tokens = 8;
    c.decode_tokens = 3;
    c.reps = 3;
    c.when = when;
    for (KernelRun& r : runs) r.report.load = tools::load_between({{1000, 10000, 2}, 100}, {{1000 + 40 + other_ticks, 10200, 2}, 140});
    c.runs = std::move(runs);
    return c;
}

QByteArray report(const QString& cpu, const QStringList& features, const std::vector<Row>& rows) {
    QJsonArray results;
    for (const Row& r : rows) {
        const double bytes = r.rows * double(r.cols) * (QLatin1String(r.type) == QLatin1String("f32") ? 4 : 2);
        results.append(QJsonObject{{"op", r.op}, {"type", r.type}, {"rows", r.rows}, {"cols", r.cols}, {"variant", r.variant},
                                   {"ns_median", r.ns}, {"gflops", 2.0 * r.rows * r.cols / r.ns}, {"gbps", bytes / r.ns},
                                   {"chosen", r.chosen}});
    }
    return QJsonDocument(QJsonObject{{"colibri_version", "0.1.0"},
                                     {"cpu", QJsonObject{{"model", cpu}, {"features", QJsonArray::fromStringList(features)}}},
                                     {"results", results}})
        .toJson();
}

}  // namespace

class TestKernels : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    QString x86_, arm_;

private slots:
    void initTestCase() {
        x86_ = write_all(dir_.filePath(QStringLiteral("x86.json")),
                         report(QStringLiteral("AMD EPYC 7B13"), {"avx2", "avx512f"},
                                {{"matvec", "f16", 4096, 4096, "scalar", 9.0e6, false},
                                 {"matvec", "f16", 4096, 4096, "avx2", 1.5e6, false},
                                 {"matvec", "f16", 4096, 4096, "avx512", 1.0e6, true},
                                 {"matvec", "q8_0", 4096, 4096, "scalar", 7.0e6, false},
                                 {"matvec", "q8_0", 4096, 4096, "avx2", 1.2e6, true}}));
        arm_ = write_all(dir_.filePath(QStringLiteral("arm.json")),
                         report(QStringLiteral("Cortex-A76"), {"neon", "dotprod"},
                                {{"matvec", "f16", 4096, 4096, "scalar", 2.0e7, false},
                                 {"matvec", "f16", 4096, 4096, "neon", 4.0e6, true},
                                 {"matvec", "q8_0", 4096, 4096, "neon", 3.0e6, true}}));
    }

    void reports_compare_side_by_side() {
        KernelsView view;
        QVERIFY(view.import_report(x86_).is_ok());
        QVERIFY(view.import_report(arm_).is_ok());
        QCOMPARE(view.results()->rowCount(), 8);
        QCOMPARE(view.results()->reports()[0].label(), QStringLiteral("AMD EPYC 7B13 (x86.json)"));
        QCOMPARE(view.results()->reports()[1].cpu_features, QStringList({"neon", "dotprod"}));
        view.metric_selector()->setCurrentIndex(view.metric_selector()->findText(QStringLiteral("median µs")));
        view.select(QStringLiteral("matvec"), QStringLiteral("f16"), QStringLiteral("4096×4096"));
        // Every variant of either machine along the axis; a variant a machine lacks is an empty bar.
        QCOMPARE(view.chart_categories(), QStringList({"scalar", "avx2", "avx512", "neon"}));
        QCOMPARE(view.chart_values(0), QList<qreal>({9000.0, 1500.0, 1000.0, 0.0}));
        QCOMPARE(view.chart_values(1), QList<qreal>({20000.0, 0.0, 0.0, 4000.0}));
        view.metric_selector()->setCurrentIndex(view.metric_selector()->findText(QStringLiteral("GFLOP/s")));
        QCOMPARE(view.chart_values(0)[2], 2.0 * 4096 * 4096 / 1.0e6);
        view.select(QStringLiteral("matvec"), QStringLiteral("q8_0"), QStringLiteral("4096×4096"));
        QCOMPARE(view.chart_categories(), QStringList({"scalar", "avx2", "neon"}));
        // Drawn on a log axis, named as people say them, a machine's missing variant an empty slot, every bar
        // with its value.
        BarChart* chart = view.tuner_chart();
        QVERIFY(chart->log_scale());
        QCOMPARE(chart->categories(), QStringList({"Scalar", "AVX2", "NEON"}));
        QVERIFY(std::isnan(chart->series()[0].values[2]));  // no NEON on the EPYC
        chart->resize(600, 300);
        (void)chart->grab();
        QCOMPARE(chart->drawn_labels().size(), 3);  // the EPYC's scalar and AVX2, the ARM board's NEON
        const auto [lo, hi] = chart->y_range();
        QVERIFY(lo > 0 && hi / lo >= 10);  // whole decades
        // The table: chosen variants marked, filterable.
        int chosen = 0;
        for (int r = 0; r < view.results()->rowCount(); ++r)
            chosen += view.results()->index(r, KernelResultsModel::Chosen).data(Qt::EditRole).toBool() ? 1 : 0;
        QCOMPARE(chosen, 4);
    }

    void bad_reports_are_refused_with_a_reason() {
        KernelsView view;
        const struct {
            const char* name;
            QByteArray bytes;
            const char* why;
        } cases[] = {
            {"not-json", "{ nope", "not JSON"},
            {"array", "[]", "a tune report is a JSON object"},
            {"no-results", R"({"cpu":{"model":"x"}})", "\"results\" is missing"},
            {"bad-field", R"({"cpu":{},"results":[{"op":"matvec","type":"f16","variant":"avx2","rows":"4096","cols":1,"ns_median":1}]})",
             "\"rows\" is of the wrong type"},
            {"empty", R"({"cpu":{},"results":[]})", "the report has no results"},
        };
        for (const auto& c : cases) {
            const QString path = write_all(dir_.filePath(QString::fromLatin1(c.name) + ".json"), c.bytes);
            const Status s = view.import_report(path);
            QVERIFY2(!s.is_ok(), c.name);
            QVERIFY2(QString::fromStdString(s.message()).contains(QLatin1String(c.why)), s.message().c_str());
            QVERIFY(view.status_label()->text().contains(QLatin1String(c.why)));
        }
        QVERIFY(!view.import_report(dir_.filePath(QStringLiteral("missing.json"))).is_ok());
        QCOMPARE(view.results()->rowCount(), 0);
    }

    void tuner_reports_progress_and_its_result() {
        KernelsView view;
        kernels::TuneOptions small;
        small.shapes = {{256, 256}};  // a multiple of every block type's size; milliseconds per measurement
        small.reps = 1;
        view.tuner()->set_options(small);
        const QString cache = dir_.filePath(QStringLiteral("tune-cache.json"));
        view.tuner()->set_cache_path(cache);
        QSignalSpy progress(view.tuner(), &TuneRunner::progress);
        QSignalSpy finished(view.tuner(), &TuneRunner::finished);
        view.run_tuner();
        QVERIFY(view.tuner()->running());
        QVERIFY(wait_for(finished, 1, 120000));
        QVERIFY(!view.tuner()->running());
        // One progress step per measurement, counting up to the total; every one is a row of the table.
        QVERIFY(progress.count() > 0);
        const int total = progress.at(0).at(1).toInt();
        QCOMPARE(progress.count(), total);
        for (int i = 0; i < progress.count(); ++i) QCOMPARE(progress.at(i).at(0).toInt(), i + 1);
        QCOMPARE(view.results()->rowCount(), total);
        QCOMPARE(view.tuner_progress()->value(), total);
        const TuneReport& report = view.results()->reports()[0];
        QVERIFY(report.label().contains(QStringLiteral("(this machine")));
        QVERIFY(view.results()->variants(QStringLiteral("matvec"), QStringLiteral("f16"), QStringLiteral("256×256")).contains(QStringLiteral("scalar")));
        // Exactly one chosen variant per op and weight type.
        QMap<QString, int> chosen;
        for (const TuneResult& r : report.results)
            if (r.chosen) ++chosen[r.op + ' ' + r.type];
        for (int n : chosen) QCOMPARE(n, 1);
        QCOMPARE(size_t(chosen.size()), 2 * kernels::kernel_types().size());  // matvec and matmul × every matrix type
        QVERIFY(view.status_label()->text().contains(QStringLiteral("choice saved to ") + cache));
        QVERIFY(read_json(cache).isObject());
        QVERIFY(!view.chart_categories().isEmpty());
    }

    void tuner_cancels_between_measurements() {
        KernelsView view;
        // Many small measurements: far more than can run before the cancel lands (it takes effect between two).
        kernels::TuneOptions options;
        options.shapes.assign(400, kernels::TuneShape{256, 256});
        options.reps = 1;
        view.tuner()->set_options(options);
        view.tuner()->set_cache_path(QString());
        QSignalSpy progress(view.tuner(), &TuneRunner::progress);
        QSignalSpy cancelled(view.tuner(), &TuneRunner::cancelled);
        QSignalSpy finished(view.tuner(), &TuneRunner::finished);
        view.run_tuner();
        QVERIFY(wait_for(progress, 1, 120000));
        view.cancel_tuner();
        QVERIFY(wait_for(cancelled, 1, 60000));
        QCOMPARE(finished.count(), 0);
        QVERIFY(!view.tuner()->running());
        QVERIFY(progress.count() < progress.at(0).at(1).toInt());
        // What was measured before the cancel is kept, as a report of its own.
        const int partial = view.results()->rowCount();
        QCOMPARE(partial, progress.count());
        QCOMPARE(cancelled.at(0).at(0).value<TuneReport>().results.size(), static_cast<size_t>(partial));
        QVERIFY2(view.status_label()->text().startsWith(QStringLiteral("Tuning cancelled: the %1 finished").arg(partial)),
                 qPrintable(view.status_label()->text()));
        QVERIFY(view.results()->reports().back().label().contains(QStringLiteral("cancelled")));
        // And it runs again after a cancel.
        kernels::TuneOptions small;
        small.shapes = {{256, 256}};
        small.reps = 1;
        small.variants = {kernels::Variant::Scalar};
        view.tuner()->set_options(small);
        view.run_tuner();
        QVERIFY(wait_for(finished, 1, 120000));
        QCOMPARE(size_t(view.results()->rowCount()), size_t(partial) + 2 * kernels::kernel_types().size());
    }

    // What a comparison's numbers are worth, as displayed: medians with their min–max, the spread flagged where
    // repetitions lie far apart, the machine's load (from synthetic /proc/stat snapshots) flagged when busy,
    // NEON (translated) explained, two comparisons side by side, and the prompt line true to the model's state.
    void comparison_shows_spread_load_and_neon_note() {
        KernelsView view;
        view.resize(1100, 600);
        view.show();
        QVERIFY(view.comparison_status()->text().startsWith(QStringLiteral("Load a model")));
        view.set_model_loaded(true);
        QVERIFY2(!view.comparison_status()->text().contains(QStringLiteral("Load a model")), qPrintable(view.comparison_status()->text()));
        QVERIFY(view.comparison_status()->text().contains(QStringLiteral("loaded model")));
        QVERIFY(view.reliability_label()->isHidden());

        // Busy: others used 140 of 200 ticks of 2 CPUs; the scalar run's decode repetitions lie 50 % apart.
        view.comparison_finished(made_comparison(QStringLiteral("2026-12-07T01:00:00"), 140,
                                                 {made_run(kernels::Variant::Scalar, {20, 30, 20}),
                                                  made_run(kernels::Variant::NeonTranslated, {60, 61, 59})}));
        QLabel* flag = view.reliability_label();
        QVERIFY(flag->isVisibleTo(&view));
        QVERIFY2(flag->text().startsWith(QStringLiteral("⚠ Unreliable: the machine was busy: other processes used 1.4 of 2 CPUs")),
                 qPrintable(flag->text()));
        QVERIFY2(flag->text().contains(QStringLiteral("decode tok/s of Scalar varied 50 % between repetitions")), qPrintable(flag->text()));
        KernelComparisonModel* m = view.comparison_model();
        QCOMPARE(m->headerData(KernelComparisonModel::DecodeTps, Qt::Horizontal).toString(), QStringLiteral("decode tok/s (min–max)"));
        QCOMPARE(m->index(0, KernelComparisonModel::DecodeTps).data().toString(), QStringLiteral("20.0 (20.0–30.0)"));
        QCOMPARE(m->index(1, KernelComparisonModel::DecodeTps).data().toString(), QStringLiteral("60.0 (59.0–61.0)"));
        QCOMPARE(m->index(0, KernelComparisonModel::Spread).data().toString(), QStringLiteral("50 %, large"));
        QCOMPARE(m->index(1, KernelComparisonModel::Spread).data().toString(), QStringLiteral("3 %"));
        QVERIFY(m->index(0, KernelComparisonModel::DecodeTps).data(Qt::ToolTipRole).toString().contains(QStringLiteral("20.0, 30.0, 20.0")));
        // NEON (translated): said what it is in the view, on its row and in the chat's kernel choice.
        QVERIFY(view.neon_note()->isVisibleTo(&view));
        QVERIFY(view.neon_note()->text().contains(QStringLiteral("says nothing about an ARM CPU")));
        QVERIFY(m->index(1, KernelComparisonModel::Variant).data(Qt::ToolTipRole).toString().contains(QStringLiteral("through SIMDe")));
        QVERIFY(m->index(0, KernelComparisonModel::Variant).data(Qt::ToolTipRole).isNull());
        // The chart: medians with their min–max whiskers.
        BarChart* speed = view.speed_chart();
        QCOMPARE(speed->series()[0].ranges.size(), 2);
        QCOMPARE(speed->series()[0].ranges[1], qMakePair(20.0, 30.0));
        (void)speed->grab();
        QCOMPARE(speed->drawn_ranges(), 4);

        // Quiet, every repetition close: said so; no NEON (translated), no note.
        view.comparison_finished(made_comparison(QStringLiteral("2026-12-07T02:00:00"), 10,
                                                 {made_run(kernels::Variant::Scalar, {40, 41, 40})}));
        QVERIFY2(flag->text().startsWith(QStringLiteral("The machine was quiet: other processes used 0.1 of 2 CPUs")), qPrintable(flag->text()));
        QVERIFY(!flag->text().contains(QStringLiteral("Unreliable")));
        QVERIFY(!view.neon_note()->isVisibleTo(&view));
        QCOMPARE(m->columnCount(), KernelComparisonModel::SameOutput + 1);  // no baseline: no empty columns
        // One repetition has no spread to show: no whisker, "—", and the line says why it cannot judge.
        KernelRun once = made_run(kernels::Variant::Scalar, {40});
        once.report.prompt_tps = tools::Spread::of({100});
        view.comparison_finished(made_comparison(QStringLiteral("2026-12-07T01:30:00"), 10, {once}));
        QCOMPARE(m->index(0, KernelComparisonModel::Spread).data().toString(), QStringLiteral("—"));
        QCOMPARE(m->index(0, KernelComparisonModel::DecodeTps).data().toString(), QStringLiteral("40.0"));
        QVERIFY2(flag->text().endsWith(QStringLiteral("One repetition: no spread to judge it by (3 or more tell).")), qPrintable(flag->text()));
        (void)speed->grab();
        QCOMPARE(speed->drawn_ranges(), 0);
        view.comparison_selector()->setCurrentIndex(1);

        // Side by side with the first: its decode rate and the ratio, within or beyond the two runs' spread.
        view.set_baseline(0);
        QCOMPARE(m->columnCount(), KernelComparisonModel::VsBaseline + 1);
        QCOMPARE(m->index(0, KernelComparisonModel::BaselineDecodeTps).data().toString(), QStringLiteral("20.0 (20.0–30.0)"));
        QCOMPARE(m->index(0, KernelComparisonModel::VsBaseline).data().toString(), QStringLiteral("×2.00, beyond the spread"));
        QVERIFY(m->headerData(KernelComparisonModel::VsBaseline, Qt::Horizontal).toString().contains(QStringLiteral("2026-12-07T01:00:00")));
        QCOMPARE(speed->categories(), QStringList({"Scalar"}));
        QCOMPARE(speed->series().size(), 2);
        QCOMPARE(speed->series()[1].values[0], 20.0);
        QVERIFY(view.neon_note()->isVisibleTo(&view));  // the baseline has NEON (translated)
        view.set_baseline(-1);
        QCOMPARE(m->columnCount(), KernelComparisonModel::SameOutput + 1);

        // Kept with the comparison: the load as measured, and the flag again after a restart.
        KernelResults kept;
        kept.add_comparison(view.comparisons().front());
        const auto back = KernelComparison::from_json(QJsonDocument::fromJson(kept.json()).object()["comparisons"].toArray()[0].toObject());
        QVERIFY2(back.is_ok(), back.message().c_str());
        QVERIFY(back->load().busy());
        QCOMPARE(back->load().other_cpus, 1.4);
        QCOMPARE(back->unreliable(), view.comparisons().front().unreliable());
    }

    // At the size of a dock under the chat (1280×720's bottom area: about 900×240) and a wide short one, the
    // charts keep a readable height with the comparison's flag and note above them.
    void charts_readable_at_dock_size() {
        KernelsView view;
        view.set_model_loaded(true);
        view.comparison_finished(made_comparison(QStringLiteral("2026-12-07T01:00:00"), 140,
                                                 {made_run(kernels::Variant::Scalar, {20, 30, 20}),
                                                  made_run(kernels::Variant::NeonTranslated, {60, 61, 59})}));
        for (const QSize size : {QSize(900, 240), QSize(1280, 200), QSize(1900, 420)}) {
            view.resize(size);
            view.show();
            QVERIFY(QTest::qWaitForWindowExposed(&view));
            QCoreApplication::processEvents();
            // Never squeezed below their minimum (a dock smaller than that scrolls), every bar's value written.
            for (BarChart* chart : {view.speed_chart(), view.layer_chart()}) {
                QVERIFY2(chart->height() >= chart->minimumSizeHint().height() && chart->height() >= 110,
                         qPrintable(QStringLiteral("%1 at %2×%3: %4 px").arg(chart->objectName()).arg(size.width()).arg(size.height()).arg(chart->height())));
                (void)chart->grab();
                QVERIFY(!chart->drawn_labels().isEmpty());
            }
            QVERIFY(view.reliability_label()->isVisibleTo(&view) && view.neon_note()->isVisibleTo(&view));
        }
    }

    // A kernel comparison run twice while the test keeps every CPU busy with processes of its own: both runs are
    // flagged unreliable, on the real /proc/stat.
    void comparison_on_a_busy_machine_is_flagged() {
        const std::unique_ptr<MainWindow> window = shown_window();
        MainWindow& w = *window;
        KernelsView* view = w.kernels_view();
        QSignalSpy loaded(&w, &MainWindow::modelLoaded);
        w.open_model(QStringLiteral(COLIBRI_UI_TEST_MODEL));
        QVERIFY(wait_for(loaded, 1));
        QVERIFY(!view->comparison_status()->text().contains(QStringLiteral("Load a model")));
        view->set_comparison_size(4, 2, 1);  // small: the load, not the spread, is what flags it here
        QSignalSpy done(w.worker(), &EngineWorker::kernelComparisonFinished);
        LoadGenerator load;
        QVERIFY(load.size() > 0);
        for (int run = 1; run <= 2; ++run) {
            QTRY_VERIFY(view->compare_button()->isEnabled());
            QTest::mouseClick(view->compare_button(), Qt::LeftButton);
            QVERIFY(wait_for(done, run, 120000));
            QTRY_COMPARE_WITH_TIMEOUT(view->comparisons().size(), size_t(run), 10000);
            const KernelComparison& c = view->comparisons().back();
            QVERIFY2(c.load().measured && c.load().busy(), c.load().describe().c_str());
            const QString flag = view->reliability_label()->text();
            QVERIFY2(view->reliability_label()->isVisibleTo(view) && flag.startsWith(QStringLiteral("⚠ Unreliable: the machine was busy")),
                     qPrintable(flag));
        }
    }

    void comparison_on_the_model_end_to_end() {
        const std::unique_ptr<MainWindow> window = shown_window();
        MainWindow& w = *window;
        KernelsView* view = w.kernels_view();
        const QString store = dir_.filePath(QStringLiteral("kernel-results.json"));
        view->set_store(store);
        QVERIFY(!view->compare_button()->isEnabled());  // no model yet
        QSignalSpy loaded(&w, &MainWindow::modelLoaded);
        w.open_model(QStringLiteral(COLIBRI_UI_TEST_MODEL));
        QVERIFY(wait_for(loaded, 1));
        QVERIFY(view->compare_button()->isEnabled());
        view->set_comparison_size(12, 6, 2);
        QSignalSpy done(w.worker(), &EngineWorker::kernelComparisonFinished);
        QSignalSpy progress(w.worker(), &EngineWorker::kernelComparisonProgress);
        QTest::mouseClick(view->compare_button(), Qt::LeftButton);
        QVERIFY(wait_for(done, 1, 600000));
        const std::vector<kernels::Variant> here = kernels::supported_variants();
        QVERIFY(here.size() >= 2);
        QVERIFY(progress.count() >= static_cast<int>(here.size()) * 2);
        // The spy records in the worker's thread; the view gets the result through the event loop.
        QTRY_VERIFY2_WITH_TIMEOUT(view->comparisons().size() == 1, qPrintable(view->comparison_status()->text()), 10000);
        const KernelComparison& c = view->comparisons().front();
        QVERIFY(c.complete);
        QCOMPARE(c.runs.size(), here.size());
        QCOMPARE(c.prompt_tokens, 12);
        QCOMPARE(c.decode_tokens, 6);
        for (size_t i = 0; i < here.size(); ++i) {
            const KernelRun& r = c.runs[i];
            QCOMPARE(r.variant, here[i]);
            QCOMPARE(r.report.decode_tps.samples.size(), size_t(2));
            QVERIFY(r.report.prompt_tps.median > 0 && r.report.decode_tps.median > 0);
            QCOMPARE(r.report.decode_layers.size(), size_t(4));
            for (uint32_t l = 0; l < 4; ++l) {
                QCOMPARE(r.report.decode_layers[l].layer, l);
                QVERIFY(r.report.decode_layers[l].total_us() > 0);
            }
            QVERIFY(r.report.decode_lm_head_us > 0);
            QCOMPARE(r.decoded.size(), size_t(6));
        }
        // Bit-identical kernels: the same tokens from every variant.
        QVERIFY(c.identical_output());
        QVERIFY(view->comparison_status()->text().contains(QStringLiteral("every variant decoded the same tokens")));
        QCOMPARE(view->comparison_model()->rowCount(), static_cast<int>(here.size()));
        // Side by side: tokens/s and per-layer time per variant, log axis, every bar with its value.
        BarChart* speed = view->speed_chart();
        QCOMPARE(speed->categories(), QStringList({"prompt", "decode"}));
        QCOMPARE(speed->series().size(), static_cast<int>(here.size()));
        QVERIFY(speed->log_scale());
        QCOMPARE(speed->series()[0].values[1], c.runs[0].report.decode_tps.median);
        speed->resize(500, 300);
        (void)speed->grab();
        QVERIFY2(speed->drawn_labels().contains(speed->format_value(c.runs[0].report.decode_tps.median)), qPrintable(speed->drawn_labels().join(", ")));
        BarChart* layers = view->layer_chart();
        QCOMPARE(layers->categories(), QStringList({"L0", "L1", "L2", "L3", "lm head"}));
        QCOMPARE(layers->series().size(), static_cast<int>(here.size()));
        // Kept between sessions: another view reading the same store has it.
        QVERIFY(QFileInfo::exists(store));
        KernelsView again;
        again.set_store(store);
        QCOMPARE(again.comparisons().size(), size_t(1));
        QCOMPARE(again.comparisons().front().runs.size(), here.size());
        QCOMPARE(again.comparison_model()->rowCount(), static_cast<int>(here.size()));
        // Exported as JSON and CSV.
        QVERIFY(view->export_results(dir_.filePath(QStringLiteral("export.json"))).is_ok());
        const QJsonObject exported = read_json(dir_.filePath(QStringLiteral("export.json"))).object();
        QCOMPARE(exported["format"].toString(), QStringLiteral("colibri-kernel-results"));
        QCOMPARE(exported["comparisons"].toArray().size(), 1);
        QVERIFY(view->export_results(dir_.filePath(QStringLiteral("export.csv"))).is_ok());
        const QStringList csv = QString::fromUtf8(read_all(dir_.filePath(QStringLiteral("export.csv")))).split('\n', Qt::SkipEmptyParts);
        QCOMPARE(csv.size(), 2 + static_cast<int>(here.size()));  // a comment, the header, a row per variant
        QVERIFY(csv[1].startsWith(QStringLiteral("variant,prompt_tokens_per_s,decode_tokens_per_s,layer0_us")));
        // A FIFO where the export goes is refused and left as it is (ui/file_output.h).
        const QString fifo = dir_.filePath(QStringLiteral("export.fifo"));
        QVERIFY(mkfifo(QFile::encodeName(fifo).constData(), 0644) == 0);
        const Status to_fifo = view->export_results(fifo);
        QVERIFY2(!to_fifo.is_ok() && to_fifo.message().find("not a regular file (a FIFO)") != std::string::npos, to_fifo.message().c_str());
        QVERIFY(QFileInfo(fifo).isFile() == false && QFileInfo::exists(fifo));
        // Cancelled part-way: only repetitions every variant completed are kept.
        view->set_comparison_size(12, 64, 5);
        view->start_comparison();
        QVERIFY(wait_for(progress, progress.count() + 2, 120000));
        view->cancel_comparison();
        QVERIFY(wait_for(done, 2, 600000));
        const KernelComparison stopped = done.at(1).at(0).value<KernelComparison>();
        QVERIFY(!stopped.complete);
        for (const KernelRun& r : stopped.runs) QCOMPARE(r.report.decode_tps.samples.size(), stopped.runs.front().report.decode_tps.samples.size());
        // The chat's own choice: scalar, then automatic again, give the same greedy tokens.
        QSignalSpy finished(w.chat(), &ChatController::finished);
        ChatSettings greedy;
        greedy.sampling.greedy = true;
        greedy.random_seed = false;
        greedy.max_tokens = 6;
        QComboBox* session = view->session_kernel_selector();
        session->setCurrentIndex(session->findData(QStringLiteral("scalar")));
        QVERIFY(w.chat()->send(QStringLiteral("Hi"), greedy).is_ok());
        QVERIFY(wait_for(finished, 1, 120000));
        QCOMPARE(finished.at(0).at(0).value<GenerationStats>().kernel, QStringLiteral("Scalar"));
        const QString scalar_reply = finished.at(0).at(0).value<GenerationStats>().reply;
        session->setCurrentIndex(0);
        w.chat()->new_conversation();
        QVERIFY(w.chat()->send(QStringLiteral("Hi"), greedy).is_ok());
        QVERIFY(wait_for(finished, 2, 120000));
        QVERIFY(finished.at(1).at(0).value<GenerationStats>().kernel != QStringLiteral("Scalar"));
        QCOMPARE(finished.at(1).at(0).value<GenerationStats>().reply, scalar_reply);
    }
};

QTEST_MAIN(TestKernels)
#include "test_ui_kernels.moc"
