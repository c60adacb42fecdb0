#include "ui/models/conversation_list_model.h"

#include <QFileInfo>
#include <QFont>

#include "ui/colors.h"

namespace colibri::studio {

QString conversation_detail(const StoredConversation& c) {
    if (c.damaged()) return QObject::tr("cannot be opened: %1").arg(c.error);
    const QDate day = c.updated.date();
    const QString when = day == QDate::currentDate() ? QObject::tr("today %1").arg(c.updated.toString(QStringLiteral("HH:mm")))
                                                     : c.updated.toString(QStringLiteral("yyyy-MM-dd HH:mm"));
    QStringList parts{when};
    if (!c.model.isEmpty()) parts << QFileInfo(c.model).fileName();
    parts << (c.messages == 1 ? QObject::tr("1 message") : QObject::tr("%1 messages").arg(c.messages));
    return parts.join(QStringLiteral(" · "));
}

void ConversationListModel::set_conversations(QVector<StoredConversation> conversations) {
    beginResetModel();
    rows_ = std::move(conversations);
    endResetModel();
}

void ConversationListModel::set_current(const QString& id) {
    current_ = id;
    if (!rows_.isEmpty()) emit dataChanged(index(0), index(static_cast<int>(rows_.size()) - 1), {Qt::FontRole, Qt::DisplayRole});
}

int ConversationListModel::row_of(const QString& id) const {
    for (int r = 0; r < rows_.size(); ++r)
        if (rows_[r].id == id) return r;
    return -1;
}

int ConversationListModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : static_cast<int>(rows_.size()); }

QVariant ConversationListModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= rows_.size()) return {};
    const StoredConversation& c = rows_[index.row()];
    switch (role) {
    case Qt::DisplayRole: return (c.damaged() ? QStringLiteral("⚠ ") : QString()) + c.title + QLatin1Char('\n') + conversation_detail(c);
    case Qt::ToolTipRole: return c.damaged() ? c.error : c.title + QLatin1Char('\n') + conversation_detail(c);
    case Qt::ForegroundRole:
        if (c.damaged()) return status_color(StatusColor::Error);
        return {};
    case Qt::FontRole:
        if (c.id == current_) {
            QFont f;
            f.setBold(true);
            return f;
        }
        return {};
    case IdRole: return c.id;
    case DamagedRole: return c.damaged();
    case DetailRole: return conversation_detail(c);
    default: return {};
    }
}

}  // namespace colibri::studio
