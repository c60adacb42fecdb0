#include "ui/conversation_store.h"

#include <QDir>
#include <algorithm>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QRandomGenerator>
#include <QRegularExpression>
#include <QStandardPaths>

#include "ui/conversation.h"
#include "ui/file_output.h"

namespace colibri::studio {

namespace {

const QString kSuffix = QStringLiteral(".json");

// An id names a file in the folder and nothing else: no separators, no dots.
bool valid_id(const QString& id) {
    static const QRegularExpression re(QStringLiteral("^[A-Za-z0-9_-]{1,100}$"));
    return re.match(id).hasMatch();
}

// The document checked as a conversation, the same way opening it does.
Status check_document(const QJsonObject& o) {
    Conversation scratch;
    return scratch.from_json(o);
}

}  // namespace

ConversationStore::ConversationStore(const QString& directory)
    : dir_(directory.isEmpty() ? QStandardPaths::writableLocation(QStandardPaths::AppDataLocation) + QStringLiteral("/conversations") : directory) {}

QString ConversationStore::path(const QString& id) const { return dir_ + QLatin1Char('/') + id + kSuffix; }

QString ConversationStore::new_id() {
    return QDateTime::currentDateTime().toString(QStringLiteral("yyyyMMdd-HHmmss-")) +
           QString::number(QRandomGenerator::global()->bounded(0x10000), 16).rightJustified(4, QLatin1Char('0'));
}

QString ConversationStore::title_from(const QString& first_message) {
    QString line = first_message.trimmed().section(QLatin1Char('\n'), 0, 0).simplified();
    if (line.size() > 60) line = line.left(59) + QStringLiteral("…");
    return line.isEmpty() ? QObject::tr("Conversation") : line;
}

Result<QJsonObject> ConversationStore::read(const QString& id) const {
    const QString name = id + kSuffix;
    if (!valid_id(id)) return error(name.toStdString() + ": not a conversation name");
    QFile f(path(id));
    if (!f.open(QIODevice::ReadOnly)) return error((name + QStringLiteral(": ") + f.errorString()).toStdString());
    if (f.size() > kMaxConversationBytes)
        return error((name + QStringLiteral(": %1 bytes, more than a conversation holds (%2 at most)").arg(f.size()).arg(kMaxConversationBytes)).toStdString());
    QJsonParseError perr;
    const QJsonDocument doc = QJsonDocument::fromJson(f.read(kMaxConversationBytes), &perr);
    if (perr.error != QJsonParseError::NoError)
        return error((name + QStringLiteral(": not JSON (%1 at offset %2)").arg(perr.errorString()).arg(perr.offset)).toStdString());
    if (!doc.isObject()) return error(name.toStdString() + ": not a JSON object");
    const QJsonObject o = doc.object();
    if (Status s = check_document(o); !s) return error(name.toStdString() + ": " + s.message());
    return o;
}

QVector<StoredConversation> ConversationStore::list() const {
    QVector<StoredConversation> out;
    const QFileInfoList files = QDir(dir_).entryInfoList({QStringLiteral("*.json")}, QDir::Files | QDir::Readable, QDir::Time);
    for (const QFileInfo& fi : files) {
        StoredConversation c;
        c.id = fi.completeBaseName();
        c.updated = fi.lastModified();
        if (!valid_id(c.id)) continue;  // not one of ours
        auto doc = read(c.id);
        if (!doc) {
            c.title = fi.fileName();
            c.error = QString::fromStdString(doc.message());
        } else {
            const QJsonObject& o = doc.value();
            c.title = o.value("title").toString(QObject::tr("Conversation"));
            c.model = o.value("model").toString();
            c.messages = static_cast<int>(o.value("messages").toArray().size());
            const QDateTime saved = QDateTime::fromString(o.value("updated").toString(), Qt::ISODateWithMs);
            if (saved.isValid()) c.updated = saved;
        }
        out.push_back(std::move(c));
    }
    std::stable_sort(out.begin(), out.end(), [](const StoredConversation& a, const StoredConversation& b) { return a.updated > b.updated; });
    return out;
}

Status ConversationStore::write(const QString& id, QJsonObject document, const QString& title, const QString& model) {
    if (!valid_id(id)) return error((id + kSuffix).toStdString() + ": not a conversation name");
    if (!QDir().mkpath(dir_)) return error(dir_.toStdString() + ": cannot create the folder");
    document["title"] = title;
    document["model"] = model;
    document["updated"] = QDateTime::currentDateTime().toString(Qt::ISODateWithMs);
    return save_file(path(id), QJsonDocument(document).toJson(QJsonDocument::Indented));
}

Status ConversationStore::rename(const QString& id, const QString& title) {
    auto doc = read(id);
    if (!doc) return doc.status();
    QJsonObject o = doc.value();
    o["title"] = title.simplified().isEmpty() ? QObject::tr("Conversation") : title.simplified();
    return save_file(path(id), QJsonDocument(o).toJson(QJsonDocument::Indented));
}

Status ConversationStore::remove(const QString& id) {
    if (!valid_id(id)) return error((id + kSuffix).toStdString() + ": not a conversation name");
    QFile f(path(id));
    if (!f.exists()) return Status::ok();
    if (!f.remove()) return error(((id + kSuffix) + QStringLiteral(": ") + f.errorString()).toStdString());
    return Status::ok();
}

}  // namespace colibri::studio
