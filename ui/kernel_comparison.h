// A kernel comparison on a model: the same prompt and the same greedy decode run once per kernel variant
// (scalar, AVX2, AVX-512, NEON translated, ... whatever this machine runs), with tokens/s and the decode's
// time per layer. Plain values: the EngineWorker produces them, the kernels view shows, keeps and exports them.
#pragma once
#include <QJsonObject>
#include <QMetaType>
#include <QString>
#include <QStringList>
#include <vector>

#include "engine/base/status.h"

namespace colibri::studio {

struct KernelComparisonRequest {
    std::vector<int32_t> prompt;  // token ids; empty: prompt_tokens seeded random ids, as `colibri bench`
    int prompt_tokens = 64;       // the prompt is cut to this length
    int decode_tokens = 32;
    int reps = 3;                 // per variant, interleaved (variant order within each repetition)
    QStringList variants;         // kernels::variant_name; empty: every variant this machine runs
};

struct KernelRun {
    QString variant;                 // "avx2"
    QString display;                 // "AVX2"
    std::vector<double> prompt_tps;  // per repetition
    std::vector<double> decode_tps;
    std::vector<int> layers;         // layer numbers of layer_us
    std::vector<double> layer_us;    // decode: mean µs per token in each layer (attention, router, experts)
    double lm_head_us = 0.0;         // decode: final norm and lm head, per token
    double token_us = 0.0;           // decode: the whole step, per token
    std::vector<int32_t> decoded;    // the greedy ids of the first repetition
    double prompt_median() const;
    double decode_median() const;
};

struct KernelComparison {
    QString model;
    QString cpu;
    int threads = 0;
    int prompt_tokens = 0, decode_tokens = 0, reps = 0;
    std::vector<KernelRun> runs;  // in the order run; complete repetitions only
    bool complete = true;         // false: stopped part-way
    QString error;                // set when the comparison could not run at all
    QString when;                 // ISO date and time it finished

    // Every variant decoded the same ids (the kernels are bit-identical; docs/KERNELS.md).
    bool identical_output() const;
    QJsonObject to_json() const;
    static Result<KernelComparison> from_json(const QJsonObject& o);
    // One line per variant: variant, prompt and decode tokens/s, then µs per layer and the lm head.
    QString csv() const;
};

}  // namespace colibri::studio

Q_DECLARE_METATYPE(colibri::studio::KernelComparison)
Q_DECLARE_METATYPE(colibri::studio::KernelComparisonRequest)
