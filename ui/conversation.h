// The conversation as the UI thread knows it: the chat messages, and one entry per position the session
// holds (prompt and generated tokens) with its trace. It mirrors the EngineWorker's signals; every view
// reads from here, and the selected token lives here so all views follow one selection.
#pragma once
#include <QJsonObject>
#include <QObject>
#include <QVector>
#include <vector>

#include "engine/base/status.h"
#include "ui/engine_worker.h"
#include "ui/data/token_trace.h"

namespace colibri::studio {

struct ConversationToken {
    TokenTrace trace;          // position, id, text, generated; routing etc. once evaluated
    bool evaluated = false;
    bool end_of_turn = false;  // the model's stop token ending a reply
};

// How long a reply took (the GenerationStats of the request that produced it).
struct ReplyTiming {
    int prompt_tokens = 0;      // evaluated for this reply (beyond the reused prefix)
    int generated = 0;
    int decode_evaluated = 0;   // GenerationStats::decode_evaluated (a transcript without it: generated)
    double prompt_seconds = 0.0;
    double decode_seconds = 0.0;
    bool stopped = false;
    QString kernel;
    bool valid() const { return generated > 0 || prompt_tokens > 0; }
    double tokens_per_second() const { return TokenRate{static_cast<uint64_t>(std::max(decode_evaluated, 0)), decode_seconds}.per_second(); }
};

struct ConversationMessage {
    QString role;
    QString content;
    int first_token = -1;  // assistant replies: position of the first generated token
    int token_count = 0;
    ReplyTiming timing;    // assistant replies, once finished
    bool unverified = false;  // written by a model that failed verification (the user chose "Chat anyway")
};

// "24 tokens · 160.2 tokens/s · prompt 63 tokens in 0.31 s · 0.46 s · AVX-512": a reply's timing for people.
QString timing_text(const ReplyTiming& timing);
// The mark on a reply written by a model that failed verification.
QString unverified_text();

class Conversation : public QObject {
    Q_OBJECT
public:
    using QObject::QObject;

    const QString& system_prompt() const { return system_prompt_; }
    void set_system_prompt(const QString& text) { system_prompt_ = text; }
    const QVector<ConversationMessage>& messages() const { return messages_; }
    const std::vector<ConversationToken>& tokens() const { return tokens_; }
    int size() const { return static_cast<int>(tokens_.size()); }
    const ConversationToken* token(int position) const;
    // Positions in [0, size()) that have a trace.
    int evaluated_count() const;

    // The messages the next request renders: the system prompt, then every message.
    QVector<ChatTurn> request_messages() const;
    void add_user_message(const QString& text);
    void begin_reply(int first_position, bool unverified = false);
    void finish_reply(const QString& text, const ReplyTiming& timing = {});
    // Regenerate drops the last reply; a failed request takes back its message.
    void remove_last_message();
    void clear();

    // Mirroring the worker. A pass starts at the reused prefix; positions it sends replace what was there
    // when the token differs (a token that matches keeps its generated flag, so a replayed conversation keeps
    // its replies); finish_pass() drops what lies beyond the session. An earlier reply whose tokens a pass
    // replaced (the next turn's prompt encodes a reply's text again, and the encoding need not be the tokens
    // that were generated) shows its text until finish_pass() finds that text among the new tokens again.
    void begin_pass(int reused);
    void add_generated(int position, int token, const QString& text, bool end_of_turn);
    void add_trace(const TokenTrace& trace);
    void finish_pass(int session_tokens);

    int selected() const { return selected_; }
    void select(int position);

    // Save and load (JSON): system prompt, messages with their token ranges, every token id and flag.
    // Traces are not saved: a loaded conversation is replayed through the model to rebuild them.
    QJsonObject to_json() const;
    Status from_json(const QJsonObject& o);
    std::vector<int32_t> token_ids() const;
    // The conversation as a Markdown document: the system prompt, then every message under its role, with
    // each reply's timing.
    QString to_markdown() const;

signals:
    void messagesChanged();
    void tokenAppended(int position);
    void traceUpdated(int position);
    void tokensChanged(int from);   // positions >= from were removed or replaced
    void selectionChanged(int position);

private:
    // Returns the entry for position, dropping everything from there on when the token differs.
    ConversationToken& place(int position, int token, bool* appended);
    // Replies whose token range reaches position or beyond lose it (their text stays); relocate_replies() looks
    // for them again.
    void detach_replies(int position);
    void relocate_replies();

    struct Detached {
        int message;      // index in messages_
        int first_token;  // where it started before: where it most likely starts again
    };
    std::vector<Detached> detached_;

    QString system_prompt_;
    QVector<ConversationMessage> messages_;
    std::vector<ConversationToken> tokens_;
    int selected_ = -1;
};

}  // namespace colibri::studio
