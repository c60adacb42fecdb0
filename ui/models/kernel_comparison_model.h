// The kernel comparisons run on the model: one row per kernel variant of the comparison shown (prompt and
// decode tokens/s as medians over the repetitions, decode against the first variant's, the decode's time per
// token in the layers and the lm head, and whether it decoded the same tokens as the first).
#pragma once
#include <QAbstractTableModel>

#include "ui/kernel_comparison.h"

namespace colibri::studio {

class KernelComparisonModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Variant, PromptTps, DecodeTps, Speedup, DecodeUs, LayersUs, LmHeadUs, SameOutput, ColumnCount };

    using QAbstractTableModel::QAbstractTableModel;
    void set_comparison(const KernelComparison& c);
    const KernelComparison& comparison() const { return comparison_; }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

private:
    KernelComparison comparison_;
};

}  // namespace colibri::studio
