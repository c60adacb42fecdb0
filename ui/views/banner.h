// A message across the top of the chat that stays until it is dealt with: a model that failed verification
// (red, with "Chat anyway"), a file that could not be opened, a GGUF file or Hugging Face directory that can
// be converted (with "Convert…"). Its text wraps; it never widens the window.
#pragma once
#include <QFrame>
#include <QList>
#include <functional>

class QHBoxLayout;
class QLabel;
class QPushButton;

namespace colibri::studio {

class Banner : public QFrame {
    Q_OBJECT
public:
    enum class Kind { Error, Warning, Info };

    explicit Banner(QWidget* parent = nullptr);
    // Shows the banner with these buttons (callbacks run on click); a Dismiss button is always there.
    struct Action {
        QString text;
        std::function<void()> run;
        bool dismisses = true;
    };
    void show_message(Kind kind, const QString& text, const QList<Action>& actions = {});
    void dismiss();
    Kind kind() const { return kind_; }
    QString text() const;
    QList<QPushButton*> buttons() const { return buttons_; }
    QPushButton* button(const QString& text) const;

signals:
    void dismissed();

protected:
    void changeEvent(QEvent* e) override;

private:
    void restyle();
    Kind kind_ = Kind::Info;
    QLabel* label_ = nullptr;
    QHBoxLayout* buttons_layout_ = nullptr;
    QList<QPushButton*> buttons_;
    QPushButton* dismiss_ = nullptr;
};

}  // namespace colibri::studio
