// A one-line label that never asks for more width than it is given: text that does not fit is elided and
// shown whole in the tooltip. Status lines and paths use it, so that no text can widen the window.
#pragma once
#include <QLabel>

namespace colibri::studio {

class ElidedLabel : public QLabel {
    Q_OBJECT
public:
    explicit ElidedLabel(const QString& text = {}, QWidget* parent = nullptr);
    void setElideMode(Qt::TextElideMode mode) { mode_ = mode; update(); }
    // What is drawn now (the text, elided to the width).
    QString shown_text() const;
    bool elided() const { return shown_text() != text(); }
    QSize minimumSizeHint() const override;
    QSize sizeHint() const override;

protected:
    void paintEvent(QPaintEvent* e) override;
    bool event(QEvent* e) override;

private:
    Qt::TextElideMode mode_ = Qt::ElideRight;
};

}  // namespace colibri::studio
