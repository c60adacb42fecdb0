#include "ui/views/banner.h"

#include <QEvent>
#include <QGuiApplication>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QVBoxLayout>

#include "ui/colors.h"

namespace colibri::studio {

Banner::Banner(QWidget* parent) : QFrame(parent) {
    setObjectName(QStringLiteral("banner"));
    setFrameShape(QFrame::StyledPanel);
    label_ = new QLabel;
    label_->setObjectName(QStringLiteral("banner_text"));
    label_->setWordWrap(true);
    label_->setTextFormat(Qt::PlainText);
    label_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    // A long word (a path) wraps anywhere rather than asking for its width.
    label_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    label_->setMinimumWidth(100);
    dismiss_ = new QPushButton(tr("Dismiss"));
    connect(dismiss_, &QPushButton::clicked, this, &Banner::dismiss);
    buttons_layout_ = new QHBoxLayout;
    buttons_layout_->setContentsMargins(0, 0, 0, 0);
    auto* layout = new QHBoxLayout(this);
    layout->setContentsMargins(8, 6, 8, 6);
    layout->addWidget(label_, 1);
    layout->addLayout(buttons_layout_);
    layout->addWidget(dismiss_);
    hide();
}

void Banner::show_message(Kind kind, const QString& text, const QList<Action>& actions) {
    kind_ = kind;
    label_->setText(text);
    for (QPushButton* b : buttons_) b->deleteLater();
    buttons_.clear();
    for (const Action& a : actions) {
        auto* b = new QPushButton(a.text);
        connect(b, &QPushButton::clicked, this, [this, run = a.run, dismisses = a.dismisses] {
            if (dismisses) dismiss();
            if (run) run();
        });
        buttons_layout_->addWidget(b);
        buttons_ << b;
    }
    restyle();
    show();
}

void Banner::dismiss() {
    if (isHidden()) return;
    hide();
    emit dismissed();
}

QString Banner::text() const { return label_->text(); }

QPushButton* Banner::button(const QString& text) const {
    for (QPushButton* b : buttons_)
        if (b->text() == text) return b;
    return nullptr;
}

void Banner::changeEvent(QEvent* e) {
    if (e->type() == QEvent::PaletteChange) restyle();
    QFrame::changeEvent(e);
}

void Banner::restyle() {
    const StatusColor c = kind_ == Kind::Error ? StatusColor::Error : kind_ == Kind::Warning ? StatusColor::Warning : StatusColor::Normal;
    const QPalette app = QGuiApplication::palette();
    const QColor edge = kind_ == Kind::Info ? app.color(QPalette::Highlight) : status_color(c);
    const QColor fill = blend(app.color(QPalette::Window), edge, dark_palette() ? 0.30 : 0.16);
    // Only the frame is styled: the buttons keep the application's look.
    const QString sheet = QStringLiteral("#banner { background: %1; border: 1px solid %2; border-radius: 3px; } #banner_text { color: %3; }")
                              .arg(fill.name(), edge.name(), QGuiApplication::palette().color(QPalette::WindowText).name());
    if (sheet != styleSheet()) setStyleSheet(sheet);  // restyling raises PaletteChange again
}

}  // namespace colibri::studio
