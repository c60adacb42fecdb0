#include "ui/models/kernel_comparison_model.h"

#include <numeric>

namespace colibri::studio {

void KernelComparisonModel::set_comparison(const KernelComparison& c) {
    beginResetModel();
    comparison_ = c;
    endResetModel();
}

int KernelComparisonModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : static_cast<int>(comparison_.runs.size()); }
int KernelComparisonModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant KernelComparisonModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= rowCount() || index.column() >= columnCount()) return {};
    const KernelRun& r = comparison_.runs[static_cast<size_t>(index.row())];
    const KernelRun& first = comparison_.runs.front();
    if (role == Qt::TextAlignmentRole) return index.column() == Variant ? int(Qt::AlignLeft | Qt::AlignVCenter) : int(Qt::AlignRight | Qt::AlignVCenter);
    if (role == Qt::ToolTipRole && index.column() == SameOutput)
        return r.decoded == first.decoded ? tr("the same %1 greedy tokens as %2").arg(r.decoded.size()).arg(variant_label(first))
                                          : tr("different tokens from %1: the variants should be bit-identical").arg(variant_label(first));
    if (role != Qt::DisplayRole && role != Qt::EditRole) return {};
    const bool edit = role == Qt::EditRole;
    auto number = [edit](double v, int decimals) { return edit ? QVariant(v) : QVariant(QString::number(v, 'f', decimals)); };
    switch (index.column()) {
    case Variant: return variant_label(r);
    case PromptTps: return number(r.report.prompt_tps.median, 1);
    case DecodeTps: return number(r.report.decode_tps.median, 1);
    case Speedup: {
        const double base = first.report.decode_tps.median;
        const double v = base > 0 ? r.report.decode_tps.median / base : 0.0;
        return edit ? QVariant(v) : QVariant(QStringLiteral("×%1").arg(v, 0, 'f', 2));
    }
    case DecodeUs: return number(r.report.decode_token_us, 1);
    case LayersUs: return number(std::accumulate(r.report.decode_layers.begin(), r.report.decode_layers.end(), 0.0, [](double sum, const tools::LayerTimes& l) { return sum + l.total_us(); }), 1);
    case LmHeadUs: return number(r.report.decode_lm_head_us, 1);
    case SameOutput: return edit ? QVariant(r.decoded == first.decoded) : QVariant(r.decoded == first.decoded ? tr("yes") : tr("NO"));
    default: return {};
    }
}

QVariant KernelComparisonModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
    switch (section) {
    case Variant: return tr("kernel");
    case PromptTps: return tr("prompt tok/s");
    case DecodeTps: return tr("decode tok/s");
    case Speedup: return tr("decode vs first");
    case DecodeUs: return tr("µs / token");
    case LayersUs: return tr("layers µs");
    case LmHeadUs: return tr("lm head µs");
    case SameOutput: return tr("same tokens");
    default: return {};
    }
}

}  // namespace colibri::studio
