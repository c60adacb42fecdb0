#include "ui/models/heatmap_model.h"

#include <QStringList>
#include <algorithm>

#include "ui/colors.h"

namespace colibri::studio {

namespace {
QString expert_label(int first, int last) {
    return first == last ? QObject::tr("expert %1").arg(first) : QObject::tr("experts %1–%2").arg(first).arg(last);
}
}  // namespace

QString HeatmapModel::holders_text(int row, int column) const {
    // Which ranks compute the cell's experts: "; on rank 1", "; replicated on ranks 0, 1", "; on ranks 0–3".
    if (!placement_.spread()) return {};
    const int layer = usage_.layers[static_cast<size_t>(row)];
    QVector<int> ranks;
    for (int e = first_expert(column); e <= last_expert(column); ++e)
        for (int r : placement_.holders_of(layer, e))
            if (!ranks.contains(r)) ranks.push_back(r);
    if (ranks.isEmpty()) return {};
    std::sort(ranks.begin(), ranks.end());
    QStringList names;
    for (int r : ranks) names << QString::number(r);
    const QString list = names.join(QStringLiteral(", "));
    if (first_expert(column) == last_expert(column))
        return ranks.size() == 1 ? tr("; on rank %1").arg(list) : tr("; replicated on ranks %1 (its tokens split among them)").arg(list);
    return ranks.size() == 1 ? tr("; on rank %1").arg(list) : tr("; on ranks %1").arg(list);
}

void HeatmapModel::set_usage(const ExpertUsage& usage) {
    // Same shape: update in place so views keep their selection and scroll position.
    const bool same_shape = usage.layers == usage_.layers && usage.experts == usage_.experts;
    if (!same_shape) beginResetModel();
    usage_ = usage;
    update_max();
    if (!same_shape) {
        endResetModel();
    } else if (rowCount() > 0 && columnCount() > 0) {
        emit dataChanged(index(0, 0), index(rowCount() - 1, columnCount() - 1));
    }
}

void HeatmapModel::set_bin(int experts) {
    experts = std::max(experts, 1);
    if (experts == bin_) return;
    beginResetModel();
    bin_ = experts;
    update_max();
    endResetModel();
}

void HeatmapModel::set_linear_layers(const QVector<int>& layers) {
    linear_ = layers;
    if (rowCount() > 0) emit headerDataChanged(Qt::Vertical, 0, rowCount() - 1);
}

int HeatmapModel::count(int row, int column) const {
    const std::vector<int>& counts = usage_.counts[static_cast<size_t>(row)];
    int sum = 0;
    for (int e = first_expert(column); e <= last_expert(column); ++e) sum += counts[static_cast<size_t>(e)];
    return sum;
}

void HeatmapModel::update_max() {
    max_ = 0;
    for (int r = 0; r < rowCount(); ++r)
        for (int c = 0; c < columnCount(); ++c) max_ = std::max(max_, count(r, c));
}

QString HeatmapModel::to_csv() const {
    QString csv = QStringLiteral("layer");
    for (int e = 0; e < usage_.experts; ++e) csv += QStringLiteral(",E%1").arg(e);
    csv += QLatin1Char('\n');
    for (size_t r = 0; r < usage_.layers.size(); ++r) {
        csv += QString::number(usage_.layers[r]);
        for (int v : usage_.counts[r]) csv += QLatin1Char(',') + QString::number(v);
        csv += QLatin1Char('\n');
    }
    return csv;
}

int HeatmapModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : static_cast<int>(usage_.layers.size()); }
int HeatmapModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : (usage_.experts + bin_ - 1) / bin_; }

void HeatmapModel::set_marked(const QHash<int, QVector<int>>& experts) {
    if (experts == marked_) return;
    marked_ = experts;
    if (rowCount() > 0 && columnCount() > 0) emit dataChanged(index(0, 0), index(rowCount() - 1, columnCount() - 1), {MarkedRole});
}

bool HeatmapModel::is_marked(int row, int column) const {
    if (row < 0 || row >= rowCount()) return false;
    const auto it = marked_.constFind(usage_.layers[static_cast<size_t>(row)]);
    if (it == marked_.constEnd()) return false;
    const int first = first_expert(column), last = last_expert(column);
    return std::any_of(it->begin(), it->end(), [&](int e) { return e >= first && e <= last; });
}

void HeatmapModel::set_placement(const RankPlacement& placement) {
    placement_ = placement;
    if (rowCount() > 0 && columnCount() > 0) emit dataChanged(index(0, 0), index(rowCount() - 1, columnCount() - 1));
}

void HeatmapModel::set_by_rank(bool on) {
    if (on == by_rank_) return;
    by_rank_ = on;
    if (rowCount() > 0 && columnCount() > 0) emit dataChanged(index(0, 0), index(rowCount() - 1, columnCount() - 1));
}

