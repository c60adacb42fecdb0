// The model as a layer graph (what Netron draws, from the .bin's own sections): the embedding, then each layer's
// token mixer (softmax attention or Gated DeltaNet linear attention), its feed-forward part (a router with its
// experts and shared expert, or a dense MLP), then the output norm and lm head; each block with its tensors'
// names, shapes and types and the sections it stands for, so a click can select them.
#pragma once
#include <QString>
#include <QStringList>
#include <vector>

#include "ui/data/file_layout.h"

namespace colibri::studio {

struct GraphBlock {
    enum class Kind { Tokenizer, Embedding, Attention, LinearAttention, Router, Experts, SharedExpert, DenseMlp, Output };
    Kind kind = Kind::Embedding;
    int layer = -1;          // -1 outside the layers
    QString title;           // "attention", "linear attention", "router", "8 experts", "shared expert", ...
    QStringList tensors;     // "q [128, 64] f16", one per tensor (for the experts: expert 0's, "×8")
    std::vector<int> sections;  // what the block stands for in the file
};

// One row of the graph: the blocks outside the layers, or one layer's, left to right in the order data flows.
struct GraphRow {
    int layer = -1;
    QString label;  // "input", "layer 3", "output"
    std::vector<GraphBlock> blocks;
};

std::vector<GraphRow> model_graph(const FileLayout& layout);
QString graph_kind_name(GraphBlock::Kind kind);

}  // namespace colibri::studio
