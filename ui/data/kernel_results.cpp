#include "ui/data/kernel_results.h"

#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <algorithm>

#include "ui/file_output.h"

namespace colibri::studio {

void KernelResults::add_comparison(const KernelComparison& comparison) {
    comparisons_.push_back(comparison);
    save();
}

const TuneReport& KernelResults::add_own_report(const TuneReport& report) {
    TuneReport r = report;
    const QString when = QDateTime::currentDateTime().toString(QStringLiteral("yyyy-MM-dd HH:mm"));
    if (!r.source.contains(when)) r.source = r.source + QStringLiteral(", ") + when;
    own_reports_.push_back(std::move(r));
    save();
    return own_reports_.back();
}

void KernelResults::remove_own_report(const QString& source) {
    const auto kept = std::remove_if(own_reports_.begin(), own_reports_.end(), [&](const TuneReport& r) { return r.source == source; });
    if (kept == own_reports_.end()) return;
    own_reports_.erase(kept, own_reports_.end());
    save();
}

void KernelResults::clear_own_reports() {
    own_reports_.clear();
    save();
}

QByteArray KernelResults::json() const {
    QJsonArray comparisons, reports;
    for (const KernelComparison& c : comparisons_) comparisons.append(c.to_json());
    for (const TuneReport& r : own_reports_) {
        QJsonObject o = QJsonDocument::fromJson(tune_report_json(r)).object();
        o["source"] = r.source;
        reports.append(o);
    }
    return QJsonDocument(QJsonObject{{"format", "colibri-kernel-results"}, {"version", 1}, {"comparisons", comparisons}, {"tune_reports", reports}})
        .toJson(QJsonDocument::Indented);
}

QString KernelResults::csv() const {
    QString csv;
    for (const KernelComparison& c : comparisons_) {
        csv += QStringLiteral("# %1, %2, %3 threads, %4\n").arg(c.model, c.cpu).arg(c.threads).arg(c.when);
        csv += c.csv();
    }
    return csv;
}

Status KernelResults::export_to(const QString& path) const {
    return save_file(path, path.endsWith(QLatin1String(".csv"), Qt::CaseInsensitive) ? csv().toUtf8() : json());
}

void KernelResults::set_store(const QString& path) {
    store_ = path;
    if (path.isEmpty()) return;
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return;  // nothing kept yet
    const QJsonObject root = QJsonDocument::fromJson(f.readAll()).object();
    if (root.value("format").toString() != QLatin1String("colibri-kernel-results")) return;
    for (const auto& v : root.value("comparisons").toArray())
        if (auto c = KernelComparison::from_json(v.toObject())) comparisons_.push_back(std::move(c.value()));
    for (const auto& v : root.value("tune_reports").toArray()) {
        const QJsonObject o = v.toObject();
        if (auto r = parse_tune_report(QJsonDocument(o).toJson(QJsonDocument::Compact), o.value("source").toString()))
            own_reports_.push_back(std::move(r.value()));
    }
}

Status KernelResults::save() const {
    if (store_.isEmpty()) return Status::ok();
    QDir().mkpath(QFileInfo(store_).absolutePath());
    return export_to(store_);
}

}  // namespace colibri::studio