int HeatmapModel::rank_of(int row, int column) const {
    if (row < 0 || row >= rowCount() || !placement_.spread()) return -1;
    const int layer = usage_.layers[static_cast<size_t>(row)];
    int rank = -1;
    for (int e = first_expert(column); e <= last_expert(column); ++e) {
        const QVector<int> h = placement_.holders_of(layer, e);
        if (h.size() != 1 || (rank >= 0 && h.front() != rank)) return -1;
        rank = h.front();
    }
    return rank;
}

bool HeatmapModel::replicated(int row, int column) const {
    if (row < 0 || row >= rowCount() || !placement_.spread()) return false;
    const int layer = usage_.layers[static_cast<size_t>(row)];
    for (int e = first_expert(column); e <= last_expert(column); ++e)
        if (placement_.holders_of(layer, e).size() > 1) return true;
    return false;
}

QColor HeatmapModel::cell_color(int row, int column) const {
    const double intensity = max_ > 0 ? static_cast<double>(count(row, column)) / max_ : 0.0;
    if (!by_rank()) return heat_color(intensity);
    // The holder's hue, from pale (never chosen) to full (the busiest cell): owner and load at once.
    const int rank = rank_of(row, column);
    return blend(QColor(250, 250, 250), rank >= 0 ? rank_color(rank) : QColor(120, 120, 120), 0.3 + 0.7 * intensity);
}

QVariant HeatmapModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= rowCount() || index.column() >= columnCount()) return {};
    const size_t row = static_cast<size_t>(index.row());
    const int count = this->count(index.row(), index.column());
    const LayerBalance b = usage_.balance(row);
    const double share = b.selections > 0 ? static_cast<double>(count) / b.selections : 0.0;
    const double intensity = max_ > 0 ? static_cast<double>(count) / max_ : 0.0;
    switch (role) {
    case Qt::DisplayRole: return count;
    case CountRole: return count;
    case ShareRole: return share;
    case IntensityRole: return intensity;
    case Qt::BackgroundRole: return cell_color(index.row(), index.column());
    case Qt::ForegroundRole: return text_color_on(cell_color(index.row(), index.column()));
    case Qt::TextAlignmentRole: return int(Qt::AlignCenter);
    case MarkedRole: return is_marked(index.row(), index.column());
    case RankRole: return rank_of(index.row(), index.column());
    case ReplicatedRole: return replicated(index.row(), index.column());
    case Qt::ToolTipRole:
        return tr("layer %1, %2: %3 of %4 selections (%5%) over %6 tokens%7%8")
            .arg(usage_.layers[row]).arg(expert_label(first_expert(index.column()), last_expert(index.column())))
            .arg(count).arg(b.selections).arg(share * 100.0, 0, 'f', 1).arg(usage_.tokens)
            .arg(holders_text(index.row(), index.column()))
            .arg(is_marked(index.row(), index.column()) ? tr("; chosen for the selected token") : QString());
    default: return {};
    }
}

QVariant HeatmapModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o == Qt::Horizontal) {
        if (section < 0 || section >= columnCount()) return {};
        const int first = first_expert(section), last = last_expert(section);
        if (role == Qt::DisplayRole) return first == last ? QStringLiteral("E%1").arg(first) : QStringLiteral("%1–%2").arg(first).arg(last);
        if (role == Qt::ToolTipRole) return expert_label(first, last);
        return {};
    }
    if (section < 0 || section >= rowCount()) return {};
    const int layer = usage_.layers[static_cast<size_t>(section)];
    if (role == Qt::DisplayRole)
        return linear_.isEmpty() ? tr("layer %1").arg(layer) : tr("layer %1 %2").arg(layer).arg(linear_.contains(layer) ? tr("linear") : tr("full"));
    if (role == Qt::ToolTipRole && !linear_.isEmpty())
        return linear_.contains(layer) ? tr("layer %1: Gated DeltaNet linear attention").arg(layer) : tr("layer %1: full attention").arg(layer);
    return {};
}

BalanceModel::BalanceModel(QObject* parent) : TableModel(parent) {
    auto b = [this](int row) -> const LayerBalance& { return rows_[static_cast<size_t>(row)]; };
    set_columns({{tr("layer"), [this](int row) { return QVariant(layers_[static_cast<size_t>(row)]); }},
                 {tr("selections"), [b](int row) { return QVariant(b(row).selections); }},
                 number(tr("entropy (bits)"), [b](int row) { return b(row).entropy_bits; }, 3),
                 number(tr("entropy / max"), [b](int row) { return b(row).entropy_ratio; }, 3),
                 number(tr("max / mean"), [b](int row) { return b(row).max_over_mean; }, 2),
                 {tr("busiest"), [b](int row) { return b(row).busiest_expert >= 0 ? QVariant(QStringLiteral("E%1").arg(b(row).busiest_expert)) : QVariant(); }}});
}

void BalanceModel::set_usage(const ExpertUsage& usage) {
    beginResetModel();
    layers_ = usage.layers;
    rows_.clear();
    for (size_t r = 0; r < usage.layers.size(); ++r) rows_.push_back(usage.balance(r));
    endResetModel();
}

}  // namespace colibri::studio
