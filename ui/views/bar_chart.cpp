#include "ui/views/bar_chart.h"

#include <QHelpEvent>
#include <QPainter>
#include <QToolTip>
#include <algorithm>
#include <cmath>
#include <limits>

#include "ui/colors.h"

namespace colibri::studio {

namespace {

bool present(double v) { return std::isfinite(v); }

QString tick_label(double v) {
    const double a = std::fabs(v);
    if (a >= 1e9) return QString::number(v / 1e9, 'g', 3) + QStringLiteral("G");
    if (a >= 1e6) return QString::number(v / 1e6, 'g', 3) + QStringLiteral("M");
    if (a >= 1e3) return QString::number(v / 1e3, 'g', 3) + QStringLiteral("k");
    return QString::number(v, 'g', 3);
}

// 1, 2 or 5 × 10^k at or above x.
double nice_step(double x) {
    if (!(x > 0)) return 1.0;
    const double p = std::pow(10.0, std::floor(std::log10(x)));
    for (double m : {1.0, 2.0, 5.0, 10.0})
        if (m * p >= x) return m * p;
    return 10 * p;
}

}  // namespace

BarChart::BarChart(QWidget* parent) : QWidget(parent) { setMouseTracking(true); }

void BarChart::set_title(const QString& title) {
    title_ = title;
    update();
}
void BarChart::set_axis_title(const QString& title) {
    axis_title_ = title;
    update();
}
void BarChart::set_x_axis_title(const QString& title) {
    x_axis_title_ = title;
    update();
}
void BarChart::set_legend_entries(const QVector<LegendEntry>& entries) {
    legend_entries_ = entries;
    update();
}
QVector<BarChart::LegendEntry> BarChart::legend_entries() const {
    if (!legend_entries_.isEmpty()) return legend_entries_;
    QVector<LegendEntry> out;
    if (legend_ && (series_.size() > 1 || (series_.size() == 1 && !series_[0].name.isEmpty())))
        for (const Series& s : series_) out.push_back({s.name, s.color});
    return out;
}
QStringList BarChart::legend_names() const {
    QStringList names;
    for (const LegendEntry& e : legend_entries()) names << e.name;
    return names;
}
void BarChart::set_log_scale(bool on) {
    log_ = on;
    update();
}
void BarChart::set_value_labels(bool on) {
    labels_ = on;
    update();
}
void BarChart::set_legend_visible(bool on) {
    legend_ = on;
    update();
}
void BarChart::set_value_format(std::function<QString(double)> format) {
    format_ = std::move(format);
    update();
}
void BarChart::set_fixed_range(double lo, double hi) {
    fixed_lo_ = lo;
    fixed_hi_ = hi;
    update();
}

void BarChart::set_data(const QStringList& categories, const QVector<Series>& series) {
    categories_ = categories;
    series_ = series;
    for (Series& s : series_) s.values.resize(categories_.size(), std::numeric_limits<double>::quiet_NaN());
    update();
}

void BarChart::clear() { set_data({}, {}); }

QString BarChart::format_value(double v) const {
    if (format_) return format_(v);
    const double a = std::fabs(v);
    if (a >= 1e4) return tick_label(v);
    return QString::number(v, 'f', a >= 100 ? 0 : a >= 10 ? 1 : 2);
}

std::pair<double, double> BarChart::y_range() const {
    double lo = std::numeric_limits<double>::infinity(), hi = 0;
    for (const Series& s : series_) {
        for (double v : s.values)
            if (present(v) && v > 0) {
                lo = std::min(lo, v);
                hi = std::max(hi, v);
            }
        for (const auto& [min, max] : s.ranges)  // whiskers stay inside the axis
            if (present(min) && present(max) && min > 0) {
                lo = std::min(lo, min);
                hi = std::max(hi, max);
            }
    }
    if (log_) {
        if (!(hi > 0)) return {1, 10};
        const double a = std::pow(10.0, std::floor(std::log10(lo))), b = std::pow(10.0, std::ceil(std::log10(hi)));
        return {a, b > a ? b : a * 10};
    }
    if (fixed_hi_ > fixed_lo_) return {fixed_lo_, fixed_hi_};
    if (!(hi > 0)) return {0, 1};
    const double step = nice_step(hi * 1.08 / 4);
    return {0, std::ceil(hi * 1.08 / step) * step};
}

double BarChart::y_of(double v, const QRectF& plot) const {
    const auto [lo, hi] = y_range();
    double f = 0;
    if (log_) f = v > 0 ? (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)) : 0;
    else f = hi > lo ? (v - lo) / (hi - lo) : 0;
    return plot.bottom() - std::clamp(f, 0.0, 1.0) * plot.height();
}

