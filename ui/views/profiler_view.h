// The profiler. Every token's time is accounted for: attention, router, experts, lm head, sampling, counter
// reads and other add up to its step (summary line, per-token timeline and table). Per layer the time in
// attention, router and experts (stacked chart and table). perf_event counters per layer, and per routed expert,
// only when asked (they slow generation: per-expert counting runs one expert at a time); their cost is measured
// and shown (the time spent reading them, taken out of the stage it fell in, and the step with and without
// them), and the line says plainly which counters this machine does not give (hardware counters on a VM).
#pragma once
#include <QSortFilterProxyModel>
#include <QTimer>
#include <QWidget>

#include "ui/data/generation.h"
#include "ui/data/model_summary.h"
#include "ui/models/profiler_models.h"
#include "ui/data/token_trace.h"
#include "ui/trace_collector.h"

class QBarSet;
class QChart;
class QChartView;
class QCheckBox;
class QComboBox;
class QLabel;
class QTabWidget;
class QTableView;
class QValueAxis;

namespace colibri::studio {

class ElidedLabel;
class TokenTimeline;

class ProfilerView : public QWidget {
    Q_OBJECT
public:
    explicit ProfilerView(Conversation* conversation, QWidget* parent = nullptr);
    void set_model(const ModelSummary& model, const CounterSet& counters);

    LayerProfileModel* layer_model() { return &layers_; }
    ExpertCounterModel* expert_model() { return &experts_; }
    TokenTimeModel* token_model() { return &tokens_; }
    TokenTimeline* timeline() const { return timeline_; }
    QLabel* counter_status() const { return status_; }
    // "24 generated tokens, 6.25 ms each: attention … + other …"
    QLabel* summary_label() const;
    // What counting costs, measured.
    QLabel* overhead_label() const;
    // "⚠ Unreliable: …" when the machine was busy during the last reply or the steps' IQR is wide; hidden otherwise.
    QLabel* reliability_label() const;
    QComboBox* counting_selector() const { return counting_; }
    Counting counting() const;
    void set_counting(Counting mode);
    QTabWidget* tabs() const { return tabs_; }
    // Values of one stage in the stacked chart, per layer: 0 attention, 1 router, 2 experts (µs per token).
    QList<qreal> chart_values(int stage) const;
    // The counter chart: the mean per token of the chosen counter, per layer.
    QComboBox* counter_selector() const { return counter_; }
    QList<qreal> counter_chart_values() const;  // empty when the counters were not measured
    QString counter_chart_title() const;
    void refresh();
    // A finished reply: its machine load (other processes during the turn) flags the summary when busy.
    void note_generation(const colibri::studio::GenerationStats& stats);

signals:
    void countingChanged(colibri::studio::Counting mode);

protected:
    void changeEvent(QEvent* e) override;

private:
    void schedule();
    void rebuild_chart();
    void rebuild_counter_chart();
    void show_summary(const TimeTotals& t);

    Conversation* conversation_;
    LayerProfileModel layers_;
    ExpertCounterModel experts_;
    TokenTimeModel tokens_;
    QSortFilterProxyModel expert_sort_;
    QSortFilterProxyModel token_sort_;
    CounterSet counter_set_;
    QLabel* status_ = nullptr;
    ElidedLabel* summary_ = nullptr;
    ElidedLabel* overhead_ = nullptr;
    ElidedLabel* reliability_ = nullptr;
    QComboBox* counting_ = nullptr;
    QCheckBox* generated_only_ = nullptr;
    QTabWidget* tabs_ = nullptr;
    TokenTimeline* timeline_ = nullptr;
    QTableView* token_table_ = nullptr;
    QChart* chart_ = nullptr;
    QChartView* chart_view_ = nullptr;
    QBarSet* sets_[3] = {nullptr, nullptr, nullptr};
    QValueAxis* y_axis_ = nullptr;
    QStringList categories_;  // layer labels of the series drawn now
    QComboBox* counter_ = nullptr;
    QChart* counter_chart_ = nullptr;
    QChartView* counter_chart_view_ = nullptr;
    QBarSet* counter_bars_ = nullptr;
    QValueAxis* counter_axis_ = nullptr;
    QStringList counter_categories_;
    QTableView* layer_table_ = nullptr;
    QTableView* expert_table_ = nullptr;
    QTimer timer_;
    tools::MachineLoad last_load_;  // of the last reply
};

}  // namespace colibri::studio
