// The profiler does not distort: counters are off until asked for; every token's time is accounted for
// (attention, router, experts, lm head, sampling, counter reads and other add up to its step) and drawn on the
// per-token timeline; with counters on, what reading them costs is measured and shown.
// Built a second time as bench_ui_profiler (COLIBRI_PROFILER_BENCH, not a ctest test: a measurement, not a unit
// test): the layers' time per generated token with counters off against `colibri bench`'s time per decoded token
// on the same model, medians of alternating runs (docs/PERFORMANCE.md quotes it).
#include <QComboBox>
#include <QDockWidget>
#include <QJsonArray>
#include <QLabel>
#include <QMenu>
#include <QTabWidget>
#include <QToolButton>
#include <memory>
#include <sys/stat.h>

#include "engine/core/perf_counters.h"
#include "ui/data/profile_snapshot.h"
#include "ui/trace_stats.h"
#include "ui/views/main_window.h"
#include "ui/views/profiler_view.h"
#include "ui/views/token_timeline.h"
#include "ui_test_support.h"

using namespace colibri;
using namespace colibri::studio;
using namespace colibri::test;

namespace {

#ifdef COLIBRI_PROFILER_BENCH
double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}
#endif

}  // namespace

class TestProfiler : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

    static bool open(MainWindow& w, const QString& path) {
        QSignalSpy loaded(&w, &MainWindow::modelLoaded);
        w.open_model(path);
        return wait_for(loaded, 1);
    }

    static bool chat(MainWindow& w, const QString& text, int max_tokens) {
        QSignalSpy finished(w.chat(), &ChatController::finished);
        if (!w.chat()->send(text, greedy(max_tokens)).is_ok()) return false;
        return wait_for(finished, 1, 300000);
    }

