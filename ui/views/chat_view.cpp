#include "ui/views/chat_view.h"

#include <QAction>
#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QClipboard>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFontDatabase>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHelpEvent>
#include <QLabel>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollBar>
#include <QSettings>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QTextBlock>
#include <QTextBrowser>
#include <QTextCursor>
#include <QTextDocument>
#include <QToolTip>
#include <QUrl>
#include <QVBoxLayout>

#include "engine/core/speculation.h"
#include "ui/colors.h"
#include "ui/views/elided_label.h"

namespace colibri::studio {

namespace {

const QString kTokenScheme = QStringLiteral("tok");
constexpr int kNaturalBackground = QTextFormat::UserProperty + 1;  // a character's background before selection

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

// A token's text as a tooltip shows it: quoted, with white space made visible.
QString shown_token(const QString& text) {
    QString t = text;
    t.replace(QLatin1Char('\n'), QStringLiteral("↵"));
    t.replace(QLatin1Char('\t'), QStringLiteral("⇥"));
    if (t.trimmed().isEmpty()) t.replace(QLatin1Char(' '), QStringLiteral("␣"));
    return QStringLiteral("“%1”").arg(t.toHtmlEscaped());
}

QString percent(double p) { return p >= 0.0995 ? QString::number(p * 100, 'f', 1) + QStringLiteral(" %") : QString::number(p * 100, 'f', 2) + QStringLiteral(" %"); }

QString ms(uint64_t ns) { return QString::number(static_cast<double>(ns) / 1e6, 'f', 2); }

}  // namespace

ChatView::ChatView(ChatController* chat, Conversation* conversation, QWidget* parent)
    : QWidget(parent), chat_(chat), conversation_(conversation) {
    transcript_ = new QTextBrowser;
    transcript_->setOpenLinks(false);
    transcript_->setOpenExternalLinks(false);
    transcript_->setObjectName(QStringLiteral("transcript"));
    transcript_->setPlaceholderText(tr("Open a model (File ▸ Open, or drop a .bin here), then write a message."));
    transcript_->viewport()->installEventFilter(this);
    transcript_->setMinimumSize(200, 120);
    connect(transcript_, &QTextBrowser::anchorClicked, this, &ChatView::open_link);

    input_ = new QPlainTextEdit;
    input_->setObjectName(QStringLiteral("message"));
    input_->setMinimumHeight(40);
    input_->setMaximumHeight(90);

    send_ = new QPushButton(tr("Send"));
    stop_ = new QPushButton(tr("Stop"));
    regenerate_ = new QPushButton(tr("Regenerate"));
    new_ = new QPushButton(tr("New conversation"));
    send_->setToolTip(tr("Send the message (Ctrl+Return)"));
    stop_->setToolTip(tr("Stop the reply (Esc)"));
    regenerate_->setToolTip(tr("Answer the last message again (Ctrl+R)"));
    new_->setToolTip(tr("Start over (Ctrl+N)"));
    connect(send_, &QPushButton::clicked, this, &ChatView::send);
    connect(stop_, &QPushButton::clicked, chat_, &ChatController::stop);
    connect(regenerate_, &QPushButton::clicked, this, &ChatView::regenerate);
    connect(new_, &QPushButton::clicked, this, &ChatView::start_new_conversation);

    send_action_ = new QAction(tr("&Send"), this);
    send_action_->setShortcuts({QKeySequence(Qt::CTRL | Qt::Key_Return), QKeySequence(Qt::CTRL | Qt::Key_Enter)});
    connect(send_action_, &QAction::triggered, this, &ChatView::send);
    stop_action_ = new QAction(tr("S&top"), this);
    stop_action_->setShortcut(QKeySequence(Qt::Key_Escape));
    connect(stop_action_, &QAction::triggered, chat_, &ChatController::stop);
    regenerate_action_ = new QAction(tr("&Regenerate"), this);
    regenerate_action_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_R));
    connect(regenerate_action_, &QAction::triggered, this, &ChatView::regenerate);
    new_action_ = new QAction(tr("&New conversation"), this);
    new_action_->setShortcut(QKeySequence::New);
    connect(new_action_, &QAction::triggered, this, &ChatView::start_new_conversation);
    addActions(chat_actions());

    speed_ = new ElidedLabel;
    speed_->setObjectName(QStringLiteral("speed"));
    error_ = new ElidedLabel;
    error_->setObjectName(QStringLiteral("chat_error"));
    error_->setStyleSheet(QStringLiteral("color: %1").arg(status_color(StatusColor::Error).name()));
    warning_ = new ElidedLabel;
    warning_->setObjectName(QStringLiteral("context_warning"));
    warning_->setStyleSheet(QStringLiteral("color: %1").arg(status_color(StatusColor::Warning).name()));
    context_ = new QProgressBar;
    context_->setObjectName(QStringLiteral("context"));
    context_->setFormat(tr("context %v / %m"));
    context_->setMaximumWidth(260);
    set_context_size(1);
    context_->setValue(0);

    auto* buttons = new QHBoxLayout;
    buttons->addWidget(send_);
    buttons->addWidget(stop_);
    buttons->addWidget(regenerate_);
    buttons->addWidget(error_, 1);
    buttons->addWidget(new_);
    auto* status = new QHBoxLayout;
    status->addWidget(speed_, 3);
    status->addWidget(warning_, 2);
    status->addWidget(context_, 1);

    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addWidget(transcript_, 1);
    layout->addWidget(input_);
    layout->addLayout(buttons);
    layout->addLayout(status);

    panel_ = build_settings_panel();

    stream_timer_.setSingleShot(true);
    stream_timer_.setInterval(60);
    connect(&stream_timer_, &QTimer::timeout, this, &ChatView::update_streaming);
    connect(conversation_, &Conversation::messagesChanged, this, &ChatView::rebuild_transcript);
    connect(conversation_, &Conversation::tokensChanged, this, &ChatView::rebuild_transcript);
    connect(conversation_, &Conversation::selectionChanged, this, &ChatView::on_selection);
    connect(conversation_, &Conversation::tokenAppended, this, [this] {
        if (!stream_timer_.isActive()) stream_timer_.start();
    });
    connect(chat_, &ChatController::generatingChanged, this, &ChatView::update_buttons);
    connect(chat_, &ChatController::finished, this, &ChatView::show_stats);
    connect(chat_, &ChatController::failed, this, &ChatView::show_error);
    connect(chat_, &ChatController::progressed, this, &ChatView::show_progress);
    connect(chat_, &ChatController::sendFailed, this, [this](const QString& message) {
        // The message the model never answered goes back into the box, unless something new was typed there.
        if (input_->toPlainText().trimmed().isEmpty()) input_->setPlainText(message);
    });
    connect(max_tokens_, &QSpinBox::valueChanged, this, [this] { update_context(context_->value(), context_->maximum()); });
    update_buttons();
}

