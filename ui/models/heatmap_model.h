// Layers × experts activation counts over a span (HeatmapModel), and per layer the load-balance figures
// (BalanceModel): both views of one ExpertUsage, with CSV for export. With hundreds of experts the heatmap's
// columns can each sum a bin of neighbouring experts, so that a layer's whole row fits on screen. On a server across
// ranks the cells can take the colour of the rank holding their experts instead, shaded by the count.
#pragma once
#include <QAbstractTableModel>
#include <QHash>
#include <QVector>
#include <algorithm>

#include "ui/data/rank_placement.h"
#include "ui/models/table_model.h"
#include "ui/trace_stats.h"

namespace colibri::studio {

class HeatmapModel : public QAbstractTableModel {
    Q_OBJECT
public:
    // RankRole: the one rank holding every expert of the cell, -1 when several do (replicated, or a bin across ranks)
    // or the placement does not say; ReplicatedRole: some expert of the cell is held by several ranks.
    enum Role { CountRole = Qt::UserRole + 1, ShareRole, IntensityRole, MarkedRole, RankRole, ReplicatedRole };

    using QAbstractTableModel::QAbstractTableModel;
    void set_usage(const ExpertUsage& usage);
    const ExpertUsage& usage() const { return usage_; }
    // Experts per column (1: one column per expert); the last bin may hold fewer.
    void set_bin(int experts);
    int bin() const { return bin_; }
    // The experts of a column: [first, last].
    int first_expert(int column) const { return column * bin_; }
    int last_expert(int column) const { return std::min((column + 1) * bin_, usage_.experts) - 1; }
    // A column's count at a row: its experts' counts summed.
    int count(int row, int column) const;
    // The largest cell (the colour scale's top).
    int max_cell() const { return max_; }
    // Hybrids: the Gated DeltaNet layers, so each row says which kind of token mixer its layer has.
    void set_linear_layers(const QVector<int>& layers);
    // The selected token's experts per layer (layer → experts), framed on the map (MarkedRole); empty: none.
    void set_marked(const QHash<int, QVector<int>>& experts);
    const QHash<int, QVector<int>>& marked() const { return marked_; }
    bool is_marked(int row, int column) const;
    // Which rank holds each expert (ModelSummary::placement); by_rank colours the cells by it (when it is spread).
    void set_placement(const RankPlacement& placement);
    const RankPlacement& placement() const { return placement_; }
    void set_by_rank(bool on);
    bool by_rank() const { return by_rank_ && placement_.spread(); }
    int rank_of(int row, int column) const;
    bool replicated(int row, int column) const;
    // The cell's colour: the heat scale, or by rank the holder's colour shaded by the count (several: grey).
    QColor cell_color(int row, int column) const;
    // "layer,E0,E1,..." then one row of counts per MoE layer.
    QString to_csv() const;

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

private:
    void update_max();
    QString holders_text(int row, int column) const;
    ExpertUsage usage_;
    int bin_ = 1;
    int max_ = 0;
    QVector<int> linear_;
    QHash<int, QVector<int>> marked_;
    RankPlacement placement_;
    bool by_rank_ = false;
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
