#include "ui/models/kernel_comparison_model.h"

#include <numeric>

namespace colibri::studio {

KernelComparisonModel::KernelComparisonModel(QObject* parent) : TableModel(parent) {
    auto tps = [this](int row) { return run(row).report.decode_tps.median; };
    set_columns({
        text(tr("kernel"), [this](int row) { return QVariant(variant_label(run(row))); }),
        number(tr("prompt tok/s"), [this](int row) { return run(row).report.prompt_tps.median; }, 1),
        number(tr("decode tok/s"), tps, 1),
        number(tr("decode vs first"),
               [this, tps](int row) {
                   const double base = tps(0);
                   return base > 0 ? tps(row) / base : 0.0;
               },
               2, [](double v) { return QStringLiteral("×%1").arg(v, 0, 'f', 2); }),
        number(tr("µs / token"), [this](int row) { return run(row).report.decode_token_us; }, 1),
        number(tr("layers µs"),
               [this](int row) {
                   const std::vector<tools::LayerTimes>& layers = run(row).report.decode_layers;
                   return std::accumulate(layers.begin(), layers.end(), 0.0, [](double sum, const tools::LayerTimes& l) { return sum + l.total_us(); });
               },
               1),
        number(tr("lm head µs"), [this](int row) { return run(row).report.decode_lm_head_us; }, 1),
        {tr("same tokens"), [this](int row) { return QVariant(same_output(row) ? tr("yes") : tr("NO")); },
         [this](int row) { return QVariant(same_output(row)); }, Qt::AlignRight | Qt::AlignVCenter,
         [this](int row) {
             const KernelRun& first = comparison_.runs.front();
             return QVariant(same_output(row) ? tr("the same %1 greedy tokens as %2").arg(run(row).decoded.size()).arg(variant_label(first))
                                              : tr("different tokens from %1: the variants should be bit-identical").arg(variant_label(first)));
         }},
    });
}

void KernelComparisonModel::set_comparison(const KernelComparison& c) {
    beginResetModel();
    comparison_ = c;
    endResetModel();
}

}  // namespace colibri::studio
