// The profiler. Every token's time is accounted for: attention, router, experts, lm head, sampling, counter
// reads and other add up to its step (summary line, per-token timeline and table). Per layer the time in
// attention, router and experts (stacked chart and table). perf_event counters per layer, and per routed expert,
// only when asked (they slow generation: per-expert counting runs one expert at a time); their cost is measured
// and shown (the time spent reading them, taken out of the stage it fell in, and the step with and without
// them), and the line says plainly which counters this machine does not give (hardware counters on a VM).
// A profile can be kept as a baseline, saved and compared with later (another kernel, thread count or build, as
// Hotspot compares two recordings): the step's change with whether it stands out of the noise, and per layer the
// baseline's total beside this one's, in the table and as markers on the chart. On a server across ranks a Ranks tab
// shows per MoE layer each rank's expert time, rank 0's wait in the exchange and the bytes exchanged per token.
#pragma once
#include <QSortFilterProxyModel>
#include <QTimer>
#include <QWidget>

#include "ui/data/generation.h"
#include "ui/data/model_summary.h"
#include "ui/data/profile_snapshot.h"
#include "ui/models/profiler_models.h"
#include "ui/models/rank_model.h"
#include "ui/data/token_trace.h"
#include "ui/trace_collector.h"

#include <optional>

class QBarSet;
class QScatterSeries;
class QToolButton;
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
    RankTimeModel* rank_model() { return &ranks_; }
    // "2 ranks, 24 tokens: 2.0 KiB exchanged per token …"; the Ranks tab is shown only for a model on several ranks.
    QLabel* rank_summary() const { return rank_summary_; }
    int ranks_tab() const { return ranks_tab_; }
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

    // What the summary and the layer table show now, as a profile to keep; empty() when nothing is profiled.
    ProfileSnapshot snapshot() const;
    // This profile becomes the baseline that later ones are compared with (an error when nothing is profiled);
    // from then on the profiler shows the tokens evaluated after it (in this conversation; all of a new one).
    Status keep_as_baseline();
    // A saved profile (ProfileSnapshot::read) becomes the baseline, compared with the whole span shown; on an
    // error the baseline stays as it was.
    Status compare_with_file(const QString& path);
    // `since`: the first position profiled against it (0: every token).
    void set_baseline(const ProfileSnapshot& baseline, int since = 0);
    int profiled_from() const { return since_; }
    void clear_baseline();
    const std::optional<ProfileSnapshot>& baseline() const { return baseline_; }
    Status save_profile(const QString& path) const;
    // "vs baseline (…): 6.25 → 5.10 ms per token (−18 %), beyond the noise …"; hidden without a baseline.
    QLabel* comparison_label() const;
    QToolButton* compare_button() const { return compare_; }
    // The chart's baseline markers, per layer (µs per token); empty without a baseline.
    QList<qreal> baseline_chart_values() const;

signals:
    void countingChanged(colibri::studio::Counting mode);

protected:
    void changeEvent(QEvent* e) override;

private:
    void schedule();
    void rebuild_chart();
    void rebuild_counter_chart();
    void show_summary(const TimeTotals& t);
    void show_ranks(const TokenSpan& span);
    void show_comparison();
    // The menu's file dialogs; errors go to the comparison line.
    void save_profile_as();
    void compare_with_chosen_file();

    Conversation* conversation_;
    LayerProfileModel layers_;
    ExpertCounterModel experts_;
    TokenTimeModel tokens_;
    RankTimeModel ranks_;
    int rank_count_ = 1;
    QLabel* rank_summary_ = nullptr;
    QTableView* rank_table_ = nullptr;
    int ranks_tab_ = -1;
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
    QString model_name_, kernel_;
    int threads_ = 0;
    TimeTotals times_;  // of the span shown
    std::optional<ProfileSnapshot> baseline_;
    int since_ = 0;  // the first position shown: evaluated after a baseline kept from this conversation
    ElidedLabel* comparison_ = nullptr;
    QToolButton* compare_ = nullptr;
    QScatterSeries* baseline_markers_ = nullptr;
};

}  // namespace colibri::studio