QList<QAction*> ChatView::chat_actions() const { return {send_action_, stop_action_, regenerate_action_, new_action_}; }
QLabel* ChatView::speed_label() const { return speed_; }
QLabel* ChatView::context_warning() const { return warning_; }
QLabel* ChatView::error_label() const { return error_; }

QWidget* ChatView::build_settings_panel() {
    auto* panel = new QWidget;
    panel->setObjectName(QStringLiteral("chat_settings"));
    system_prompt_ = new QPlainTextEdit;
    system_prompt_->setPlaceholderText(tr("System prompt (optional)"));
    system_prompt_->setMinimumHeight(40);
    system_prompt_->setMaximumHeight(90);
    connect(system_prompt_, &QPlainTextEdit::textChanged, this, [this] { conversation_->set_system_prompt(system_prompt_->toPlainText()); });
    auto* form = new QFormLayout;
    form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
    greedy_ = new QCheckBox(tr("greedy"));
    greedy_->setToolTip(tr("Always take the most likely token"));
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
    preset_ = new QComboBox;
    preset_->setObjectName(QStringLiteral("sampling_preset"));
    preset_->addItem(tr("Model default"), static_cast<int>(SamplingPreset::ModelDefault));
    preset_->addItem(tr("Greedy"), static_cast<int>(SamplingPreset::Greedy));
    preset_->addItem(tr("Balanced"), static_cast<int>(SamplingPreset::Balanced));
    preset_->addItem(tr("Creative"), static_cast<int>(SamplingPreset::Creative));
    preset_->addItem(tr("Custom"), static_cast<int>(SamplingPreset::Custom));
    preset_->setItemData(0, tr("What the model's authors recommend (its generation_config.json)"), Qt::ToolTipRole);
    preset_->setItemData(1, tr("Always the most likely token: the same reply every time"), Qt::ToolTipRole);
    preset_->setItemData(2, tr("Temperature 0.8, top-k 40, top-p 0.95, min-p 0.05"), Qt::ToolTipRole);
    preset_->setItemData(3, tr("Temperature 1.0, top-p 0.98, min-p 0.02: more varied, more mistakes"), Qt::ToolTipRole);
    model_default_ = new ElidedLabel;
    model_default_->setObjectName(QStringLiteral("model_default_sampling"));
    form->addRow(tr("preset"), preset_);
    form->addRow(model_default_);
    form->addRow(greedy_);
    form->addRow(tr("temperature"), temperature_);
    form->addRow(tr("top-k"), top_k_);
    form->addRow(tr("top-p"), top_p_);
    form->addRow(tr("min-p"), min_p_);
    form->addRow(tr("repetition"), repetition_);
    form->addRow(tr("seed"), seed_);
    form->addRow(tr("max tokens"), max_tokens_);
    speculate_ = new QComboBox;
    speculate_->setObjectName(QStringLiteral("speculate"));
    speculate_->addItem(tr("off"), int(SpeculateMode::Off));
    speculate_->addItem(tr("prompt lookup"), int(SpeculateMode::Lookup));
    speculate_->addItem(tr("MTP head"), int(SpeculateMode::Mtp));
    speculate_->setToolTip(tr("Speculative decoding: guesses of the next tokens (from earlier text, or the model's "
                              "multi-token-prediction head) checked in one evaluation. The reply and its routing are "
                              "the same as without; the reply's figures say how many guesses were right. Off while "
                              "the profiler counts."));
    form->addRow(tr("speculative"), speculate_);
    repetition_->setToolTip(tr("Repetition penalty"));
    max_tokens_->setToolTip(tr("The longest reply, in tokens"));
    connect(greedy_, &QCheckBox::toggled, this, [this](bool on) {
        for (QWidget* w : std::initializer_list<QWidget*>{temperature_, top_k_, top_p_, min_p_}) w->setEnabled(!on);
    });
    connect(preset_, &QComboBox::activated, this, [this] { set_preset(preset()); });
    auto by_hand = [this] {
        if (!applying_preset_) preset_->setCurrentIndex(preset_->findData(static_cast<int>(SamplingPreset::Custom)));
    };
    connect(greedy_, &QCheckBox::toggled, this, by_hand);
    for (QDoubleSpinBox* b : {temperature_, top_p_, min_p_, repetition_}) connect(b, &QDoubleSpinBox::valueChanged, this, by_hand);
    connect(top_k_, &QSpinBox::valueChanged, this, by_hand);
    auto* layout = new QVBoxLayout(panel);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addWidget(system_prompt_);
    layout->addLayout(form);
    layout->addStretch();
    set_settings(ChatSettings{});
    set_preset(SamplingPreset::ModelDefault);
    return panel;
}

