#include "ui/views/chat_view.h"

#include <QCheckBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QKeyEvent>
#include <QLabel>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollBar>
#include <QSettings>
#include <QShortcut>
#include <QSpinBox>
#include <QSplitter>
#include <QTextBlock>
#include <QTextBrowser>
#include <QTextCursor>
#include <QUrl>
#include <QVBoxLayout>

namespace colibri::studio {

namespace {

const QString kAnchorScheme = QStringLiteral("tok");

QString role_title(const QString& role) {
    if (role == QLatin1String("user")) return QObject::tr("You");
    if (role == QLatin1String("assistant")) return QObject::tr("Model");
    return QObject::tr("System");
}

QDoubleSpinBox* spin(double lo, double hi, double step, int decimals) {
    auto* s = new QDoubleSpinBox;
    s->setRange(lo, hi);
    s->setSingleStep(step);
    s->setDecimals(decimals);
    return s;
}

}  // namespace

ChatView::ChatView(ChatController* chat, Conversation* conversation, QWidget* parent)
    : QWidget(parent), chat_(chat), conversation_(conversation) {
    transcript_ = new QTextBrowser;
    transcript_->setOpenLinks(false);
    transcript_->setObjectName(QStringLiteral("transcript"));
    transcript_->setPlaceholderText(tr("Open a model (File ▸ Open, or drop a .bin here), then write a message."));
    connect(transcript_, &QTextBrowser::anchorClicked, this, &ChatView::on_anchor);

    system_prompt_ = new QPlainTextEdit;
    system_prompt_->setPlaceholderText(tr("System prompt (optional)"));
    system_prompt_->setMaximumHeight(60);
    connect(system_prompt_, &QPlainTextEdit::textChanged, this, [this] { conversation_->set_system_prompt(system_prompt_->toPlainText()); });

    input_ = new QPlainTextEdit;
    input_->setObjectName(QStringLiteral("message"));
    input_->setMaximumHeight(80);
    auto* send_shortcut = new QShortcut(QKeySequence(Qt::CTRL | Qt::Key_Return), input_);
    connect(send_shortcut, &QShortcut::activated, this, &ChatView::send);

    send_ = new QPushButton(tr("Send"));
    stop_ = new QPushButton(tr("Stop"));
    regenerate_ = new QPushButton(tr("Regenerate"));
    new_ = new QPushButton(tr("New conversation"));
    send_->setToolTip(tr("Send the message (Ctrl+Return)"));
    connect(send_, &QPushButton::clicked, this, &ChatView::send);
    connect(stop_, &QPushButton::clicked, chat_, &ChatController::stop);
    connect(regenerate_, &QPushButton::clicked, this, &ChatView::regenerate);
    connect(new_, &QPushButton::clicked, chat_, &ChatController::new_conversation);

    speed_ = new QLabel;
    speed_->setObjectName(QStringLiteral("speed"));
    error_ = new QLabel;
    error_->setStyleSheet(QStringLiteral("color: #c62828"));
    error_->setWordWrap(true);
    context_ = new QProgressBar;
    context_->setFormat(tr("context %v / %m tokens"));
    context_->setRange(0, 1);
    context_->setValue(0);

    auto* buttons = new QHBoxLayout;
    buttons->addWidget(send_);
    buttons->addWidget(stop_);
    buttons->addWidget(regenerate_);
    buttons->addStretch();
    buttons->addWidget(new_);
    auto* status = new QHBoxLayout;
    status->addWidget(speed_, 1);
    status->addWidget(context_, 1);

    auto* left = new QWidget;
    auto* left_layout = new QVBoxLayout(left);
    left_layout->setContentsMargins(0, 0, 0, 0);
    left_layout->addWidget(system_prompt_);
    left_layout->addWidget(transcript_, 1);
    left_layout->addWidget(input_);
    left_layout->addLayout(buttons);
    left_layout->addWidget(error_);
    left_layout->addLayout(status);

    auto* splitter = new QSplitter;
    splitter->addWidget(left);
    splitter->addWidget(build_sampling_panel());
    splitter->setStretchFactor(0, 1);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addWidget(splitter);

    connect(conversation_, &Conversation::messagesChanged, this, &ChatView::rebuild_transcript);
    connect(conversation_, &Conversation::tokensChanged, this, &ChatView::rebuild_transcript);
    connect(conversation_, &Conversation::selectionChanged, this, &ChatView::rebuild_transcript);
    connect(conversation_, &Conversation::tokenAppended, this, &ChatView::append_token);
    connect(chat_, &ChatController::generatingChanged, this, &ChatView::update_buttons);
    connect(chat_, &ChatController::finished, this, &ChatView::show_stats);
    connect(chat_, &ChatController::failed, this, &ChatView::show_error);
    update_buttons();
}

QWidget* ChatView::build_sampling_panel() {
    auto* box = new QGroupBox(tr("Sampling"));
    auto* form = new QFormLayout(box);
    greedy_ = new QCheckBox(tr("greedy (always the most likely token)"));
    temperature_ = spin(0.0, 5.0, 0.05, 2);
    top_k_ = new QSpinBox;
    top_k_->setRange(0, 1000000);
    top_k_->setSpecialValueText(tr("off"));
    top_p_ = spin(0.0, 1.0, 0.01, 3);
    min_p_ = spin(0.0, 1.0, 0.01, 3);
    repetition_ = spin(0.5, 3.0, 0.05, 2);
    seed_ = new QSpinBox;
    seed_->setRange(-1, INT32_MAX);
    seed_->setSpecialValueText(tr("random"));
    max_tokens_ = new QSpinBox;
    max_tokens_->setRange(1, 1 << 20);
    form->addRow(greedy_);
    form->addRow(tr("temperature"), temperature_);
    form->addRow(tr("top-k"), top_k_);
    form->addRow(tr("top-p"), top_p_);
    form->addRow(tr("min-p"), min_p_);
    form->addRow(tr("repetition penalty"), repetition_);
    form->addRow(tr("seed"), seed_);
    form->addRow(tr("max tokens"), max_tokens_);
    connect(greedy_, &QCheckBox::toggled, this, [this](bool on) {
        for (QWidget* w : std::initializer_list<QWidget*>{temperature_, top_k_, top_p_, min_p_}) w->setEnabled(!on);
    });
    set_settings(ChatSettings{});
    return box;
}

ChatSettings ChatView::settings() const {
    ChatSettings s;
    s.sampling.greedy = greedy_->isChecked();
    s.sampling.temperature = static_cast<float>(temperature_->value());
    s.sampling.top_k = top_k_->value();
    s.sampling.top_p = static_cast<float>(top_p_->value());
    s.sampling.min_p = static_cast<float>(min_p_->value());
    s.sampling.repetition_penalty = static_cast<float>(repetition_->value());
    s.random_seed = seed_->value() < 0;
    s.sampling.seed = s.random_seed ? 0 : static_cast<uint64_t>(seed_->value());
    s.max_tokens = max_tokens_->value();
    return s;
}

void ChatView::set_settings(const ChatSettings& s) {
    greedy_->setChecked(s.sampling.greedy);
    temperature_->setValue(s.sampling.temperature);
    top_k_->setValue(s.sampling.top_k);
    top_p_->setValue(s.sampling.top_p);
    min_p_->setValue(s.sampling.min_p);
    repetition_->setValue(s.sampling.repetition_penalty);
    seed_->setValue(s.random_seed ? -1 : static_cast<int>(std::min<uint64_t>(s.sampling.seed, INT32_MAX)));
    max_tokens_->setValue(s.max_tokens);
}

void ChatView::save_settings(QSettings& q) const {
    const ChatSettings s = settings();
    q.beginGroup(QStringLiteral("sampling"));
    q.setValue("greedy", s.sampling.greedy);
    q.setValue("temperature", s.sampling.temperature);
    q.setValue("top_k", s.sampling.top_k);
    q.setValue("top_p", s.sampling.top_p);
    q.setValue("min_p", s.sampling.min_p);
    q.setValue("repetition_penalty", s.sampling.repetition_penalty);
    q.setValue("seed", seed_->value());
    q.setValue("max_tokens", s.max_tokens);
    q.endGroup();
    q.setValue("chat/system_prompt", system_prompt_->toPlainText());
}

void ChatView::restore_settings(QSettings& q) {
    ChatSettings s;
    q.beginGroup(QStringLiteral("sampling"));
    s.sampling.greedy = q.value("greedy", s.sampling.greedy).toBool();
    s.sampling.temperature = q.value("temperature", s.sampling.temperature).toFloat();
    s.sampling.top_k = q.value("top_k", s.sampling.top_k).toInt();
    s.sampling.top_p = q.value("top_p", s.sampling.top_p).toFloat();
    s.sampling.min_p = q.value("min_p", s.sampling.min_p).toFloat();
    s.sampling.repetition_penalty = q.value("repetition_penalty", s.sampling.repetition_penalty).toFloat();
    const int seed = q.value("seed", -1).toInt();
    s.random_seed = seed < 0;
    s.sampling.seed = seed < 0 ? 0 : static_cast<uint64_t>(seed);
    s.max_tokens = q.value("max_tokens", s.max_tokens).toInt();
    q.endGroup();
    set_settings(s);
    system_prompt_->setPlainText(q.value("chat/system_prompt").toString());
}

void ChatView::send() {
    error_->clear();
    const QString text = input_->toPlainText();
    if (Status s = chat_->send(text, settings()); !s) {
        show_error(QString::fromStdString(s.message()));
        return;
    }
    input_->clear();
}

void ChatView::regenerate() {
    error_->clear();
    if (Status s = chat_->regenerate(settings()); !s) show_error(QString::fromStdString(s.message()));
}

void ChatView::model_changed() {
    const bool ids = chat_->uses_token_ids();
    input_->setPlaceholderText(ids ? tr("This model has no tokenizer: type token ids, e.g. 1, 415, 2936") : tr("Message"));
    context_->setRange(0, std::max(chat_->model().context, 1));
    context_->setValue(0);
    speed_->clear();
    error_->clear();
    update_buttons();
}

void ChatView::update_buttons() {
    const bool busy = chat_->generating();
    const bool ready = chat_->has_model() && !busy;
    send_->setEnabled(ready);
    regenerate_->setEnabled(ready && !conversation_->messages().isEmpty());
    stop_->setEnabled(busy);
}

void ChatView::show_stats(const GenerationStats& s) {
    QString text = tr("%1 tokens at %2 tokens/s").arg(s.generated).arg(s.decode_tokens_per_second(), 0, 'f', 1);
    if (s.prompt_tokens > 0)
        text += tr(" · prompt %1 tokens at %2 tokens/s").arg(s.prompt_tokens).arg(s.prompt_tokens_per_second(), 0, 'f', 1);
    if (s.reused_tokens > 0) text += tr(" · %1 reused from the cache").arg(s.reused_tokens);
    if (s.stopped) text += tr(" · stopped");
    speed_->setText(text);
    context_->setRange(0, std::max(s.context_size, 1));
    context_->setValue(s.context_used);
    update_buttons();
}

void ChatView::show_error(const QString& error) {
    error_->setText(error);
    update_buttons();
}

void ChatView::on_anchor(const QUrl& url) {
    if (url.scheme() != kAnchorScheme) return;
    bool ok = false;
    const int position = url.path().toInt(&ok);
    if (ok) conversation_->select(position);
}

int ChatView::anchor_position(int token_position) const {
    const QString href = kAnchorScheme + QLatin1Char(':') + QString::number(token_position);
    for (QTextBlock b = transcript_->document()->begin(); b.isValid(); b = b.next())
        for (auto it = b.begin(); !it.atEnd(); ++it)
            if (it.fragment().charFormat().anchorHref() == href) return it.fragment().position();
    return -1;
}

namespace {

QTextCharFormat token_format(const ConversationToken& t, bool selected) {
    QTextCharFormat f;
    f.setAnchor(true);
    f.setAnchorHref(QStringLiteral("tok:%1").arg(t.trace.position));
    f.setToolTip(QObject::tr("token %1 at position %2 (click for its routing)").arg(t.trace.token).arg(t.trace.position));
    if (selected) f.setBackground(QColor(255, 213, 79));
    return f;
}

void insert_header(QTextCursor& c, const QString& role, bool first) {
    if (!first) c.insertBlock();
    QTextCharFormat bold;
    bold.setFontWeight(QFont::Bold);
    c.insertText(role_title(role), bold);
    c.insertBlock();
}

}  // namespace

void ChatView::rebuild_transcript() {
    transcript_->clear();
    QTextCursor c(transcript_->document());
    const auto& messages = conversation_->messages();
    streaming_reply_ = false;
    for (int i = 0; i < messages.size(); ++i) {
        const ConversationMessage& m = messages[i];
        insert_header(c, m.role, i == 0);
        const bool tokens_shown = m.role == QLatin1String("assistant") && m.first_token >= 0 &&
                                  m.first_token + m.token_count <= conversation_->size();
        if (!tokens_shown) {
            c.insertText(m.content, QTextCharFormat());
            continue;
        }
        for (int p = m.first_token; p < m.first_token + m.token_count; ++p) {
            const ConversationToken* t = conversation_->token(p);
            if (t->end_of_turn || t->trace.text.isEmpty()) continue;
            c.insertText(t->trace.text, token_format(*t, p == conversation_->selected()));
        }
        streaming_reply_ = i == messages.size() - 1 && chat_->generating();
    }
    update_buttons();
}

void ChatView::append_token(int position) {
    const auto& messages = conversation_->messages();
    if (messages.isEmpty() || messages.back().role != QLatin1String("assistant") || messages.back().first_token < 0) return;
    const ConversationMessage& m = messages.back();
    if (position < m.first_token) return;
    if (!streaming_reply_) {  // the reply just began: show its header
        rebuild_transcript();
        streaming_reply_ = true;
        return;
    }
    const ConversationToken* t = conversation_->token(position);
    if (t == nullptr || t->end_of_turn || t->trace.text.isEmpty()) return;
    QTextCursor c(transcript_->document());
    c.movePosition(QTextCursor::End);
    c.insertText(t->trace.text, token_format(*t, false));
    transcript_->verticalScrollBar()->setValue(transcript_->verticalScrollBar()->maximum());
}

}  // namespace colibri::studio
