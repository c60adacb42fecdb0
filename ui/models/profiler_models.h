// The profiler's tables: per layer the mean time per token in attention, router and experts, what reading the
// counters cost there, and the mean counter deltas per token (LayerProfileModel); per activated expert the
// activations and the mean counter deltas per activation (ExpertCounterModel); per token where its time went
// (TokenTimeModel). Counter columns follow the loaded model's CounterSet; a Gated DeltaNet hybrid's layer table ends
// with the linear layers' mixer in its steps (input projections, conv, gates, delta rule, gated norm, output projection).
// Compared with a baseline profile, the layer table ends with the baseline's total per layer and the change.
#pragma once
#include <QStringList>

#include "ui/data/profile_snapshot.h"
#include "ui/models/table_model.h"
#include "ui/trace_stats.h"

namespace colibri::studio {

class LayerProfileModel : public TableModel {
    Q_OBJECT
public:
    enum Column { Layer, Attention, Router, Experts, Total, CounterReads, FirstCounter };

    explicit LayerProfileModel(QObject* parent = nullptr);
    void set_counter_names(const QStringList& names);
    // Whether the step columns follow the counters (a hybrid model); they come after FirstCounter + the counters.
    void set_deltanet_steps(bool on);
    int first_step_column() const { return FirstCounter + static_cast<int>(counters_.size()); }
    // Mean microseconds per token of a Gated DeltaNet step in a row (0 for another layer).
    double mean_step_us(int row, DeltaNetStep step) const;
    void set_totals(const ProfileTotals& totals);
    // Mean microseconds per token of a stage column (Attention, Router, Experts, Total, CounterReads) in a row.
    double mean_us(int row, int column) const;
    // Mean delta per token of counter i in a row, over the tokens whose counters were read; NaN: none were.
    double mean_counter(int row, int counter) const;
    // Whether any token of the totals had its counters read.
    bool counters_measured() const;
    const ProfileTotals& totals() const { return totals_; }
    // A profile to compare with (nullptr: none): two more columns, its total µs per token in the same layer and
    // the change from it. The snapshot must outlive the model's use of it.
    void set_baseline(const ProfileSnapshot* baseline);
    int baseline_column() const { return first_step_column() + (steps_ ? static_cast<int>(kDeltaNetSteps) : 0); }
    // The baseline's total in a row's layer; NaN: no baseline, or the layer is not in it.
    double baseline_total_us(int row) const;

private:
    int rows() const override { return static_cast<int>(totals_.layers.size()); }
    void declare_columns();
    QStringList counters_;
    bool steps_ = false;
    ProfileTotals totals_;
    const ProfileSnapshot* baseline_ = nullptr;
};

class ExpertCounterModel : public TableModel {
    Q_OBJECT
public:
    enum Column { Layer, Expert, Activations, FirstCounter };

    explicit ExpertCounterModel(QObject* parent = nullptr);
    void set_counter_names(const QStringList& names);
    void set_totals(const ProfileTotals& totals);

private:
    int rows() const override { return static_cast<int>(rows_.size()); }
    void declare_columns();
    QStringList counters_;
    std::vector<ExpertTotals> rows_;
};

class TokenTimeModel : public TableModel {
    Q_OBJECT
public:
    enum Column { Position, Token, Kind, Attention, Router, Experts, LmHead, Sampling, Counters, Other, Total, ColumnCount };
    enum Role { PositionRole = Qt::UserRole + 1 };

    explicit TokenTimeModel(QObject* parent = nullptr);
    // The span's evaluated tokens, in order.
    void set_tokens(const Conversation& c, const TokenSpan& span);
    const TokenTrace& trace(int row) const { return rows_[static_cast<size_t>(row)]; }
    // Microseconds of a time column in a row.
    double us(int row, int column) const;

private:
    int rows() const override { return static_cast<int>(rows_.size()); }
    QVariant other_data(int row, int column, int role) const override;
    std::vector<TokenTrace> rows_;  // routing dropped: only what the table shows
};

// Counter values for people: "1.2 k", "3.40 M".
QString compact_number(double v);

}  // namespace colibri::studio
