#include "ui/models/profiler_models.h"

#include <cmath>

namespace colibri::studio {

QString compact_number(double v) {
    const double a = std::fabs(v);
    if (a >= 1e9) return QString::number(v / 1e9, 'f', 2) + QStringLiteral(" G");
    if (a >= 1e6) return QString::number(v / 1e6, 'f', 2) + QStringLiteral(" M");
    if (a >= 1e4) return QString::number(v / 1e3, 'f', 1) + QStringLiteral(" k");
    return QString::number(v, 'f', a < 10 && v != std::floor(v) ? 2 : 0);
}

void LayerProfileModel::set_counter_names(const QStringList& names) {
    beginResetModel();
    counters_ = names;
    totals_ = {};
    endResetModel();
}

void LayerProfileModel::set_totals(const ProfileTotals& totals) {
    beginResetModel();
    totals_ = totals;
    endResetModel();
}

double LayerProfileModel::mean_us(int row, int column) const {
    if (row < 0 || row >= rowCount()) return 0.0;
    const StageTotals& s = totals_.per_layer[static_cast<size_t>(row)];
    if (s.tokens == 0) return 0.0;
    uint64_t ns = 0;
    switch (column) {
    case Attention: ns = s.attention_ns; break;
    case Router: ns = s.router_ns; break;
    case Experts: ns = s.experts_ns; break;
    case Total: ns = s.attention_ns + s.router_ns + s.experts_ns; break;
    case CounterReads: ns = s.counter_ns; break;
    default: return 0.0;
    }
    return static_cast<double>(ns) / s.tokens / 1e3;
}

double LayerProfileModel::mean_counter(int row, int counter) const {
    if (row < 0 || row >= rowCount() || counter < 0 || counter >= counters_.size()) return 0.0;
    const StageTotals& s = totals_.per_layer[static_cast<size_t>(row)];
    return s.tokens > 0 && static_cast<size_t>(counter) < s.counters.size() ? static_cast<double>(s.counters[static_cast<size_t>(counter)]) / s.tokens : 0.0;
}

int LayerProfileModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : static_cast<int>(totals_.layers.size()); }
int LayerProfileModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : FirstCounter + static_cast<int>(counters_.size()); }

QVariant LayerProfileModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= rowCount() || index.column() >= columnCount()) return {};
    const int col = index.column();
    if (role == Qt::TextAlignmentRole) return int(Qt::AlignRight | Qt::AlignVCenter);
    if (role != Qt::DisplayRole && role != Qt::EditRole) return {};
    if (col == Layer) return totals_.layers[static_cast<size_t>(index.row())];
    const double v = col < FirstCounter ? mean_us(index.row(), col) : mean_counter(index.row(), col - FirstCounter);
    if (role == Qt::EditRole) return v;
    return col < FirstCounter ? QString::number(v, 'f', 1) : compact_number(v);
}

QVariant LayerProfileModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
    switch (section) {
    case Layer: return tr("layer");
    case Attention: return tr("attention µs");
    case Router: return tr("router µs");
    case Experts: return tr("experts µs");
    case Total: return tr("total µs");
    case CounterReads: return tr("counter reads µs");
    default:
        return section - FirstCounter < counters_.size() ? QVariant(tr("%1 / token").arg(counters_[section - FirstCounter])) : QVariant();
    }
}

void ExpertCounterModel::set_counter_names(const QStringList& names) {
    beginResetModel();
    counters_ = names;
    rows_.clear();
    endResetModel();
}

void ExpertCounterModel::set_totals(const ProfileTotals& totals) {
    beginResetModel();
    rows_ = totals.per_expert;
    endResetModel();
}

int ExpertCounterModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : static_cast<int>(rows_.size()); }
int ExpertCounterModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : FirstCounter + static_cast<int>(counters_.size()); }

