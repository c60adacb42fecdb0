#include "ui/models/kernel_comparison_model.h"

#include <QBrush>
#include <numeric>

#include "ui/colors.h"

namespace colibri::studio {

QString median_with_range(const tools::Spread& s, int decimals) {
    const QString median = QString::number(s.median, 'f', decimals);
    if (s.samples.size() < 2) return median;
    return QStringLiteral("%1 (%2–%3)").arg(median, QString::number(s.min, 'f', decimals), QString::number(s.max, 'f', decimals));
}

QString spread_tooltip(const tools::Spread& s, const QString& unit) {
    QStringList each;
    for (double v : s.samples) each << QString::number(v, 'f', 1);
    return QObject::tr("%n repetition(s): %1 %2\nmedian %3, IQR %4–%5, min–max %6–%7 (%8 % of the median)", nullptr, static_cast<int>(s.samples.size()))
        .arg(each.join(QStringLiteral(", ")), unit)
        .arg(s.median, 0, 'f', 1).arg(s.q1, 0, 'f', 1).arg(s.q3, 0, 'f', 1).arg(s.min, 0, 'f', 1).arg(s.max, 0, 'f', 1)
        .arg(100.0 * s.relative_range(), 0, 'f', 0);
}

KernelComparisonModel::KernelComparisonModel(QObject* parent) : TableModel(parent) { declare_columns(); }

double KernelComparisonModel::spread(int row) const {
    return std::max(run(row).report.prompt_tps.relative_range(), run(row).report.decode_tps.relative_range());
}

const KernelRun* KernelComparisonModel::baseline_run(int row) const {
    if (!baseline_) return nullptr;
    for (const KernelRun& r : baseline_->runs)
        if (r.variant == run(row).variant) return &r;
    return nullptr;
}

void KernelComparisonModel::declare_columns() {
    auto tps = [this](int row) { return run(row).report.decode_tps.median; };
    auto rate = [this](const QString& header, const tools::Spread tools::BenchReport::*figure) {
        return TableColumn{header, [this, figure](int row) { return QVariant(median_with_range(run(row).report.*figure, 1)); },
                           [this, figure](int row) { return QVariant((run(row).report.*figure).median); }, Qt::AlignRight | Qt::AlignVCenter,
                           [this, figure](int row) { return QVariant(spread_tooltip(run(row).report.*figure, tr("tok/s"))); }};
    };
    std::vector<TableColumn> columns{
        {tr("kernel"), [this](int row) { return QVariant(variant_label(run(row))); }, {}, Qt::AlignLeft | Qt::AlignVCenter,
         [this](int row) {
             return run(row).variant == kernels::Variant::NeonTranslated ? QVariant(tr(tools::kNeonTranslatedNote)) : QVariant();
         }},
        rate(tr("prompt tok/s (min–max)"), &tools::BenchReport::prompt_tps),
        rate(tr("decode tok/s (min–max)"), &tools::BenchReport::decode_tps),
        {tr("spread"),
         [this](int row) {
             if (run(row).report.decode_tps.samples.size() < 2) return QVariant(QStringLiteral("—"));  // one repetition: none
             const QString pct = QStringLiteral("%1 %").arg(100.0 * spread(row), 0, 'f', 0);
             return QVariant(spread(row) > tools::kLargeSpread ? tr("%1, large").arg(pct) : pct);
         },
         [this](int row) { return QVariant(spread(row)); }, Qt::AlignRight | Qt::AlignVCenter,
         [](int) {
             return QVariant(tr("(max − min) / median of the repetitions, the larger of prompt and decode; above %1 % the "
                                "figures are not to be trusted; one repetition has none (—)").arg(100.0 * tools::kLargeSpread, 0, 'f', 0));
         }},
        number(tr("decode vs first"),
               [tps](int row) {
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
    };
    if (baseline_) {
        columns.push_back({tr("decode tok/s, %1").arg(baseline_->when),
                           [this](int row) {
                               const KernelRun* b = baseline_run(row);
                               return QVariant(b ? median_with_range(b->report.decode_tps, 1) : tr("not run"));
                           },
                           [this](int row) {
                               const KernelRun* b = baseline_run(row);
                               return QVariant(b ? b->report.decode_tps.median : -1.0);
                           },
                           Qt::AlignRight | Qt::AlignVCenter,
                           [this](int row) {
                               const KernelRun* b = baseline_run(row);
                               return b ? QVariant(spread_tooltip(b->report.decode_tps, tr("tok/s"))) : QVariant();
                           }});
        columns.push_back({tr("vs %1").arg(baseline_->when),
                           [this](int row) -> QVariant {
                               const KernelRun* b = baseline_run(row);
                               if (!b || b->report.decode_tps.median <= 0) return QStringLiteral("—");
                               const tools::Spread &now = run(row).report.decode_tps, &then = b->report.decode_tps;
                               // Ranges that overlap: the difference is no larger than the runs' own noise.
                               const bool overlap = now.min <= then.max && then.min <= now.max;
                               return tr("×%1, %2").arg(now.median / then.median, 0, 'f', 2).arg(overlap ? tr("within the spread") : tr("beyond the spread"));
                           },
                           [this](int row) {
                               const KernelRun* b = baseline_run(row);
                               return QVariant(b && b->report.decode_tps.median > 0 ? run(row).report.decode_tps.median / b->report.decode_tps.median : 0.0);
                           }});
    }
    set_columns(std::move(columns));
}

QVariant KernelComparisonModel::other_data(int row, int column, int role) const {
    if (role == Qt::ForegroundRole && column == Spread && spread(row) > tools::kLargeSpread) return QBrush(status_color(StatusColor::Warning));
    return {};
}

void KernelComparisonModel::set_comparison(const KernelComparison& c) {
    beginResetModel();
    comparison_ = c;
    declare_columns();
    endResetModel();
}

void KernelComparisonModel::set_baseline(const std::optional<KernelComparison>& baseline) {
    beginResetModel();
    baseline_ = baseline;
    declare_columns();
    endResetModel();
}

}  // namespace colibri::studio