BarChart::Layout BarChart::layout(const QFontMetrics& fm) const {
    Layout l;
    double top = 4;
    if (!title_.isEmpty()) top += fm.height() + 2;
    if (const QVector<LegendEntry> entries = legend_entries(); !entries.isEmpty()) {
        double x = 0;
        l.legend_lines = 1;
        for (const LegendEntry& s : entries) {
            const double w = 16 + fm.horizontalAdvance(s.name) + 12;
            if (x > 0 && x + w > width() - 8) {
                ++l.legend_lines;
                x = 0;
            }
            x += w;
        }
        top += l.legend_lines * (fm.height() + 1);
    }
    if (!axis_title_.isEmpty()) top += fm.height();
    top += 4;
    // Left: the widest tick label.
    const auto [lo, hi] = y_range();
    int left = fm.horizontalAdvance(tick_label(hi));
    left = std::max(left, fm.horizontalAdvance(tick_label(lo)));
    left = std::max(left, fm.horizontalAdvance(tick_label((lo + hi) / 2)));
    const double plot_width = std::max(10, width() - left - 16);
    const int n = std::max<int>(1, static_cast<int>(categories_.size()));
    l.group_width = plot_width / n;
    // Category labels: side by side when they fit; else written upwards when that labels more of them; else every
    // 2nd, 5th, 10th... (a step that reads as a scale).
    const auto step_for = [&](int extent) {
        const int need = std::max(1, static_cast<int>(std::ceil(extent / std::max(1.0, l.group_width))));
        int step = 1;
        while (step < need) step = step == 1 ? 2 : static_cast<int>(nice_step(step + 1));
        return step;
    };
    const auto place = [&](const QFontMetrics& m) {
        int widest = 0;
        for (const QString& c : categories_) widest = std::max(widest, m.horizontalAdvance(c));
        const int flat = step_for(widest + 3), upright = step_for(m.height() + 1);
        l.rotated = flat > 1 && upright < flat;
        l.label_step = l.rotated ? upright : flat;
        return l.rotated ? widest + 4 : m.height();
    };
    double labels = place(fm);
    // A size smaller where that labels every category.
    if (l.label_step > 1) {
        const Layout normal = l;
        const QFontMetrics small(label_font());
        const double small_labels = place(small);
        if (l.label_step == 1) {
            l.small = true;
            labels = small_labels;
        } else {
            l = normal;
        }
    }
    const double bottom = labels + 6 + (x_axis_title_.isEmpty() ? 0 : fm.height());
    l.plot = QRectF(left + 8, top, plot_width, std::max(10.0, height() - top - bottom));
    l.bar_width = l.group_width * 0.84 / std::max<int>(1, static_cast<int>(series_.size()));
    return l;
}

QFont BarChart::label_font() const {
    QFont f = font();
    f.setPointSizeF(std::max(6.5, f.pointSizeF() * 0.8));
    return f;
}

QRectF BarChart::bar_rect(int s, int c) const {
    if (s < 0 || s >= series_.size() || c < 0 || c >= categories_.size()) return {};
    const double v = series_[s].values[c];
    if (!present(v) || (log_ && v <= 0)) return {};
    const Layout l = layout(fontMetrics());
    const double x = l.plot.left() + c * l.group_width + l.group_width * 0.08 + s * l.bar_width;
    const double y = y_of(v, l.plot);
    return QRectF(x, y, std::max(1.0, l.bar_width - (l.bar_width > 4 ? 1 : 0)), l.plot.bottom() - y);
}

