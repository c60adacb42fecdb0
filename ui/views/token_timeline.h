// The profiler's per-token timeline: one stacked bar per evaluated token, in order, split into attention,
// router, experts, lm head, sampling, counter reads and other, so a slow token (a page fault, a preempted
// thread) stands out. Many tokens share a pixel column (their mean) when they do not fit. Hover for a token's
// figures; click to select it in every view.
#pragma once
#include <QWidget>

class QAbstractItemModel;

namespace colibri::studio {

class TokenTimeModel;

class TokenTimeline : public QWidget {
    Q_OBJECT
public:
    explicit TokenTimeline(QWidget* parent = nullptr);
    void set_model(const TokenTimeModel* model);
    // The stages in drawing order (bottom up) and their colours, for the legend and tests.
    static QList<int> stage_columns();
    static QColor stage_color(int column);
    // Bars drawn now (tokens, or groups of tokens when they do not fit), and the rows bar i stands for.
    int bars() const;
    std::pair<int, int> bar_rows(int bar) const;
    QRect plot_rect() const;
    // The time axis: its labels ("12.50 ms") and the width left of the plot for them.
    static QString axis_label(double us, double scale_us);
    int axis_width() const;
    // The tallest bar's total in µs (the top of the scale).
    double scale_us() const { return scale_us_; }
    QSize minimumSizeHint() const override { return {200, 90}; }
    QSize sizeHint() const override { return {600, 160}; }

signals:
    void positionClicked(int position);

protected:
    void paintEvent(QPaintEvent*) override;
    void mousePressEvent(QMouseEvent* e) override;
    bool event(QEvent* e) override;

private:
    int bar_at(const QPoint& p) const;
    double bar_us(int bar, int column) const;
    const TokenTimeModel* model_ = nullptr;
    mutable double scale_us_ = 0.0;
};

}  // namespace colibri::studio
