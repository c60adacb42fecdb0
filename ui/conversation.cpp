#include "ui/conversation.h"

#include <QJsonArray>

namespace colibri::studio {

namespace {
const QString kFormat = QStringLiteral("colibri-studio-conversation");
}

const ConversationToken* Conversation::token(int position) const {
    return position >= 0 && position < size() ? &tokens_[static_cast<size_t>(position)] : nullptr;
}

int Conversation::evaluated_count() const {
    int n = 0;
    for (const ConversationToken& t : tokens_) n += t.evaluated ? 1 : 0;
    return n;
}

QVector<ChatTurn> Conversation::request_messages() const {
    QVector<ChatTurn> out;
    if (!system_prompt_.trimmed().isEmpty()) out.push_back({QStringLiteral("system"), system_prompt_});
    for (const ConversationMessage& m : messages_) out.push_back({m.role, m.content});
    return out;
}

void Conversation::add_user_message(const QString& text) {
    ConversationMessage m;
    m.role = QStringLiteral("user");
    m.content = text;
    messages_.push_back(std::move(m));
    emit messagesChanged();
}

void Conversation::begin_reply(int first_position, bool unverified) {
    messages_.push_back({QStringLiteral("assistant"), QString(), first_position, 0, {}, unverified});
    emit messagesChanged();
}

void Conversation::finish_reply(const QString& text, const ReplyTiming& timing) {
    if (messages_.isEmpty() || messages_.back().role != QLatin1String("assistant")) return;
    messages_.back().content = text;
    messages_.back().timing = timing;
    emit messagesChanged();
}

void Conversation::remove_last_message() {
    if (messages_.isEmpty()) return;
    messages_.pop_back();
    std::erase_if(detached_, [this](const Detached& d) { return d.message >= messages_.size(); });
    emit messagesChanged();
}

void Conversation::clear() {
    messages_.clear();
    tokens_.clear();
    detached_.clear();
    selected_ = -1;
    emit tokensChanged(0);
    emit messagesChanged();
    emit selectionChanged(-1);
}

void Conversation::begin_pass(int reused) {
    for (size_t p = static_cast<size_t>(std::max(reused, 0)); p < tokens_.size(); ++p) tokens_[p].evaluated = false;
}

ConversationToken& Conversation::place(int position, int token, bool* appended) {
    const size_t p = static_cast<size_t>(std::clamp(position, 0, size()));
    *appended = false;
    if (p < tokens_.size() && tokens_[p].trace.token == token) return tokens_[p];
    if (p < tokens_.size()) {
        detach_replies(static_cast<int>(p));
        tokens_.resize(p);
        if (selected_ >= static_cast<int>(p)) {
            selected_ = -1;
            emit selectionChanged(-1);
        }
        emit tokensChanged(static_cast<int>(p));
    }
    *appended = true;
    tokens_.emplace_back();
    tokens_.back().trace.position = static_cast<int>(p);
    tokens_.back().trace.token = token;
    return tokens_.back();
}

void Conversation::add_generated(int position, int token, const QString& text, bool end_of_turn) {
    bool appended = false;
    ConversationToken& t = place(position, token, &appended);
    t.trace.text = text;
    t.trace.generated = true;
    t.end_of_turn = end_of_turn;
    if (!messages_.isEmpty() && messages_.back().role == QLatin1String("assistant") && messages_.back().first_token >= 0)
        messages_.back().token_count = t.trace.position - messages_.back().first_token + 1;
    if (appended) emit tokenAppended(t.trace.position);
    else emit traceUpdated(t.trace.position);
}

void Conversation::add_trace(const TokenTrace& trace) {
    bool appended = false;
    ConversationToken& t = place(trace.position, trace.token, &appended);
    // A token already there (streamed, or restored from a saved conversation) keeps its flags and text; a
    // streamed token keeps its text even when empty (part of a character that a later token completes), but an
    // end-of-turn token, never shown in a reply, takes its piece for the routing views.
    const bool generated = t.trace.generated || trace.generated;
    const bool keep_text = !t.trace.text.isEmpty() || (t.trace.generated && !t.end_of_turn);
    const QString text = !appended && keep_text ? t.trace.text : trace.text;
    const int position = t.trace.position;
    t.trace = trace;
    t.trace.position = position;
    t.trace.generated = generated;
    t.trace.text = text;
    t.evaluated = true;
    if (appended) emit tokenAppended(position);
    emit traceUpdated(position);
}

void Conversation::finish_pass(int session_tokens) {
    if (session_tokens >= 0 && session_tokens < size()) {
        detach_replies(session_tokens);
        tokens_.resize(static_cast<size_t>(session_tokens));
        if (selected_ >= session_tokens) {
            selected_ = -1;
            emit selectionChanged(-1);
        }
        emit tokensChanged(session_tokens);
    }
    relocate_replies();
}

void Conversation::detach_replies(int position) {
    bool changed = false;
    for (int i = 0; i < messages_.size(); ++i) {
        ConversationMessage& m = messages_[i];
        if (m.role != QLatin1String("assistant") || m.first_token < 0 || m.first_token + m.token_count <= position) continue;
        detached_.push_back({i, m.first_token});
        m.first_token = -1;
        m.token_count = 0;
        changed = true;
    }
    if (changed) emit messagesChanged();
}

void Conversation::relocate_replies() {
    if (detached_.empty()) return;
    std::sort(detached_.begin(), detached_.end(), [](const Detached& a, const Detached& b) { return a.message < b.message; });
    // Where `text` is exactly the text of the tokens from `at` on (those without text, parts of a character that
    // a later token completes, skipped; an end-of-turn token right after it included): the end, or -1.
    auto match_at = [this](int at, const QString& text) {
        qsizetype done = 0;
        int p = at;
        for (; p < size() && done < text.size(); ++p) {
            const ConversationToken& t = tokens_[static_cast<size_t>(p)];
            if (t.end_of_turn) return -1;
            if (t.trace.text.isEmpty()) continue;
            if (!QStringView(text).sliced(done).startsWith(t.trace.text)) return -1;
            done += t.trace.text.size();
        }
        if (done < text.size() || p == at) return -1;
        if (p < size() && tokens_[static_cast<size_t>(p)].end_of_turn) ++p;
        return p;
    };
    int from = 0;  // a reply starts after the one before it
    for (const Detached& d : detached_) {
        ConversationMessage& m = messages_[d.message];
        for (int i = d.message - 1; i >= 0; --i)
            if (messages_[i].first_token >= 0) {
                from = std::max(from, messages_[i].first_token + messages_[i].token_count);
                break;
            }
        if (m.first_token >= 0 || m.content.isEmpty()) continue;
        // Most often the reply starts where it did (only its own tokens were encoded differently).
        int end = d.first_token >= from ? match_at(d.first_token, m.content) : -1;
        int start = d.first_token;
        for (int a = from; end < 0 && a < size(); ++a)
            if ((end = match_at(a, m.content)) >= 0) start = a;
        if (end < 0) continue;  // not found: the reply shows its text without tokens
        m.first_token = start;
        m.token_count = end - start;
        from = end;
    }
    detached_.clear();
    emit messagesChanged();
}

void Conversation::select(int position) {
    if (position < -1 || position >= size() || position == selected_) return;
    selected_ = position;
    emit selectionChanged(position);
}

std::vector<int32_t> Conversation::token_ids() const {
    std::vector<int32_t> ids;
    ids.reserve(tokens_.size());
    for (const ConversationToken& t : tokens_) ids.push_back(t.trace.token);
    return ids;
}

QJsonObject Conversation::to_json() const {
    QJsonArray messages, tokens;
    for (const ConversationMessage& m : messages_) {
        QJsonObject o{{"role", m.role}, {"content", m.content}};
        if (m.first_token >= 0) {
            o["first_token"] = m.first_token;
            o["token_count"] = m.token_count;
        }
        if (m.timing.valid())
            o["timing"] = QJsonObject{{"prompt_tokens", m.timing.prompt_tokens}, {"generated", m.timing.generated},
                                      {"decode_evaluated", m.timing.decode_evaluated},
                                      {"prompt_seconds", m.timing.prompt_seconds}, {"decode_seconds", m.timing.decode_seconds},
                                      {"stopped", m.timing.stopped}, {"kernel", m.timing.kernel}};
        if (m.unverified) o["unverified"] = true;
        messages.append(o);
    }
    for (const ConversationToken& t : tokens_) {
        QJsonObject o{{"id", t.trace.token}, {"text", t.trace.text}};
        if (t.trace.generated) o["generated"] = true;
        if (t.end_of_turn) o["end_of_turn"] = true;
        tokens.append(o);
    }
    return QJsonObject{{"format", kFormat}, {"version", 1}, {"system", system_prompt_}, {"messages", messages}, {"tokens", tokens}};
}

Status Conversation::from_json(const QJsonObject& o) {
    if (o.value("format").toString() != kFormat) return error("not a Colibri Studio conversation (no \"format\": \"" + kFormat.toStdString() + "\")");
    if (o.value("version").toInt() != 1) return error("unsupported conversation version " + std::to_string(o.value("version").toInt()));
    if (!o.value("messages").isArray() || !o.value("tokens").isArray()) return error("conversation lacks \"messages\" or \"tokens\"");
    QVector<ConversationMessage> messages;
    for (const auto& v : o.value("messages").toArray()) {
        const QJsonObject m = v.toObject();
        const QString role = m.value("role").toString();
        if (role != QLatin1String("user") && role != QLatin1String("assistant") && role != QLatin1String("system"))
            return error("message with unknown role '" + role.toStdString() + "'");
        ReplyTiming timing;
        const QJsonObject t = m.value("timing").toObject();
        timing.prompt_tokens = std::max(0, t.value("prompt_tokens").toInt());
        timing.generated = std::max(0, t.value("generated").toInt());
        timing.prompt_seconds = std::max(0.0, t.value("prompt_seconds").toDouble());
        timing.decode_seconds = std::max(0.0, t.value("decode_seconds").toDouble());
        // Written before the count was kept: every generated token was evaluated within decode_seconds.
        timing.decode_evaluated = std::max(0, t.value("decode_evaluated").toInt(timing.generated));
        timing.stopped = t.value("stopped").toBool();
        timing.kernel = t.value("kernel").toString();
        messages.push_back({role, m.value("content").toString(), m.value("first_token").toInt(-1), m.value("token_count").toInt(0), timing,
                            m.value("unverified").toBool()});
    }
    std::vector<ConversationToken> tokens;
    for (const auto& v : o.value("tokens").toArray()) {
        const QJsonObject t = v.toObject();
        const int id = t.value("id").toInt(-1);
        if (id < 0) return error("token " + std::to_string(tokens.size()) + " has no valid id");
        ConversationToken ct;
        ct.trace.position = static_cast<int>(tokens.size());
        ct.trace.token = id;
        ct.trace.text = t.value("text").toString();
        ct.trace.generated = t.value("generated").toBool();
        ct.end_of_turn = t.value("end_of_turn").toBool();
        tokens.push_back(std::move(ct));
    }
    for (const ConversationMessage& m : messages)
        if (m.token_count < 0 || (m.first_token >= 0 && int64_t(m.first_token) + m.token_count > static_cast<int64_t>(tokens.size())))
            return error("a reply's token range lies beyond the conversation's tokens");
    system_prompt_ = o.value("system").toString();
    messages_ = std::move(messages);
    tokens_ = std::move(tokens);
    detached_.clear();
    selected_ = -1;
    emit tokensChanged(0);
    emit messagesChanged();
    emit selectionChanged(-1);
    return Status::ok();
}

QString unverified_text() { return QObject::tr("⚠ unverified: the model failed verification"); }

QString timing_text(const ReplyTiming& t) {
    if (!t.valid()) return {};
    QStringList parts;
    parts << QObject::tr("%n token(s)", nullptr, t.generated);
    if (t.decode_seconds > 0) parts << QObject::tr("%1 tokens/s").arg(t.tokens_per_second(), 0, 'f', 1);
    if (t.prompt_tokens > 0) parts << QObject::tr("prompt %1 tokens in %2 s").arg(t.prompt_tokens).arg(t.prompt_seconds, 0, 'f', 2);
    parts << QObject::tr("%1 s").arg(t.prompt_seconds + t.decode_seconds, 0, 'f', 2);
    if (!t.kernel.isEmpty()) parts << t.kernel;
    if (t.stopped) parts << QObject::tr("stopped");
    return parts.join(QStringLiteral(" · "));
}

QString Conversation::to_markdown() const {
    QString out = QStringLiteral("# Conversation\n\n");
    auto role_name = [](const QString& role) {
        if (role == QLatin1String("user")) return QObject::tr("You");
        if (role == QLatin1String("assistant")) return QObject::tr("Model");
        return QObject::tr("System");
    };
    if (!system_prompt_.trimmed().isEmpty()) out += QStringLiteral("## %1\n\n%2\n\n").arg(role_name(QStringLiteral("system")), system_prompt_.trimmed());
    for (const ConversationMessage& m : messages_) {
        out += QStringLiteral("## %1\n\n").arg(role_name(m.role));
        if (m.timing.valid()) out += QStringLiteral("*%1*\n\n").arg(timing_text(m.timing));
        if (m.unverified) out += QStringLiteral("**%1**\n\n").arg(unverified_text());
        out += m.content.trimmed() + QStringLiteral("\n\n");
    }
    return out;
}

}  // namespace colibri::studio