QLabel* ChatView::model_default_label() const { return model_default_; }

SamplingPreset ChatView::preset() const { return static_cast<SamplingPreset>(preset_->currentData().toInt()); }

void ChatView::set_preset(SamplingPreset preset) {
    preset_->setCurrentIndex(preset_->findData(static_cast<int>(preset)));
    // The model's own defaults, shown whatever the preset, so the user knows what "Model default" means.
    const ModelSummary& m = chat_->model();
    model_default_->setText(!chat_->has_model()                   ? tr("Model default: open a model to see it")
                            : m.default_sampling_text.isEmpty()   ? tr("Model default: none given (Colibri's: temperature 0.8)")
                                                                  : tr("Model default: %1").arg(m.default_sampling_text));
    model_default_->setToolTip(tr("From the model's generation_config.json, carried into the .bin by colibri convert"));
    if (preset == SamplingPreset::Custom) return;
    ChatSettings s = settings();
    s.sampling = preset_sampling(preset, chat_->has_model() ? m.default_sampling : SamplerConfig{});
    s.sampling.seed = settings().sampling.seed;
    applying_preset_ = true;
    set_settings(s);
    applying_preset_ = false;
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
    s.speculate = static_cast<SpeculateMode>(speculate_->currentData().toInt());
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
    speculate_->setCurrentIndex(std::max(speculate_->findData(int(s.speculate)), 0));
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
    q.setValue("speculate", speculate_mode_name(s.speculate));
    q.setValue("preset", static_cast<int>(preset()));
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
    if (auto mode = parse_speculate_mode(q.value("speculate", "off").toString().toStdString())) s.speculate = mode.value();
    const auto preset = static_cast<SamplingPreset>(std::clamp(q.value("preset", 0).toInt(), 0, static_cast<int>(SamplingPreset::Custom)));
    q.endGroup();
    applying_preset_ = true;
    set_settings(s);
    applying_preset_ = false;
    set_preset(preset);  // a preset other than Custom sets its own values
    system_prompt_->setPlainText(q.value("chat/system_prompt").toString());
}

