// The profiler: per layer the time in attention, router and experts (stacked chart and table), the perf
// counters per layer and per routed expert, and a line that says plainly which counters this machine does
// not give (hardware counters on a VM without a PMU) while the software ones keep counting.
#pragma once
#include <QSortFilterProxyModel>
#include <QTimer>
#include <QWidget>

#include "ui/models/model_summary.h"
#include "ui/models/profiler_models.h"
#include "ui/token_trace.h"

class QBarSet;
class QChart;
class QChartView;
class QCheckBox;
class QComboBox;
class QLabel;
class QTableView;
class QValueAxis;

namespace colibri::studio {

class ProfilerView : public QWidget {
    Q_OBJECT
public:
    explicit ProfilerView(Conversation* conversation, QWidget* parent = nullptr);
    void set_model(const ModelSummary& model, const CounterSet& counters);

    LayerProfileModel* layer_model() { return &layers_; }
    ExpertCounterModel* expert_model() { return &experts_; }
    QLabel* counter_status() const { return status_; }
    QCheckBox* counting_box() const { return counting_; }
    // Values of one stage in the stacked chart, per layer: 0 attention, 1 router, 2 experts (µs per token).
    QList<qreal> chart_values(int stage) const;
    // The counter chart: the mean per token of the chosen counter, per layer.
    QComboBox* counter_selector() const { return counter_; }
    QList<qreal> counter_chart_values() const;
    void refresh();

signals:
    void countingChanged(bool on);

private:
    void schedule();
    void rebuild_chart();
    void rebuild_counter_chart();

    Conversation* conversation_;
    LayerProfileModel layers_;
    ExpertCounterModel experts_;
    QSortFilterProxyModel expert_sort_;
    CounterSet counter_set_;
    QLabel* status_ = nullptr;
    QLabel* summary_ = nullptr;
    QCheckBox* counting_ = nullptr;
    QCheckBox* generated_only_ = nullptr;
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
};

}  // namespace colibri::studio
