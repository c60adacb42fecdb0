// A read-only table of computed figures for the routing analyses: columns with headers and per-cell values
// (numbers sort as numbers through Qt::EditRole, show with the column's format), an optional background per
// cell (the co-activation matrix is a heatmap) and a tooltip per cell.
#pragma once
#include <QAbstractTableModel>
#include <QColor>
#include <QStringList>
#include <QVariant>
#include <QVector>

namespace colibri::studio {

// v with `digits` significant digits in fixed notation ("0.00312", "0.25", "12.5", "0"); below 1e-4, scientific.
QString significant(double v, int digits = 3);

class StatsTableModel : public QAbstractTableModel {
    Q_OBJECT
public:
    // Significant3: three significant digits however small (a divergence of 0.00312 bits is not "0.003").
    enum class Format { Text, Integer, Percent, Decimal3, Significant3 };
    struct Cell {
        Cell() = default;
        Cell(QVariant v, QColor background_ = {}, QString tooltip_ = {})
            : value(std::move(v)), background(std::move(background_)), tooltip(std::move(tooltip_)) {}
        QVariant value;
        QColor background;  // invalid: none
        QString tooltip;
    };

    using QAbstractTableModel::QAbstractTableModel;
    // formats: one per column (missing ones are Text); rows: each as long as headers.
    void set_table(const QStringList& headers, const QVector<Format>& formats, const QVector<QVector<Cell>>& rows,
                   const QStringList& row_headers = {});
    void clear();
    QString text(int row, int column) const;

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

private:
    QStringList headers_, row_headers_;
    QVector<Format> formats_;
    QVector<QVector<Cell>> rows_;
};

}  // namespace colibri::studio
