#include "ui/views/elided_label.h"

#include <QHelpEvent>
#include <QPainter>
#include <QStyle>
#include <QToolTip>

namespace colibri::studio {

ElidedLabel::ElidedLabel(const QString& text, QWidget* parent) : QLabel(text, parent) {
    setTextFormat(Qt::PlainText);
    setWordWrap(false);
    setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
}

QString ElidedLabel::shown_text() const {
    // One line: a multi-line text shows its lines joined.
    QString one = text();
    one.replace(QLatin1Char('\n'), QStringLiteral(" · "));
    return fontMetrics().elidedText(one, mode_, std::max(0, contentsRect().width() - 2 * margin()));
}

QSize ElidedLabel::minimumSizeHint() const {
    const QSize s = QLabel::minimumSizeHint();
    return {fontMetrics().horizontalAdvance(QStringLiteral("…")) + 2 * margin(), s.height()};
}

QSize ElidedLabel::sizeHint() const {
    const QSize s = QLabel::sizeHint();
    return {std::min(s.width(), 400), s.height()};
}

void ElidedLabel::paintEvent(QPaintEvent*) {
    QPainter p(this);
    const QRect r = contentsRect().adjusted(margin(), margin(), -margin(), -margin());
    p.setPen(palette().color(foregroundRole()));
    p.drawText(r, static_cast<int>(alignment() & ~Qt::AlignJustify) | Qt::TextSingleLine, shown_text());
}

bool ElidedLabel::event(QEvent* e) {
    if (e->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(e);
        if (!toolTip().isEmpty()) return QLabel::event(e);
        if (elided()) QToolTip::showText(help->globalPos(), text(), this);
        else QToolTip::hideText();
        return true;
    }
    return QLabel::event(e);
}

}  // namespace colibri::studio
