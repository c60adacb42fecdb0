// The expert cache view's tables: the map of MoE layers × experts coloured by each expert's place in the cache
// (CacheMapModel), and what the cache did per layer over the conversation (CacheLayersModel, from cache_totals).
#pragma once
#include <QAbstractTableModel>
#include <QColor>
#include <memory>
#include <vector>

#include "ui/cache_state.h"
#include "ui/data/token_trace.h"
#include "ui/models/table_model.h"

namespace colibri::studio {

class Conversation;

// Milliseconds and megabytes as the cache view writes them: two decimals below 10, one above.
QString milliseconds_text(uint64_t ns);
QString megabytes_text(uint64_t bytes);

// The colour of a cell: its state's hue, brighter the hotter (heat relative to the layer's hottest, 0..1).
QColor cache_cell_color(CacheCell cell, double heat);

// Rows: MoE layers; columns: experts. Text marks the shown token's experts (●) and pinned ones (P).
class CacheMapModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Role { CellRole = Qt::UserRole + 1, HeatRole };
    using QAbstractTableModel::QAbstractTableModel;
    // trace: the token whose experts are marked (may be null).
    void set_state(std::shared_ptr<const CacheSnapshot> state, const TokenTrace* trace);
    const CacheSnapshot* state() const { return state_.get(); }
    // Hundreds of experts: each layer's experts in rows of `experts` (0: one row per layer); row r of a wrapped
    // layer holds experts r·experts + column.
    void set_wrap(int experts);
    int wrap() const { return wrap_; }
    // The layer index (into the snapshot's layers) and expert of a cell; expert -1 past the last expert.
    std::pair<int, int> cell_at(int row, int column) const;

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

private:
    std::shared_ptr<const CacheSnapshot> state_;
    int rows_per_layer() const;
    std::vector<uint8_t> chosen_;  // [layer index * n_experts + expert]
    int wrap_ = 0;
};

// What the cache did at each MoE layer over the conversation (sums of the traces' LayerCacheSteps).
struct CacheLayerTotals {
    int layer = 0;  // -1 for the sum over the layers
    uint64_t hits = 0, misses = 0, bytes_read = 0, stall_ns = 0, prefetched = 0, predicted = 0, predicted_right = 0;
    double hit_rate() const { return hits + misses ? double(hits) / double(hits + misses) : 0.0; }
    void add(const LayerCacheStep& s);
};
struct CacheTotals {
    std::vector<CacheLayerTotals> layers;  // ascending
    CacheLayerTotals all{-1};
};
CacheTotals cache_totals(const Conversation& conversation);

class CacheLayersModel : public TableModel {
    Q_OBJECT
public:
    explicit CacheLayersModel(QObject* parent = nullptr);
    void set_totals(std::vector<CacheLayerTotals> totals);
    const std::vector<CacheLayerTotals>& totals() const { return totals_; }

private:
    int rows() const override { return static_cast<int>(totals_.size()); }
    std::vector<CacheLayerTotals> totals_;
};

}  // namespace colibri::studio
