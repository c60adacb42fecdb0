// The kept conversations as a list: each row its title over a line with when, which model and how many messages
// (or, for a damaged file, why it cannot be opened); the current conversation in bold.
#pragma once
#include <QAbstractListModel>
#include <QVector>

#include "ui/conversation_store.h"

namespace colibri::studio {

class ConversationListModel : public QAbstractListModel {
    Q_OBJECT
public:
    enum Role { IdRole = Qt::UserRole + 1, DamagedRole, DetailRole };
    using QAbstractListModel::QAbstractListModel;

    void set_conversations(QVector<StoredConversation> conversations);
    void set_current(const QString& id);
    const QString& current() const { return current_; }
    const QVector<StoredConversation>& conversations() const { return rows_; }
    int row_of(const QString& id) const;

    int rowCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;

private:
    QVector<StoredConversation> rows_;
    QString current_;
};

// "today 14:05 · demo.bin · 4 messages": the second line of a row.
QString conversation_detail(const StoredConversation& c);

}  // namespace colibri::studio
