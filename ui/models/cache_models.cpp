#include "ui/models/cache_models.h"

#include <QPalette>
#include <algorithm>

#include "ui/colors.h"
#include "ui/conversation.h"

namespace colibri::studio {

namespace {

// A hue per state: what a glance must tell apart (read now, evicted now, loading ahead) is warm or violet,
// what merely sits in the cache is blue; what is not in the cache is grey.
QColor base_color(CacheCell c) {
    switch (c) {
    case CacheCell::Resident: return QColor::fromHsvF(0.58f, 0.70f, 1.0f);
    case CacheCell::Loaded: return QColor::fromHsvF(0.11f, 0.85f, 1.0f);
    case CacheCell::Evicted: return QColor::fromHsvF(0.0f, 0.80f, 0.95f);
    case CacheCell::ReadAhead: return QColor::fromHsvF(0.36f, 0.70f, 0.85f);
    case CacheCell::Loading: return QColor::fromHsvF(0.78f, 0.55f, 1.0f);
    case CacheCell::Out: return QColor(128, 128, 128);
    case CacheCell::Never: break;
    }
    return QColor(128, 128, 128);
}

}  // namespace

QString milliseconds_text(uint64_t ns) { return QString::number(double(ns) / 1e6, 'f', ns < 10'000'000 ? 2 : 1); }
QString megabytes_text(uint64_t bytes) { return QString::number(double(bytes) / 1e6, 'f', bytes < 10'000'000 ? 2 : 1); }

QColor cache_cell_color(CacheCell cell, double heat) {
    heat = std::clamp(heat, 0.0, 1.0);
    const QColor window = QPalette().color(QPalette::Base);
    if (cell == CacheCell::Never) return blend(window, QPalette().color(QPalette::Text), 0.06);
    if (cell == CacheCell::Evicted || cell == CacheCell::Loading || cell == CacheCell::ReadAhead) return base_color(cell);
    // Brightness by heat: the layer's coldest expert in its state is a faint tint, its hottest the full colour.
    return blend(window, base_color(cell), (cell == CacheCell::Out ? 0.15 : 0.35) + (cell == CacheCell::Out ? 0.35 : 0.65) * heat);
}

void CacheMapModel::set_state(std::shared_ptr<const CacheSnapshot> state, const TokenTrace* trace) {
    beginResetModel();
    state_ = std::move(state);
    chosen_.clear();
    if (state_ && trace != nullptr) {
        chosen_.assign(state_->cell.size(), 0);
        for (size_t li = 0; li < state_->layers.size(); ++li)
            if (const LayerRouting* r = trace->routing_at(state_->layers[li]))
                for (int32_t e : r->experts)
                    if (e >= 0 && e < state_->n_experts) chosen_[state_->index(static_cast<int>(li), e)] = 1;
    }
    endResetModel();
}

void CacheMapModel::set_wrap(int experts) {
    experts = std::max(experts, 0);
    if (experts == wrap_) return;
    beginResetModel();
    wrap_ = experts;
    endResetModel();
}

int CacheMapModel::rows_per_layer() const { return wrap_ > 0 && state_ ? (state_->n_experts + wrap_ - 1) / wrap_ : 1; }

std::pair<int, int> CacheMapModel::cell_at(int row, int column) const {
    const int per = rows_per_layer(), e = (row % per) * (wrap_ > 0 ? wrap_ : 0) + column;
    return {row / per, state_ && e < state_->n_experts ? e : -1};
}

int CacheMapModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() || !state_ ? 0 : static_cast<int>(state_->layers.size()) * rows_per_layer();
}

int CacheMapModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() || !state_ ? 0 : wrap_ > 0 ? std::min(wrap_, state_->n_experts) : state_->n_experts;
}

QVariant CacheMapModel::data(const QModelIndex& index, int role) const {
    if (!state_ || !index.isValid()) return {};
    const auto [li, e] = cell_at(index.row(), index.column());
    if (e < 0) return {};
    const size_t i = state_->index(li, e);
    const CacheCell cell = state_->cell[i];
    const float max = state_->max_heat(li);
    const double heat = max > 0 ? state_->heat[i] / max : 0.0;
    const bool chosen = !chosen_.empty() && chosen_[i];
    switch (role) {
    case Qt::DisplayRole:
        if (chosen) return QStringLiteral("●");
        return state_->pinned[i] ? QStringLiteral("P") : QString();
    case CellRole: return static_cast<int>(cell);
    case HeatRole: return heat;
    case Qt::BackgroundRole: return cache_cell_color(cell, heat);
    case Qt::ForegroundRole: return text_color_on(cache_cell_color(cell, heat));
    case Qt::TextAlignmentRole: return int(Qt::AlignCenter);
    case Qt::ToolTipRole: {
        QString tip = tr("Layer %1, expert %2: %3").arg(state_->layers[static_cast<size_t>(li)]).arg(e).arg(QString::fromLatin1(cache_cell_name(cell)));
        if (state_->pinned[i]) tip += tr(", pinned");
        tip += tr("\nheat %1 (%2 % of the layer's hottest) · read %3 times since load").arg(state_->heat[i], 0, 'f', 2).arg(heat * 100.0, 0, 'f', 0).arg(state_->loads[i]);
        if (chosen) tip += tr("\nchosen by this token");
        return tip;
    }
    default: return {};
    }
}

