// The expert cache (a model opened with a RAM budget), live: a map of MoE layers × experts coloured by each
// expert's place after the selected token's evaluation (resident, read for it, evicted by it, loading ahead,
// out of the cache), brightness by the policy's heat, the selected token's own experts marked; the cache's hits,
// misses, bytes read and stalls per layer over the conversation; and the conversation's routing replayed through
// every policy and Belady's optimum as hit-rate curves against slots per layer (needs only routing, so it works
// for a model mapped whole too).
#pragma once
#include <QFutureWatcher>
#include <QTimer>
#include <QWidget>
#include <atomic>
#include <memory>

#include "ui/cache_replay.h"
#include "ui/cache_state.h"
#include "ui/models/cache_models.h"
#include "ui/data/model_summary.h"
#include "ui/data/token_trace.h"

class QChart;
class QChartView;
class QLabel;
class QPushButton;
class QStackedWidget;
class QTableView;

namespace colibri::studio {

class Conversation;
struct ConversationToken;

class CacheView : public QWidget {
    Q_OBJECT
public:
    explicit CacheView(Conversation* conversation, QWidget* parent = nullptr);
    ~CacheView() override;
    void set_model(const ModelSummary& model);

    CacheMapModel* map_model() { return &map_; }
    static constexpr int kWrapAbove = 64;  // experts per layer beyond which the map wraps each layer into rows
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
