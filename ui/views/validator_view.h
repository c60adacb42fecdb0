// The model file validator: the file drawn to scale as its sections (header, tokenizer, attention, router,
// every expert), each coloured by its state (not checked, checksum ok, damaged, misaligned), named where
// there is room, over a byte-offset axis; the tensor table with sorting and a filter, the damaged tensors'
// rows highlighted; verification with progress and cancel; a histogram of the selected tensor's values (a
// constant tensor says so); and two files compared tensor by tensor. A file the engine refuses opens here
// too, with its damage shown. The first tab draws the model as a layer graph (ui/views/model_graph_view.h).
#pragma once
#include <QSortFilterProxyModel>
#include <QStringListModel>
#include <QWidget>
#include <memory>

#include "ui/file_worker.h"
#include "ui/models/stats_table_model.h"
#include "ui/views/elided_label.h"
#include "ui/views/model_graph_view.h"
#include "ui/models/validator_models.h"
#include "ui/worker_thread.h"

class QAreaSeries;
class QChart;
class QTabWidget;
class QChartView;
class QLabel;
class QLineEdit;
class QListView;
class QProgressBar;
class QPushButton;
class QTableView;

namespace colibri::studio {

// The file as a strip wrapped over rows, one pixel per image_size / (width × rows) bytes; every section
// gets at least one pixel so none disappears.
class FileMapWidget : public QWidget {
    Q_OBJECT
public:
    explicit FileMapWidget(QWidget* parent = nullptr);
    void set_file(const FileLayout& layout, const std::vector<SectionState>& states);
    // Where a section starts on the map (its first rectangle), empty when not drawn.
    QRect section_rect(int section) const;
    int section_at(const QPoint& p) const;
    // The short name drawn inside a section's run when it fits ("L1 E5", "attn 0", "tokenizer").
    static QString short_name(const SectionInfo& s);
    // The names drawn by the last paint, and the byte offsets written on the axis.
    QStringList drawn_names() const { return drawn_names_; }
    QStringList axis_labels() const { return axis_labels_; }
    void set_highlight(int section);
    QSize sizeHint() const override { return {600, 120}; }
    QSize minimumSizeHint() const override;

signals:
    void sectionClicked(int section);

protected:
    void paintEvent(QPaintEvent*) override;
    void mousePressEvent(QMouseEvent* e) override;
    bool event(QEvent* e) override;

private:
    struct Run {
        qint64 first, last;  // pixel indices along the strip, inclusive
    };
    int rows() const;
    qint64 pixels() const;
    Run run_of(const SectionInfo& s) const;
    QRect rect_of(qint64 first, qint64 last) const;  // first and last on one row

    int gutter() const;
    FileLayout layout_;
    std::vector<SectionState> states_;
    int highlight_ = -1;
    mutable QStringList drawn_names_, axis_labels_;
};

class ValidatorView : public QWidget {
    Q_OBJECT
public:
    explicit ValidatorView(QWidget* parent = nullptr);

    // Shows the file's structure; with verify, hashes every section after.
    void open(const QString& path, bool verify);
    void verify();
    void cancel();
    bool verifying() const { return verifying_; }

    const FileLayout& file_layout() const { return layout_; }
    const tools::CheckReport* report() const { return has_report_ ? &report_ : nullptr; }
    const std::vector<SectionState>& states() const { return states_; }
    FileMapWidget* map() const { return map_; }
    TensorTableModel* tensors() { return &tensors_; }
    QSortFilterProxyModel* tensor_filter() { return &filter_; }
    QTableView* tensor_table() const { return table_; }
    QLineEdit* filter_edit() const { return filter_edit_; }
    QLabel* status_label() const { return status_; }
    QStringListModel* problems() { return &problems_; }
    const TensorHistogram& histogram() const { return histogram_; }
    QProgressBar* progress_bar() const { return progress_; }
    FileWorker* worker() const { return worker_; }
    QLabel* histogram_label() const { return histogram_label_; }
    QChart* histogram_chart() const { return chart_; }
    QChartView* histogram_view() const { return chart_view_; }
    // The value axis's tick labels as the chart writes them (labelFormat over the range).
    QStringList histogram_tick_labels() const;
    QWidget* legend() const { return legend_; }
    ModelGraphView* graph() const { return graph_; }
    QTabWidget* tabs() const { return tabs_; }
    QTableView* comparison_table() const { return comparison_table_; }
    // Selects every tensor of these sections in the table (what a click on the map or the graph does).
    void select_sections(const std::vector<int>& sections);

    // Tensor by tensor: the file shown here against another (a quantised copy, say), on the file worker.
    void compare_with(const QString& other);
    void compare_dialog();
    StatsTableModel* comparison() { return &comparison_; }
    const std::vector<TensorDiff>& differences() const { return diffs_; }
    QLabel* comparison_label() const;

signals:
    void verifiedFile(const QString& path, bool valid);
    void histogramShown(const QString& tensor);
    void compared(bool ok);

private:
    void on_layout(const FileLayout& layout);
    void on_report(const tools::CheckReport& report);
    void on_histogram(const TensorHistogram& h);
    void on_compared(const TensorComparison& c);
    void clear_histogram(const QString& text);
    void show_status();
    bool has_tokenizer() const;
    void fit_histogram_ticks();
    bool eventFilter(QObject* watched, QEvent* e) override;

    FileWorker* worker_;
    std::unique_ptr<WorkerThread> thread_;  // stops the worker before the views it reports to go away
    FileLayout layout_;
    tools::CheckReport report_;
    bool has_report_ = false;
    bool verifying_ = false;
    bool verify_after_layout_ = false;
    bool comparing_ = false;
    std::vector<SectionState> states_;
    TensorTableModel tensors_;
    QSortFilterProxyModel filter_;
    QStringListModel problems_;
    TensorHistogram histogram_;

    ElidedLabel* path_ = nullptr;
    ElidedLabel* status_ = nullptr;
    QPushButton *verify_ = nullptr, *cancel_ = nullptr;
    QProgressBar* progress_ = nullptr;
    FileMapWidget* map_ = nullptr;
    QLineEdit* filter_edit_ = nullptr;
    QTableView* table_ = nullptr;
    QListView* problem_list_ = nullptr;
    QChart* chart_ = nullptr;
    QChartView* chart_view_ = nullptr;
    QLabel* histogram_label_ = nullptr;
    QTabWidget* tabs_ = nullptr;
    QWidget* tables_tab_ = nullptr;
    QWidget* compared_tab_ = nullptr;
    StatsTableModel comparison_;
    QSortFilterProxyModel comparison_sort_;
    std::vector<TensorDiff> diffs_;
    ElidedLabel* comparison_label_ = nullptr;
    QTableView* comparison_table_ = nullptr;
    QWidget* legend_ = nullptr;
    ElidedLabel* map_summary_ = nullptr;
    ModelGraphView* graph_ = nullptr;
    QPushButton* compare_ = nullptr;
};

}  // namespace colibri::studio
