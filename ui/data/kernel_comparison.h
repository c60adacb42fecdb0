// A kernel comparison on a model: the same prompt and the same greedy decode run once per kernel variant
// (scalar, AVX2, AVX-512, NEON translated, ... whatever this machine runs), with tokens/s and the decode's
// time per layer, measured by tools::compare_kernels (the measurement of `colibri bench`), with every
// repetition's figure and the machine's load while it ran. Plain values: the
// EngineWorker produces them, the kernels view shows them, KernelResults keeps and exports them.
#pragma once
#include <QJsonObject>
#include <QMetaType>
#include <QString>
#include <QStringList>
#include <vector>

#include "engine/base/status.h"
#include "tools/bench.h"

namespace colibri::studio {

struct KernelComparisonRequest {
    std::vector<int32_t> prompt;  // token ids; empty: prompt_tokens seeded random ids, as `colibri bench`
    int prompt_tokens = 64;       // the prompt is cut to this length
    int decode_tokens = 32;
    int reps = 3;                 // per variant, interleaved (variant order within each repetition)
    QStringList variants;         // kernels::variant_name; empty: every variant this machine runs
};

// A variant's runs: tools::KernelRun, the type `colibri bench --kernel` reports, measured by the same function.
using tools::KernelRun;
// kernels::variant_name ("avx2") and the name the views show ("AVX2").
QString variant_key(const KernelRun& run);
QString variant_label(const KernelRun& run);

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
    // Other load on the machine over the whole comparison (kept in every run's report).
    tools::MachineLoad load() const { return runs.empty() ? tools::MachineLoad{} : runs.front().report.load; }
    // Why its figures should not be trusted (tools::comparison_unreliable), or "".
    QString unreliable() const { return QString::fromStdString(tools::comparison_unreliable(runs)); }
    bool has_variant(kernels::Variant v) const;
    QJsonObject to_json() const;
    static Result<KernelComparison> from_json(const QJsonObject& o);
    // One line per variant: variant, prompt and decode tokens/s, then µs per layer and the lm head.
    QString csv() const;
};

}  // namespace colibri::studio

Q_DECLARE_METATYPE(colibri::studio::KernelComparison)
Q_DECLARE_METATYPE(colibri::studio::KernelComparisonRequest)
