// Kernels: the auto-tuner run on this machine, and tune reports (`colibri tune --json`) from any number of
// machines, compared side by side. The
// chart shows one op, weight type and shape: a group of bars per kernel variant, one bar per machine; the
// table lists every result, sortable and filterable.
#pragma once
#include <QSortFilterProxyModel>
#include <QWidget>

#include "engine/status.h"
#include "ui/models/kernel_results_model.h"
#include "ui/tune_runner.h"

class QChart;
class QChartView;
class QComboBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QSettings;
class QTableView;

namespace colibri::studio {

class KernelsView : public QWidget {
    Q_OBJECT
public:
    explicit KernelsView(QWidget* parent = nullptr);

    Status import_report(const QString& path);
    // Runs the auto-tuner on this machine (TuneRunner, its own thread) and adds its report.
    void run_tuner();
    void cancel_tuner();
    TuneRunner* tuner() { return &tuner_; }
    QLabel* status_label() const { return status_; }
    QProgressBar* tuner_progress() const { return progress_; }
    KernelResultsModel* results() { return &results_; }
    QTableView* table() const { return table_; }
    // What the chart shows now: variants along the axis, and per imported report its bar heights.
    QStringList chart_categories() const;
    QList<qreal> chart_values(int report) const;
    void select(const QString& op, const QString& type, const QString& shape);
    QComboBox* metric_selector() const { return metric_; }
    void save_settings(QSettings& settings) const;
    void restore_settings(QSettings& settings);

public slots:
    void import_dialog();

private:
    void refill_selectors();
    void rebuild_chart();
    void set_tuning(bool on);
    KernelResultsModel::Metric metric() const;

    KernelResultsModel results_;
    TuneRunner tuner_;
    QPushButton *run_ = nullptr, *cancel_ = nullptr;
    QProgressBar* progress_ = nullptr;
    QSortFilterProxyModel filter_;
    QComboBox *op_ = nullptr, *type_ = nullptr, *shape_ = nullptr, *metric_ = nullptr;
    QChart* chart_ = nullptr;
    QChartView* chart_view_ = nullptr;
    QTableView* table_ = nullptr;
    QLineEdit* filter_edit_ = nullptr;
    QLabel* status_ = nullptr;
    QStringList categories_;
    std::vector<QList<qreal>> values_;
};

}  // namespace colibri::studio
