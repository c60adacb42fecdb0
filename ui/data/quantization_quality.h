// The measured quality of each weight type, as docs/QUANTIZATION.md reports it (the doc is compiled into the
// Studio as :/colibri/QUANTIZATION.md): the trained demo model's table ("On a trained model") and the generated
// bench-shape model's table (b). Read from the doc, so the figures are written in one place only.
#pragma once
#include <QMap>
#include <QString>
#include <QStringList>
#include <QVector>

namespace colibri::studio {

struct TypeQuality {
    QString trained_top1, trained_kl;  // the trained demo model against f32 (empty: not measured)
    QString random_top1, random_kl;    // the random bench-shape model against f32 (empty: not measured)
    // One line for the dialog: "99.75 % same next token, KL 0.00086 (trained demo model)", or "not measured".
    QString summary() const;
};

// The rows of the first markdown table whose header starts with these cells, each row's cells trimmed.
QVector<QStringList> markdown_table(const QString& markdown, const QStringList& header_start);
// Per type name ("q8_0"), from the doc's text.
QMap<QString, TypeQuality> quantization_quality(const QString& markdown);
// From the compiled-in doc.
const QMap<QString, TypeQuality>& quantization_quality();

}  // namespace colibri::studio
