#include "ui/models/model_graph.h"

#include <QObject>
#include <algorithm>
#include <map>

namespace colibri::studio {

QString graph_kind_name(GraphBlock::Kind kind) {
    switch (kind) {
    case GraphBlock::Kind::Tokenizer: return QObject::tr("tokenizer");
    case GraphBlock::Kind::Embedding: return QObject::tr("embedding");
    case GraphBlock::Kind::Attention: return QObject::tr("attention");
    case GraphBlock::Kind::LinearAttention: return QObject::tr("linear attention");
    case GraphBlock::Kind::Router: return QObject::tr("router");
    case GraphBlock::Kind::Experts: return QObject::tr("experts");
    case GraphBlock::Kind::SharedExpert: return QObject::tr("shared expert");
    case GraphBlock::Kind::DenseMlp: return QObject::tr("dense MLP");
    case GraphBlock::Kind::Output: return QObject::tr("norm + lm head");
    }
    return {};
}

namespace {

// "layers.3.experts.5.gate" -> "gate", "layers.3.attn.q" -> "attn.q": the part that tells a layer's tensors apart.
QString layer_tensor_name(const QString& name) {
    QStringList parts = name.split(QLatin1Char('.'));
    if (parts.size() > 2 && parts[0] == QLatin1String("layers")) parts.erase(parts.begin(), parts.begin() + 2);
    if (parts.size() > 2 && parts[0] == QLatin1String("experts")) parts.erase(parts.begin(), parts.begin() + 2);
    return parts.join(QLatin1Char('.'));
}

// In a block: without the "attn.", "linear." or "shared_expert." its title already says ("attn.q" -> "q").
QString tensor_line(const TensorInfo& t, const QString& suffix = {}) {
    QString name = layer_tensor_name(t.name);
    for (const QLatin1String prefix : {QLatin1String("attn."), QLatin1String("linear."), QLatin1String("shared_expert.")})
        if (name.startsWith(prefix)) name = name.mid(prefix.size());
    const QString shape = t.dims == 1 ? QString::number(t.rows) : QStringLiteral("%1×%2").arg(t.rows).arg(t.cols);
    return QStringLiteral("%1 %2 %3%4").arg(name, shape, t.type, suffix);
}

}  // namespace

std::vector<GraphRow> model_graph(const FileLayout& layout) {
    std::map<int, std::vector<const TensorInfo*>> by_section;
    for (const TensorInfo& t : layout.tensors) by_section[t.section].push_back(&t);
    auto lines_of = [&](int section, const QString& suffix = {}) {
        QStringList lines;
        for (const TensorInfo* t : by_section[section]) lines << tensor_line(*t, suffix);
        return lines;
    };
    GraphRow input{-1, QObject::tr("input"), {}}, output{-1, QObject::tr("output"), {}};
    std::map<int, GraphRow> layers;
    std::map<int, std::vector<int>> experts;  // layer -> expert sections, in expert order
    GraphBlock tokenizer{GraphBlock::Kind::Tokenizer, -1, graph_kind_name(GraphBlock::Kind::Tokenizer), {}, {}};
    auto layer_row = [&](int l) -> GraphRow& {
        GraphRow& r = layers[l];
        r.layer = l;
        r.label = QObject::tr("layer %1").arg(l);
        return r;
    };
    for (const SectionInfo& s : layout.sections) {
        const QString& k = s.kind;
        if (k == QLatin1String("tokenizer") || k == QLatin1String("tokenizer_config") || k == QLatin1String("chat_template")) {
            tokenizer.sections.push_back(s.index);
            tokenizer.tensors << (k == QLatin1String("tokenizer") ? QObject::tr("tokenizer.json") : k == QLatin1String("tokenizer_config")
                                                                                 ? QObject::tr("tokenizer_config.json")
                                                                                 : QObject::tr("chat template"));
        } else if (k == QLatin1String("embedding")) {
            input.blocks.push_back({GraphBlock::Kind::Embedding, -1, graph_kind_name(GraphBlock::Kind::Embedding), lines_of(s.index), {s.index}});
        } else if (k == QLatin1String("output")) {
            // Tied embeddings: the section holds the norm only, the embedding doubles as the lm head.
            bool head = false;
            for (const TensorInfo* t : by_section[s.index]) head = head || t->dims == 2;
            output.blocks.push_back({GraphBlock::Kind::Output, -1, head ? graph_kind_name(GraphBlock::Kind::Output) : QObject::tr("norm; lm head = embedding"),
                                     lines_of(s.index), {s.index}});
        } else if (s.layer >= 0 && k == QLatin1String("attention")) {
            // Gated DeltaNet layers keep their projections under "linear.": the same section kind, another mixer.
            bool linear = false;
            for (const TensorInfo* t : by_section[s.index]) linear = linear || layer_tensor_name(t->name).startsWith(QLatin1String("linear."));
            const auto kind = linear ? GraphBlock::Kind::LinearAttention : GraphBlock::Kind::Attention;
            layer_row(s.layer).blocks.push_back({kind, s.layer, graph_kind_name(kind), lines_of(s.index), {s.index}});
        } else if (s.layer >= 0 && k == QLatin1String("router")) {
            layer_row(s.layer).blocks.push_back({GraphBlock::Kind::Router, s.layer, graph_kind_name(GraphBlock::Kind::Router), lines_of(s.index), {s.index}});
        } else if (s.layer >= 0 && k == QLatin1String("expert")) {
            layer_row(s.layer);
            experts[s.layer].push_back(s.index);
        } else if (s.layer >= 0 && k == QLatin1String("shared_expert")) {
            layer_row(s.layer).blocks.push_back(
                {GraphBlock::Kind::SharedExpert, s.layer, graph_kind_name(GraphBlock::Kind::SharedExpert), lines_of(s.index), {s.index}});
        } else if (s.layer >= 0 && k == QLatin1String("dense_mlp")) {
            layer_row(s.layer).blocks.push_back({GraphBlock::Kind::DenseMlp, s.layer, graph_kind_name(GraphBlock::Kind::DenseMlp), lines_of(s.index), {s.index}});
        }
    }
    // The experts of a layer are one block (they share shapes and types); expert 0's tensors stand for all of them.
    for (auto& [l, sections] : experts) {
        const QString times = QStringLiteral(" ×%1").arg(sections.size());
        GraphBlock b{GraphBlock::Kind::Experts, l, sections.size() == 1 ? QObject::tr("1 expert") : QObject::tr("%1 experts").arg(sections.size()),
                     lines_of(sections.front(), times), sections};
        std::vector<GraphBlock>& blocks = layers[l].blocks;
        // After the router, before the shared expert: the order the data flows through them.
        auto at = std::find_if(blocks.begin(), blocks.end(), [](const GraphBlock& x) { return x.kind == GraphBlock::Kind::SharedExpert; });
        blocks.insert(at, std::move(b));
    }
    for (auto& [l, row] : layers)
        std::stable_sort(row.blocks.begin(), row.blocks.end(), [](const GraphBlock& a, const GraphBlock& b) {
            auto rank = [](GraphBlock::Kind k) {
                return k == GraphBlock::Kind::Attention || k == GraphBlock::Kind::LinearAttention ? 0 : k == GraphBlock::Kind::Router ? 1 : 2;
            };
            return rank(a.kind) < rank(b.kind);
        });
    if (!tokenizer.sections.empty()) input.blocks.insert(input.blocks.begin(), std::move(tokenizer));
    std::vector<GraphRow> rows;
    if (!input.blocks.empty()) rows.push_back(std::move(input));
    for (auto& [l, row] : layers) rows.push_back(std::move(row));
    if (!output.blocks.empty()) rows.push_back(std::move(output));
    return rows;
}

}  // namespace colibri::studio
