// Routing analyses over the conversation (ui/routing_stats.h): the expert co-activation matrix per layer, the
// tokens each expert receives most, how often consecutive tokens keep their expert per layer (as the Mixtral
// paper's Table 5, against random routing), how well a layer's choice predicts the next layer's, and a
// comparison with another run: the same conversation through another model (f16 against q4_k: where routing
// diverges, position by position) or another saved conversation (how far apart the expert usage is).
#pragma once
#include <QTimer>
#include <QWidget>

#include "ui/conversation.h"
#include "ui/data/model_summary.h"
#include "ui/models/stats_table_model.h"
#include "ui/replay_worker.h"
#include "ui/routing_stats.h"

class QComboBox;
class QLabel;
class QProgressBar;
class QPushButton;
class QTabWidget;
class QTableView;

namespace colibri::studio {

class BarChart;
class HeatLegend;

class AnalysisView : public QWidget {
    Q_OBJECT
public:
    explicit AnalysisView(Conversation* conversation, QWidget* parent = nullptr);
    void set_model(const ModelSummary& model);
    // Recomputes now (it is otherwise batched while tokens stream in).
    void refresh();

    QTabWidget* tabs() const { return tabs_; }
    StatsTableModel* coactivation_model() { return &coactivation_; }
    QComboBox* coactivation_layer() const { return co_layer_; }
    QComboBox* coactivation_mode() const { return co_mode_; }
    QTableView* coactivation_table() const { return co_table_; }
    // The matrix's colour scale, what it measures, and its axes' titles (columns above, rows beside).
    HeatLegend* coactivation_legend() const { return co_legend_; }
    QString coactivation_legend_caption() const;
    QString coactivation_axis_title(Qt::Orientation o) const;
    QTableView* divergence_table() const { return divergence_table_; }
    StatsTableModel* top_tokens_model() { return &top_tokens_; }
    QComboBox* top_tokens_layer() const { return top_layer_; }
    StatsTableModel* repetition_model() { return &repetition_; }
    BarChart* repetition_chart() const { return repetition_chart_; }
    StatsTableModel* predictability_model() { return &predictability_; }
    BarChart* predictability_chart() const { return predictability_chart_; }
    StatsTableModel* agreement_model() { return &agreement_; }
    StatsTableModel* divergence_model() { return &divergence_; }
    BarChart* comparison_chart() const { return comparison_chart_; }
    QLabel* comparison_status() const;

    // This conversation's tokens through the model at path, compared position by position with this run.
    void compare_with_model(const QString& path);
    // The tokens of a saved conversation (File ▸ Save conversation) through model_path (the loaded model when
    // empty), compared with this run.
    Status compare_with_conversation(const QString& conversation_path, const QString& model_path = {});
    void cancel_comparison();
    const RoutingComparison& comparison() const { return comparison_; }
    // This conversation's evaluated traces, in position order.
    std::vector<TokenTrace> traces() const;

signals:
    void comparisonFinished(bool ok);

private:
    void schedule();
    void fill_layer_boxes();
    void show_coactivation();
    void show_top_tokens();
    void show_comparison(const ReplayResult& other);

    Conversation* conversation_;
    ModelSummary model_;
    QTimer timer_;
    Replayer replayer_;
    QString other_label_;
    RoutingComparison comparison_;
    std::vector<TokenTrace> traces_;  // as of the last refresh

    StatsTableModel coactivation_, top_tokens_, repetition_, predictability_, agreement_, divergence_;
    QTabWidget* tabs_ = nullptr;
    QComboBox *co_layer_ = nullptr, *co_mode_ = nullptr, *top_layer_ = nullptr;
    QTableView* co_table_ = nullptr;
    QLabel* co_summary_ = nullptr;
    HeatLegend* co_legend_ = nullptr;
    QLabel* co_legend_caption_ = nullptr;
    QLabel* co_x_title_ = nullptr;
    QString co_y_title_;
    QTableView* divergence_table_ = nullptr;
    BarChart* repetition_chart_ = nullptr;
    QLabel* repetition_note_ = nullptr;
    BarChart* predictability_chart_ = nullptr;
    BarChart* comparison_chart_ = nullptr;
    QLabel* compare_status_ = nullptr;
    QProgressBar* compare_progress_ = nullptr;
    QPushButton *compare_model_ = nullptr, *compare_conversation_ = nullptr, *compare_cancel_ = nullptr;
};

}  // namespace colibri::studio
