// A Gated DeltaNet hybrid's layers and recurrent states. The layer strip shows which layers are linear attention
// (a recurrent state per value head) and which are full softmax attention over the KV cache; the heatmap shows per
// linear layer and head, across the conversation, the state's Frobenius norm after each token, how strongly the
// token wrote into it (β) or how much of it the token kept (the decay). A model without linear layers gets a note.
#pragma once
#include <QTimer>
#include <QWidget>

#include "ui/data/model_summary.h"
#include "ui/models/linear_state_model.h"

class QComboBox;
class QLabel;
class QSpinBox;
class QStackedWidget;
class QTableView;

namespace colibri::studio {

class HeatLegend;

// One box per layer: linear attention or full attention (MoE layers marked), with a legend.
class LayerKindStrip : public QWidget {
    Q_OBJECT
public:
    using QWidget::QWidget;
    void set_model(const ModelSummary& model);
    QSize sizeHint() const override { return {320, 44}; }
    QSize minimumSizeHint() const override { return {160, 44}; }
    // The colour a layer's box is drawn in.
    static QColor color(bool linear);

protected:
    void paintEvent(QPaintEvent*) override;
    bool event(QEvent* e) override;  // tooltips per layer

private:
    int layer_at(QPoint p) const;
    QString legend_text(bool linear) const;
    int legend_width() const;
    QRect strip_rect() const;
    ModelSummary model_;
};

class StateView : public QWidget {
    Q_OBJECT
public:
    explicit StateView(Conversation* conversation, QWidget* parent = nullptr);
    void set_model(const ModelSummary& model);
    void set_quantity(LinearStateModel::Quantity q);
    // Pixels per cell (zoom), 4 to 32.
    void set_cell_size(int pixels);

    LinearStateModel* state_model() { return &model_; }
    LayerKindStrip* layer_strip() const { return strip_; }
    QTableView* table() const { return table_; }
    QLabel* summary_label() const { return summary_; }
    // Whether the model has linear layers (else the note is shown).
    bool hybrid() const;
    Status export_csv(const QString& path) const;
    // Recomputes now (it is otherwise batched while tokens stream in).
    void refresh();

private:
    void schedule();

    Conversation* conversation_;
    LinearStateModel model_;
    LayerKindStrip* strip_ = nullptr;
    QStackedWidget* pages_ = nullptr;
    QComboBox* quantity_ = nullptr;
    QSpinBox* cell_ = nullptr;
    QTableView* table_ = nullptr;
    HeatLegend* legend_ = nullptr;
    QLabel* summary_ = nullptr;
    QLabel* note_ = nullptr;
    QTimer timer_;
};

}  // namespace colibri::studio
