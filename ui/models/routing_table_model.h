// The routing of one token: a row per MoE layer with the top-k experts and their weights, and the router's
// full distribution (for the bar-chart delegate and the chart below the table).
#pragma once
#include <QAbstractTableModel>
#include <QList>

#include "ui/conversation.h"

namespace colibri::studio {

class RoutingTableModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Role { ExpertRole = Qt::UserRole + 1, WeightRole, ProbsRole, LayerRole, SelectionRole };

    using QAbstractTableModel::QAbstractTableModel;
    // top_k fixes the columns (the model's active experts); token may be null or without a trace.
    void set_token(const ConversationToken* token, int top_k);
    int top_k() const { return top_k_; }
    int position() const { return position_; }
    int distribution_column() const { return top_k_ + 1; }
    const LayerRouting* routing(int row) const;

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

private:
    std::vector<LayerRouting> rows_;
    int top_k_ = 0;
    int position_ = -1;
};

}  // namespace colibri::studio
