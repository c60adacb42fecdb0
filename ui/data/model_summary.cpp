#include "ui/data/model_summary.h"

#include <QFileInfo>
#include <map>
#include <utility>

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
    for (size_t l = 0; l < model.layers().size(); ++l)
        if (model.layers()[l].mixer == TokenMixer::GatedDeltaNet) s.linear_layer_ids.push_back(static_cast<int>(l));
    if (!s.linear_layer_ids.isEmpty()) s.linear_heads = static_cast<int>(hp.linear_value_heads);
    s.mtp_layers = static_cast<int>(hp.mtp_layers);
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
    s.default_sampling = apply_generation_defaults(SamplerConfig{}, model.generation_defaults());
    s.default_sampling_text = QString::fromStdString(describe_generation_defaults(model.generation_defaults()));
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

namespace {

// n in the largest of five units (each `step` times the last) that keeps it at least 1: the value and the unit.
std::pair<double, int> in_units(quint64 n, double step) {
    double v = static_cast<double>(n);
    int u = 0;
    while (v >= step && u < 4) {
        v /= step;
        ++u;
    }
    return {v, u};
}

}  // namespace

QString human_bytes(quint64 bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    const auto [v, u] = in_units(bytes, 1024.0);
    return u == 0 ? QStringLiteral("%1 B").arg(bytes) : QStringLiteral("%1 %2").arg(v, 0, 'f', 1).arg(QLatin1String(units[u]));
}

QString human_count(quint64 n) {
    const char* units[] = {"", " k", " M", " B", " T"};
    const auto [v, u] = in_units(n, 1000.0);
    return u == 0 ? QString::number(n) : QString::number(v, 'g', 3) + QLatin1String(units[u]);
}

}  // namespace colibri::studio
