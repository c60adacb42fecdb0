#include "ui/models/rank_model.h"

#include <QFont>
#include <QIcon>
#include <QPixmap>
#include <algorithm>
#include <cmath>

#include "ui/colors.h"
#include "ui/data/model_summary.h"

namespace colibri::studio {

QString bytes_text(double bytes) { return human_bytes(static_cast<quint64>(std::llround(std::max(bytes, 0.0)))); }

RankTimeModel::RankTimeModel(QObject* parent) : TableModel(parent) { declare_columns(); }

void RankTimeModel::declare_columns() {
    auto layer = [this](int row) -> const RankLayerStats& { return totals_.layers[static_cast<size_t>(row)]; };
    std::vector<TableColumn> columns{{tr("layer"), [layer](int row) { return QVariant(layer(row).layer); }}};
    for (int r = 0; r < totals_.ranks; ++r)
        columns.push_back(number(tr("rank %1 µs").arg(r), [layer, r](int row) { return layer(row).experts_us[static_cast<size_t>(r)]; }, 1));
    columns.push_back({tr("slowest"), [layer](int row) { return QVariant(tr("rank %1").arg(layer(row).slowest)); },
                       [layer](int row) { return QVariant(layer(row).slowest); }, Qt::AlignLeft | Qt::AlignVCenter,
                       [layer](int row) {
                           return QVariant(tr("Every rank waits for rank %1 at this layer's exchange: its share of the experts took the longest")
                                               .arg(layer(row).slowest));
                       }});
    TableColumn exchange = number(tr("rank 0 exchange µs"), [layer](int row) { return layer(row).exchange_us; }, 1);
    exchange.tooltip = [](int) { return QVariant(tr("Rank 0's time in the exchange after its experts: waiting for the slowest rank, then the transfer")); };
    columns.push_back(std::move(exchange));
    TableColumn bytes = number(tr("bytes / token"), [layer](int row) { return layer(row).bytes_per_token; }, 0, bytes_text);
    bytes.tooltip = [](int) { return QVariant(tr("The expert output rows every rank sent at this layer (each to every other rank), per token")); };
    columns.push_back(std::move(bytes));
    set_columns(std::move(columns));
}

void RankTimeModel::set_totals(const RankTotals& totals) {
    beginResetModel();
    totals_ = totals;
    declare_columns();  // one column per rank
    endResetModel();
}

QVariant RankTimeModel::other_data(int row, int column, int role) const {
    // The slowest rank's time in bold: the one the layer waits for.
    if (role != Qt::FontRole || column < FirstRank || column >= slowest_column()) return {};
    if (totals_.layers[static_cast<size_t>(row)].slowest != column - FirstRank) return {};
    QFont f;
    f.setBold(true);
    return f;
}

QVariant RankTimeModel::headerData(int section, Qt::Orientation o, int role) const {
    const bool rank = o == Qt::Horizontal && section >= FirstRank && section < slowest_column();
    if (rank && role == Qt::DecorationRole) {
        // A swatch (a header draws icons, not colours): the rank's colour on the heatmap.
        QPixmap swatch(10, 10);
        swatch.fill(rank_color(section - FirstRank));
        return QIcon(swatch);
    }
    if (rank && role == Qt::ToolTipRole) return tr("Rank %1's time in its share of the layer's experts, the median per token").arg(section - FirstRank);
    return TableModel::headerData(section, o, role);
}

}  // namespace colibri::studio
