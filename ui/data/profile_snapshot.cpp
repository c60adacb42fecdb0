#include "ui/data/profile_snapshot.h"

#include <QDateTime>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <cmath>

#include "engine/file/mapped_file.h"
#include "ui/data/json_values.h"
#include "ui/file_output.h"

namespace colibri::studio {

namespace {

QString ms(double v) { return QString::number(v, 'f', v < 10 ? 2 : 1); }

bool finite_non_negative(double v) { return std::isfinite(v) && v >= 0; }

}  // namespace

QString ProfileSnapshot::label() const {
    QStringList parts;
    parts << (model.isEmpty() ? QObject::tr("unnamed model") : model);
    if (!kernel.isEmpty()) parts << kernel;
    if (threads > 0) parts << QObject::tr("%n threads", nullptr, threads);
    parts << QStringLiteral("%1 %2").arg(step_ms.samples.size()).arg(tokens_kind);
    const QDateTime t = QDateTime::fromString(when, Qt::ISODate);
    if (t.isValid()) parts << t.toString(QStringLiteral("yyyy-MM-dd HH:mm"));
    return parts.join(QStringLiteral(", "));
}

const ProfileLayer* ProfileSnapshot::layer(int number) const {
    for (const ProfileLayer& l : layers)
        if (l.layer == number) return &l;
    return nullptr;
}

QJsonObject ProfileSnapshot::to_json() const {
    QJsonArray list;
    for (const ProfileLayer& l : layers)
        list.append(QJsonObject{{"layer", l.layer}, {"attention_us", l.attention_us}, {"router_us", l.router_us}, {"experts_us", l.experts_us}});
    return QJsonObject{{"format", "colibri-profile"},
                       {"version", 1},
                       {"model", model},
                       {"kernel", kernel},
                       {"threads", threads},
                       {"when", when},
                       {"tokens", tokens_kind},
                       {"step_ms", json_array_of(step_ms.samples)},
                       {"layers", list},
                       {"machine_load", machine_load_json(load)}};
}

Result<ProfileSnapshot> ProfileSnapshot::from_json(const QJsonObject& o) {
    if (o.value("format").toString() != QLatin1String("colibri-profile")) return error("not a Colibri profile (no \"format\": \"colibri-profile\")");
    if (o.value("version").toInt() != 1) return error("unsupported profile version " + std::to_string(o.value("version").toInt()));
    ProfileSnapshot p;
    p.model = o.value("model").toString();
    p.kernel = o.value("kernel").toString();
    p.threads = std::max(o.value("threads").toInt(), 0);
    p.when = o.value("when").toString();
    p.tokens_kind = o.value("tokens").toString();
    const QJsonArray steps = o.value("step_ms").toArray();
    if (steps.isEmpty()) return error("the profile has no token steps");
    if (steps.size() > kMaxProfileSteps) return error("the profile has " + std::to_string(steps.size()) + " token steps, more than the Studio writes");
    std::vector<double> samples;
    for (const auto& v : steps) {
        if (!v.isDouble() || !finite_non_negative(v.toDouble())) return error("a token step is not a non-negative number");
        samples.push_back(v.toDouble());
    }
    p.step_ms = tools::Spread::of(std::move(samples));
    const QJsonArray layers = o.value("layers").toArray();
    if (layers.size() > kMaxProfileLayers) return error("the profile has " + std::to_string(layers.size()) + " layers, more than any model");
    for (const auto& v : layers) {
        const QJsonObject l = v.toObject();
        ProfileLayer layer;
        layer.layer = l.value("layer").toInt(-1);
        layer.attention_us = l.value("attention_us").toDouble(-1);
        layer.router_us = l.value("router_us").toDouble(-1);
        layer.experts_us = l.value("experts_us").toDouble(-1);
        if (layer.layer < 0 || !finite_non_negative(layer.attention_us) || !finite_non_negative(layer.router_us) ||
            !finite_non_negative(layer.experts_us))
            return error("a layer of the profile lacks its number or a time");
        if (p.layer(layer.layer) != nullptr) return error("layer " + std::to_string(layer.layer) + " is in the profile twice");
        p.layers.push_back(layer);
    }
    p.load = machine_load_from_json(o.value("machine_load"));
    return p;
}

Status ProfileSnapshot::save(const QString& path) const {
    return save_file(path, QJsonDocument(to_json()).toJson(QJsonDocument::Indented));
}

Result<ProfileSnapshot> ProfileSnapshot::read(const QString& path) {
    const std::string name = QFile::encodeName(path).toStdString();
    auto bytes = read_small_file(name, kMaxProfileBytes);
    if (!bytes) return error(bytes.message());
    QJsonParseError perr;
    const QJsonDocument doc = QJsonDocument::fromJson(QByteArray::fromStdString(bytes.value()), &perr);
    if (perr.error != QJsonParseError::NoError)
        return error(name + ": not JSON (" + perr.errorString().toStdString() + " at offset " + std::to_string(perr.offset) + ")");
    auto p = from_json(doc.object());
    if (!p) return error(name + ": " + p.message());
    return p;
}

StepChange step_change(const ProfileSnapshot& base, const ProfileSnapshot& now) {
    StepChange c;
    c.base_ms = base.step_ms.median;
    c.now_ms = now.step_ms.median;
    c.change = c.base_ms > 0 ? c.now_ms / c.base_ms - 1.0 : 0.0;
    c.beyond_noise = now.step_ms.q3 < base.step_ms.q1 || now.step_ms.q1 > base.step_ms.q3;
    return c;
}

QString percent_change(double change) {
    const double pct = change * 100.0;
    const QString digits = QString::number(std::fabs(pct), 'f', std::fabs(pct) < 10 ? 1 : 0);
    if (digits.toDouble() == 0) return QStringLiteral("±0 %");
    return (pct < 0 ? QStringLiteral("−") : QStringLiteral("+")) + digits + QStringLiteral(" %");
}

QString describe_step_change(const ProfileSnapshot& base, const ProfileSnapshot& now) {
    const StepChange c = step_change(base, now);
    // The verdict first: at dock width the line is cut at its end, where the baseline's name is.
    QString text = QObject::tr("vs baseline: %1 → %2 ms per token (%3), ").arg(ms(c.base_ms), ms(c.now_ms), percent_change(c.change));
    const QString iqrs = QStringLiteral("%1–%2 and %3–%4").arg(ms(base.step_ms.q1), ms(base.step_ms.q3), ms(now.step_ms.q1), ms(now.step_ms.q3));
    text += c.beyond_noise ? QObject::tr("beyond the noise (the IQRs %1 ms do not overlap)").arg(iqrs)
                           : QObject::tr("within the noise (the IQRs %1 ms overlap)").arg(iqrs);
    QStringList warnings;
    if (base.model != now.model) warnings << QObject::tr("different models (%1 and %2)").arg(base.model, now.model);
    if (base.tokens_kind != now.tokens_kind) warnings << QObject::tr("different tokens (%1 and %2)").arg(base.tokens_kind, now.tokens_kind);
    if (base.load.busy()) warnings << QObject::tr("the baseline's machine was busy (%1)").arg(QString::fromStdString(base.load.describe()));
    if (now.load.busy()) warnings << QObject::tr("the machine was busy (%1)").arg(QString::fromStdString(now.load.describe()));
    if (!warnings.isEmpty()) text += QObject::tr("; ⚠ %1").arg(warnings.join(QStringLiteral("; ")));
    return text + QObject::tr("; baseline: %1").arg(base.label());
}

}  // namespace colibri::studio
