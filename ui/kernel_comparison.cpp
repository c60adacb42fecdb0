#include "ui/kernel_comparison.h"

#include <QJsonArray>
#include <algorithm>

namespace colibri::studio {

namespace {

double median(std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

template <typename T>
QJsonArray array_of(const std::vector<T>& v) {
    QJsonArray a;
    for (const T& x : v) a.append(static_cast<double>(x));
    return a;
}

template <typename T>
std::vector<T> vector_of(const QJsonValue& v) {
    std::vector<T> out;
    for (const auto& x : v.toArray()) out.push_back(static_cast<T>(x.toDouble()));
    return out;
}

}  // namespace

double KernelRun::prompt_median() const { return median(prompt_tps); }
double KernelRun::decode_median() const { return median(decode_tps); }

bool KernelComparison::identical_output() const {
    for (const KernelRun& r : runs)
        if (r.decoded != runs.front().decoded) return false;
    return true;
}

QJsonObject KernelComparison::to_json() const {
    QJsonArray list;
    for (const KernelRun& r : runs)
        list.append(QJsonObject{{"variant", r.variant},
                                {"display", r.display},
                                {"prompt_tokens_per_s", array_of(r.prompt_tps)},
                                {"decode_tokens_per_s", array_of(r.decode_tps)},
                                {"layers", array_of(r.layers)},
                                {"layer_us", array_of(r.layer_us)},
                                {"lm_head_us", r.lm_head_us},
                                {"token_us", r.token_us},
                                {"decoded", array_of(r.decoded)}});
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
    for (const auto& v : o.value("runs").toArray()) {
        const QJsonObject r = v.toObject();
        KernelRun run;
        run.variant = r.value("variant").toString();
        run.display = r.value("display").toString(run.variant);
        run.prompt_tps = vector_of<double>(r.value("prompt_tokens_per_s"));
        run.decode_tps = vector_of<double>(r.value("decode_tokens_per_s"));
        run.layers = vector_of<int>(r.value("layers"));
        run.layer_us = vector_of<double>(r.value("layer_us"));
        run.lm_head_us = r.value("lm_head_us").toDouble();
        run.token_us = r.value("token_us").toDouble();
        run.decoded = vector_of<int32_t>(r.value("decoded"));
        if (run.variant.isEmpty() || run.layers.size() != run.layer_us.size()) return colibri::error("a run lacks its variant or layer times");
        c.runs.push_back(std::move(run));
    }
    return c;
}

QString KernelComparison::csv() const {
    QStringList lines;
    QStringList header{QStringLiteral("variant"), QStringLiteral("prompt_tokens_per_s"), QStringLiteral("decode_tokens_per_s")};
    if (!runs.empty()) {
        for (int l : runs.front().layers) header << QStringLiteral("layer%1_us").arg(l);
        header << QStringLiteral("lm_head_us") << QStringLiteral("token_us");
    }
    lines << header.join(QLatin1Char(','));
    for (const KernelRun& r : runs) {
        QStringList row{r.variant, QString::number(r.prompt_median(), 'f', 2), QString::number(r.decode_median(), 'f', 2)};
        for (double us : r.layer_us) row << QString::number(us, 'f', 2);
        row << QString::number(r.lm_head_us, 'f', 2) << QString::number(r.token_us, 'f', 2);
        lines << row.join(QLatin1Char(','));
    }
    return lines.join(QLatin1Char('\n')) + QLatin1Char('\n');
}

}  // namespace colibri::studio
