#include "ui/models/linear_state_model.h"

#include <cmath>
#include <limits>

#include "ui/colors.h"

namespace colibri::studio {

namespace {
constexpr float kNone = std::numeric_limits<float>::quiet_NaN();
}

void LinearStateModel::set_layers(const QVector<int>& layers, int heads) {
    beginResetModel();
    layers_ = layers;
    heads_ = layers.isEmpty() ? 0 : heads;
    positions_.clear();
    texts_.clear();
    for (auto& v : values_) v.clear();
    for (double& m : max_) m = 0.0;
    endResetModel();
}

void LinearStateModel::set_quantity(Quantity q) {
    if (q == quantity_) return;
    quantity_ = q;
    if (rowCount() > 0 && columnCount() > 0) emit dataChanged(index(0, 0), index(rowCount() - 1, columnCount() - 1));
    emit headerDataChanged(Qt::Horizontal, 0, std::max(columnCount() - 1, 0));
}

void LinearStateModel::update(const Conversation& conversation) {
    std::vector<int> positions;
    std::vector<QString> texts;
    const size_t rows = static_cast<size_t>(layers_.size() * heads_);
    std::vector<std::vector<float>> values[3];
    for (auto& v : values) v.assign(rows, {});
    double max[3] = {0, 0, 0};
    for (const ConversationToken& t : conversation.tokens()) {
        if (!t.evaluated || t.trace.linear_states.empty()) continue;
        positions.push_back(t.trace.position);
        texts.push_back(t.trace.text);
        for (size_t li = 0; li < static_cast<size_t>(layers_.size()); ++li) {
            const LayerLinearState* s = t.trace.linear_state_at(layers_[static_cast<qsizetype>(li)]);
            for (size_t h = 0; h < static_cast<size_t>(heads_); ++h) {
                const std::vector<float>* from[3] = {s ? &s->norms : nullptr, s ? &s->betas : nullptr, s ? &s->decays : nullptr};
                for (int q = 0; q < 3; ++q) {
                    const float v = from[q] != nullptr && h < from[q]->size() ? (*from[q])[h] : kNone;
                    values[q][li * static_cast<size_t>(heads_) + h].push_back(v);
                    if (!std::isnan(v)) max[q] = std::max(max[q], double(v));
                }
            }
        }
    }
    // Only positions added (the usual case while a reply streams): insert the new columns, keep the view's place.
    const size_t old = positions_.size();
    const bool appended = old > 0 && positions.size() >= old && std::equal(positions_.begin(), positions_.end(), positions.begin());
    const auto swap_in = [&] {
        positions_ = std::move(positions);
        texts_ = std::move(texts);
        for (int q = 0; q < 3; ++q) values_[q] = std::move(values[q]);
        for (int q = 0; q < 3; ++q) max_[q] = max[q];
    };
    if (!appended) {
        beginResetModel();
        swap_in();
        endResetModel();
        return;
    }
    const size_t added = positions.size() - old;
    if (added > 0) beginInsertColumns({}, static_cast<int>(old), static_cast<int>(old + added - 1));
    swap_in();
    if (added > 0) endInsertColumns();
    if (rows > 0) emit dataChanged(index(0, 0), index(static_cast<int>(rows) - 1, static_cast<int>(old) - 1));
}

LinearStateModel::Peak LinearStateModel::peak(Quantity q) const {
    Peak p;
    const auto& rows = values_[static_cast<int>(q)];
    for (size_t r = 0; r < rows.size(); ++r)
        for (size_t c = 0; c < rows[r].size(); ++c)
            if (!std::isnan(rows[r][c]) && (p.row < 0 || rows[r][c] > p.value)) p = Peak{rows[r][c], int(r), int(c)};
    return p;
}

double LinearStateModel::scale_max() const { return quantity_ == Quantity::Norm ? max_value() : 1.0; }

QString LinearStateModel::to_csv() const {
    QString csv = QStringLiteral("layer,head");
    for (int p : positions_) csv += QStringLiteral(",P%1").arg(p);
    csv += QLatin1Char('\n');
    for (int r = 0; r < rowCount(); ++r) {
        csv += QStringLiteral("%1,%2").arg(layer_of(r)).arg(head_of(r));
        for (float v : values(r)) csv += QLatin1Char(',') + (std::isnan(v) ? QString() : QString::number(v, 'g', 9));
        csv += QLatin1Char('\n');
    }
    return csv;
}

int LinearStateModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : static_cast<int>(layers_.size() * heads_); }
int LinearStateModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : static_cast<int>(positions_.size()); }

QVariant LinearStateModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= rowCount() || index.column() >= columnCount()) return {};
    const float v = values(index.row())[static_cast<size_t>(index.column())];
    const double top = scale_max();
    const double intensity = std::isnan(v) || top <= 0.0 ? 0.0 : std::clamp(double(v) / top, 0.0, 1.0);
    switch (role) {
    case ValueRole: return std::isnan(v) ? QVariant() : QVariant(double(v));
    case IntensityRole: return intensity;
    case LayerRole: return layer_of(index.row());
    case HeadRole: return head_of(index.row());
    case PositionRole: return position_of(index.column());
    case Qt::BackgroundRole: return std::isnan(v) ? QVariant() : QVariant(heat_color(intensity));
    case Qt::ToolTipRole: {
        const QString text = texts_[static_cast<size_t>(index.column())];
        const size_t c = static_cast<size_t>(index.column()), r = static_cast<size_t>(index.row());
        auto at = [&](Quantity q) { return values_[static_cast<int>(q)][r][c]; };
        return tr("layer %1, head %2, position %3 (%4)\nstate norm %5 · β %6 · decay %7")
            .arg(layer_of(index.row())).arg(head_of(index.row())).arg(position_of(index.column()))
            .arg(text.isEmpty() ? QStringLiteral("…") : QStringLiteral("“%1”").arg(text.toHtmlEscaped()))
            .arg(at(Quantity::Norm), 0, 'g', 4).arg(at(Quantity::Beta), 0, 'f', 3).arg(at(Quantity::Decay), 0, 'f', 3);
    }
    default: return {};
    }
}

QVariant LinearStateModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o == Qt::Vertical) {
        if (section < 0 || section >= rowCount()) return {};
        // The layer's number on its first head only, so the rows read as blocks.
        if (role == Qt::DisplayRole)
            return head_of(section) == 0 ? tr("L%1 h0").arg(layer_of(section)) : QStringLiteral("h%1").arg(head_of(section));
        if (role == Qt::ToolTipRole) return tr("layer %1 (Gated DeltaNet), value head %2").arg(layer_of(section)).arg(head_of(section));
        return {};
    }
    if (section < 0 || section >= columnCount()) return {};
    if (role == Qt::DisplayRole) return position_of(section);
    if (role == Qt::ToolTipRole) return tr("position %1: %2").arg(position_of(section)).arg(texts_[static_cast<size_t>(section)]);
    return {};
}

}  // namespace colibri::studio
