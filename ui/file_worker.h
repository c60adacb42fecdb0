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

#include "kernels/types.h"
#include "tools/check.h"

namespace colibri::studio {

struct SectionInfo {
    int index = 0;
    QString kind;    // "expert", "attention", ...
    QString label;   // "layer 1 expert 5 (gate up down)"
    int layer = -1;
    int expert = -1;
    quint64 offset = 0;
    quint64 size = 0;
    quint64 stored_size = 0;  // compressed bytes in a .bin.zst
    bool aligned = true;
    bool in_bounds = true;    // lies inside the file; a section that does not cannot be hashed
};

struct TensorInfo {
    QString name;
    QString type;
    int dims = 0;
    quint64 rows = 0, cols = 0;
    quint64 offset = 0, size = 0;
    int section = 0;
    bool aligned = true;
    bool shape_ok = true;  // type, shape and size agree with each other, the section and the hyper-parameters
};

// A file's structure as the validator draws it, read without hashing the sections (tools/check.h reads even a
// damaged file's tables, so the damage can be shown). error is set only when nothing could be read at all.
struct FileLayout {
    QString path;
    QString error;
    quint64 file_size = 0;   // on disk
    quint64 image_size = 0;  // uncompressed
    bool compressed = false;
    QString family;
    std::vector<SectionInfo> sections;
    std::vector<TensorInfo> tensors;
    QStringList problems;    // what the structure alone shows to be wrong
    bool unreadable = false; // the path could not be opened at all (missing, a directory, no permission)
};

struct TensorHistogram {
    QString path, tensor;
    QString error;
    double min = 0, max = 0, mean = 0, stddev = 0;
    quint64 values = 0;       // total in the tensor
    quint64 sampled = 0;      // used for the histogram (every value up to a million, else whole rows strided)
    quint64 non_finite = 0;
    std::vector<quint64> bins;
    bool constant() const { return sampled > 0 && min == max; }
};

// One tensor of file A against the tensor of the same name in file B.
struct TensorDiff {
    QString name;
    QString shape_a, shape_b, type_a, type_b;
    enum class Kind { Identical, Differs, ShapeDiffers, OnlyInA, OnlyInB, Unreadable } kind = Kind::Identical;
    quint64 values = 0;
    double max_abs = 0.0;      // largest |a - b|
    double rms = 0.0;          // root mean square of a - b
    double relative_rms = 0.0; // rms / rms(a): 0 identical; q8_0 of random weights ~0.005, q4 ~0.1
    double cosine = 1.0;       // of the two tensors as vectors
    QString error;
};
struct TensorComparison {
    QString path_a, path_b;
    QString error;  // a file could not be opened
    bool cancelled = false;
    std::vector<TensorDiff> tensors;  // A's order, then what only B has
};

struct ConvertJob {
    QString source;   // Hugging Face directory or .gguf file
    QString output;   // .bin, or .bin.zst when zstd
    WeightType type = WeightType::F32;
    bool zstd = false;
};

class FileWorker : public QObject {
    Q_OBJECT
public:
    FileWorker();
    // Posted to the worker's thread.
    void inspect(const QString& path);
    void verify(const QString& path);
    void histogram(const QString& path, const QString& tensor, int bins = 64);
    void convert(const ConvertJob& job);
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
TensorHistogram tensor_histogram(const QString& path, const QString& tensor, int bins);
// progress(done_bytes, total_bytes) returns false to stop (the result is then marked cancelled).
TensorComparison compare_tensors(const QString& a, const QString& b, const std::function<bool(quint64, quint64)>& progress = {});

}  // namespace colibri::studio

Q_DECLARE_METATYPE(colibri::studio::FileLayout)
Q_DECLARE_METATYPE(colibri::studio::TensorHistogram)
Q_DECLARE_METATYPE(colibri::studio::TensorComparison)
Q_DECLARE_METATYPE(colibri::tools::CheckReport)
