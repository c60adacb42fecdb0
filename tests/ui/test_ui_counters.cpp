// Counters for the profiler: the libpfm4 encoding of every hardware event the profiler offers, the fallback
// when hardware events cannot be opened (this VM has no PMU: the view says so and keeps the software events),
// and the profiler's tables on a real generation.
#include <QComboBox>
#include <QLabel>
#include <linux/perf_event.h>

#include "engine/core/perf_counters.h"
#include "ui/engine_worker.h"
#include "ui/views/main_window.h"
#include "ui/views/profiler_view.h"
#include "ui_test_support.h"

using namespace colibri;
using namespace colibri::studio;
using namespace colibri::test;


class TestCounters : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

private slots:
    void libpfm4_encodes_the_offered_events() {
        // perf_event_attr type and config each offered event must encode to (linux/perf_event.h).
        const std::map<std::string, std::pair<uint32_t, uint64_t>> expected = {
            {"PERF_COUNT_HW_CPU_CYCLES", {PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES}},
            {"PERF_COUNT_HW_INSTRUCTIONS", {PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS}},
            {"PERF_COUNT_HW_CACHE_MISSES", {PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES}},
            {"PERF_COUNT_HW_CACHE_LL:READ:MISS",
             {PERF_TYPE_HW_CACHE, PERF_COUNT_HW_CACHE_LL | (PERF_COUNT_HW_CACHE_OP_READ << 8) | (PERF_COUNT_HW_CACHE_RESULT_MISS << 16)}},
            {"PERF_COUNT_HW_CACHE_L1D:READ:MISS",
             {PERF_TYPE_HW_CACHE, PERF_COUNT_HW_CACHE_L1D | (PERF_COUNT_HW_CACHE_OP_READ << 8) | (PERF_COUNT_HW_CACHE_RESULT_MISS << 16)}},
        };
        const auto offered = offered_hardware_events();
        QCOMPARE(offered.size(), expected.size());
        for (const auto& [name, pfm_name] : offered) {
            auto e = encode_hardware_event(name, pfm_name);
            if (!e && QString::fromStdString(e.message()).endsWith(QStringLiteral("this build has no libpfm4")))
                QSKIP("built without libpfm4");
            QVERIFY2(e.is_ok(), e.message().c_str());
            QVERIFY2(expected.count(pfm_name) == 1, pfm_name.c_str());
            QCOMPARE(e->type, expected.at(pfm_name).first);
            QCOMPARE(e->config, expected.at(pfm_name).second);
            QCOMPARE(e->name, name);
            QVERIFY(e->hardware);
        }
        QVERIFY(!encode_hardware_event("bogus", "NO_SUCH_EVENT_ANYWHERE").is_ok());
    }

    void hardware_refused_software_kept() {
        // An event of a PMU type no kernel has: it cannot open anywhere, so this is the fallback on every machine.
        const CounterEvent impossible{"LLC misses", "", 0x7FFF, 0, true};
        auto c = PerfCounters::open(software_events(), {impossible});
        QVERIFY(!c->hardware_available());
        QVERIFY(!c->hardware_status().empty());
        const CounterSet set = counter_set(*c);
        QVERIFY(set.hardware_names.isEmpty());
        Conversation conversation;
        ProfilerView view(&conversation);
        view.set_model(ModelSummary{}, set);
        const QString text = view.counter_status()->text();
        if (c->size() == 0) {  // a kernel that allows no perf events at all (perf_event_paranoid 3+)
            QVERIFY2(text.startsWith(QStringLiteral("No perf counters")), qPrintable(text));
            return;
        }
        QVERIFY2(text.startsWith(QStringLiteral("Hardware counters ")), qPrintable(text));
        QVERIFY(text.contains(set.hardware_status));
        for (const QString& name : set.names) QVERIFY2(text.contains(name), qPrintable(name));
        QCOMPARE(view.layer_model()->columnCount(), LayerProfileModel::FirstCounter + static_cast<int>(set.names.size()));
        // The software events keep counting.
        std::vector<uint64_t> before(c->size()), after(c->size());
        c->read(before);
        volatile double x = 0;
        for (int i = 0; i < 2000000; ++i) x = x + i * 0.5;
        c->read(after);
        const int task_clock = static_cast<int>(set.names.indexOf(QStringLiteral("task clock ns")));
        QVERIFY(task_clock >= 0);
        QVERIFY(after[static_cast<size_t>(task_clock)] > before[static_cast<size_t>(task_clock)]);
    }

    // Counting off is "not measured", never zeros; tokens with counters read are slower and never mixed into the
    // summary of those without; the summary gives the median step with its IQR and min–max, and flags a spread
    // too wide to trust.
    void counters_not_measured_and_never_mixed() {
        Conversation conversation;
        ProfilerView view(&conversation);
        CounterSet set;
        set.names = {QStringLiteral("page faults"), QStringLiteral("task clock ns")};
        view.set_model(ModelSummary{}, set);
        auto add = [&](int position, double step_ms, bool counted) {
            TokenTrace t;
            t.position = position;
            t.token = 7 + position;
            t.generated = true;
            t.counted = counted;
            t.step_ns = static_cast<uint64_t>(step_ms * 1e6);
            for (int layer = 0; layer < 2; ++layer) {
                LayerProfile l;
                l.layer = layer;
                l.attention_ns = 300000;
                l.experts_ns = 500000;
                if (counted) {
                    l.counter_ns = 20000;
                    l.counters = {10, 1000};
                }
                t.layers.push_back(l);
            }
            conversation.add_trace(t);
        };
        for (int i = 0; i < 5; ++i) add(i, 2.0 + 0.01 * i, false);
        view.refresh();
        LayerProfileModel* layers = view.layer_model();
        QCOMPARE(layers->index(0, LayerProfileModel::FirstCounter).data().toString(), QStringLiteral("not measured"));
        QCOMPARE(layers->index(1, LayerProfileModel::FirstCounter + 1).data().toString(), QStringLiteral("not measured"));
        QVERIFY(view.counter_chart_values().isEmpty());
        QVERIFY2(view.counter_chart_title().startsWith(QStringLiteral("Counters not measured: counting was off")), qPrintable(view.counter_chart_title()));
        QString summary = view.summary_label()->text();
        QVERIFY2(summary.startsWith(QStringLiteral("5 generated tokens, counters off: 2.02 ms per token median (IQR 2.01–2.03, min–max 2.00–2.04)")),
                 qPrintable(summary));
        QVERIFY(view.reliability_label()->isHidden());

        // Three more with counters read, 9 ms each: left out of the summary, and the counters' means theirs alone.
        for (int i = 5; i < 8; ++i) add(i, 9.0, true);
        view.refresh();
        summary = view.summary_label()->text();
        QVERIFY2(summary.startsWith(QStringLiteral("5 generated tokens, counters off: 2.02 ms per token median")), qPrintable(summary));
        QVERIFY2(summary.endsWith(QStringLiteral("; 3 more with counters read left out")), qPrintable(summary));
        QCOMPARE(layers->index(0, LayerProfileModel::FirstCounter).data().toString(), QStringLiteral("10"));
        QCOMPARE(layers->mean_counter(1, 1), 1000.0);
        QCOMPARE(view.counter_chart_values(), QList<qreal>({10.0, 10.0}));
        QVERIFY2(view.counter_chart_title().contains(QStringLiteral("the 3 of 8 tokens counted")), qPrintable(view.counter_chart_title()));
        QVERIFY(view.overhead_label()->text().contains(QStringLiteral("9.00 ms counted (3) and 2.02 ms uncounted (5)")));
        // A reply during which other processes loaded the machine (synthetic /proc/stat: 1.4 of 2 CPUs) is flagged.
        GenerationStats busy;
        busy.load = tools::load_between({{1000, 10000, 2}, 100}, {{1180, 10200, 2}, 140});
        view.note_generation(busy);
        QVERIFY2(view.reliability_label()->text().startsWith(
                     QStringLiteral("⚠ Unreliable: the machine was busy during the last reply (other processes used 1.4 of 2 CPUs")),
                 qPrintable(view.reliability_label()->text()));
        QVERIFY(!view.reliability_label()->isHidden());
        QVERIFY(view.summary_label()->text().startsWith(QStringLiteral("5 generated tokens, counters off: 2.02 ms")));
        view.note_generation(GenerationStats{});
        QVERIFY(view.reliability_label()->isHidden());

        // Only counted tokens: said so, with their cost inside.
        Conversation counted_only;
        ProfilerView all_counted(&counted_only);
        all_counted.set_model(ModelSummary{}, set);
        for (int i = 0; i < 3; ++i) {
            TokenTrace t;
            t.position = i;
            t.token = 3;
            t.generated = true;
            t.counted = true;
            t.step_ns = 4000000;
            counted_only.add_trace(t);
        }
        all_counted.refresh();
        QVERIFY2(all_counted.summary_label()->text().startsWith(QStringLiteral("3 generated tokens, all with counters read: 4.00 ms")),
                 qPrintable(all_counted.summary_label()->text()));

        // Steps all over the place (IQR as wide as the median): flagged.
        Conversation noisy;
        ProfilerView noisy_view(&noisy);
        const double steps[] = {1, 1, 2, 3, 4};
        for (int i = 0; i < 5; ++i) {
            TokenTrace t;
            t.position = i;
            t.token = 3;
            t.generated = true;
            t.step_ns = static_cast<uint64_t>(steps[i] * 1e6);
            noisy.add_trace(t);
        }
        noisy_view.refresh();
        QCOMPARE(noisy_view.reliability_label()->text(), QStringLiteral("⚠ Unreliable: the middle half of the steps spans 100 % of the median."));
        QVERIFY(!noisy_view.reliability_label()->isHidden());
    }

    void profiler_on_this_machine() {
        const QString model = convert_reference(dir_, QStringLiteral("mixtral"));
        QVERIFY(!model.isEmpty());
        const auto here = PerfCounters::open_default();  // what the EngineWorker opens too
        MainWindowOptions options;
        options.persist_settings = false;
        MainWindow w(options);
        QSignalSpy loaded(&w, &MainWindow::modelLoaded);
        w.open_model(model);
        QVERIFY(wait_for(loaded, 1));
        // Off by default: asked for here, per layer and per expert.
        QCOMPARE(w.profiler_view()->counting(), Counting::Off);
        w.profiler_view()->set_counting(Counting::Experts);
        QSignalSpy finished(w.chat(), &ChatController::finished);
        ChatSettings greedy;
        greedy.sampling.greedy = true;
        greedy.random_seed = false;
        greedy.max_tokens = 4;
        QVERIFY(w.chat()->send(join_ids(reference_input_ids(QStringLiteral("mixtral"))), greedy).is_ok());
        QVERIFY(wait_for(finished, 1));
        ProfilerView* p = w.profiler_view();
        p->refresh();
        const QString text = p->counter_status()->text();
        if (here->size() == 0) {
            QVERIFY2(text.startsWith(QStringLiteral("No perf counters")), qPrintable(text));
        } else if (!here->hardware_available()) {
            // This VM: no PMU. The view says so and shows the software events.
            QVERIFY2(text.startsWith(QStringLiteral("Hardware counters ")), qPrintable(text));
            QVERIFY(text.contains(QStringLiteral("page faults")));
        } else {
            QVERIFY2(text.startsWith(QStringLiteral("Counting ")), qPrintable(text));
        }
        // Per layer: the mean time per token in each stage and every counter's mean per token.
        LayerProfileModel* layers = p->layer_model();
        QCOMPARE(layers->rowCount(), 2);
        QCOMPARE(layers->columnCount(), LayerProfileModel::FirstCounter + static_cast<int>(here->size()));
        for (int r = 0; r < 2; ++r) {
            const double total = layers->mean_us(r, LayerProfileModel::Total);
            QVERIFY(total > 0);
            QVERIFY(std::abs(layers->mean_us(r, LayerProfileModel::Attention) + layers->mean_us(r, LayerProfileModel::Router) +
                             layers->mean_us(r, LayerProfileModel::Experts) - total) < 1e-6 * total + 1e-9);
        }
        const QList<qreal> experts_bars = p->chart_values(2);
        QCOMPARE(experts_bars.size(), 2);
        QCOMPARE(experts_bars[0], layers->mean_us(0, LayerProfileModel::Experts));
        // Per expert: the activations add up to every routing decision of the 20 positions.
        int activations = 0;
        for (int r = 0; r < p->expert_model()->rowCount(); ++r)
            activations += p->expert_model()->index(r, ExpertCounterModel::Activations).data().toInt();
        QCOMPARE(activations, 20 * 2 * 2);
        for (size_t i = 0; i < here->size(); ++i)
            if (here->events()[i].name == "task clock ns") QVERIFY(layers->mean_counter(0, static_cast<int>(i)) > 0);
        // The counter chart follows the selector: one bar per layer, the table's mean per token.
        for (int i = 0; i < p->counter_selector()->count(); ++i) {
            p->counter_selector()->setCurrentIndex(i);
            const QList<qreal> bars = p->counter_chart_values();
            QCOMPARE(bars.size(), 2);
            for (int r = 0; r < 2; ++r) QCOMPARE(bars[r], layers->mean_counter(r, i));
        }
    }
};

QTEST_MAIN(TestCounters)
#include "test_ui_counters.moc"
