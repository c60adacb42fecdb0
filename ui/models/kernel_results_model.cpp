#include "ui/models/kernel_results_model.h"

#include <QFont>

namespace colibri::studio {

namespace {
void add_unique(QStringList& list, const QString& v) {
    if (!list.contains(v)) list << v;
}
}  // namespace

void KernelResultsModel::rebuild_rows() {
    rows_.clear();
    for (size_t r = 0; r < reports_.size(); ++r)
        for (size_t i = 0; i < reports_[r].results.size(); ++i) rows_.push_back({static_cast<int>(r), i});
}

KernelResultsModel::KernelResultsModel(QObject* parent) : TableModel(parent) {
    auto t = [this](int row) -> const TuneResult& { return result_of(row); };
    auto figure = [t](const QString& header, double TuneResult::*field, double scale) {
        return TableColumn{header, [t, field, scale](int row) { return QVariant(QString::number(t(row).*field / scale, 'f', 2)); },
                           [t, field](int row) { return QVariant(t(row).*field); }, Qt::AlignLeft | Qt::AlignVCenter};
    };
    set_columns({text(tr("machine"), [this](int row) { return QVariant(report_of(row).label()); }),
                 text(tr("op"), [t](int row) { return QVariant(t(row).op); }),
                 text(tr("type"), [t](int row) { return QVariant(t(row).type); }),
                 {tr("rows × cols"), [t](int row) { return QVariant(t(row).shape()); },
                  [t](int row) { return QVariant(static_cast<qlonglong>(t(row).rows) * t(row).cols); }, Qt::AlignLeft | Qt::AlignVCenter},
                 text(tr("variant"), [t](int row) { return QVariant(t(row).variant); }),
                 figure(tr("median µs"), &TuneResult::ns_median, 1e3),
                 figure(tr("GFLOP/s"), &TuneResult::gflops, 1),
                 figure(tr("GB/s"), &TuneResult::gbps, 1),
                 {tr("chosen"), [t](int row) { return QVariant(t(row).chosen ? tr("chosen") : QString()); }, [t](int row) { return QVariant(t(row).chosen); },
                  Qt::AlignLeft | Qt::AlignVCenter}});
}

void KernelResultsModel::add_report(const TuneReport& report) {
    const int first = rowCount();
    const int n = static_cast<int>(report.results.size());
    if (n == 0) return;
    beginInsertRows({}, first, first + n - 1);
    reports_.push_back(report);
    rebuild_rows();
    endInsertRows();
}

void KernelResultsModel::remove_report(int index) {
    if (index < 0 || index >= static_cast<int>(reports_.size())) return;
    beginResetModel();
    reports_.erase(reports_.begin() + index);
    rebuild_rows();
    endResetModel();
}

void KernelResultsModel::clear() {
    beginResetModel();
    reports_.clear();
    rows_.clear();
    endResetModel();
}

QStringList KernelResultsModel::ops() const {
    QStringList out;
    for (const TuneReport& r : reports_)
        for (const TuneResult& t : r.results) add_unique(out, t.op);
    return out;
}

QStringList KernelResultsModel::types(const QString& op) const {
    QStringList out;
    for (const TuneReport& r : reports_)
        for (const TuneResult& t : r.results)
            if (t.op == op) add_unique(out, t.type);
    return out;
}

QStringList KernelResultsModel::shapes(const QString& op, const QString& type) const {
    QStringList out;
    for (const TuneReport& r : reports_)
        for (const TuneResult& t : r.results)
            if (t.op == op && t.type == type) add_unique(out, t.shape());
    return out;
}

QStringList KernelResultsModel::variants(const QString& op, const QString& type, const QString& shape) const {
    QStringList out;
    for (const TuneReport& r : reports_)
        for (const TuneResult& t : r.results)
            if (t.op == op && t.type == type && t.shape() == shape) add_unique(out, t.variant);
    return out;
}

double KernelResultsModel::value(int report, const QString& op, const QString& type, const QString& shape,
                                 const QString& variant, Metric metric) const {
    if (report < 0 || report >= static_cast<int>(reports_.size())) return -1.0;
    for (const TuneResult& t : reports_[static_cast<size_t>(report)].results) {
        if (t.op != op || t.type != type || t.shape() != shape || t.variant != variant) continue;
        switch (metric) {
        case Metric::Gflops: return t.gflops;
        case Metric::Gbps: return t.gbps;
        case Metric::Microseconds: return t.ns_median / 1e3;
        }
    }
    return -1.0;
}

QVariant KernelResultsModel::other_data(int row, int column, int role) const {
    const TuneReport& rep = report_of(row);
    if (role == ReportRole) return rows_[static_cast<size_t>(row)].report;
    if (role == Qt::ToolTipRole && column == Machine)
        return tr("%1\nfeatures: %2\ncolibri %3").arg(rep.source, rep.cpu_features.join(QStringLiteral(" ")), rep.colibri_version);
    if (role == Qt::FontRole && result_of(row).chosen) {
        QFont f;
        f.setBold(true);
        return f;
    }
    return {};
}

}  // namespace colibri::studio