void ChatView::send() {
    if (!send_->isEnabled() && chat_->generating()) return;
    error_->clear();
    const QString text = input_->toPlainText();
    if (Status s = chat_->send(text, settings()); !s) {
        show_error(QString::fromStdString(s.message()));
        return;  // the message stays in the box
    }
    last_sent_ = text;
    input_->clear();
}

void ChatView::start_new_conversation() {
    if (discard_check_ && !discard_check_(tr("Starting a new conversation"))) return;
    chat_->new_conversation();
}

void ChatView::regenerate() {
    error_->clear();
    if (Status s = chat_->regenerate(settings()); !s) show_error(QString::fromStdString(s.message()));
}

void ChatView::model_changed() {
    const bool ids = chat_->uses_token_ids();
    input_->setPlaceholderText(ids ? tr("This model has no tokenizer: type token ids, e.g. 1, 415, 2936") : tr("Message"));
    // The empty transcript says what to do next: open a model, or write to the one that is open.
    transcript_->setPlaceholderText(!chat_->has_model() ? tr("Open a model (File ▸ Open, or drop a .bin here), then write a message.")
                                    : ids              ? tr("Type token ids below; Ctrl+Return sends them.")
                                                       : tr("Write a message below; Ctrl+Return sends it."));
    clear_figures();
    set_context_size(chat_->model().context);
    // Drafting with the MTP head needs a model that has one.
    auto* items = qobject_cast<QStandardItemModel*>(speculate_->model());
    const bool head = chat_->has_model() && chat_->model().mtp_layers > 0;
    items->item(speculate_->findData(int(SpeculateMode::Mtp)))->setEnabled(head);
    if (!head && speculate_->currentData().toInt() == int(SpeculateMode::Mtp)) speculate_->setCurrentIndex(0);
    set_preset(preset());  // Model default follows the model
    update_buttons();
}

void ChatView::clear_figures() {
    speed_->clear();
    error_->clear();
    warning_->clear();
    set_context_size(chat_->has_model() ? chat_->model().context : 1);
    context_->setValue(0);
    context_->setStyleSheet(QString());
}

void ChatView::update_buttons() {
    const bool busy = chat_->generating();
    const bool ready = chat_->has_model() && !busy;
    send_->setEnabled(ready);
    send_action_->setEnabled(ready);
    regenerate_->setEnabled(ready && !conversation_->messages().isEmpty());
    regenerate_action_->setEnabled(regenerate_->isEnabled());
    stop_->setEnabled(busy);
    stop_action_->setEnabled(busy);
}

void ChatView::show_progress() {
    const ChatController::Progress& p = chat_->progress();
    if (!chat_->generating() || chat_->discarding()) {  // New conversation: nothing is left of the last reply
        if (conversation_->size() == 0) clear_figures();
        return;
    }
    speed_->setText(p.generated > 1 ? tr("generating: %1 tokens at %2 tokens/s").arg(p.generated).arg(p.tokens_per_second, 0, 'f', 1)
                                    : tr("generating…"));
    update_context(p.context_used, p.context_size > 0 ? p.context_size : chat_->model().context);
}

void ChatView::set_context_size(int size) {
    size = std::max(size, 1);
    if (size == context_->maximum()) return;  // a new bar's 100 is never the constructor's 1: the first call measures
    // The bar is as wide as its text at the fullest ("context 4096 / 4096"): a narrower one wrapped it onto two lines
    // in the chat column at 1280x720. Measured when the context changes, not per token.
    const int text_width = context_->fontMetrics().horizontalAdvance(tr("context %1 / %1").arg(size));
    context_->setMinimumWidth(std::max(80, text_width + 2 * context_->fontMetrics().averageCharWidth() + 16));
    context_->setRange(0, size);
}

