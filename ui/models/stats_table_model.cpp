#include "ui/models/stats_table_model.h"

#include <algorithm>
#include <cmath>

#include "ui/colors.h"

namespace colibri::studio {

QString significant(double v, int digits) {
    if (v == 0.0 || !std::isfinite(v)) return QString::number(v);
    const double a = std::fabs(v);
    if (a < 1e-4) return QString::number(v, 'e', digits - 1);
    const int decimals = std::max(0, digits - 1 - static_cast<int>(std::floor(std::log10(a))));
    return QString::number(v, 'f', decimals);
}

void StatsTableModel::set_table(const QStringList& headers, const QVector<Format>& formats, const QVector<QVector<Cell>>& rows,
                                const QStringList& row_headers) {
    beginResetModel();
    headers_ = headers;
    formats_ = formats;
    formats_.resize(headers.size(), Format::Text);
    rows_ = rows;
    for (QVector<Cell>& r : rows_) r.resize(headers.size());
    row_headers_ = row_headers;
    endResetModel();
}

void StatsTableModel::clear() { set_table({}, {}, {}); }

QString StatsTableModel::text(int row, int column) const {
    if (row < 0 || row >= rowCount() || column < 0 || column >= columnCount()) return {};
    const QVariant& v = rows_[row][column].value;
    if (!v.isValid()) return QString();
    switch (formats_[column]) {
    case Format::Integer: return QString::number(v.toLongLong());
    case Format::Percent: return QString::number(v.toDouble() * 100.0, 'f', 1) + QStringLiteral(" %");
    case Format::Decimal3: return QString::number(v.toDouble(), 'f', 3);
    case Format::Significant3: return significant(v.toDouble(), 3);
    case Format::Text: break;
    }
    return v.toString();
}

int StatsTableModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : static_cast<int>(rows_.size()); }
int StatsTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : static_cast<int>(headers_.size()); }

QVariant StatsTableModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= rowCount() || index.column() >= columnCount()) return {};
    const Cell& c = rows_[index.row()][index.column()];
    switch (role) {
    case Qt::DisplayRole: return text(index.row(), index.column());
    case Qt::EditRole: return c.value;
    case Qt::ToolTipRole: return c.tooltip.isEmpty() ? QVariant() : QVariant(c.tooltip);
    case Qt::BackgroundRole: return c.background.isValid() ? QVariant(c.background) : QVariant();
    case Qt::ForegroundRole: return c.background.isValid() ? QVariant(text_color_on(c.background)) : QVariant();
    case Qt::TextAlignmentRole:
        return formats_[index.column()] == Format::Text ? int(Qt::AlignLeft | Qt::AlignVCenter) : int(Qt::AlignRight | Qt::AlignVCenter);
    default: return {};
    }
}

QVariant StatsTableModel::headerData(int section, Qt::Orientation o, int role) const {
    if (role != Qt::DisplayRole) return {};
    if (o == Qt::Horizontal) return section >= 0 && section < headers_.size() ? QVariant(headers_[section]) : QVariant();
    return section >= 0 && section < row_headers_.size() ? QVariant(row_headers_[section]) : QVariant(section + 1);
}

}  // namespace colibri::studio
