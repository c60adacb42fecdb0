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

int KernelResultsModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : static_cast<int>(rows_.size()); }
int KernelResultsModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant KernelResultsModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= rowCount()) return {};
    const Row& row = rows_[static_cast<size_t>(index.row())];
    const TuneReport& rep = reports_[static_cast<size_t>(row.report)];
    const TuneResult& t = rep.results[row.result];
    if (role == ReportRole) return row.report;
    if (role == Qt::ToolTipRole && index.column() == Machine)
        return tr("%1\nfeatures: %2\ncolibri %3").arg(rep.source, rep.cpu_features.join(QStringLiteral(" ")), rep.colibri_version);
    if (role == Qt::FontRole && t.chosen) {
        QFont f;
        f.setBold(true);
        return f;
    }
    if (role != Qt::DisplayRole && role != Qt::EditRole) return {};
    const bool raw = role == Qt::EditRole;
    switch (index.column()) {
    case Machine: return rep.label();
    case Op: return t.op;
    case Type: return t.type;
    case Shape: return raw ? QVariant(static_cast<qlonglong>(t.rows) * t.cols) : QVariant(t.shape());
    case Variant: return t.variant;
    case NsMedian: return raw ? QVariant(t.ns_median) : QVariant(QString::number(t.ns_median / 1e3, 'f', 2));
    case Gflops: return raw ? QVariant(t.gflops) : QVariant(QString::number(t.gflops, 'f', 2));
    case Gbps: return raw ? QVariant(t.gbps) : QVariant(QString::number(t.gbps, 'f', 2));
    case Chosen: return raw ? QVariant(t.chosen) : QVariant(t.chosen ? tr("chosen") : QString());
    default: return {};
    }
}

QVariant KernelResultsModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
    switch (section) {
    case Machine: return tr("machine");
    case Op: return tr("op");
    case Type: return tr("type");
    case Shape: return tr("rows × cols");
    case Variant: return tr("variant");
    case NsMedian: return tr("median µs");
    case Gflops: return tr("GFLOP/s");
    case Gbps: return tr("GB/s");
    case Chosen: return tr("chosen");
    default: return {};
    }
}

}  // namespace colibri::studio