private slots:
#ifndef COLIBRI_PROFILER_BENCH
    void counters_off_by_default_and_every_token_accounted_for() {
        const std::unique_ptr<MainWindow> window = shown_window();
        MainWindow& w = *window;
        QVERIFY(open(w, QStringLiteral(COLIBRI_UI_TEST_MODEL)));
        ProfilerView* p = w.profiler_view();
        QCOMPARE(p->counting(), Counting::Off);
        QVERIFY(chat(w, QStringLiteral("Hello! What do hummingbirds eat?"), 12));
        int generated = 0;
        for (const ConversationToken& t : w.conversation()->tokens()) {
            QVERIFY(t.evaluated);
            QVERIFY(!t.trace.counted);
            QVERIFY(t.trace.experts.empty());
            for (const LayerProfile& l : t.trace.layers) {
                QVERIFY(l.counters.empty());
                QCOMPARE(l.counter_ns, uint64_t(0));
            }
            const TokenTime time = t.trace.time();
            QVERIFY(time.total > 0);
            QCOMPARE(time.named() + time.other(), time.total);
            QVERIFY(time.attention > 0 && time.experts > 0);
            if (t.trace.generated) {
                ++generated;
                QVERIFY(time.sampling > 0);
                QVERIFY(time.lm_head > 0);  // the step computed the logits of the next token
                QVERIFY(t.trace.step_ns >= time.named());
            }
        }
        QVERIFY(generated > 0);
        p->refresh();
        // The summary names every stage, and the timeline draws a bar per token.
        const QString summary = p->summary_label()->text();
        QVERIFY2(summary.contains(QStringLiteral("generated tokens")), qPrintable(summary));
        for (const char* stage : {"attention", "router", "experts", "lm head", "sampling", "counters", "other"})
            QVERIFY2(summary.contains(QLatin1String(stage)), stage);
        QVERIFY2(p->overhead_label()->text().startsWith(QStringLiteral("counters off")), qPrintable(p->overhead_label()->text()));
        p->tabs()->setCurrentIndex(0);
        w.dock_of(p)->raise();
        QTest::qWait(50);
        TokenTimeline* timeline = p->timeline();
        QCOMPARE(p->token_model()->rowCount(), w.conversation()->size());
        QCOMPARE(timeline->bars(), std::min(w.conversation()->size(), timeline->plot_rect().width()));
        const QImage drawn = timeline->grab().toImage();
        double tallest = 0;
        for (int r = 0; r < p->token_model()->rowCount(); ++r) tallest = std::max(tallest, p->token_model()->us(r, TokenTimeModel::Total));
        QCOMPARE(timeline->scale_us(), tallest);
        QVERIFY(!drawn.isNull());
        // The axis's labels fit left of the plot, the top one (the tallest token) and the longest there can be.
        for (double us : {tallest, 99999e3}) {
            const QString label = TokenTimeline::axis_label(us, us);
            QVERIFY2(timeline->fontMetrics().horizontalAdvance(label) + 4 <= timeline->plot_rect().left(), qPrintable(label));
        }
        // Clicking a bar selects its token everywhere.
        QSignalSpy selected(w.conversation(), &Conversation::selectionChanged);
        const auto [first, last] = timeline->bar_rows(timeline->bars() - 1);
        const QRect plot = timeline->plot_rect();
        QTest::mouseClick(timeline, Qt::LeftButton, {}, QPoint(plot.right() - 1, plot.bottom() - 1));
        QVERIFY(wait_for(selected, 1, 2000));
        QCOMPARE(w.conversation()->selected(), p->token_model()->trace(first).position);
        Q_UNUSED(last);
    }

    void counters_when_asked_with_their_cost_shown() {
        const auto here = PerfCounters::open_default();
        if (here->size() == 0) QSKIP("no perf counters can be opened here");
        MainWindowOptions options;
        options.persist_settings = false;
        MainWindow w(options);
        w.show();
        // A model without a tokenizer: its messages are token ids and the conversation's ids are evaluated as they
        // are, so the first reply keeps its uncounted traces (a text conversation is encoded again, and a reply's
        // text may then split into other tokens and be evaluated anew).
        const QString hf = dir_.filePath(QStringLiteral("hf-ids"));
        QVERIFY(make_model(hf, {"--family", "mixtral", "--layers", "4", "--hidden", "64", "--heads", "4", "--kv-heads", "2", "--experts",
                                "8", "--top-k", "2", "--ffn", "128", "--vocab", "512", "--seed", "11"}));
        const QString model = dir_.filePath(QStringLiteral("ids.bin"));
        QCOMPARE(run_cli({"convert", hf, "-o", model, "-q"}).exit_code, 0);
        QVERIFY(open(w, model));
        QVERIFY(w.chat()->uses_token_ids());
        ProfilerView* p = w.profiler_view();
        QVERIFY(chat(w, QStringLiteral("5, 6, 7"), 6));
        const int uncounted = w.conversation()->size();
        p->counting_selector()->setCurrentIndex(p->counting_selector()->findData(static_cast<int>(Counting::Experts)));
        QCOMPARE(p->counting(), Counting::Experts);
        QVERIFY(chat(w, QStringLiteral("8, 9"), 6));
        int counted = 0;
        for (const ConversationToken& t : w.conversation()->tokens()) {
            if (t.trace.position < uncounted || !t.evaluated || t.trace.position < w.conversation()->messages().back().first_token) continue;
            ++counted;
            QVERIFY(t.trace.counted && t.trace.experts_counted);
            QCOMPARE(static_cast<int>(t.trace.experts.size()), 4 * 2);  // every routed expert of the 4 layers
            for (const LayerProfile& l : t.trace.layers) {
                QCOMPARE(static_cast<int>(l.counters.size()), static_cast<int>(here->size()));
                QVERIFY(l.counter_ns > 0);  // the reads were timed, and kept out of the experts' time
            }
            QVERIFY(t.trace.time().counters > 0);
        }
        QVERIFY(counted > 0);
        p->refresh();
        const QString overhead = p->overhead_label()->text();
        QVERIFY2(overhead.contains(QStringLiteral("reading counters took")) && overhead.contains(QStringLiteral("counted")) &&
                     overhead.contains(QStringLiteral("uncounted")),
                 qPrintable(overhead));
        // Per layer only: no expert records, layer counters still.
        p->set_counting(Counting::Layers);
        QVERIFY(chat(w, QStringLiteral("10, 11"), 4));
        const ConversationToken& last = w.conversation()->tokens().back();
        QVERIFY(last.trace.counted && !last.trace.experts_counted);
        QVERIFY(last.trace.experts.empty());
        QCOMPARE(static_cast<int>(last.trace.layers.front().counters.size()), static_cast<int>(here->size()));
        // And off again: nothing counted.
        p->set_counting(Counting::Off);
        QVERIFY(chat(w, QStringLiteral("12"), 3));
        QVERIFY(!w.conversation()->tokens().back().trace.counted);
    }

    // A profile kept as the baseline, saved, loaded back and compared: the step's change and whether it stands
    // out of the noise, the baseline's totals per layer in the table and on the chart, warnings when the models
    // differ; a file that is not a profile is one line of error and the baseline stays as it was.
    void compare_with_a_baseline_profile() {
        const std::unique_ptr<MainWindow> window = shown_window();
        MainWindow& w = *window;
        QVERIFY(open(w, QStringLiteral(COLIBRI_UI_TEST_MODEL)));
        ProfilerView* p = w.profiler_view();
        QVERIFY(!p->keep_as_baseline());  // nothing profiled yet
        QVERIFY(!p->baseline().has_value());
        // The menu greys out what cannot be done: keep, (open), save, —, stop.
        QMenu* menu = p->compare_button()->menu();
        const auto enabled = [menu] {
            emit menu->aboutToShow();
            QString states;
            for (QAction* a : menu->actions()) states += a->isSeparator() ? QLatin1Char('-') : a->isEnabled() ? QLatin1Char('1') : QLatin1Char('0');
            return states;
        };
        QCOMPARE(enabled(), QStringLiteral("010-0"));
        QVERIFY(chat(w, QStringLiteral("Hello! What do hummingbirds eat?"), 12));
        p->refresh();
        QVERIFY(p->comparison_label()->isHidden());
        QCOMPARE(enabled(), QStringLiteral("111-0"));
        const int plain_columns = p->layer_model()->columnCount();
        const int layer_rows = p->layer_model()->rowCount();
        QVERIFY(layer_rows > 0);
        QVERIFY(p->keep_as_baseline());
        const ProfileSnapshot base = *p->baseline();
        QCOMPARE(base.model, QFileInfo(QStringLiteral(COLIBRI_UI_TEST_MODEL)).fileName());
        QVERIFY2(base.tokens_kind.startsWith(QStringLiteral("generated tokens")), qPrintable(base.tokens_kind));
        QVERIFY(!base.kernel.isEmpty());
        QVERIFY(base.step_ms.samples.size() >= 10);  // 12 generated tokens, the first's step is the prompt's
        QCOMPARE(static_cast<int>(base.layers.size()), layer_rows);
        QCOMPARE(enabled(), QStringLiteral("010-1"));  // nothing profiled since the baseline
        // From now on the profiler shows the tokens after the baseline: none yet.
        const int kept_at = w.conversation()->size();
        QCOMPARE(p->profiled_from(), kept_at);
        QCOMPARE(p->token_model()->rowCount(), 0);
        QVERIFY2(p->comparison_label()->text().contains(QStringLiteral("Generate to compare")), qPrintable(p->comparison_label()->text()));
        // The next reply is compared with it: the table gains the baseline's total and the change per layer, the
        // chart its markers.
        QVERIFY(chat(w, QStringLiteral("What is 23 plus 45?"), 12));
        p->refresh();
        // The next turn re-evaluates what its template renders differently from the reply's tokens (from the
        // first differing one): everything evaluated after the baseline is this run's, nothing before it.
        QVERIFY2(p->profiled_from() > 0 && p->profiled_from() <= kept_at, qPrintable(QStringLiteral("%1 %2").arg(p->profiled_from()).arg(kept_at)));
        QCOMPARE(p->token_model()->rowCount(), w.conversation()->size() - p->profiled_from());
        LayerProfileModel* layers = p->layer_model();
        QCOMPARE(layers->columnCount(), plain_columns + 2);
        QCOMPARE(layers->headerData(layers->baseline_column(), Qt::Horizontal).toString(), QStringLiteral("baseline µs"));
        QCOMPARE(layers->headerData(layers->baseline_column() + 1, Qt::Horizontal).toString(), QStringLiteral("change"));
        QCOMPARE(static_cast<size_t>(layers->rowCount()), base.layers.size());
        for (int r = 0; r < layers->rowCount(); ++r) {
            QCOMPARE(layers->baseline_total_us(r), base.layers[static_cast<size_t>(r)].total_us());
            const double change = layers->index(r, layers->baseline_column() + 1).data(Qt::EditRole).toDouble();
            QVERIFY(std::fabs(change - (layers->mean_us(r, LayerProfileModel::Total) / base.layers[static_cast<size_t>(r)].total_us() - 1)) < 1e-9);
        }
        QVERIFY(!p->comparison_label()->isHidden());
        QString line = p->comparison_label()->text();
        QVERIFY2(line.startsWith(QStringLiteral("From position %1 on: vs baseline: ").arg(p->profiled_from())) && line.contains(QStringLiteral(" ms per token (")) &&
                     line.contains(QStringLiteral("the noise")) && line.endsWith(QStringLiteral("; baseline: ") + base.label()),
                 qPrintable(line));
        QVERIFY2(!line.contains(QStringLiteral("different models")), qPrintable(line));
        const QList<qreal> markers = p->baseline_chart_values();
        QCOMPARE(markers.size(), layers->rowCount());
        for (int r = 0; r < markers.size(); ++r) QCOMPARE(markers[r], base.layers[static_cast<size_t>(r)].total_us());
        // A profile against itself: no change, within the noise.
        p->set_baseline(p->snapshot(), p->profiled_from());
        for (int r = 0; r < layers->rowCount(); ++r)
            QCOMPARE(layers->index(r, layers->baseline_column() + 1).data().toString(), QStringLiteral("±0 %"));
        line = p->comparison_label()->text();
        QVERIFY2(line.contains(QStringLiteral("(±0 %), within the noise")), qPrintable(line));
        p->set_baseline(base, p->profiled_from());

        // Saved and loaded back: the same profile.
        const QString saved = dir_.filePath(QStringLiteral("profile.json"));
        QVERIFY(p->save_profile(saved));
        auto back = ProfileSnapshot::read(saved);
        QVERIFY2(back, back.message().c_str());
        QCOMPARE(back.value().model, base.model);
        QCOMPARE(back.value().kernel, base.kernel);
        QCOMPARE(back.value().step_ms.samples.size(), base.step_ms.samples.size());
        QCOMPARE(back.value().layers.size(), base.layers.size());
        for (size_t i = 0; i < base.layers.size(); ++i) QCOMPARE(back.value().layers[i].layer, base.layers[i].layer);

        // A baseline far slower in every step and layer (another kernel, say): this run is faster, beyond the
        // noise, and a different model is said.
        ProfileSnapshot slow = base;
        slow.model = QStringLiteral("other.bin");
        std::vector<double> steps = base.step_ms.samples;
        const double top = *std::max_element(steps.begin(), steps.end());
        // Every step a thousand times the baseline's slowest: beyond any step of this run, even on a busy machine
        // (twice was not: a second reply on a loaded machine was slower than that).
        for (double& v : steps) v = 1000 * top + v;
        slow.step_ms = tools::Spread::of(steps);
        for (ProfileLayer& l : slow.layers) l.experts_us += 999 * l.total_us();  // a thousand times the total
        const QString slow_path = dir_.filePath(QStringLiteral("slow.json"));
        QVERIFY(slow.save(slow_path));
        QVERIFY(p->compare_with_file(slow_path));
        QCOMPARE(p->profiled_from(), 0);  // a saved profile is compared with every token shown
        line = p->comparison_label()->text();
        QVERIFY2(line.contains(QStringLiteral("other.bin")) && line.contains(QStringLiteral("beyond the noise")) &&
                     line.contains(QStringLiteral("(−")) && line.contains(QStringLiteral("different models")),
                 qPrintable(line));
        for (int r = 0; r < layers->rowCount(); ++r) {
            const QString change = layers->index(r, layers->baseline_column() + 1).data().toString();
            QVERIFY2(change.startsWith(QStringLiteral("−")), qPrintable(change));
            const double expected = layers->mean_us(r, LayerProfileModel::Total) / (1000 * base.layers[static_cast<size_t>(r)].total_us()) - 1;
            QVERIFY(std::fabs(layers->index(r, layers->baseline_column() + 1).data(Qt::EditRole).toDouble() - expected) < 1e-9);
        }

        // Files that are not profiles: an error each, the baseline kept.
        auto write = [this](const char* name, const QByteArray& bytes) {
            const QString path = dir_.filePath(QString::fromLatin1(name));
            QFile f(path);
            if (!f.open(QIODevice::WriteOnly)) return QString();
            f.write(bytes);
            return path;
        };
        QJsonObject good = slow.to_json();
        QJsonObject negative = good;
        negative["step_ms"] = QJsonArray{1.0, -2.0};
        QJsonObject no_steps = good;
        no_steps["step_ms"] = QJsonArray{};
        QJsonObject twice = good;
        QJsonArray repeated = good["layers"].toArray();
        repeated.append(repeated.at(0));
        twice["layers"] = repeated;
        QJsonObject future = good;
        future["version"] = 2;
        QJsonObject kernel_results{{"format", "colibri-kernel-results"}};
        const QString fifo = dir_.filePath(QStringLiteral("fifo.json"));
        QCOMPARE(::mkfifo(QFile::encodeName(fifo).constData(), 0600), 0);
        const QString huge = write("huge.json", QByteArray());
        QVERIFY(QFile::resize(huge, kMaxProfileBytes + 1));
        const QStringList hostile{dir_.filePath(QStringLiteral("missing.json")),
                                  dir_.path(),
                                  fifo,
                                  huge,
                                  write("text.json", "not json at all"),
                                  write("array.json", "[1, 2, 3]"),
                                  write("kernels.json", QJsonDocument(kernel_results).toJson()),
                                  write("negative.json", QJsonDocument(negative).toJson()),
                                  write("no_steps.json", QJsonDocument(no_steps).toJson()),
                                  write("twice.json", QJsonDocument(twice).toJson()),
                                  write("future.json", QJsonDocument(future).toJson())};
        for (const QString& path : hostile) {
            const Status st = p->compare_with_file(path);
            QVERIFY2(!st, qPrintable(path));
            QVERIFY2(st.message().find('\n') == std::string::npos && !st.message().empty(), st.message().c_str());
            QCOMPARE(p->baseline()->model, QStringLiteral("other.bin"));  // kept
        }

        // The menu offers all four, and stopping the comparison takes its columns, line and markers away.
        QCOMPARE(menu->actions().size(), 5);  // four and a separator
        p->clear_baseline();
        QVERIFY(!p->baseline().has_value());
        QCOMPARE(layers->columnCount(), plain_columns);
        QVERIFY(p->comparison_label()->isHidden());
        QVERIFY(p->baseline_chart_values().isEmpty());
        QCOMPARE(p->token_model()->rowCount(), w.conversation()->size());
        QVERIFY(!p->save_profile(dir_.filePath(QStringLiteral("missing-dir/profile.json"))));
        // A baseline kept, then a new conversation: its tokens are all profiled against the baseline.
        QVERIFY(p->keep_as_baseline());
        QVERIFY(p->profiled_from() > 0);
        w.chat()->new_conversation();
        QTRY_COMPARE(p->profiled_from(), 0);
    }