void ChatView::update_context(int used, int size) {
    size = std::max(size, 1);
    set_context_size(size);
    context_->setValue(std::min(used, size));
    const int left = size - used;
    const double full = static_cast<double>(used) / size;
    QString warning;
    StatusColor level = StatusColor::Normal;
    if (used > 0 && left < max_tokens_->value()) {
        warning = tr("%1 tokens of context left: a reply of up to %2 may not fit; start a new conversation").arg(left).arg(max_tokens_->value());
        level = StatusColor::Error;
    } else if (full >= 0.75) {
        warning = tr("context %1 % full").arg(static_cast<int>(full * 100));
        level = StatusColor::Warning;
    }
    warning_->setText(warning);
    warning_->setStyleSheet(QStringLiteral("color: %1").arg(status_color(level == StatusColor::Normal ? StatusColor::Warning : level).name()));
    context_->setStyleSheet(level == StatusColor::Normal ? QString()
                                                         : QStringLiteral("QProgressBar::chunk { background: %1; }").arg(status_color(level).name()));
}

void ChatView::show_stats(const GenerationStats& s) {
    QString text = tr("%1 tokens at %2 tokens/s").arg(s.generated).arg(s.decode_tokens_per_second(), 0, 'f', 1);
    if (s.prompt_tokens > 0)
        text += tr(" · prompt %1 tokens at %2 tokens/s").arg(s.prompt_tokens).arg(s.prompt_tokens_per_second(), 0, 'f', 1);
    if (s.reused_tokens > 0) text += tr(" · %1 reused from the cache").arg(s.reused_tokens);
    if (!s.kernel.isEmpty()) text += QStringLiteral(" · ") + s.kernel;
    if (s.speculate != SpeculateMode::Off)
        text += tr(" · %1: %2 of %3 drafts accepted").arg(QString::fromLatin1(speculate_mode_name(s.speculate))).arg(s.accepted).arg(s.drafted);
    if (s.stopped) text += tr(" · stopped");
    speed_->setText(text);
    update_context(chat_->progress().context_used, s.context_size);
    update_buttons();
}

void ChatView::show_error(const QString& error) {
    error_->setText(error);
    error_->setToolTip(error);
    update_buttons();
}

MarkdownStyle ChatView::markdown_style() const {
    MarkdownStyle s;
    s.code_font = QFontDatabase::systemFont(QFontDatabase::FixedFont);
    const QPalette& p = palette();
    s.code_background = blend(p.color(QPalette::Base), p.color(QPalette::Text), 0.08);
    s.quote_foreground = blend(p.color(QPalette::Text), p.color(QPalette::Base), 0.35);
    s.link_foreground = p.color(QPalette::Link);
    s.muted_foreground = blend(p.color(QPalette::Text), p.color(QPalette::Base), 0.45);
    return s;
}

void ChatView::rebuild_transcript() {
    stream_timer_.stop();
    QScrollBar* bar = transcript_->verticalScrollBar();
    const bool at_bottom = bar->value() >= bar->maximum() - 4;
    const int value = bar->value();
    transcript_->clear();
    QTextCursor c(transcript_->document());
    body_start_ = -1;
    rendered_selection_ = conversation_->selected();
    for (int i = 0; i < conversation_->messages().size(); ++i) render_message(c, i);
    // Lay the whole document out now, so that the scroll position can be put back where it was.
    transcript_->document()->size();
    bar->setValue(at_bottom ? bar->maximum() : value);
    update_buttons();
}

