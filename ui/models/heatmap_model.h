// Layers × experts activation counts over a span (HeatmapModel), and per layer the load-balance figures
// (BalanceModel): both views of one ExpertUsage, with CSV for export.
#pragma once
#include <QAbstractTableModel>

#include "ui/models/table_model.h"
#include "ui/trace_stats.h"

namespace colibri::studio {

class HeatmapModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Role { CountRole = Qt::UserRole + 1, ShareRole, IntensityRole };

    using QAbstractTableModel::QAbstractTableModel;
    void set_usage(const ExpertUsage& usage);
    const ExpertUsage& usage() const { return usage_; }
    // "layer,E0,E1,..." then one row of counts per MoE layer.
    QString to_csv() const;

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

private:
    ExpertUsage usage_;
    int max_ = 0;
};

class BalanceModel : public TableModel {
    Q_OBJECT
public:
    enum Column { Layer, Selections, Entropy, EntropyRatio, MaxOverMean, Busiest, ColumnCount };

    explicit BalanceModel(QObject* parent = nullptr);
    void set_usage(const ExpertUsage& usage);

private:
    int rows() const override { return static_cast<int>(rows_.size()); }
    std::vector<int> layers_;
    std::vector<LayerBalance> rows_;
};

}  // namespace colibri::studio
