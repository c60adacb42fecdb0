#include "ui/models/model_summary.h"

#include <QFileInfo>

namespace colibri::studio {

ModelSummaryModel::ModelSummaryModel(QObject* parent) : TableModel(parent) {
    set_columns({text(tr("property"), [this](int row) { return QVariant(rows_[row].first); }),
                 text(tr("value"), [this](int row) { return QVariant(rows_[row].second); })});
}

void ModelSummaryModel::set_summary(const ModelSummary& s) {
    beginResetModel();
    rows_.clear();
    rows_.push_back({tr("file"), QFileInfo(s.path).fileName()});
    rows_.push_back({tr("family"), s.family});
    rows_.push_back({tr("layers"), QStringLiteral("%1 (%2 MoE)").arg(s.layers).arg(s.moe_layers)});
    if (!s.linear_layer_ids.isEmpty())
        rows_.push_back({tr("token mixers"), tr("%1 Gated DeltaNet (%2 heads), %3 full attention")
                                                 .arg(s.linear_layer_ids.size()).arg(s.linear_heads).arg(s.layers - s.linear_layer_ids.size())});
    rows_.push_back({tr("experts"), QString::number(s.experts)});
    rows_.push_back({tr("active experts"), QString::number(s.active_experts)});
    rows_.push_back({tr("hidden size"), QString::number(s.hidden_size)});
    rows_.push_back({tr("vocabulary"), QString::number(s.vocab_size)});
    QStringList types;
    for (const auto& [type, bytes] : s.weight_bytes) types << QStringLiteral("%1 %2").arg(type, human_bytes(bytes));
    rows_.push_back({tr("weight types"), types.join(QStringLiteral(", "))});
    rows_.push_back({tr("size"), s.file_size == s.image_size ? human_bytes(s.file_size)
                                                            : tr("%1 (%2 uncompressed)").arg(human_bytes(s.file_size), human_bytes(s.image_size))});
    rows_.push_back({tr("tokenizer"), s.tokenizer + (s.has_chat_template ? tr(", chat template") : QString())});
    rows_.push_back({tr("sampling"), s.default_sampling_text.isEmpty() ? tr("no defaults of its own (Colibri's)")
                                                                      : tr("%1 (its generation_config.json)").arg(s.default_sampling_text)});
    rows_.push_back({tr("context"), QStringLiteral("%1 of %2 tokens").arg(s.context).arg(s.max_position)});
    rows_.push_back({tr("threads"), QString::number(s.threads)});
    if (s.placement.ranks > 1)
        rows_.push_back({tr("ranks"), tr("%1 processes, each holding its share of the routed experts%2")
                                          .arg(s.placement.ranks)
                                          .arg(s.placement.spread() ? QString() : tr(" (the server did not say which)"))});
    if (s.cache.budget > 0)
        rows_.push_back({tr("RAM budget"), tr("%1: %2 kept mapped, slots for %3 of %4 experts per layer (%5 each), %6%7")
                                               .arg(human_bytes(s.cache.budget), human_bytes(s.cache.resident_bytes))
                                               .arg(s.cache.slot_count).arg(s.experts).arg(human_bytes(s.cache.slot_bytes))
                                               .arg(s.cache.policy.toUpper(), s.cache.prefetch ? tr(", prefetch") : QString())});
    endResetModel();
}

void ModelSummaryModel::clear() {
    beginResetModel();
    rows_.clear();
    endResetModel();
}

QString ModelSummaryModel::value(const QString& key) const {
    for (const auto& [k, v] : rows_)
        if (k == key) return v;
    return {};
}

}  // namespace colibri::studio
