// FileWorker: the model-file jobs of the validator and the convert dialog on their own thread, so hashing a
// large file or converting one never blocks the UI or waits behind a generation. One job at a time; each
// reports progress and can be cancelled.
#pragma once
#include <QObject>
#include <QString>
#include <QStringList>
#include <QVector>
#include <atomic>
#include <functional>
#include <vector>

#include "ui/data/file_layout.h"

namespace colibri::studio {

class FileWorker : public QObject {
    Q_OBJECT
public:
    FileWorker();
    // Posted to the worker's thread.
    void inspect(const QString& path);
    void verify(const QString& path);
    void histogram(const QString& path, const QString& tensor, int bins = 64);
    void convert(const ConvertJob& job);
    // What converting the source would give: family, size, parameters, the output's size per weight type.
    void preview(const QString& source);
    // Every tensor of a against b's of the same name (dequantised values), with progress; cancel stops it.
    void compare(const QString& a, const QString& b);
    // Thread-safe: ends the running verification or conversion (and any posted) at the next progress step.
    void cancel();

signals:
    void inspected(const colibri::studio::FileLayout& layout);
    void progress(quint64 done, quint64 total);
    void verified(const colibri::tools::CheckReport& report);
    void verifyCancelled(const QString& path);
    void histogramReady(const colibri::studio::TensorHistogram& histogram);
    void converted(const QString& output, const QString& summary);
    void convertFailed(const QString& error);
    void convertCancelled();
    void comparedFiles(const colibri::studio::TensorComparison& result);
    void previewed(const colibri::studio::SourcePreview& preview);

private:
    void do_verify(const QString& path, uint64_t id);
    void do_convert(const ConvertJob& job, uint64_t id);
    void do_compare(const QString& a, const QString& b, uint64_t id);
    bool cancelled(uint64_t id) const { return id <= cancelled_.load(); }
    std::atomic<uint64_t> posted_{0}, cancelled_{0};
};

FileLayout read_layout(const QString& path);
// The layout a check report describes (its sections and tensors, whether or not they were hashed).
FileLayout layout_of(const tools::CheckReport& report);
SourcePreview source_preview(const QString& source);
TensorHistogram tensor_histogram(const QString& path, const QString& tensor, int bins);
// progress(done_bytes, total_bytes) returns false to stop (the result is then marked cancelled).
TensorComparison compare_tensors(const QString& a, const QString& b, const std::function<bool(quint64, quint64)>& progress = {});

}  // namespace colibri::studio

