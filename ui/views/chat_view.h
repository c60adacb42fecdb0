// The chat: the transcript (every generated token is a link that selects it for the routing and profiler
// views), the message box with send / stop / regenerate / new, the system prompt, the sampling settings,
// and the speed and context use of the last reply.
#pragma once
#include <QWidget>

#include "ui/chat_controller.h"

class QCheckBox;
class QDoubleSpinBox;
class QLabel;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSettings;
class QSpinBox;
class QTextBrowser;
class QUrl;

namespace colibri::studio {

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
    QPushButton* send_button() const { return send_; }
    QPushButton* stop_button() const { return stop_; }
    QPushButton* regenerate_button() const { return regenerate_; }
    QLabel* speed_label() const { return speed_; }
    QProgressBar* context_bar() const { return context_; }
    QLabel* error_label() const { return error_; }
    // Text position of a token's link in the transcript, -1 when it is not shown.
    int anchor_position(int token_position) const;

public slots:
    void send();
    void regenerate();
    void model_changed();

private:
    QWidget* build_sampling_panel();
    void rebuild_transcript();
    void append_token(int position);
    void on_anchor(const QUrl& url);
    void update_buttons();
    void show_stats(const GenerationStats& stats);
    void show_error(const QString& error);

    ChatController* chat_;
    Conversation* conversation_;
    QTextBrowser* transcript_ = nullptr;
    QPlainTextEdit* input_ = nullptr;
    QPlainTextEdit* system_prompt_ = nullptr;
    QPushButton *send_ = nullptr, *stop_ = nullptr, *regenerate_ = nullptr, *new_ = nullptr;
    QLabel* speed_ = nullptr;
    QLabel* error_ = nullptr;
    QProgressBar* context_ = nullptr;
    QCheckBox* greedy_ = nullptr;
    QDoubleSpinBox *temperature_ = nullptr, *top_p_ = nullptr, *min_p_ = nullptr, *repetition_ = nullptr;
    QSpinBox *top_k_ = nullptr, *seed_ = nullptr, *max_tokens_ = nullptr;
    bool streaming_reply_ = false;  // the transcript ends inside the reply being generated
};

}  // namespace colibri::studio
