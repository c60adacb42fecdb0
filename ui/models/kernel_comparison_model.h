// The kernel comparisons run on the model: one row per kernel variant of the comparison shown (prompt and
// decode tokens/s as the median of the repetitions with their min–max, how far the repetitions lie apart,
// decode against the first variant's, the decode's time per token in the layers and the lm head, and whether it
// decoded the same tokens as the first). With a baseline (another comparison, side by side) two more columns:
// the baseline's decode tokens/s of the same variant and the ratio, said to be within the noise where the two
// runs' min–max ranges overlap.
#pragma once
#include <optional>

#include "ui/data/kernel_comparison.h"
#include "ui/models/table_model.h"

namespace colibri::studio {

class KernelComparisonModel : public TableModel {
    Q_OBJECT
public:
    enum Column { Variant, PromptTps, DecodeTps, Spread, Speedup, DecodeUs, LayersUs, LmHeadUs, SameOutput, BaselineDecodeTps, VsBaseline };

    explicit KernelComparisonModel(QObject* parent = nullptr);
    void set_comparison(const KernelComparison& c);
    // Another comparison to set beside this one; nullopt: none (and no baseline columns).
    void set_baseline(const std::optional<KernelComparison>& baseline);
    const KernelComparison& comparison() const { return comparison_; }
    const std::optional<KernelComparison>& baseline() const { return baseline_; }

private:
    int rows() const override { return static_cast<int>(comparison_.runs.size()); }
    QVariant other_data(int row, int column, int role) const override;
    void declare_columns();
    const KernelRun& run(int row) const { return comparison_.runs[static_cast<size_t>(row)]; }
    const KernelRun* baseline_run(int row) const;
    bool same_output(int row) const { return run(row).decoded == comparison_.runs.front().decoded; }
    double spread(int row) const;

    KernelComparison comparison_;
    std::optional<KernelComparison> baseline_;
};

// "75.2 (70.1–80.3)": a median with its repetitions' min–max; a single repetition has none.
QString median_with_range(const tools::Spread& s, int decimals);
// The repetitions one by one, their IQR and min–max, for a tooltip.
QString spread_tooltip(const tools::Spread& s, const QString& unit);

}  // namespace colibri::studio
