#include "ui/data/kernel_comparison.h"

#include <QJsonArray>
#include <algorithm>

#include "kernels/registry.h"
#include "ui/data/json_values.h"

namespace colibri::studio {

QString variant_key(const KernelRun& run) { return QString::fromLatin1(kernels::variant_name(run.variant)); }
QString variant_label(const KernelRun& run) { return QString::fromLatin1(kernels::variant_display_name(run.variant)); }

bool KernelComparison::has_variant(kernels::Variant v) const {
    return std::any_of(runs.begin(), runs.end(), [v](const KernelRun& r) { return r.variant == v; });
}

bool KernelComparison::identical_output() const {
    for (const KernelRun& r : runs)
        if (r.decoded != runs.front().decoded) return false;
    return true;
}

// Version 1 of the store, as before the measurement moved to tools/: each layer's total in "layer_us"; the
// stages beside it in "layer_stages_us" (attention, router, experts), and the machine's load in "machine_load",
// which a reader of version 1 ignores.
QJsonObject KernelComparison::to_json() const {
    QJsonArray list;
    for (const KernelRun& r : runs) {
        std::vector<int> layers;
        std::vector<double> layer_us;
        QJsonArray stages;
        for (const tools::LayerTimes& l : r.report.decode_layers) {
            layers.push_back(static_cast<int>(l.layer));
            layer_us.push_back(l.total_us());
            stages.append(QJsonArray{l.attention_us, l.router_us, l.experts_us});
        }
        list.append(QJsonObject{{"variant", variant_key(r)},
                                {"display", variant_label(r)},
                                {"prompt_tokens_per_s", json_array_of(r.report.prompt_tps.samples)},
                                {"decode_tokens_per_s", json_array_of(r.report.decode_tps.samples)},
                                {"layers", json_array_of(layers)},
                                {"layer_us", json_array_of(layer_us)},
                                {"layer_stages_us", stages},
                                {"lm_head_us", r.report.decode_lm_head_us},
                                {"token_us", r.report.decode_token_us},
                                {"decoded", json_array_of(r.decoded)}});
    }
    return QJsonObject{{"format", "colibri-kernel-comparison"},
                       {"version", 1},
                       {"model", model},
                       {"cpu", cpu},
                       {"threads", threads},
                       {"prompt_tokens", prompt_tokens},
                       {"decode_tokens", decode_tokens},
                       {"reps", reps},
                       {"complete", complete},
                       {"when", when},
                       {"machine_load", machine_load_json(load())},
                       {"runs", list}};
}

Result<KernelComparison> KernelComparison::from_json(const QJsonObject& o) {
    if (o.value("format").toString() != QLatin1String("colibri-kernel-comparison")) return colibri::error("not a kernel comparison");
    if (o.value("version").toInt() != 1) return colibri::error("unsupported kernel comparison version");
    KernelComparison c;
    c.model = o.value("model").toString();
    c.cpu = o.value("cpu").toString();
    c.threads = o.value("threads").toInt();
    c.prompt_tokens = o.value("prompt_tokens").toInt();
    c.decode_tokens = o.value("decode_tokens").toInt();
    c.reps = o.value("reps").toInt();
    c.complete = o.value("complete").toBool(true);
    c.when = o.value("when").toString();
    const tools::MachineLoad load = machine_load_from_json(o.value("machine_load"));
    for (const auto& v : o.value("runs").toArray()) {
        const QJsonObject r = v.toObject();
        KernelRun run;
        const QString variant = r.value("variant").toString();
        if (!kernels::variant_from_name(variant.toStdString(), &run.variant))
            return colibri::error("a run's kernel variant '" + variant.toStdString() + "' is unknown");
        run.report.prompt_tps = tools::Spread::of(vector_from_json<double>(r.value("prompt_tokens_per_s")));
        run.report.decode_tps = tools::Spread::of(vector_from_json<double>(r.value("decode_tokens_per_s")));
        const std::vector<int> layers = vector_from_json<int>(r.value("layers"));
        const std::vector<double> layer_us = vector_from_json<double>(r.value("layer_us"));
        const QJsonArray stages = r.value("layer_stages_us").toArray();
        if (layers.size() != layer_us.size()) return colibri::error("a run lacks its layer times");
        for (size_t i = 0; i < layers.size(); ++i) {
            tools::LayerTimes l;
            l.layer = static_cast<uint32_t>(std::max(layers[i], 0));
            const QJsonArray s = stages.at(static_cast<qsizetype>(i)).toArray();
            if (s.size() == 3) {
                l.attention_us = s[0].toDouble();
                l.router_us = s[1].toDouble();
                l.experts_us = s[2].toDouble();
            } else {
                l.unattributed_us = layer_us[i];
            }
            run.report.decode_layers.push_back(l);
        }
        run.report.decode_lm_head_us = r.value("lm_head_us").toDouble();
        run.report.decode_token_us = r.value("token_us").toDouble();
        run.decoded = vector_from_json<int32_t>(r.value("decoded"));
        run.report.load = load;
        c.runs.push_back(std::move(run));
    }
    return c;
}

QString KernelComparison::csv() const {
    QStringList lines;
    QStringList header{QStringLiteral("variant"), QStringLiteral("prompt_tokens_per_s"), QStringLiteral("decode_tokens_per_s")};
    if (!runs.empty()) {
        for (const tools::LayerTimes& l : runs.front().report.decode_layers) header << QStringLiteral("layer%1_us").arg(l.layer);
        header << QStringLiteral("lm_head_us") << QStringLiteral("token_us");
    }
    // The repetitions' range after the medians, so that readers of the older columns keep working.
    header << QStringLiteral("prompt_min") << QStringLiteral("prompt_max") << QStringLiteral("decode_min") << QStringLiteral("decode_max");
    lines << header.join(QLatin1Char(','));
    for (const KernelRun& r : runs) {
        QStringList row{variant_key(r), QString::number(r.report.prompt_tps.median, 'f', 2), QString::number(r.report.decode_tps.median, 'f', 2)};
        for (const tools::LayerTimes& l : r.report.decode_layers) row << QString::number(l.total_us(), 'f', 2);
        row << QString::number(r.report.decode_lm_head_us, 'f', 2) << QString::number(r.report.decode_token_us, 'f', 2);
        for (double v : {r.report.prompt_tps.min, r.report.prompt_tps.max, r.report.decode_tps.min, r.report.decode_tps.max})
            row << QString::number(v, 'f', 2);
        lines << row.join(QLatin1Char(','));
    }
    return lines.join(QLatin1Char('\n')) + QLatin1Char('\n');
}

}  // namespace colibri::studio
