#include "ui/tune_report.h"

#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

namespace colibri::studio {

namespace {

Status need(const QJsonObject& o, const char* key, QJsonValue::Type type, const QString& where) {
    const QJsonValue v = o.value(QLatin1String(key));
    if (v.type() != type)
        return error((where + ": \"" + QLatin1String(key) + "\" is " + (v.isUndefined() ? "missing" : "of the wrong type")).toStdString());
    return Status::ok();
}

}  // namespace

QString TuneReport::label() const {
    const QString file = QFileInfo(source).fileName();
    return cpu_model.isEmpty() ? file : QStringLiteral("%1 (%2)").arg(cpu_model, file);
}

Result<TuneReport> parse_tune_report(const QByteArray& json, const QString& source) {
    QJsonParseError perr;
    const QJsonDocument doc = QJsonDocument::fromJson(json, &perr);
    if (perr.error != QJsonParseError::NoError)
        return error((source + ": not JSON (" + perr.errorString() + " at byte " + QString::number(perr.offset) + ")").toStdString());
    if (!doc.isObject()) return error((source + ": a tune report is a JSON object").toStdString());
    const QJsonObject root = doc.object();
    COLIBRI_TRY(need(root, "cpu", QJsonValue::Object, source));
    COLIBRI_TRY(need(root, "results", QJsonValue::Array, source));
    TuneReport report;
    report.source = source;
    report.colibri_version = root.value("colibri_version").toString();
    const QJsonObject cpu = root.value("cpu").toObject();
    report.cpu_model = cpu.value("model").toString();
    for (const auto& f : cpu.value("features").toArray()) report.cpu_features << f.toString();
    int i = 0;
    for (const auto& v : root.value("results").toArray()) {
        const QString where = source + ": result " + QString::number(i++);
        if (!v.isObject()) return error((where + " is not an object").toStdString());
        const QJsonObject r = v.toObject();
        for (const char* key : {"op", "type", "variant"}) COLIBRI_TRY(need(r, key, QJsonValue::String, where));
        for (const char* key : {"rows", "cols", "ns_median"}) COLIBRI_TRY(need(r, key, QJsonValue::Double, where));
        TuneResult t;
        t.op = r.value("op").toString();
        t.type = r.value("type").toString();
        t.variant = r.value("variant").toString();
        t.rows = r.value("rows").toInt();
        t.cols = r.value("cols").toInt();
        t.ns_median = r.value("ns_median").toDouble();
        t.gflops = r.value("gflops").toDouble();
        t.gbps = r.value("gbps").toDouble();
        t.chosen = r.value("chosen").toBool();
        if (t.rows <= 0 || t.cols <= 0 || !(t.ns_median > 0.0))
            return error((where + ": rows, cols and ns_median must be positive").toStdString());
        report.results.push_back(std::move(t));
    }
    if (report.results.empty()) return error((source + ": the report has no results").toStdString());
    return report;
}

Result<TuneReport> read_tune_report(const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return error((path + ": " + f.errorString()).toStdString());
    return parse_tune_report(f.readAll(), path);
}

QByteArray tune_report_json(const TuneReport& report) {
    QJsonArray results;
    for (const TuneResult& r : report.results)
        results.append(QJsonObject{{"op", r.op}, {"type", r.type}, {"rows", r.rows}, {"cols", r.cols}, {"variant", r.variant},
                                   {"ns_median", r.ns_median}, {"gflops", r.gflops}, {"gbps", r.gbps}, {"chosen", r.chosen}});
    return QJsonDocument(QJsonObject{{"colibri_version", report.colibri_version},
                                     {"cpu", QJsonObject{{"model", report.cpu_model}, {"features", QJsonArray::fromStringList(report.cpu_features)}}},
                                     {"results", results}})
        .toJson(QJsonDocument::Compact);
}

}  // namespace colibri::studio
