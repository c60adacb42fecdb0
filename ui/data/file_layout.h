// What the FileWorker finds in a model file (its sections and tensors, a tensor's histogram, two files compared
// tensor by tensor) and the conversion it is asked for: plain values for the validator and the convert dialog.
#pragma once
#include <QMetaType>
#include <QPair>
#include <QString>
#include <QStringList>
#include <QVector>
#include <cstdint>
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

// What converting a source would give (tools::preview_conversion), for the convert dialog.
struct SourcePreview {
    QString source;
    QString error;
    QString family;
    quint64 parameters = 0, source_bytes = 0;
    int layers = 0, experts = 0, active_experts = 0, linear_layers = 0;
    bool shared_expert = false, has_tokenizer = false;
    QVector<QPair<QString, quint64>> output_bytes;  // weight type name, bytes of the .bin
};

struct ConvertJob {
    QString source;   // Hugging Face directory or .gguf file
    QString output;   // .bin, or .bin.zst when zstd
    WeightType type = WeightType::F32;
    bool zstd = false;
};

}  // namespace colibri::studio

Q_DECLARE_METATYPE(colibri::studio::FileLayout)
Q_DECLARE_METATYPE(colibri::studio::TensorHistogram)
Q_DECLARE_METATYPE(colibri::studio::TensorComparison)
Q_DECLARE_METATYPE(colibri::studio::SourcePreview)
Q_DECLARE_METATYPE(colibri::tools::CheckReport)
