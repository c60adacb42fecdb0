// Every result of every imported tune report in one table (machine, op, type, shape, variant, time,
// GFLOP/s, GB/s, chosen), and the per-variant series the kernels chart draws for one op, type and shape.
#pragma once
#include <QAbstractTableModel>
#include <QStringList>

#include "ui/tune_report.h"

namespace colibri::studio {

class KernelResultsModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Machine, Op, Type, Shape, Variant, NsMedian, Gflops, Gbps, Chosen, ColumnCount };
    enum Role { ReportRole = Qt::UserRole + 1 };
    enum class Metric { Gflops, Gbps, Microseconds };

    using QAbstractTableModel::QAbstractTableModel;
    void add_report(const TuneReport& report);
    void remove_report(int index);
    void clear();
    const std::vector<TuneReport>& reports() const { return reports_; }

    // Distinct values over all reports, in first-seen order, for the chart's selectors.
    QStringList ops() const;
    QStringList types(const QString& op) const;
    QStringList shapes(const QString& op, const QString& type) const;
    QStringList variants(const QString& op, const QString& type, const QString& shape) const;
    // The metric of (report, variant) for one op/type/shape; < 0 when that report has no such result.
    double value(int report, const QString& op, const QString& type, const QString& shape, const QString& variant,
                 Metric metric) const;

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

private:
    struct Row {
        int report;
        size_t result;
    };
    void rebuild_rows();
    std::vector<TuneReport> reports_;
    std::vector<Row> rows_;
};

}  // namespace colibri::studio
