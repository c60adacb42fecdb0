// Kernels: which kernel variant runs this session's chat, and the variants compared end to end: the same
// prompt and greedy decode run on the model once per variant this machine runs (scalar, AVX2, AVX-512, NEON
// translated through SIMDe), tokens/s (median and min–max of the repetitions, flagged when they lie far apart or
// the machine was busy) and the decode's time per layer side by side, and two comparisons beside each other;
// beside them the auto-tuner's
// micro-benchmarks of this machine and of tune reports (`colibri tune --json`) from others. Charts on a log
// axis with every value written on its bar. Results are kept between sessions and export as JSON or CSV; a
// cancelled tuner keeps the measurements it finished.
#pragma once
#include <QSortFilterProxyModel>
#include <QWidget>

#include "engine/base/status.h"
#include "ui/data/kernel_comparison.h"
#include "ui/data/kernel_results.h"
#include "ui/models/kernel_comparison_model.h"
#include "ui/models/kernel_results_model.h"
#include "ui/tune_runner.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QSettings;
class QSpinBox;
class QTabWidget;
class QTableView;

namespace colibri::studio {

class BarChart;
class ElidedLabel;

class KernelsView : public QWidget {
    Q_OBJECT
public:
    explicit KernelsView(QWidget* parent = nullptr);

    Status import_report(const QString& path);
    // Runs the auto-tuner on this machine (TuneRunner, its own thread) and adds its report.
    void run_tuner();
    void cancel_tuner();
    TuneRunner* tuner() { return &tuner_; }
    QLabel* status_label() const;
    QProgressBar* tuner_progress() const { return progress_; }
    KernelResultsModel* results() { return &results_; }
    QTableView* table() const { return table_; }
    // The tuner chart: variants along the axis, and per report its bar heights.
    QStringList chart_categories() const;
    QList<qreal> chart_values(int report) const;
    BarChart* tuner_chart() const { return tuner_chart_; }
    void select(const QString& op, const QString& type, const QString& shape);
    QComboBox* metric_selector() const { return metric_; }

    // The end-to-end comparison. start_comparison() asks the main window (compareRequested) to run it on the
    // loaded model; the results arrive in comparison_finished().
    void start_comparison();
    void cancel_comparison();
    void set_comparison_size(int prompt_tokens, int decode_tokens, int reps);
    const std::vector<KernelComparison>& comparisons() const { return data_.comparisons(); }
    // What the view shows and keeps: the comparisons and this machine's tune runs, and their store.
    const KernelResults& data() const { return data_; }
    KernelComparisonModel* comparison_model() { return &comparison_model_; }
    BarChart* speed_chart() const { return speed_chart_; }
    BarChart* layer_chart() const { return layer_chart_; }
    QLabel* comparison_status() const;
    // Whether the comparison shown can be trusted: the machine's load while it ran and its repetitions' spread.
    QLabel* reliability_label() const;
    // What "NEON (translated)" is and is not; shown wherever that variant appears.
    QLabel* neon_note() const;
    // A second comparison side by side with the one shown: index into comparisons(), -1 none.
    void set_baseline(int comparison);
    QComboBox* baseline_selector() const { return baseline_selector_; }
    QComboBox* comparison_selector() const { return comparison_selector_; }
    QPushButton* compare_button() const { return compare_; }
    // The kernel the chat runs on ("" automatic), and the variants this machine offers.
    QComboBox* session_kernel_selector() const { return session_kernel_; }

    // Everything measured here as KernelResults exports it (JSON, or the comparisons as CSV by the extension).
    Status export_results(const QString& path) const { return data_.export_to(path); }
    // Where comparisons and this machine's tune runs are kept between sessions ("" keeps nothing); set_store
    // loads what is there and shows it.
    void set_store(const QString& path);
    void save_settings(QSettings& settings) const;
    void restore_settings(QSettings& settings);

public slots:
    void import_dialog();
    void set_model_loaded(bool loaded);
    void comparison_progress(int done, int total, const QString& what);
    void comparison_finished(const colibri::studio::KernelComparison& result);
    void comparison_failed(const QString& error);

signals:
    void compareRequested(const colibri::studio::KernelComparisonRequest& request);
    void compareCancelled();
    void sessionKernelChanged(const QString& variant);

private:
    void refill_selectors();
    void rebuild_chart();
    void show_comparison(const KernelComparison& c);
    void show_reliability(const KernelComparison& c);
    void update_neon_note();
    void set_tuning(bool on);
    void set_comparing(bool on);
    void add_own_report(const TuneReport& report);
    void add_comparison_item(const KernelComparison& c);
    void export_dialog();
    KernelResultsModel::Metric metric() const;

    KernelResultsModel results_;
    TuneRunner tuner_;
    KernelComparisonModel comparison_model_;
    KernelResults data_;
    bool model_loaded_ = false;
    bool comparing_ = false;

    QComboBox* session_kernel_ = nullptr;
    QSpinBox *prompt_tokens_ = nullptr, *decode_tokens_ = nullptr, *reps_ = nullptr;
    QPushButton *compare_ = nullptr, *compare_cancel_ = nullptr;
    QProgressBar* compare_progress_ = nullptr;
    ElidedLabel* compare_status_ = nullptr;
    QComboBox* comparison_selector_ = nullptr;
    QComboBox* baseline_selector_ = nullptr;
    ElidedLabel* reliability_ = nullptr;
    ElidedLabel* neon_note_ = nullptr;
    QPushButton *run_ = nullptr, *cancel_ = nullptr;
    QProgressBar* progress_ = nullptr;
    QSortFilterProxyModel filter_;
    QComboBox *op_ = nullptr, *type_ = nullptr, *shape_ = nullptr, *metric_ = nullptr;
    QCheckBox* log_scale_ = nullptr;
    BarChart* speed_chart_ = nullptr;
    BarChart* layer_chart_ = nullptr;
    BarChart* tuner_chart_ = nullptr;
    QTableView* table_ = nullptr;
    QTableView* comparison_table_ = nullptr;
    QLineEdit* filter_edit_ = nullptr;
    ElidedLabel* status_ = nullptr;
    QStringList categories_;
    std::vector<QList<qreal>> values_;
};

}  // namespace colibri::studio
