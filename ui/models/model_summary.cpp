#include "ui/models/model_summary.h"

#include <QFileInfo>
#include <map>

#include "engine/core/model.h"

namespace colibri::studio {

ModelSummary summarize(const Model& model, const QString& path) {
    const format::HyperParams& hp = model.hparams();
    ModelSummary s;
    s.path = path;
    s.family = QString::fromUtf8(format::family_name(model.family()));
    s.layers = static_cast<int>(hp.n_layers);
    s.moe_layers = static_cast<int>(model.moe_layer_count());
    for (size_t l = 0; l < model.layers().size(); ++l)
        if (model.layers()[l].is_moe) s.moe_layer_ids.push_back(static_cast<int>(l));
    s.experts = static_cast<int>(hp.n_experts);
    s.active_experts = static_cast<int>(hp.n_experts_active);
    s.hidden_size = static_cast<int>(hp.hidden_size);
    s.vocab_size = static_cast<int>(hp.vocab_size);
    s.max_position = static_cast<int>(hp.max_position);
    s.file_size = static_cast<quint64>(QFileInfo(path).size());
    s.image_size = model.file().size();
    std::map<std::string, quint64> by_type;
    for (const TensorView& t : model.file().tensors()) by_type[format::weight_type_name(t.type)] += t.size;
    for (const auto& [type, bytes] : by_type) s.weight_bytes.push_back({QString::fromStdString(type), bytes});
    if (const Tokenizer* tok = model.tokenizer()) {
        s.has_tokenizer = true;
        s.tokenizer = tok->kind() == Tokenizer::Kind::ByteLevelBpe ? QStringLiteral("byte-level BPE") : QStringLiteral("SentencePiece BPE");
    } else {
        s.tokenizer = QStringLiteral("none");
    }
    s.has_chat_template = !model.chat_template().empty();
    if (const ExpertCache* c = model.expert_cache()) {
        s.cache.budget = c->budget();
        s.cache.resident_bytes = c->resident_bytes();
        s.cache.slot_bytes = c->slot_bytes();
        s.cache.slot_count = static_cast<int>(c->slots_per_layer());
        s.cache.policy = QString::fromLatin1(cache_policy_name(c->policy()));
        s.cache.prefetch = c->prefetching();
        s.cache.direct_io = c->direct_io();
    }
    return s;
}

QString human_bytes(quint64 bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(bytes);
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        ++u;
    }
    return u == 0 ? QStringLiteral("%1 B").arg(bytes) : QStringLiteral("%1 %2").arg(v, 0, 'f', 1).arg(QLatin1String(units[u]));
}

void ModelSummaryModel::set_summary(const ModelSummary& s) {
    beginResetModel();
    rows_.clear();
    rows_.push_back({tr("file"), QFileInfo(s.path).fileName()});
    rows_.push_back({tr("family"), s.family});
    rows_.push_back({tr("layers"), QStringLiteral("%1 (%2 MoE)").arg(s.layers).arg(s.moe_layers)});
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
    rows_.push_back({tr("context"), QStringLiteral("%1 of %2 tokens").arg(s.context).arg(s.max_position)});
    rows_.push_back({tr("threads"), QString::number(s.threads)});
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

int ModelSummaryModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : static_cast<int>(rows_.size()); }
int ModelSummaryModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : 2; }

QVariant ModelSummaryModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || role != Qt::DisplayRole) return {};
    const auto& row = rows_[index.row()];
    return index.column() == 0 ? row.first : row.second;
}

QVariant ModelSummaryModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
    return section == 0 ? tr("property") : tr("value");
}

}  // namespace colibri::studio
