// The profiler's Ranks table (a server across ranks, ui/rank_stats.h): per MoE layer each rank's median time in its
// share of the experts, the slowest rank, rank 0's median wait in the exchange and the bytes exchanged per token. One
// column per rank, each headed by its colour (the heatmap's owners).
#pragma once
#include <algorithm>

#include "ui/models/table_model.h"
#include "ui/rank_stats.h"

namespace colibri::studio {

class RankTimeModel : public TableModel {
    Q_OBJECT
public:
    enum Column { Layer, FirstRank };  // then per rank, then Slowest, Exchange, Bytes (slowest_column() ...)

    explicit RankTimeModel(QObject* parent = nullptr);
    void set_totals(const RankTotals& totals);
    const RankTotals& totals() const { return totals_; }
    int ranks() const { return totals_.ranks; }
    int slowest_column() const { return FirstRank + std::max(totals_.ranks, 0); }
    int exchange_column() const { return slowest_column() + 1; }
    int bytes_column() const { return slowest_column() + 2; }
    QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

private:
    int rows() const override { return static_cast<int>(totals_.layers.size()); }
    QVariant other_data(int row, int column, int role) const override;
    void declare_columns();
    RankTotals totals_;
};

// "1.5 KiB" for a byte count that may be fractional (a mean per token).
QString bytes_text(double bytes);

}  // namespace colibri::studio
