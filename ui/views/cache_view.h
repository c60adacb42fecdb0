// The expert cache (a model opened with a RAM budget), live: a map of MoE layers × experts coloured by each
// expert's place after the selected token's evaluation (resident, read for it, evicted by it, loading ahead,
// out of the cache), brightness by the policy's heat, the selected token's own experts marked; the cache's hits,
// misses, bytes read and stalls per layer over the conversation; and the conversation's routing replayed through
// every policy and Belady's optimum as hit-rate curves against slots per layer (needs only routing, so it works
// for a model mapped whole too).
#pragma once
#include <QAbstractTableModel>
#include <QFutureWatcher>
#include <QTimer>
#include <QWidget>
#include <atomic>
#include <memory>

#include "ui/cache_replay.h"
#include "ui/cache_state.h"
#include "ui/models/model_summary.h"
#include "ui/token_trace.h"

class QChart;
class QChartView;
class QLabel;
class QPushButton;
class QStackedWidget;
class QTableView;

namespace colibri::studio {

class Conversation;
struct ConversationToken;

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

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

private:
    std::shared_ptr<const CacheSnapshot> state_;
    std::vector<uint8_t> chosen_;  // [layer index * n_experts + expert]
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

class CacheLayersModel : public QAbstractTableModel {
    Q_OBJECT
public:
    using QAbstractTableModel::QAbstractTableModel;
    void set_totals(std::vector<CacheLayerTotals> totals);
    const std::vector<CacheLayerTotals>& totals() const { return totals_; }
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

private:
    std::vector<CacheLayerTotals> totals_;
};

class CacheView : public QWidget {
    Q_OBJECT
public:
    explicit CacheView(Conversation* conversation, QWidget* parent = nullptr);
    ~CacheView() override;
    void set_model(const ModelSummary& model);

    CacheMapModel* map_model() { return &map_; }
    CacheLayersModel* layers_model() { return &layers_; }
    QLabel* summary_label() const { return summary_; }
    QTableView* map_table() const { return map_table_; }
    QChart* curves_chart() const { return chart_; }
    // The last finished replay (empty before one).
    const CacheCurves& curves() const { return curves_; }
    bool replaying() const { return watcher_.isRunning(); }

    // Recomputes the map and totals now (otherwise batched while tokens stream in).
    void refresh();
    // Replays the conversation's routing in the background; a replay already running is cancelled.
    void replay();

signals:
    void replayFinished();

protected:
    bool eventFilter(QObject* watched, QEvent* e) override;

private:
    void schedule();
    void fit_cells();
    void show_curves(const CacheCurves& curves);
    // The evaluation that holds position's state: the position itself or the last of its prompt chunk.
    const ConversationToken* state_holder(int position) const;

    Conversation* conversation_;
    ModelSummary model_;
    CacheMapModel map_;
    CacheLayersModel layers_;
    CacheCurves curves_;
    QLabel* summary_ = nullptr;
    QLabel* totals_ = nullptr;
    QLabel* legend_ = nullptr;
    QLabel* no_budget_ = nullptr;
    QStackedWidget* map_stack_ = nullptr;
    QTableView* map_table_ = nullptr;
    QTableView* layer_table_ = nullptr;
    QChart* chart_ = nullptr;
    QChartView* chart_view_ = nullptr;
    QLabel* replay_status_ = nullptr;
    QPushButton* replay_button_ = nullptr;
    QPushButton* cancel_button_ = nullptr;
    QTimer timer_;         // batches map and totals updates
    QTimer replay_timer_;  // replays once a reply has settled
    QFutureWatcher<CacheCurves> watcher_;
    std::shared_ptr<std::atomic<bool>> cancel_;
};

}  // namespace colibri::studio
