// Every result of every imported tune report in one table (machine, op, type, shape, variant, time,
// GFLOP/s, GB/s, chosen), and the per-variant series the kernels chart draws for one op, type and shape.
#pragma once
#include <QStringList>

#include "ui/data/tune_report.h"
#include "ui/models/table_model.h"

namespace colibri::studio {

class KernelResultsModel : public TableModel {
    Q_OBJECT
public:
    enum Column { Machine, Op, Type, Shape, Variant, NsMedian, Gflops, Gbps, Chosen, ColumnCount };
    enum Role { ReportRole = Qt::UserRole + 1 };
    enum class Metric { Gflops, Gbps, Microseconds };

    explicit KernelResultsModel(QObject* parent = nullptr);
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

private:
    struct Row {
        int report;
        size_t result;
    };
    int rows() const override { return static_cast<int>(rows_.size()); }
    QVariant other_data(int row, int column, int role) const override;
    const TuneReport& report_of(int row) const { return reports_[static_cast<size_t>(rows_[static_cast<size_t>(row)].report)]; }
    const TuneResult& result_of(int row) const { return report_of(row).results[rows_[static_cast<size_t>(row)].result]; }
    void rebuild_rows();
    std::vector<TuneReport> reports_;
    std::vector<Row> rows_;
};

}  // namespace colibri::studio