QVariant ExpertCounterModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= rowCount() || index.column() >= columnCount()) return {};
    const ExpertTotals& e = rows_[static_cast<size_t>(index.row())];
    if (role == Qt::TextAlignmentRole) return int(Qt::AlignRight | Qt::AlignVCenter);
    if (role != Qt::DisplayRole && role != Qt::EditRole) return {};
    switch (index.column()) {
    case Layer: return e.layer;
    case Expert: return e.expert;
    case Activations: return e.activations;
    default: {
        const size_t c = static_cast<size_t>(index.column() - FirstCounter);
        const double v = e.activations > 0 && c < e.counters.size() ? static_cast<double>(e.counters[c]) / e.activations : 0.0;
        return role == Qt::EditRole ? QVariant(v) : QVariant(compact_number(v));
    }
    }
}

QVariant ExpertCounterModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
    switch (section) {
    case Layer: return tr("layer");
    case Expert: return tr("expert");
    case Activations: return tr("activations");
    default:
        return section - FirstCounter < counters_.size() ? QVariant(tr("%1 / activation").arg(counters_[section - FirstCounter])) : QVariant();
    }
}

void TokenTimeModel::set_tokens(const Conversation& c, const TokenSpan& span) {
    beginResetModel();
    rows_.clear();
    for (const ConversationToken& t : c.tokens()) {
        if (!span.contains(t)) continue;
        TokenTrace copy;
        copy.position = t.trace.position;
        copy.token = t.trace.token;
        copy.text = t.trace.text;
        copy.generated = t.trace.generated;
        copy.layers = t.trace.layers;
        for (LayerProfile& l : copy.layers) l.counters.clear();
        copy.lm_head_ns = t.trace.lm_head_ns;
        copy.sampling_ns = t.trace.sampling_ns;
        copy.step_ns = t.trace.step_ns;
        copy.counted = t.trace.counted;
        rows_.push_back(std::move(copy));
    }
    endResetModel();
}

double TokenTimeModel::us(int row, int column) const {
    if (row < 0 || row >= rowCount()) return 0.0;
    const TokenTime t = rows_[static_cast<size_t>(row)].time();
    uint64_t ns = 0;
    switch (column) {
    case Attention: ns = t.attention; break;
    case Router: ns = t.router; break;
    case Experts: ns = t.experts; break;
    case LmHead: ns = t.lm_head; break;
    case Sampling: ns = t.sampling; break;
    case Counters: ns = t.counters; break;
    case Other: ns = t.other(); break;
    case Total: ns = t.total; break;
    default: return 0.0;
    }
    return static_cast<double>(ns) / 1e3;
}

int TokenTimeModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : static_cast<int>(rows_.size()); }
int TokenTimeModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant TokenTimeModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= rowCount() || index.column() >= columnCount()) return {};
    const TokenTrace& t = rows_[static_cast<size_t>(index.row())];
    if (role == PositionRole) return t.position;
    if (role == Qt::TextAlignmentRole) return index.column() == Token ? int(Qt::AlignLeft | Qt::AlignVCenter) : int(Qt::AlignRight | Qt::AlignVCenter);
    if (role != Qt::DisplayRole && role != Qt::EditRole) return {};
    switch (index.column()) {
    case Position: return t.position;
    case Token: {
        QString text = t.text;
        text.replace(QLatin1Char('\n'), QStringLiteral("↵"));
        return text;
    }
    case Kind: return t.generated ? tr("generated") : tr("prompt");
    default: {
        const double v = us(index.row(), index.column());
        return role == Qt::EditRole ? QVariant(v) : QVariant(QString::number(v, 'f', 1));
    }
    }
}

QVariant TokenTimeModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
    switch (section) {
    case Position: return tr("position");
    case Token: return tr("token");
    case Kind: return tr("kind");
    case Attention: return tr("attention µs");
    case Router: return tr("router µs");
    case Experts: return tr("experts µs");
    case LmHead: return tr("lm head µs");
    case Sampling: return tr("sampling µs");
    case Counters: return tr("counters µs");
    case Other: return tr("other µs");
    case Total: return tr("total µs");
    default: return {};
    }
}

}  // namespace colibri::studio
