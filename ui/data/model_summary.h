// The facts about a loaded model the main window shows: family, layers, experts, weight types, size, tokenizer,
// the session's context and threads, the expert cache. A plain value, copied from the engine's thread.
#pragma once
#include <QMetaType>
#include <QString>
#include <QVector>
#include <utility>

#include "engine/core/sampler.h"
#include "ui/data/rank_placement.h"

namespace colibri {
class Model;
}

namespace colibri::studio {

struct ModelSummary {
    QString path;
    QString family;
    int layers = 0;
    int moe_layers = 0;
    QVector<int> moe_layer_ids;  // the layers that route, ascending
    // Gated DeltaNet hybrids: the linear-attention layers (ascending; the others are full attention) and their
    // value heads, each with a recurrent state. Empty for every other family.
    QVector<int> linear_layer_ids;
    int linear_heads = 0;
    bool is_linear(int layer) const { return linear_layer_ids.contains(layer); }
    int experts = 0;
    int active_experts = 0;
    int mtp_layers = 0;  // multi-token-prediction layers (HyperParams::mtp_layers): the head MTP speculation drafts with
    int hidden_size = 0;
    int vocab_size = 0;
    int context = 0;          // of the session the worker opened
    int max_position = 0;
    quint64 file_size = 0;    // bytes on disk
    quint64 image_size = 0;   // bytes of the uncompressed model (differs for .bin.zst)
    QVector<std::pair<QString, quint64>> weight_bytes;  // per weight type
    QString tokenizer;        // "byte-level BPE", "SentencePiece BPE" or "none"
    bool has_tokenizer = false;
    bool has_chat_template = false;
    // The sampling its generation_config.json recommends, over Colibri's defaults; the text says what the file set
    // ("greedy", "temperature 0.7, top-p 0.8"), empty when it set nothing.
    SamplerConfig default_sampling;
    QString default_sampling_text;
    int threads = 0;
    bool remote = false;      // a colibri serve elsewhere (path is its address): no file, no counters
    // A server whose experts are spread over ranks (mpirun -np N colibri serve): N and who holds which expert.
    RankPlacement placement;
    // With a RAM budget (the expert cache): 0 budget means the whole model is mapped.
    struct Cache {
        quint64 budget = 0;
        quint64 resident_bytes = 0;  // what every token uses, kept mapped
        quint64 slot_bytes = 0;
        int slot_count = 0;          // per MoE layer
        QString policy;              // "lru", "lfru", "pinned"
        bool prefetch = false;
        bool direct_io = false;
    } cache;
};

ModelSummary summarize(const Model& model, const QString& path);

// "1.5 MiB", "512 B": sizes for people.
QString human_bytes(quint64 bytes);
// "3.84 M", "1.2 B", "950": counts (parameters) for people, three significant digits.
QString human_count(quint64 n);

}  // namespace colibri::studio

Q_DECLARE_METATYPE(colibri::studio::ModelSummary)
