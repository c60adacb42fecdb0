// The base of the Studio's read-only tables. A model says how many rows it has and declares its columns once:
// the header, the value shown (Qt::DisplayRole), the value sorted by (Qt::EditRole: numbers sort as numbers, and
// tests read them), the alignment and an optional tooltip; this base answers Qt's questions from them. Roles a
// column does not declare (colours, a model's own roles) come from other_data.
#pragma once
#include <QAbstractTableModel>
#include <QString>
#include <functional>
#include <vector>

namespace colibri::studio {

// One column of a TableModel: each function gets the row.
struct TableColumn {
    using Value = std::function<QVariant(int row)>;
    QString header;
    Value display;
    Value sort = {};  // empty: display's value
    Qt::Alignment alignment = Qt::AlignRight | Qt::AlignVCenter;
    Value tooltip = {};
};

class TableModel : public QAbstractTableModel {
    Q_OBJECT
public:
    using Value = TableColumn::Value;
    // A column of numbers: shown with `decimals` places (by `format` when given), sorted by the number.
    static TableColumn number(const QString& header, std::function<double(int row)> value, int decimals,
                         std::function<QString(double)> format = {});
    // A column of text, left-aligned.
    static TableColumn text(const QString& header, Value value);

    using QAbstractTableModel::QAbstractTableModel;
    int rowCount(const QModelIndex& parent = {}) const final;
    int columnCount(const QModelIndex& parent = {}) const final;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const final;
    QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

protected:
    virtual int rows() const = 0;
    // From the constructor, or between beginResetModel and endResetModel (columns that follow the data).
    void set_columns(std::vector<TableColumn> columns) { columns_ = std::move(columns); }
    virtual QVariant other_data(int /*row*/, int /*column*/, int /*role*/) const { return {}; }

private:
    std::vector<TableColumn> columns_;
};

}  // namespace colibri::studio
