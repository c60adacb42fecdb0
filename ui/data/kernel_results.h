// What the Kernels view has measured on this machine: its end-to-end kernel comparisons and its own tune runs.
// They are kept between sessions in one JSON store ("colibri-kernel-results", version 1: the comparisons as
// KernelComparison::to_json, the tune runs as `colibri tune --json` with their "source") and exported as that
// JSON, or the comparisons as CSV. The view shows them and owns neither them nor the file format.
#pragma once
#include <QByteArray>
#include <QString>
#include <vector>

#include "engine/base/status.h"
#include "ui/data/kernel_comparison.h"
#include "ui/data/tune_report.h"

namespace colibri::studio {

class KernelResults {
public:
    const std::vector<KernelComparison>& comparisons() const { return comparisons_; }
    const std::vector<TuneReport>& own_reports() const { return own_reports_; }

    void add_comparison(const KernelComparison& comparison);
    // A tune run of this machine; its source gets the time ("this machine, 2026-12-06 11:42") so that runs side
    // by side stay apart. Returns the report as kept.
    const TuneReport& add_own_report(const TuneReport& report);
    void remove_own_report(const QString& source);  // no-op for a source that is not one of this machine's runs
    void clear_own_reports();

    // Everything as one JSON document, or the comparisons as CSV (each after a "# model, cpu, threads, when" line).
    QByteArray json() const;
    QString csv() const;
    // By the file name's extension: .csv is csv(), anything else json(). Through ui/file_output.h (a complete
    // file or the old one; a FIFO or directory there is refused).
    Status export_to(const QString& path) const;

    // The store: set_store reads what is there (a missing or foreign file is an empty store; an entry that
    // does not read is skipped) and every change above is written back by save(). "" keeps nothing.
    void set_store(const QString& path);
    const QString& store() const { return store_; }
    Status save() const;

private:
    std::vector<KernelComparison> comparisons_;
    std::vector<TuneReport> own_reports_;
    QString store_;
};

}  // namespace colibri::studio
