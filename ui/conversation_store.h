// Where the Studio keeps conversations: one JSON file per conversation (Conversation::to_json plus a title, the
// model and the times) in a folder under the user's data location, each written as a whole or not at all
// (save_file: temp file + rename). Files there are read as hostile input: a damaged one is listed with a one-line
// reason and never opened.
#pragma once
#include <QDateTime>
#include <QJsonObject>
#include <QString>
#include <QVector>

#include "engine/base/status.h"

namespace colibri::studio {

struct StoredConversation {
    QString id;         // the file's base name
    QString title;
    QString model;      // path of the model it was held with ("" when none)
    QDateTime updated;
    int messages = 0;
    QString error;      // a damaged file: why it cannot be opened (one line); the other fields may be empty
    bool damaged() const { return !error.isEmpty(); }
};

class ConversationStore {
public:
    // `directory` empty: QStandardPaths::AppDataLocation/conversations.
    explicit ConversationStore(const QString& directory = {});
    const QString& directory() const { return dir_; }

    // Newest first; damaged files too, with their error.
    QVector<StoredConversation> list() const;
    // The whole document, checked: a file too large, not JSON, not a conversation, or one whose messages or
    // tokens do not hold together is an error ("<id>.json: <why>").
    Result<QJsonObject> read(const QString& id) const;
    // Writes the conversation document (adds "title", "model", "updated"); creates the folder when needed.
    Status write(const QString& id, QJsonObject document, const QString& title, const QString& model);
    Status rename(const QString& id, const QString& title);
    Status remove(const QString& id);
    QString path(const QString& id) const;
    // A fresh id: the time, then a random suffix ("20261207-023015-4f1c").
    static QString new_id();
    // A title from a first message: its first line, at most 60 characters.
    static QString title_from(const QString& first_message);

private:
    QString dir_;
};

inline constexpr qint64 kMaxConversationBytes = qint64(64) << 20;  // far beyond any chat: a bound on what is read

}  // namespace colibri::studio
