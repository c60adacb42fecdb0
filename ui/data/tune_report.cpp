#include "ui/data/tune_report.h"

#include <QFile>
#include <QFileInfo>

#include "tools/tune_report.h"

namespace colibri::studio {

QString TuneReport::label() const {
    const QString file = QFileInfo(source).fileName();
    return cpu_model.isEmpty() ? file : QStringLiteral("%1 (%2)").arg(cpu_model, file);
}

TuneReport studio_report(const kernels::TuneReport& r, const QString& source) {
    TuneReport report;
    report.source = source;
    report.colibri_version = QString::fromStdString(r.version);
    report.cpu_model = QString::fromStdString(r.cpu_model);
    for (const std::string& f : r.cpu_features) report.cpu_features << QString::fromStdString(f);
    for (const kernels::TuneResult& t : r.results)
        report.results.push_back({QLatin1String(kernels::op_name(t.op)), QLatin1String(kernels::weight_type_label(t.type)),
                                  static_cast<int>(t.rows), static_cast<int>(t.cols), QLatin1String(kernels::variant_name(t.variant)),
                                  t.ns_median, t.gflops, t.gbps, t.chosen});
    return report;
}

Result<TuneReport> parse_tune_report(const QByteArray& json, const QString& source) {
    auto parsed = tools::parse_tune_report(std::string_view(json.constData(), static_cast<size_t>(json.size())));
    if (!parsed) return error(source.toStdString() + ": " + parsed.message());
    return studio_report(parsed.value(), source);
}

Result<TuneReport> read_tune_report(const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return error((path + ": " + f.errorString()).toStdString());
    return parse_tune_report(f.readAll(), path);
}

QByteArray tune_report_json(const TuneReport& report) {
    // Back to the engine's form (its names came from parse_tune_report, so they are known), written by the one writer.
    kernels::TuneReport r;
    r.version = report.colibri_version.toStdString();
    r.cpu_model = report.cpu_model.toStdString();
    for (const QString& f : report.cpu_features) r.cpu_features.push_back(f.toStdString());
    for (const TuneResult& t : report.results) {
        kernels::TuneResult k{};
        kernels::op_from_name(t.op.toStdString(), &k.op);
        for (WeightType type : kernels::kernel_types())
            if (t.type == QLatin1String(kernels::weight_type_label(type))) k.type = type;
        kernels::variant_from_name(t.variant.toStdString(), &k.variant);
        k.rows = static_cast<size_t>(t.rows);
        k.cols = static_cast<size_t>(t.cols);
        k.ns_median = t.ns_median;
        k.gflops = t.gflops;
        k.gbps = t.gbps;
        k.chosen = t.chosen;
        r.results.push_back(k);
    }
    return QByteArray::fromStdString(kernels::tune_report_json(r));
}

}  // namespace colibri::studio
