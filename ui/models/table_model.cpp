#include "ui/models/table_model.h"

namespace colibri::studio {

TableColumn TableModel::number(const QString& header, std::function<double(int row)> value, int decimals,
                                      std::function<QString(double)> format) {
    return {header,
            [value, decimals, format](int row) {
                const double v = value(row);
                return QVariant(format ? format(v) : QString::number(v, 'f', decimals));
            },
            [value](int row) { return QVariant(value(row)); }};
}

TableColumn TableModel::text(const QString& header, Value value) {
    return {header, std::move(value), {}, Qt::AlignLeft | Qt::AlignVCenter};
}

int TableModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : rows(); }
int TableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : static_cast<int>(columns_.size()); }

QVariant TableModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= rowCount() || index.column() >= columnCount()) return {};
    const TableColumn& c = columns_[static_cast<size_t>(index.column())];
    switch (role) {
    case Qt::DisplayRole: return c.display(index.row());
    case Qt::EditRole: return c.sort ? c.sort(index.row()) : c.display(index.row());
    case Qt::TextAlignmentRole: return int(c.alignment);
    case Qt::ToolTipRole:
        if (c.tooltip) return c.tooltip(index.row());
        break;
    default: break;
    }
    return other_data(index.row(), index.column(), role);
}

QVariant TableModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal || role != Qt::DisplayRole || section < 0 || section >= columnCount()) return {};
    return columns_[static_cast<size_t>(section)].header;
}

}  // namespace colibri::studio