void ChatView::render_message(QTextCursor& c, int index) {
    const ConversationMessage& m = conversation_->messages()[index];
    QTextBlockFormat header;
    header.setTopMargin(index == 0 ? 0 : 10);
    if (index == 0) c.setBlockFormat(header);
    else c.insertBlock(header, QTextCharFormat());
    QTextCharFormat bold;
    bold.setFontWeight(QFont::Bold);
    c.insertText(role_title(m.role), bold);
    const MarkdownStyle style = markdown_style();
    QTextCharFormat muted;
    muted.setForeground(style.muted_foreground);
    const bool streaming = index == conversation_->messages().size() - 1 && chat_->generating() && m.role == QLatin1String("assistant");
    const QString timing = streaming ? tr("generating…") : timing_text(m.timing);
    if (!timing.isEmpty()) c.insertText(QStringLiteral("   ") + timing, muted);
    if (m.unverified) {
        QTextCharFormat warn;
        warn.setFontWeight(QFont::Bold);
        warn.setForeground(status_color(StatusColor::Warning));
        warn.setToolTip(tr("Written by a model that failed verification: its weights may be damaged, so this reply cannot be trusted"));
        c.insertText(QStringLiteral("   ") + tr("⚠ unverified"), warn);
    }
    QTextCharFormat link = muted;
    link.setAnchor(true);
    link.setAnchorHref(QStringLiteral("copy:%1").arg(index));
    link.setFontUnderline(true);
    link.setForeground(style.link_foreground);
    link.setToolTip(tr("Copy this message as Markdown"));
    c.insertText(QStringLiteral("   "), muted);
    c.insertText(tr("Copy"), link);

    c.insertBlock(QTextBlockFormat(), QTextCharFormat());
    body_start_ = c.position();
    render_body(c, index);
}

void ChatView::render_body(QTextCursor& c, int index) {
    const ConversationMessage& m = conversation_->messages()[index];
    TaggedText text;
    const bool tokens_shown = m.role == QLatin1String("assistant") && m.first_token >= 0 && m.first_token + m.token_count <= conversation_->size();
    if (tokens_shown) {
        for (int p = m.first_token; p < m.first_token + m.token_count; ++p) {
            const ConversationToken* t = conversation_->token(p);
            if (t->end_of_turn || t->trace.text.isEmpty()) continue;
            text.append(t->trace.text, p);
        }
    } else {
        text.append(m.content, -1);
    }
    MarkdownHooks hooks;
    const int selected = conversation_->selected();
    const QPalette pal = palette();
    hooks.tag_format = [selected, pal](int position, QTextCharFormat& f) {
        f.setAnchor(true);
        f.setAnchorHref(QStringLiteral("tok:%1").arg(position));
        f.setProperty(kNaturalBackground, f.background());
        if (position == selected) {
            f.setBackground(pal.color(QPalette::Highlight));
            f.setForeground(pal.color(QPalette::HighlightedText));
        }
    };
    hooks.copy_href = [index](int block) { return QStringLiteral("copycode:%1:%2").arg(index).arg(block); };
    render_markdown(c, text, markdown_style(), hooks);
}

void ChatView::update_streaming() {
    const auto& messages = conversation_->messages();
    if (messages.isEmpty() || body_start_ < 0 || messages.back().role != QLatin1String("assistant") || messages.back().first_token < 0) return;
    QScrollBar* bar = transcript_->verticalScrollBar();
    const bool at_bottom = bar->value() >= bar->maximum() - 4;
    const int value = bar->value();
    // Only the last message's body changes while it streams: it is drawn again, the rest stays.
    QTextCursor c(transcript_->document());
    // One edit block: the document lays the body out once per redraw, not once per inserted fragment (per
    // token), which made a long reply's redraw quadratic and stalled the UI thread for seconds.
    c.beginEditBlock();
    c.setPosition(body_start_);
    c.movePosition(QTextCursor::End, QTextCursor::KeepAnchor);
    c.removeSelectedText();
    c.setBlockFormat(QTextBlockFormat());
    c.setCharFormat(QTextCharFormat());
    render_body(c, static_cast<int>(messages.size()) - 1);
    c.endEditBlock();
    transcript_->document()->size();
    bar->setValue(at_bottom ? bar->maximum() : value);
}

void ChatView::flush() {
    if (stream_timer_.isActive()) update_streaming();
}

void ChatView::restyle_token(int position, bool selected) {
    if (position < 0) return;
    const QString href = kTokenScheme + QLatin1Char(':') + QString::number(position);
    for (QTextBlock b = transcript_->document()->begin(); b.isValid(); b = b.next())
        for (auto it = b.begin(); !it.atEnd(); ++it) {
            const QTextFragment f = it.fragment();
            if (f.charFormat().anchorHref() != href) continue;
            QTextCharFormat format = f.charFormat();
            if (selected) {
                format.setBackground(palette().color(QPalette::Highlight));
                format.setForeground(palette().color(QPalette::HighlightedText));
            } else {
                const QBrush natural = format.property(kNaturalBackground).value<QBrush>();
                if (natural.style() == Qt::NoBrush) format.clearBackground();
                else format.setBackground(natural);
                format.clearForeground();
            }
            QTextCursor c(transcript_->document());
            c.setPosition(f.position());
            c.setPosition(f.position() + f.length(), QTextCursor::KeepAnchor);
            c.setCharFormat(format);
        }
}