void BarChart::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing, false);
    const QPalette pal = palette();
    const QColor base = pal.color(QPalette::Base), text = pal.color(QPalette::Text);
    p.fillRect(rect(), base);
    const QFontMetrics fm = fontMetrics();
    const Layout l = layout(fm);
    drawn_labels_.clear();
    drawn_ranges_ = 0;
    double y = 4;
    if (!title_.isEmpty()) {
        QFont bold = font();
        bold.setBold(true);
        p.setFont(bold);
        p.setPen(text);
        p.drawText(QRectF(4, y, width() - 8, fm.height()), Qt::AlignHCenter | Qt::AlignVCenter,
                   QFontMetrics(bold).elidedText(title_, Qt::ElideRight, width() - 8));
        p.setFont(font());
        y += fm.height() + 2;
    }
    if (l.legend_lines > 0) {
        double x = 8;
        for (const LegendEntry& s : legend_entries()) {
            const double w = 16 + fm.horizontalAdvance(s.name) + 12;
            if (x > 8 && x + w > width() - 8) {
                x = 8;
                y += fm.height() + 1;
            }
            p.fillRect(QRectF(x, y + fm.height() / 2.0 - 5, 10, 10), s.color);
            p.setPen(text);
            p.drawText(QPointF(x + 14, y + fm.ascent()), s.name);
            x += w;
        }
        y += fm.height() + 1;
    }
    if (!axis_title_.isEmpty()) {
        p.setPen(blend(text, base, 0.35));
        p.drawText(QPointF(4, y + fm.ascent()), axis_title_ + (log_ ? tr(" (log scale)") : QString()));
    }
    if (!x_axis_title_.isEmpty()) {
        p.setPen(blend(text, base, 0.35));
        p.drawText(QRectF(l.plot.left(), height() - fm.height() - 2, l.plot.width(), fm.height()), Qt::AlignHCenter | Qt::AlignVCenter,
                   fm.elidedText(x_axis_title_, Qt::ElideRight, static_cast<int>(l.plot.width())));
    }
    drawn_categories_.clear();
    if (categories_.isEmpty() || series_.isEmpty()) {
        p.setPen(blend(text, base, 0.45));
        p.drawText(l.plot, Qt::AlignCenter | Qt::TextWordWrap, tr("Nothing measured yet"));
        return;
    }
    // Grid and ticks.
    const auto [lo, hi] = y_range();
    QVector<double> ticks;
    if (log_) {
        for (double t = lo; t <= hi * 1.0001; t *= 10) ticks << t;
    } else {
        const double step = nice_step((hi - lo) / 4);
        for (double t = lo; t <= hi + step * 1e-6; t += step) ticks << t;
    }
    const QColor grid = blend(base, text, 0.15);
    for (double t : ticks) {
        const double ty = y_of(t, l.plot);
        p.setPen(grid);
        p.drawLine(QPointF(l.plot.left(), ty), QPointF(l.plot.right(), ty));
        p.setPen(text);
        p.drawText(QRectF(0, ty - fm.height() / 2.0, l.plot.left() - 4, fm.height()), Qt::AlignRight | Qt::AlignVCenter, tick_label(t));
    }
    if (log_) {  // minor ticks 2..9 of each decade
        p.setPen(blend(base, text, 0.07));
        for (double t = lo; t < hi; t *= 10)
            for (int m = 2; m < 10; ++m) {
                const double ty = y_of(t * m, l.plot);
                p.drawLine(QPointF(l.plot.left(), ty), QPointF(l.plot.right(), ty));
            }
    }
    p.setPen(blend(base, text, 0.5));
    p.drawLine(l.plot.bottomLeft(), l.plot.bottomRight());
    // Bars and their values.
    for (int s = 0; s < series_.size(); ++s)
        for (int c = 0; c < categories_.size(); ++c) {
            const QRectF r = bar_rect(s, c);
            if (r.width() <= 0) continue;
            const QColor color = c < series_[s].bar_colors.size() && series_[s].bar_colors[c].isValid() ? series_[s].bar_colors[c] : series_[s].color;
            p.fillRect(r, color);
            if (c < series_[s].ranges.size() && present(series_[s].ranges[c].first) && present(series_[s].ranges[c].second) &&
                series_[s].ranges[c].second > series_[s].ranges[c].first) {
                // The repetitions' min–max: a whisker through the bar's top, capped at both ends.
                const double top = y_of(series_[s].ranges[c].second, l.plot), bottom = y_of(series_[s].ranges[c].first, l.plot);
                const double x = r.center().x(), cap = std::max(2.0, r.width() / 4);
                p.setPen(QPen(text, 1));
                p.drawLine(QPointF(x, top), QPointF(x, bottom));
                p.drawLine(QPointF(x - cap, top), QPointF(x + cap, top));
                p.drawLine(QPointF(x - cap, bottom), QPointF(x + cap, bottom));
                ++drawn_ranges_;
            }
            if (!labels_) continue;
            const QString label = format_value(series_[s].values[c]);
            const int tw = fm.horizontalAdvance(label);
            if (r.width() >= tw + 2) {
                QRectF box(r.center().x() - tw / 2.0 - 1, r.top() - fm.height() - 1, tw + 2, fm.height());
                QColor pen = text;
                if (box.top() < l.plot.top()) {  // no room above: inside the bar's top
                    box.moveTop(r.top() + 1);
                    pen = text_color_on(color);
                }
                p.setPen(pen);
                p.drawText(box, Qt::AlignCenter, label);
                drawn_labels_ << label;
            } else if (r.width() >= fm.height() - 2 && std::max(r.height(), r.top() - l.plot.top()) >= tw + 4) {
                // Narrow bars: the value written upwards, above the bar or, where that is cramped, inside it.
                p.save();
                const bool inside = r.height() >= tw + 4;
                p.setPen(inside ? text_color_on(color) : text);
                p.translate(r.center().x() + fm.ascent() / 2.0 - 1, inside ? r.bottom() - 2 : r.top() - 2);
                p.rotate(-90);
                p.drawText(QPointF(0, 0), label);
                p.restore();
                drawn_labels_ << label;
            }
        }
    // Category labels as layout() placed them.
    p.setPen(text);
    if (l.small) p.setFont(label_font());
    const QFontMetrics lfm = p.fontMetrics();
    for (int c = 0; c < categories_.size(); c += l.label_step) {
        const double x = l.plot.left() + (c + 0.5) * l.group_width;
        if (l.rotated) {
            p.save();
            p.translate(x + lfm.ascent() / 2.0 - 1, l.plot.bottom() + 3 + lfm.horizontalAdvance(categories_[c]));
            p.rotate(-90);
            p.drawText(QPointF(0, 0), categories_[c]);
            p.restore();
        } else {
            const int w = lfm.horizontalAdvance(categories_[c]) + 3;
            p.drawText(QRectF(x - w / 2.0, l.plot.bottom() + 2, w, lfm.height()), Qt::AlignHCenter | Qt::AlignTop, categories_[c]);
        }
        drawn_categories_ << categories_[c];
    }
    p.setFont(font());
}

std::pair<int, int> BarChart::hit(const QPoint& pt) const {
    for (int s = 0; s < series_.size(); ++s)
        for (int c = 0; c < categories_.size(); ++c) {
            QRectF r = bar_rect(s, c);
            if (r.width() <= 0) continue;
            r.setTop(std::min(r.top(), r.bottom() - 6));
            if (r.adjusted(-1, 0, 1, 0).contains(pt)) return {s, c};
        }
    return {-1, -1};
}

bool BarChart::event(QEvent* e) {
    if (e->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(e);
        const auto [s, c] = hit(help->pos());
        if (s < 0) QToolTip::hideText();
        else
            QToolTip::showText(help->globalPos(), QStringLiteral("%1%2: %3 %4")
                                                      .arg(series_[s].name.isEmpty() ? QString() : series_[s].name + QStringLiteral(", "), categories_[c],
                                                           format_value(series_[s].values[c]), axis_title_),
                               this);
        return true;
    }
    return QWidget::event(e);
}

}  // namespace colibri::studio
