// The expert heatmap: layers × experts activation counts over the conversation or a span of it, on a colour
// scale with its legend, tooltips with counts and shares, load-balance figures per layer (entropy,
// max/mean), and export as PNG and CSV. Hundreds of experts are binned (experts per column, by default as few as
// fit the width) so a layer's row reads at a glance; one column per expert scrolls. On a server across ranks each
// cell can take the colour of the rank holding its experts (replicated ones striped), shaded by the count.
#pragma once
#include <QImage>
#include <QTimer>
#include <QWidget>
#include <functional>

#include "ui/models/heatmap_model.h"
#include "ui/data/model_summary.h"

class QCheckBox;
class QComboBox;
class QHBoxLayout;
class QLabel;
class QPainter;
class QSpinBox;
class QTableView;

namespace colibri::studio {

// The colour scale: a vertical gradient from 0 to the largest count.
class HeatLegend : public QWidget {
    Q_OBJECT
public:
    using QWidget::QWidget;
    void set_max(double max);
    // How the scale's numbers are written (by default up to four significant digits).
    void set_format(std::function<QString(double)> format);
    // The numbers as drawn: top, middle, zero; none while the maximum is 0 ("no data" is drawn instead).
    QStringList labels() const;
    QSize sizeHint() const override { return {70, 160}; }
    QSize minimumSizeHint() const override { return {70, 60}; }

protected:
    void paintEvent(QPaintEvent*) override;

private:
    double max_ = 0;
    std::function<QString(double)> format_;
};

// By rank, one line under the map: each rank's colour (as many as fit, then "+N more"), the stripes of a replicated
// expert, and that a cell's shade is its count.
class RankLegend : public QWidget {
    Q_OBJECT
public:
    using QWidget::QWidget;
    void set_ranks(int ranks);
    int ranks() const { return ranks_; }
    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

protected:
    void paintEvent(QPaintEvent*) override;

private:
    int ranks_ = 0;
};

// Diagonal stripes over `rect` in `color`: a replicated expert's cell.
void draw_stripes(QPainter& p, const QRectF& rect, const QColor& color);

class HeatmapView : public QWidget {
    Q_OBJECT
public:
    explicit HeatmapView(Conversation* conversation, QWidget* parent = nullptr);
    void set_model(const ModelSummary& model);
    void set_span(const TokenSpan& span);
    TokenSpan span() const;

    HeatmapModel* heatmap_model() { return &heatmap_; }
    BalanceModel* balance_model() { return &balance_; }
    QTableView* table() const { return table_; }
    QLabel* summary_label() const { return summary_; }
    // What the frames on the map are: the selected token's experts (or how to get them).
    QLabel* mark_note() const { return mark_note_; }
    // Rows' height: as tall as the map's height allows for every layer to show (kMinRow..kMaxRow pixels).
    static constexpr int kMinRow = 14, kMaxRow = 64;

    // The heatmap as a picture (grid, labels, legend), as exported. Cells are cell × cell pixels.
    QImage render_image(int cell = 28) const;
    Status export_png(const QString& path) const;
    Status export_csv(const QString& path) const;
    // Recomputes now (it is otherwise batched while tokens stream in).
    void refresh();
    // Experts per column; 0 fits the width (the fewest per column, a power of two, that need no scrolling).
    void set_bin(int experts);
    QComboBox* bin_box() const { return bin_; }
    // Colour by the rank holding each expert: shown only for a model whose experts are spread over ranks.
    QCheckBox* by_rank_box() const { return by_rank_; }
    RankLegend* rank_legend() const { return rank_legend_; }
    static constexpr int kCellWidth = 34;  // pixels per column (wider when fitting binned experts)
    static constexpr int kMaxCellWidth = 4 * kCellWidth;  // the widest a fitted column grows

    // "Fit width" for a table `width` pixels wide: experts per column and the columns' width.
    std::pair<int, int> fit(int width) const;
    // The narrowest column that shows its label with `bin` experts per column.
    int min_section(int bin) const;

    // The binning and export controls beside the span controls (wide) or below them (narrow).
    bool controls_in_one_row() const;

protected:
    bool eventFilter(QObject* watched, QEvent* e) override;
    void resizeEvent(QResizeEvent* e) override;

private:
    void apply_bin();
    void apply_by_rank();
    void fit_rows();
    void show_marked();  // the selected token's experts, framed
    QFont header_font(int bin) const;
    int header_margins() const;
    void schedule();
    void export_png_dialog();
    void export_csv_dialog();

    Conversation* conversation_;
    HeatmapModel heatmap_;
    BalanceModel balance_;
    int experts_ = 0;
    QSpinBox *from_ = nullptr, *to_ = nullptr;
    QCheckBox* generated_only_ = nullptr;
    QComboBox* bin_ = nullptr;
    QTableView* table_ = nullptr;
    QTableView* balance_table_ = nullptr;
    HeatLegend* legend_ = nullptr;
    QCheckBox* by_rank_ = nullptr;
    RankLegend* rank_legend_ = nullptr;
    QLabel* summary_ = nullptr;
    QLabel* mark_note_ = nullptr;
    QHBoxLayout* controls_ = nullptr;
    QWidget* more_controls_ = nullptr;
    QTimer timer_;
};

}  // namespace colibri::studio
