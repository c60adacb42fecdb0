// A Gated DeltaNet hybrid's recurrent states across the conversation: one row per (linear layer, value head), one
// column per evaluated position, the value the state's norm after that token, its write strength β or its decay.
// Rebuilt from the conversation's traces; when only positions were added, columns are inserted so that views keep
// their scroll position.
#pragma once
#include <QAbstractTableModel>
#include <vector>

#include "ui/conversation.h"

namespace colibri::studio {

class LinearStateModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum class Quantity { Norm, Beta, Decay };
    enum Role { ValueRole = Qt::UserRole + 1, IntensityRole, LayerRole, HeadRole, PositionRole };

    using QAbstractTableModel::QAbstractTableModel;
    // The model's linear layers and their value heads; rows are layer-major.
    void set_layers(const QVector<int>& layers, int heads);
    void set_quantity(Quantity q);
    Quantity quantity() const { return quantity_; }
    // Reads every position of the conversation that has a trace.
    void update(const Conversation& conversation);

    int layer_of(int row) const { return heads_ > 0 ? layers_.value(row / heads_, -1) : -1; }
    int head_of(int row) const { return heads_ > 0 ? row % heads_ : -1; }
    int position_of(int column) const { return positions_[static_cast<size_t>(column)]; }
    // The largest value of the shown quantity (the colour scale's top: norms are scaled by it, β and the decay by 1).
    double scale_max() const;
    double max_value() const { return max_[static_cast<int>(quantity_)]; }
    // Where a quantity is largest (row and column -1 when there are no values).
    struct Peak {
        double value = 0;
        int row = -1, column = -1;
    };
    Peak peak(Quantity q) const;
    int layer_count() const { return static_cast<int>(layers_.size()); }
    int heads() const { return heads_; }
    // "layer,head,P0,P1,...", then one row per (layer, head), of the shown quantity.
    QString to_csv() const;

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

private:
    // [quantity][row][column]; NaN where a position has no record of that layer.
    const std::vector<float>& values(int row) const { return values_[static_cast<int>(quantity_)][static_cast<size_t>(row)]; }
    QVector<int> layers_;
    int heads_ = 0;
    Quantity quantity_ = Quantity::Norm;
    std::vector<int> positions_;
    std::vector<QString> texts_;
    std::vector<std::vector<float>> values_[3];
    double max_[3] = {0, 0, 0};
};

}  // namespace colibri::studio