QVariant CacheMapModel::headerData(int section, Qt::Orientation o, int role) const {
    if (role != Qt::DisplayRole || !state_) return {};
    if (o == Qt::Horizontal) return section;
    // A wrapped layer: its number on its first row, the experts' offset on every row ("L3 +0", "+64").
    const auto [li, first] = cell_at(section, 0);
    const QString layer = tr("L%1").arg(state_->layers[static_cast<size_t>(li)]);
    if (wrap_ == 0) return layer;
    return first == 0 ? layer + QStringLiteral(" +0") : QStringLiteral("+%1").arg(first);
}

void CacheLayerTotals::add(const LayerCacheStep& s) {
    hits += s.hits;
    misses += s.misses;
    bytes_read += s.bytes_read;
    stall_ns += s.stall_ns;
    prefetched += s.prefetched;
    predicted += s.predicted;
    predicted_right += s.predicted_right;
}

CacheTotals cache_totals(const Conversation& conversation) {
    CacheTotals totals;
    for (const ConversationToken& c : conversation.tokens()) {
        if (!c.evaluated) continue;
        for (const LayerCacheStep& s : c.trace.cache) {
            auto it = std::find_if(totals.layers.begin(), totals.layers.end(), [&](const CacheLayerTotals& t) { return t.layer == s.layer; });
            if (it == totals.layers.end()) {
                totals.layers.push_back(CacheLayerTotals{s.layer});
                it = totals.layers.end() - 1;
            }
            it->add(s);
            totals.all.add(s);
        }
    }
    std::sort(totals.layers.begin(), totals.layers.end(), [](const CacheLayerTotals& a, const CacheLayerTotals& b) { return a.layer < b.layer; });
    return totals;
}

CacheLayersModel::CacheLayersModel(QObject* parent) : TableModel(parent) {
    auto t = [this](int row) -> const CacheLayerTotals& { return totals_[static_cast<size_t>(row)]; };
    auto count = [t](const QString& header, uint64_t CacheLayerTotals::*field) {
        return TableColumn{header, [t, field](int row) { return QVariant(qulonglong(t(row).*field)); }};
    };
    auto percent = [](bool any, double fraction) { return any ? QStringLiteral("%1 %").arg(fraction * 100.0, 0, 'f', 1) : QStringLiteral("–"); };
    set_columns({
        {tr("layer"), [t](int row) { return QVariant(t(row).layer); }},
        count(tr("hits"), &CacheLayerTotals::hits),
        count(tr("misses"), &CacheLayerTotals::misses),
        {tr("hit rate"), [t, percent](int row) { return QVariant(percent(t(row).hits + t(row).misses > 0, t(row).hit_rate())); },
         [t](int row) { return QVariant(t(row).hit_rate()); }},
        {tr("MB read"), [t](int row) { return QVariant(megabytes_text(t(row).bytes_read)); }, [t](int row) { return QVariant(qulonglong(t(row).bytes_read)); }},
        {tr("waiting (ms)"), [t](int row) { return QVariant(milliseconds_text(t(row).stall_ns)); }, [t](int row) { return QVariant(qulonglong(t(row).stall_ns)); }},
        count(tr("read ahead"), &CacheLayerTotals::prefetched),
        {tr("prediction right"),
         [t, percent](int row) { return QVariant(percent(t(row).predicted > 0, t(row).predicted ? double(t(row).predicted_right) / double(t(row).predicted) : 0.0)); },
         [t](int row) { return QVariant(t(row).predicted ? double(t(row).predicted_right) / double(t(row).predicted) : -1.0); }},
    });
}

void CacheLayersModel::set_totals(std::vector<CacheLayerTotals> totals) {
    beginResetModel();
    totals_ = std::move(totals);
    endResetModel();
}

}  // namespace colibri::studio
