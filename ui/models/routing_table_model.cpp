#include "ui/models/routing_table_model.h"

#include <algorithm>

#include "ui/colors.h"

namespace colibri::studio {

void RoutingTableModel::set_token(const ConversationToken* token, int top_k) {
    beginResetModel();
    top_k_ = std::max(top_k, 0);
    position_ = token ? token->trace.position : -1;
    rows_ = token && token->evaluated ? token->trace.routing : std::vector<LayerRouting>{};
    endResetModel();
}

const LayerRouting* RoutingTableModel::routing(int row) const {
    return row >= 0 && row < static_cast<int>(rows_.size()) ? &rows_[static_cast<size_t>(row)] : nullptr;
}

int RoutingTableModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : static_cast<int>(rows_.size()); }
int RoutingTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : top_k_ + 2; }

QVariant RoutingTableModel::data(const QModelIndex& index, int role) const {
    const LayerRouting* r = index.isValid() ? routing(index.row()) : nullptr;
    if (r == nullptr) return {};
    const int col = index.column();
    if (role == LayerRole) return r->layer;
    if (col == 0) return role == Qt::DisplayRole ? QVariant(tr("layer %1").arg(r->layer)) : QVariant();
    if (col == distribution_column()) {
        if (role == ProbsRole) return QVariant::fromValue(QList<float>(r->probs.begin(), r->probs.end()));
        if (role == Qt::ToolTipRole) {
            QStringList parts;
            for (size_t e = 0; e < r->probs.size(); ++e) parts << QStringLiteral("E%1 %2").arg(e).arg(r->probs[e], 0, 'f', 3);
            return tr("router scores (probabilities for a softmax router): %1").arg(parts.join(QStringLiteral(", ")));
        }
        return {};
    }
    const size_t slot = static_cast<size_t>(col - 1);
    if (slot >= r->experts.size()) return {};
    const int expert = r->experts[slot];
    const float weight = r->weights[slot];
    switch (role) {
    case Qt::DisplayRole: return QStringLiteral("E%1  %2").arg(expert).arg(weight, 0, 'f', 3);
    case ExpertRole: return expert;
    case WeightRole: return weight;
    case SelectionRole: return slot < r->selection.size() ? QVariant(r->selection[slot]) : QVariant();
    case Qt::BackgroundRole: return expert_color(expert);
    case Qt::ForegroundRole: return text_color_on(expert_color(expert));
    case Qt::ToolTipRole: {
        // The weight multiplies the expert's output; the selection score chose it. They differ for sigmoid routers
        // (a learned bias steers the choice only, weights sum to the scaling factor) and group-limited ones.
        QString tip = tr("layer %1, choice %2: expert %3, weight %4, router score %5")
                          .arg(r->layer).arg(slot + 1).arg(expert).arg(weight, 0, 'f', 4)
                          .arg(static_cast<size_t>(expert) < r->probs.size() ? r->probs[static_cast<size_t>(expert)] : 0.0f, 0, 'f', 4);
        if (slot < r->selection.size()) tip += tr(", selected by %1").arg(r->selection[slot], 0, 'f', 4);
        if (!r->groups.empty()) {
            QStringList g;
            for (uint32_t id : r->groups) g << QString::number(id);
            tip += tr(" (within groups %1)").arg(g.join(QStringLiteral(", ")));
        }
        return tip;
    }
    default: return {};
    }
}

QVariant RoutingTableModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o == Qt::Vertical) return role == Qt::DisplayRole ? QVariant(section + 1) : QVariant();
    const bool expert_column = section > 0 && section != distribution_column();
    // "#1 weight": short, so that a top-2 model's table fits the dock at 1280x720 without scrolling sideways (the
    // view's caption says what a cell holds); the tooltip says it in full.
    if (role == Qt::ToolTipRole && expert_column) return tr("the expert chosen #%1 for this layer, and its weight").arg(section);
    if (role == Qt::ToolTipRole && section == distribution_column()) return tr("the router's probability of every expert");
    if (role != Qt::DisplayRole) return {};
    if (section == 0) return tr("layer");
    if (section == distribution_column()) return tr("probability");
    return tr("#%1 weight").arg(section);
}

}  // namespace colibri::studio
