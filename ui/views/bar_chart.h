// A grouped bar chart drawn with QPainter, for the figures that must stay readable in a dock of any size:
// kernel variants side by side (where scalar is 20× slower than AVX-512: a logarithmic axis, and every bar
// with its value written on it), and the router's distribution over experts. Category labels thin out and
// value labels drop out rather than overlap; a missing value (NaN) leaves an empty slot, not a zero bar.
#pragma once
#include <QColor>
#include <QStringList>
#include <QVector>
#include <QWidget>
#include <functional>

namespace colibri::studio {

class BarChart : public QWidget {
    Q_OBJECT
public:
    struct Series {
        QString name;
        QColor color;
        QVector<double> values;      // one per category; NaN: none
        QVector<QColor> bar_colors;  // optional, one per category: overrides color
        // Optional, one per category: the repetitions' min and max, drawn as a whisker over the bar (its
        // height is the median). NaN, or min == max (one repetition): none.
        QVector<QPair<double, double>> ranges = {};
    };

    explicit BarChart(QWidget* parent = nullptr);
    void set_title(const QString& title);
    void set_axis_title(const QString& title);  // the unit, shown with the axis
    void set_x_axis_title(const QString& title);  // what the categories are, under their labels
    // Legend entries in place of the series' names (a single series coloured per bar: what the colours mean).
    struct LegendEntry {
        QString name;
        QColor color;
    };
    void set_legend_entries(const QVector<LegendEntry>& entries);
    void set_log_scale(bool on);
    void set_value_labels(bool on);
    void set_legend_visible(bool on);
    void set_value_format(std::function<QString(double)> format);
    void set_fixed_range(double lo, double hi);  // linear scale only; lo >= hi: automatic
    void set_data(const QStringList& categories, const QVector<Series>& series);
    void clear();

    const QString& title() const { return title_; }
    const QStringList& categories() const { return categories_; }
    const QVector<Series>& series() const { return series_; }
    bool log_scale() const { return log_; }
    // The axis range drawn (for a log scale: whole decades).
    std::pair<double, double> y_range() const;
    // Where bar (series, category) is drawn in widget coordinates; empty when not drawn.
    QRectF bar_rect(int series, int category) const;
    // The value labels the last paint wrote (text per bar drawn with a label).
    QStringList drawn_labels() const { return drawn_labels_; }
    // The whiskers the last paint drew: (series, category) pairs with a min–max range.
    int drawn_ranges() const { return drawn_ranges_; }
    QString format_value(double v) const;
    // The category labels the last paint wrote: every category, or every 2nd, 5th, 10th... when they would overlap.
    QStringList drawn_categories() const { return drawn_categories_; }
    bool categories_rotated() const { return layout(fontMetrics()).rotated; }
    const QString& axis_title() const { return axis_title_; }
    const QString& x_axis_title() const { return x_axis_title_; }
    // The legend as drawn (names), from the series or set_legend_entries.
    QStringList legend_names() const;
    QSize minimumSizeHint() const override { return {160, 110}; }
    QSize sizeHint() const override { return {420, 240}; }

protected:
    void paintEvent(QPaintEvent*) override;
    bool event(QEvent* e) override;

private:
    struct Layout {
        QRectF plot;
        double group_width = 0, bar_width = 0;
        int legend_lines = 0;
        int label_step = 1;    // every label_step-th category labelled
        bool rotated = false;  // labels written upwards (they fit that way where side by side they would not)
        bool small = false;    // labels in label_font() (every one fits that way, not at the normal size)
    };
    QFont label_font() const;
    Layout layout(const QFontMetrics& fm) const;
    double y_of(double v, const QRectF& plot) const;
    std::pair<int, int> hit(const QPoint& p) const;

    QVector<LegendEntry> legend_entries() const;

    QString title_, axis_title_, x_axis_title_;
    QVector<LegendEntry> legend_entries_;
    bool log_ = false, labels_ = true, legend_ = true;
    double fixed_lo_ = 0, fixed_hi_ = 0;
    std::function<QString(double)> format_;
    QStringList categories_;
    QVector<Series> series_;
    mutable QStringList drawn_labels_, drawn_categories_;
    int drawn_ranges_ = 0;
};

}  // namespace colibri::studio