#else
    void layer_times_against_colibri_bench() {
        // A model whose layers dominate each token (the chat model's embedding and lm head are a large share of its).
        const QString hf = dir_.filePath(QStringLiteral("hf"));
        QVERIFY(make_model(hf, {"--family", "mixtral", "--layers", "4", "--hidden", "512", "--heads", "8", "--kv-heads", "4", "--experts",
                                "8", "--top-k", "2", "--ffn", "1024", "--vocab", "2048", "--seed", "7"}));
        const QString model = dir_.filePath(QStringLiteral("layers.bin"));
        QCOMPARE(run_cli({"convert", hf, "-o", model, "-q"}).exit_code, 0);
        MainWindowOptions options;
        options.persist_settings = false;
        // One thread on both sides: the engine's pool spins while it waits, so two threads on a host where another
        // process runs measure the scheduler, not the layers (ctest also runs this suite alone: RUN_SERIAL).
        options.load.threads = 1;
        MainWindow w(options);
        w.resize(1280, 720);
        w.show();
        QVERIFY(open(w, model));
        QCOMPARE(w.profiler_view()->counting(), Counting::Off);
        constexpr int kDecode = 32;
        std::vector<double> layer_ratios, token_ratios;
        for (int round = 0; round < 5; ++round) {  // five, alternating: the median of a shared host's noise
            const CliResult bench = run_cli({"bench", "-m", model, "-t", "1", "-p", "16", "-n", QString::number(kDecode), "--reps", "3",
                                             "--json", "--bandwidth-mib", "16"});
            QVERIFY2(bench.exit_code == 0, bench.err.constData());
            const double tps = QJsonDocument::fromJson(bench.out).object()["decode_tokens_per_s"].toObject()["median"].toDouble();
            QVERIFY(tps > 0);
            const double bench_us = 1e6 / tps;
            w.chat()->new_conversation();
            QVERIFY(chat(w, QStringLiteral("1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16"), kDecode));
            TokenSpan generated;
            generated.generated_only = true;
            const ProfileTotals totals = profile_totals(*w.conversation(), generated, 0);
            double layers_us = 0;
            for (const StageTotals& s : totals.per_layer)
                layers_us += static_cast<double>(s.attention_ns + s.router_ns + s.experts_ns) / s.tokens / 1e3;
            const TimeTotals times = time_totals(*w.conversation(), generated);
            const double token_us = static_cast<double>(times.generated_sum.total) / times.generated / 1e3;
            qInfo("round %d: colibri bench %.1f us per decoded token; the profiler, counters off: layers %.1f us (x%.3f), "
                  "whole step %.1f us (x%.3f)",
                  round, bench_us, layers_us, layers_us / bench_us, token_us, token_us / bench_us);
            layer_ratios.push_back(layers_us / bench_us);
            token_ratios.push_back(token_us / bench_us);
        }
        const double layers = median(layer_ratios), token = median(token_ratios);
        // A ratio of medians of interleaved runs: a slower or busier host moves both sides.
        qInfo("median ratios to colibri bench: layers x%.3f, whole step x%.3f", layers, token);
        QVERIFY(layers > 0 && token > 0);
        QVERIFY2(layers <= token, qPrintable(QStringLiteral("layers %1 > step %2").arg(layers).arg(token)));
    }
#endif
};

QTEST_MAIN(TestProfiler)
#include "test_ui_profiler.moc"
