#include "ui/data/quantization_quality.h"

#include <QFile>
#include <QObject>
#include <QRegularExpression>

// The Studio's resources live in this static library: registered by hand, since nothing else references them.
static void init_studio_resources() { Q_INIT_RESOURCE(studio); }

namespace colibri::studio {

QString TypeQuality::summary() const {
    // Figures in brackets in the doc are an earlier run's; the dialog quotes the current one.
    auto current = [](QString v) { return v.remove(QRegularExpression(QStringLiteral("\\s*\\(.*\\)"))).trimmed(); };
    QStringList parts;
    if (!trained_top1.isEmpty() && !trained_top1.startsWith(QLatin1Char('(')))
        parts << QObject::tr("%1 same next token, KL %2 (trained demo model)").arg(current(trained_top1), current(trained_kl));
    else if (trained_top1.startsWith(QLatin1Char('(')))
        parts << QObject::tr("the reference");
    if (!random_top1.isEmpty() && !random_top1.startsWith(QLatin1Char('(')))
        parts << QObject::tr("%1 top-1, KL %2 (random model)").arg(current(random_top1), current(random_kl));
    return parts.isEmpty() ? QObject::tr("not measured") : parts.join(QStringLiteral("; "));
}

QVector<QStringList> markdown_table(const QString& markdown, const QStringList& header_start) {
    QVector<QStringList> rows;
    bool in_table = false;
    for (const QString& raw : markdown.split(QLatin1Char('\n'))) {
        const QString line = raw.trimmed();
        if (!line.startsWith(QLatin1Char('|'))) {
            if (in_table) break;
            continue;
        }
        QStringList cells = line.mid(1, line.endsWith(QLatin1Char('|')) ? line.size() - 2 : -1).split(QLatin1Char('|'));
        for (QString& c : cells) c = c.trimmed().remove(QLatin1Char('`'));
        if (!in_table) {
            in_table = cells.mid(0, header_start.size()) == header_start;
            continue;
        }
        if (!cells.isEmpty() && cells[0].startsWith(QStringLiteral("---"))) continue;
        rows << cells;
    }
    return rows;
}

QMap<QString, TypeQuality> quantization_quality(const QString& markdown) {
    QMap<QString, TypeQuality> out;
    for (const QStringList& r : markdown_table(markdown, {QStringLiteral("type"), QStringLiteral("same next token as f32"), QStringLiteral("mean KL to f32")}))
        if (r.size() >= 3) {
            out[r[0]].trained_top1 = r[1];
            out[r[0]].trained_kl = r[2];
        }
    for (const QStringList& r : markdown_table(markdown, {QStringLiteral("type"), QStringLiteral("file bytes"), QStringLiteral("top-1 agreement"), QStringLiteral("mean KL")}))
        if (r.size() >= 4 && !r[0].contains(QLatin1Char(','))) {  // not the one-off "q4_k, lm head q8_0" row
            out[r[0]].random_top1 = r[2];
            out[r[0]].random_kl = r[3];
        }
    return out;
}

const QMap<QString, TypeQuality>& quantization_quality() {
    static const QMap<QString, TypeQuality> table = [] {
        init_studio_resources();
        QFile f(QStringLiteral(":/colibri/QUANTIZATION.md"));
        return f.open(QIODevice::ReadOnly) ? quantization_quality(QString::fromUtf8(f.readAll())) : QMap<QString, TypeQuality>{};
    }();
    return table;
}

}  // namespace colibri::studio
