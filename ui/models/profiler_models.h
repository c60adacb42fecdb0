// The profiler's tables: per layer the mean time per token in attention, router and experts and the mean
// counter deltas per token (LayerProfileModel); per activated expert the activations and the mean counter
// deltas per activation (ExpertCounterModel). Counter columns follow the loaded model's CounterSet.
#pragma once
#include <QAbstractTableModel>
#include <QStringList>

#include "ui/trace_stats.h"

namespace colibri::studio {

class LayerProfileModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Layer, Attention, Router, Experts, Total, FirstCounter };

    using QAbstractTableModel::QAbstractTableModel;
    void set_counter_names(const QStringList& names);
    void set_totals(const ProfileTotals& totals);
    // Mean microseconds per token of a stage column (Attention, Router, Experts, Total) in a row.
    double mean_us(int row, int column) const;
    // Mean delta per token of counter i in a row.
    double mean_counter(int row, int counter) const;
    const ProfileTotals& totals() const { return totals_; }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

private:
    QStringList counters_;
    ProfileTotals totals_;
};

class ExpertCounterModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Layer, Expert, Activations, FirstCounter };

    using QAbstractTableModel::QAbstractTableModel;
    void set_counter_names(const QStringList& names);
    void set_totals(const ProfileTotals& totals);

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

private:
    QStringList counters_;
    std::vector<ExpertTotals> rows_;
};

// Counter values for people: "1.2 k", "3.40 M".
QString compact_number(double v);

}  // namespace colibri::studio
