// A kernel auto-tune report as `colibri tune --json` writes it (one machine: its CPU, then one result per
// op, weight type, shape and kernel variant), in the form the views show. Read by tools::parse_tune_report and
// written by kernels::tune_report_json (the schema's one reader and one writer), so that a report from another
// machine or version gives the same one-line error here as anywhere.
#pragma once
#include <QByteArray>
#include <QMetaType>
#include <QString>
#include <QStringList>
#include <vector>

#include "engine/base/status.h"
#include "kernels/tuner.h"

namespace colibri::studio {

struct TuneResult {
    QString op;       // "matvec"
    QString type;     // weight type: "q8_0", "f16", ...
    int rows = 0;
    int cols = 0;
    QString variant;  // "scalar", "avx2", "avx512", "neon"
    double ns_median = 0.0;
    double gflops = 0.0;
    double gbps = 0.0;
    bool chosen = false;
    QString shape() const { return QStringLiteral("%1×%2").arg(rows).arg(cols); }
};

struct TuneReport {
    QString source;           // file it came from
    QString colibri_version;
    QString cpu_model;
    QStringList cpu_features;
    std::vector<TuneResult> results;
    // "cpu model (file name)": how the views name the machine.
    QString label() const;
};

// A tuner's report as the views show it (the Studio's own runs take this way, imports through parse_tune_report).
TuneReport studio_report(const kernels::TuneReport& report, const QString& source);
// Errors: "<source>: <why>".
Result<TuneReport> parse_tune_report(const QByteArray& json, const QString& source);
Result<TuneReport> read_tune_report(const QString& path);
// The report as `colibri tune --json` writes it (what parse_tune_report reads back).
QByteArray tune_report_json(const TuneReport& report);

}  // namespace colibri::studio

Q_DECLARE_METATYPE(colibri::studio::TuneReport)
