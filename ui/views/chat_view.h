// The chat: the transcript rendered as Markdown (code blocks with a copy link; every generated token stays a
// link that selects it for the other views, and hovering it shows the model's top-5 alternatives there), a
// copy link and the timing on every message, the message box with send / stop / regenerate / new, and while a
// reply streams its tokens/s and the context gauge (warning before the context runs out). The system prompt
// and the sampling settings live in a panel of their own (settings_panel(), docked by the main window).
#pragma once
#include <QTimer>
#include <QWidget>
#include <functional>

#include "ui/chat_controller.h"
#include "ui/markdown.h"

class QAction;
class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSettings;
class QSpinBox;
class QTextBrowser;
class QUrl;
class QTextCursor;

namespace colibri::studio {

class ElidedLabel;

class ChatView : public QWidget {
    Q_OBJECT
public:
    ChatView(ChatController* chat, Conversation* conversation, QWidget* parent = nullptr);

    ChatSettings settings() const;
    void set_settings(const ChatSettings& s);
    void save_settings(QSettings& settings) const;
    void restore_settings(QSettings& settings);

    // What the user sees and does, for the main window and for tests.
    QTextBrowser* transcript() const { return transcript_; }
    QPlainTextEdit* input() const { return input_; }
    QPlainTextEdit* system_prompt() const { return system_prompt_; }
    QPushButton* send_button() const { return send_; }
    QPushButton* stop_button() const { return stop_; }
    QPushButton* regenerate_button() const { return regenerate_; }
    QPushButton* new_button() const { return new_; }
    QLabel* speed_label() const;
    QProgressBar* context_bar() const { return context_; }
    QLabel* context_warning() const;
    QLabel* error_label() const;
    // The sampling preset (Model default, Greedy, Balanced, Creative, Custom) and the line that says what the
    // model's default is; editing a value by hand makes the preset Custom.
    QComboBox* preset_box() const { return preset_; }
    QLabel* model_default_label() const;
    SamplingPreset preset() const;
    void set_preset(SamplingPreset preset);
    // The system prompt and sampling settings (the main window docks it).
    QWidget* settings_panel() const { return panel_; }
    // Send (Ctrl+Return), Stop (Esc), Regenerate (Ctrl+R), New conversation (Ctrl+N): for the window's menu.
    QList<QAction*> chat_actions() const;
    QAction* send_action() const { return send_action_; }
    QAction* stop_action() const { return stop_action_; }
    QAction* new_action() const { return new_action_; }
    // Text position of a token's link in the transcript, -1 when it is not shown.
    int anchor_position(int token_position) const;
    // The tooltip of a generated token (its alternatives, probability and time); empty for other positions.
    QString token_tooltip(int token_position) const;
    // Follows a transcript link as a click does: "tok:N", "copy:M" (message M), "copycode:M:K".
    void open_link(const QUrl& url);
    // Asked before New conversation ends this one ("Starting a new conversation"); false keeps it. The main
    // window answers (its discard question); without one, New goes ahead.
    void set_discard_check(std::function<bool(const QString& action)> check) { discard_check_ = std::move(check); }
    // Renders the streaming reply now (it is otherwise batched).
    void flush();

public slots:
    void send();
    void regenerate();
    void start_new_conversation();
    void model_changed();

signals:
    void copied(const QString& what);

private:
    QWidget* build_settings_panel();
    void rebuild_transcript();
    void render_message(QTextCursor& c, int index);
    void render_body(QTextCursor& c, int index);
    void update_streaming();
    void restyle_token(int position, bool selected);
    void on_selection(int position);
    void update_buttons();
    void show_progress();
    void show_stats(const GenerationStats& stats);
    void show_error(const QString& error);
    void set_context_size(int size);  // the bar's range, and a width that fits its text
    void update_context(int used, int size);
    void clear_figures();
    MarkdownStyle markdown_style() const;
    bool eventFilter(QObject* watched, QEvent* event) override;

    ChatController* chat_;
    Conversation* conversation_;
    QTextBrowser* transcript_ = nullptr;
    QPlainTextEdit* input_ = nullptr;
    QPlainTextEdit* system_prompt_ = nullptr;
    QPushButton *send_ = nullptr, *stop_ = nullptr, *regenerate_ = nullptr, *new_ = nullptr;
    QAction *send_action_ = nullptr, *stop_action_ = nullptr, *regenerate_action_ = nullptr, *new_action_ = nullptr;
    ElidedLabel* speed_ = nullptr;
    ElidedLabel* error_ = nullptr;
    ElidedLabel* warning_ = nullptr;
    QProgressBar* context_ = nullptr;
    QWidget* panel_ = nullptr;
    QCheckBox* greedy_ = nullptr;
    QComboBox* preset_ = nullptr;
    ElidedLabel* model_default_ = nullptr;
    bool applying_preset_ = false;  // the values change because a preset was chosen, not by hand
    QDoubleSpinBox *temperature_ = nullptr, *top_p_ = nullptr, *min_p_ = nullptr, *repetition_ = nullptr;
    QSpinBox *top_k_ = nullptr, *seed_ = nullptr, *max_tokens_ = nullptr;
    QComboBox* speculate_ = nullptr;
    QTimer stream_timer_;
    int body_start_ = -1;       // document position where the last message's body begins
    int rendered_selection_ = -1;
    QString last_sent_;
    std::function<bool(const QString&)> discard_check_;
};

}  // namespace colibri::studio
