#include "ui/views/token_timeline.h"

#include <QHelpEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <algorithm>

#include "ui/colors.h"
#include "ui/models/profiler_models.h"

namespace colibri::studio {

namespace {
constexpr int kLegendHeight = 18;
}  // namespace

TokenTimeline::TokenTimeline(QWidget* parent) : QWidget(parent) {
    setMouseTracking(true);
    setObjectName(QStringLiteral("token_timeline"));
}

void TokenTimeline::set_model(const TokenTimeModel* model) {
    model_ = model;
    update();
}

QList<int> TokenTimeline::stage_columns() {
    return {TokenTimeModel::Attention, TokenTimeModel::Router, TokenTimeModel::Experts, TokenTimeModel::LmHead,
            TokenTimeModel::Sampling, TokenTimeModel::Counters, TokenTimeModel::Other};
}

QColor TokenTimeline::stage_color(int column) {
    switch (column) {
    case TokenTimeModel::Attention: return {66, 133, 244};
    case TokenTimeModel::Router: return {251, 188, 5};
    case TokenTimeModel::Experts: return {52, 168, 83};
    case TokenTimeModel::LmHead: return {171, 71, 188};
    case TokenTimeModel::Sampling: return {0, 172, 193};
    case TokenTimeModel::Counters: return {234, 67, 53};
    default: return {158, 158, 158};
    }
}

// Wide enough for the axis's longest label (up to 99 s a token), whatever the font.
int TokenTimeline::axis_width() const { return fontMetrics().horizontalAdvance(axis_label(99999e3, 1e9)) + 8; }

QString TokenTimeline::axis_label(double us, double scale_us) {
    return QStringLiteral("%1 ms").arg(us / 1e3, 0, 'f', scale_us < 1e4 ? 2 : 1);
}

QRect TokenTimeline::plot_rect() const { return rect().adjusted(axis_width(), kLegendHeight + 4, -4, -16); }

int TokenTimeline::bars() const {
    const int n = model_ ? model_->rowCount() : 0;
    return std::min(n, std::max(1, plot_rect().width()));
}

std::pair<int, int> TokenTimeline::bar_rows(int bar) const {
    const int n = model_ ? model_->rowCount() : 0;
    const int b = bars();
    if (b <= 0 || bar < 0 || bar >= b) return {0, 0};
    return {static_cast<int>(static_cast<qint64>(bar) * n / b), static_cast<int>(static_cast<qint64>(bar + 1) * n / b)};
}

double TokenTimeline::bar_us(int bar, int column) const {
    const auto [from, to] = bar_rows(bar);
    double sum = 0;
    for (int r = from; r < to; ++r) sum += model_->us(r, column);
    return to > from ? sum / (to - from) : 0.0;
}

void TokenTimeline::paintEvent(QPaintEvent*) {
    QPainter p(this);
    const QPalette pal = palette();
    p.fillRect(rect(), pal.color(QPalette::Base));
    const QColor text = pal.color(QPalette::Text);
    // Legend.
    int x = 4;
    static const char* names[] = {QT_TR_NOOP("attention"), QT_TR_NOOP("router"), QT_TR_NOOP("experts"), QT_TR_NOOP("lm head"),
                                  QT_TR_NOOP("sampling"), QT_TR_NOOP("counters"), QT_TR_NOOP("other")};
    const QList<int> stages = stage_columns();
    for (int i = 0; i < stages.size(); ++i) {
        p.fillRect(QRect(x, 4, 10, 10), stage_color(stages[i]));
        p.setPen(text);
        const QString label = tr(names[i]);
        p.drawText(QPoint(x + 13, 13), label);
        x += 13 + p.fontMetrics().horizontalAdvance(label) + 10;
    }
    const QRect plot = plot_rect();
    const int n = model_ ? model_->rowCount() : 0;
    if (n == 0 || plot.width() <= 0 || plot.height() <= 0) {
        p.setPen(blend(text, pal.color(QPalette::Base), 0.4));
        p.drawText(plot, Qt::AlignCenter, tr("No tokens yet: the time of every token appears here as it is evaluated."));
        return;
    }
    const int b = bars();
    scale_us_ = 0;
    for (int i = 0; i < b; ++i) scale_us_ = std::max(scale_us_, bar_us(i, TokenTimeModel::Total));
    if (scale_us_ <= 0) scale_us_ = 1;
    // Axis: 0, half and the top, in ms.
    p.setPen(blend(text, pal.color(QPalette::Base), 0.75));
    for (double f : {0.0, 0.5, 1.0}) {
        const int y = plot.bottom() - static_cast<int>(f * plot.height());
        p.drawLine(plot.left(), y, plot.right(), y);
    }
    p.setPen(text);
    for (double f : {0.0, 0.5, 1.0}) {
        const int y = plot.bottom() - static_cast<int>(f * plot.height());
        p.drawText(QRect(0, y - 8, plot.left() - 4, 16), Qt::AlignRight | Qt::AlignVCenter, axis_label(scale_us_ * f, scale_us_));
    }
    const double w = static_cast<double>(plot.width()) / b;
    for (int i = 0; i < b; ++i) {
        double base = 0;
        const int left = plot.left() + static_cast<int>(i * w);
        const int width = std::max(1, static_cast<int>((i + 1) * w) - static_cast<int>(i * w) - (w >= 4 ? 1 : 0));
        for (int column : stages) {
            const double v = bar_us(i, column);
            if (v <= 0) continue;
            const int y0 = plot.bottom() - static_cast<int>(base / scale_us_ * plot.height());
            const int y1 = plot.bottom() - static_cast<int>((base + v) / scale_us_ * plot.height());
            if (y0 > y1) p.fillRect(QRect(left, y1, width, y0 - y1), stage_color(column));
            base += v;
        }
    }
    // Positions along the bottom: first and last.
    p.setPen(text);
    p.drawText(QRect(plot.left(), plot.bottom() + 2, 120, 14), Qt::AlignLeft, tr("position %1").arg(model_->trace(0).position));
    p.drawText(QRect(plot.right() - 120, plot.bottom() + 2, 120, 14), Qt::AlignRight, tr("%1").arg(model_->trace(n - 1).position));
}

int TokenTimeline::bar_at(const QPoint& pt) const {
    const QRect plot = plot_rect();
    const int b = bars();
    if (b <= 0 || !plot.contains(pt)) return -1;
    return std::clamp(static_cast<int>(static_cast<double>(pt.x() - plot.left()) / plot.width() * b), 0, b - 1);
}

void TokenTimeline::mousePressEvent(QMouseEvent* e) {
    const int bar = bar_at(e->position().toPoint());
    if (bar < 0) return;
    emit positionClicked(model_->trace(bar_rows(bar).first).position);
}

bool TokenTimeline::event(QEvent* e) {
    if (e->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(e);
        const int bar = bar_at(help->pos());
        if (bar < 0) {
            QToolTip::hideText();
            return true;
        }
        const auto [from, to] = bar_rows(bar);
        QString head = to - from == 1 ? tr("position %1 “%2” (%3)").arg(model_->trace(from).position).arg(model_->trace(from).text.toHtmlEscaped(),
                                                                          model_->trace(from).generated ? tr("generated") : tr("prompt"))
                                      : tr("positions %1–%2 (mean of %3 tokens)").arg(model_->trace(from).position).arg(model_->trace(to - 1).position).arg(to - from);
        QString rows;
        static const char* names[] = {QT_TR_NOOP("attention"), QT_TR_NOOP("router"), QT_TR_NOOP("experts"), QT_TR_NOOP("lm head"),
                                      QT_TR_NOOP("sampling"), QT_TR_NOOP("counters"), QT_TR_NOOP("other")};
        const QList<int> stages = stage_columns();
        for (int i = 0; i < stages.size(); ++i)
            rows += QStringLiteral("<tr><td>%1</td><td align=right>%2 µs</td></tr>").arg(tr(names[i])).arg(bar_us(bar, stages[i]), 0, 'f', 1);
        rows += QStringLiteral("<tr><td><b>%1</b></td><td align=right><b>%2 µs</b></td></tr>").arg(tr("total")).arg(bar_us(bar, TokenTimeModel::Total), 0, 'f', 1);
        QToolTip::showText(help->globalPos(), head + QStringLiteral("<table>") + rows + QStringLiteral("</table>"), this);
        return true;
    }
    return QWidget::event(e);
}

}  // namespace colibri::studio