void ChatView::on_selection(int position) {
    // Only the two tokens change: the transcript keeps its place.
    restyle_token(rendered_selection_, false);
    restyle_token(position, true);
    rendered_selection_ = position;
}

void ChatView::open_link(const QUrl& url) {
    const QString scheme = url.scheme();
    const QStringList parts = url.path().split(QLatin1Char(':'));
    bool ok = false;
    const int n = parts.value(0).toInt(&ok);
    if (!ok) return;
    if (scheme == kTokenScheme) {
        conversation_->select(n);
    } else if (scheme == QLatin1String("copy") && n >= 0 && n < conversation_->messages().size()) {
        QApplication::clipboard()->setText(conversation_->messages()[n].content);
        emit copied(tr("message"));
    } else if (scheme == QLatin1String("copycode") && n >= 0 && n < conversation_->messages().size()) {
        const int block = parts.value(1).toInt();
        const auto blocks = markdown_code_blocks(conversation_->messages()[n].content);
        if (block >= 0 && static_cast<size_t>(block) < blocks.size()) {
            QApplication::clipboard()->setText(blocks[static_cast<size_t>(block)].code);
            emit copied(tr("code block"));
        }
    }
}

int ChatView::anchor_position(int token_position) const {
    const QString href = kTokenScheme + QLatin1Char(':') + QString::number(token_position);
    for (QTextBlock b = transcript_->document()->begin(); b.isValid(); b = b.next())
        for (auto it = b.begin(); !it.atEnd(); ++it)
            if (it.fragment().charFormat().anchorHref() == href) return it.fragment().position();
    return -1;
}

QString ChatView::token_tooltip(int position) const {
    const ConversationToken* t = conversation_->token(position);
    if (t == nullptr) return {};
    QString html = tr("<b>%1</b> token %2 at position %3").arg(shown_token(t->trace.text)).arg(t->trace.token).arg(position);
    if (t->trace.probability >= 0) html += tr("<br>model probability %1").arg(percent(t->trace.probability));
    if (!t->trace.alternatives.empty()) {
        html += tr("<br>the model's top %1 here:<table>").arg(t->trace.alternatives.size());
        for (const TokenAlternative& a : t->trace.alternatives) {
            const bool chosen = a.token == t->trace.token;
            html += QStringLiteral("<tr><td>%1%2%3</td><td align=right>&nbsp;&nbsp;%4</td></tr>")
                        .arg(chosen ? QStringLiteral("<b>▸ ") : QStringLiteral("&nbsp;&nbsp;"), shown_token(a.text),
                             chosen ? QStringLiteral("</b>") : QString(), percent(a.probability));
        }
        html += QStringLiteral("</table>");
    }
    if (t->evaluated) {
        const TokenTime tt = t->trace.time();
        html += tr("<br>%1 ms: attention %2, router %3, experts %4, lm head %5, sampling %6, other %7")
                    .arg(ms(tt.total), ms(tt.attention), ms(tt.router), ms(tt.experts), ms(tt.lm_head), ms(tt.sampling), ms(tt.other()));
    }
    html += tr("<br><i>click for its routing</i>");
    return html;
}

bool ChatView::eventFilter(QObject* watched, QEvent* event) {
    if (watched == transcript_->viewport() && event->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(event);
        const QString href = transcript_->anchorAt(help->pos());
        const QUrl url(href);
        QString tip;
        if (url.scheme() == kTokenScheme) tip = token_tooltip(url.path().toInt());
        else if (url.scheme() == QLatin1String("copy")) tip = tr("Copy this message as Markdown");
        else if (url.scheme() == QLatin1String("copycode")) tip = tr("Copy this code block");
        else {
            // Links inside a message (Markdown [text](url)) carry their target as the tooltip.
            const QTextCursor c = transcript_->cursorForPosition(help->pos());
            tip = c.charFormat().toolTip();
        }
        if (tip.isEmpty()) QToolTip::hideText();
        else QToolTip::showText(help->globalPos(), tip, transcript_->viewport());
        return true;
    }
    return QWidget::eventFilter(watched, event);
}

}  // namespace colibri::studio
