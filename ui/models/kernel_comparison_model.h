// The kernel comparisons run on the model: one row per kernel variant of the comparison shown (prompt and
// decode tokens/s as medians over the repetitions, decode against the first variant's, the decode's time per
// token in the layers and the lm head, and whether it decoded the same tokens as the first).
#pragma once

#include "ui/data/kernel_comparison.h"
#include "ui/models/table_model.h"

namespace colibri::studio {

class KernelComparisonModel : public TableModel {
    Q_OBJECT
public:
    enum Column { Variant, PromptTps, DecodeTps, Speedup, DecodeUs, LayersUs, LmHeadUs, SameOutput, ColumnCount };

    explicit KernelComparisonModel(QObject* parent = nullptr);
    void set_comparison(const KernelComparison& c);
    const KernelComparison& comparison() const { return comparison_; }

private:
    int rows() const override { return static_cast<int>(comparison_.runs.size()); }
    const KernelRun& run(int row) const { return comparison_.runs[static_cast<size_t>(row)]; }
    bool same_output(int row) const { return run(row).decoded == comparison_.runs.front().decoded; }

    KernelComparison comparison_;
};

}  // namespace colibri::studio
