// The routing inspector. For the selected token: a layers × top-k table of experts and weights, with the
// router's full distribution drawn in each row and charted for the chosen row (a chart that reads at the
// dock's size: its values written on the bars that have room, labels thinned out for many experts). Below,
// the conversation's text with every token coloured by the expert it was sent to first at a chosen layer (as
// in the Mixtral paper's routing figures).
#pragma once
#include <QColor>
#include <QStyledItemDelegate>
#include <QTimer>
#include <QWidget>

#include "ui/conversation.h"
#include "ui/data/model_summary.h"
#include "ui/models/routing_table_model.h"

class QComboBox;
class QLabel;
class QTableView;
class QTextBrowser;
class QUrl;

namespace colibri::studio {

class BarChart;
class ElidedLabel;

// Paints a row's router distribution (RoutingTableModel::ProbsRole) as bars; the chosen experts in their
// colours, the rest grey.
class DistributionDelegate : public QStyledItemDelegate {
    Q_OBJECT
public:
    using QStyledItemDelegate::QStyledItemDelegate;
    void paint(QPainter* painter, const QStyleOptionViewItem& option, const QModelIndex& index) const override;
    QSize sizeHint(const QStyleOptionViewItem& option, const QModelIndex& index) const override;
};

class RoutingView : public QWidget {
    Q_OBJECT
public:
    explicit RoutingView(Conversation* conversation, QWidget* parent = nullptr);
    void set_model(const ModelSummary& model);

    RoutingTableModel* table_model() { return &table_model_; }
    QTableView* table() const { return table_; }
    QTextBrowser* text() const { return text_; }
    QComboBox* layer_selector() const { return layer_; }
    BarChart* chart() const { return chart_; }
    // Says that the table shows renormalised weights and the chart router probabilities.
    QLabel* weights_note() const { return weights_note_; }
    // The layer the text is coloured by, -1 before a model is loaded.
    int text_layer() const;
    void set_text_layer(int layer);
    // Router probabilities the chart shows (chosen and other experts together), in expert order; beyond
    // kChartAllExperts experts the kChartedExperts most likely, by descending probability.
    QList<qreal> chart_values() const;
    QStringList chart_categories() const;
    static constexpr int kChartAllExperts = 64, kChartedExperts = 32;
    // Beyond kChartAllExperts the legend lists the text's most frequent first experts only, at most this many.
    static constexpr int kLegendExperts = 24;
    QString legend_text() const;
    // Background of the token at position in the coloured text; invalid when it has none.
    QColor text_background(int position) const;
    // Renders pending changes now (they are otherwise batched while tokens stream in).
    void refresh();

protected:
    bool eventFilter(QObject* watched, QEvent* event) override;

private:
    // The columns as wide as their contents, but the last (the router's sparkline) gives way down to
    // kMinSparklineWidth so that a top-2 model's table fits the dock at 1280x720 without scrolling sideways.
    void fit_columns();
    static constexpr int kMinSparklineWidth = 48;
    void show_selected();
    void show_distribution(int row);
    void render_text();  // the whole text again
    void append_text();  // positions evaluated since the last call
    void update_legend();  // the expert colours (with many experts: those the text shows)
    void on_anchor(const QUrl& url);

    Conversation* conversation_;
    RoutingTableModel table_model_;
    ModelSummary model_;
    ElidedLabel* title_ = nullptr;
    QLabel* weights_note_ = nullptr;
    QTableView* table_ = nullptr;
    DistributionDelegate* delegate_ = nullptr;
    int delegate_column_ = 0;
    BarChart* chart_ = nullptr;
    QComboBox* layer_ = nullptr;
    QLabel* legend_ = nullptr;
    QTextBrowser* text_ = nullptr;
    QTimer text_timer_;
    int rendered_ = 0;         // positions drawn in the text, in order
    bool full_render_ = false;  // something already drawn changed
};

}  // namespace colibri::studio
