#include "ui/file_worker.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/model_file.h"
#include "kernels/matvec.h"
#include "tools/convert.h"
#include "ui/models/model_summary.h"

namespace colibri::studio {

namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }

}  // namespace

FileLayout layout_of(const tools::CheckReport& r) {
    FileLayout layout;
    layout.path = qs(r.path);
    layout.file_size = r.stored_size;
    layout.image_size = r.image_size;
    layout.compressed = r.compressed;
    layout.family = qs(r.family);
    if (r.unreadable || (r.sections.empty() && !r.fatal.empty())) layout.error = qs(r.fatal);
    for (const tools::SectionCheck& c : r.sections)
        layout.sections.push_back(SectionInfo{static_cast<int>(c.index), qs(c.kind), qs(c.name), static_cast<int>(c.layer),
                                              static_cast<int>(c.expert), c.offset, c.size, c.stored_size, c.aligned, c.in_bounds});
    for (const tools::TensorCheck& t : r.tensors) {
        TensorInfo info;
        info.name = qs(t.name);
        info.type = qs(t.type);
        info.dims = static_cast<int>(t.shape.size());
        info.rows = t.shape.empty() ? 0 : t.shape[0];
        info.cols = t.shape.size() > 1 ? t.shape[1] : 1;
        info.offset = t.offset;
        info.size = t.size;
        info.section = static_cast<int>(t.section);
        info.aligned = t.aligned;
        info.shape_ok = t.shape_ok;
        layout.tensors.push_back(std::move(info));
    }
    for (const std::string& p : r.problems) layout.problems << qs(p);
    // A structure-only read ends with the check's own "cancelled" line, which is no problem of the file.
    if (r.cancelled && !layout.problems.isEmpty()) layout.problems.removeLast();
    return layout;
}

FileLayout read_layout(const QString& path) {
    // Stopping the check at its first progress call, before any section is hashed, leaves the structure.
    tools::CheckOptions structure_only;
    structure_only.progress = [](uint64_t, uint64_t) { return false; };
    FileLayout layout = layout_of(tools::check_model(path.toStdString(), structure_only));
    layout.path = path;
    return layout;
}

TensorHistogram tensor_histogram(const QString& path, const QString& tensor, int bins) {
    TensorHistogram h;
    h.path = path;
    h.tensor = tensor;
    auto file = ModelFile::open(path.toStdString());
    if (!file) {
        h.error = qs(file.message());
        return h;
    }
    const ModelFile& f = *file.value();
    const TensorView* t = f.find_tensor(tensor.toStdString());
    if (t == nullptr) {
        h.error = QObject::tr("%1: no tensor named %2").arg(path, tensor);
        return h;
    }
    if (Status s = f.ensure_section(t->section); !s) {
        h.error = qs(s.message());
        return h;
    }
    // A 1-d tensor is one row of `rows` values; a matrix is rows × cols.
    const uint64_t rows = t->n_dims == 1 ? 1 : t->rows, cols = t->n_dims == 1 ? t->rows : t->cols;
    h.values = rows * cols;
    constexpr uint64_t kMaxSampled = 1u << 20;
    const uint64_t stride = std::max<uint64_t>(1, (h.values + kMaxSampled - 1) / kMaxSampled);
    std::vector<float> row(cols), sample;
    sample.reserve(static_cast<size_t>(std::min<uint64_t>(h.values, kMaxSampled + cols)));
    for (uint64_t r = 0; r < rows; r += stride) {
        kernels::dequantize_row(t->type, t->data, cols, r, row.data());
        for (float v : row) {
            if (std::isfinite(v)) sample.push_back(v);
            else ++h.non_finite;
        }
    }
    h.sampled = sample.size();
    h.bins.assign(static_cast<size_t>(std::max(bins, 1)), 0);
    if (sample.empty()) return h;
    const auto [lo, hi] = std::minmax_element(sample.begin(), sample.end());
    h.min = *lo;
    h.max = *hi;
    double sum = 0, sum2 = 0;
    for (float v : sample) {
        sum += v;
        sum2 += double(v) * v;
    }
    h.mean = sum / static_cast<double>(sample.size());
    h.stddev = std::sqrt(std::max(0.0, sum2 / static_cast<double>(sample.size()) - h.mean * h.mean));
    const double width = (h.max - h.min) / static_cast<double>(h.bins.size());
    for (float v : sample) {
        size_t b = width > 0 ? static_cast<size_t>((v - h.min) / width) : 0;
        ++h.bins[std::min(b, h.bins.size() - 1)];
    }
    return h;
}

FileWorker::FileWorker() {
    qRegisterMetaType<FileLayout>();
    qRegisterMetaType<TensorHistogram>();
    qRegisterMetaType<tools::CheckReport>();
}

void FileWorker::inspect(const QString& path) {
    QMetaObject::invokeMethod(this, [this, path] { emit inspected(read_layout(path)); }, Qt::QueuedConnection);
}

void FileWorker::verify(const QString& path) {
    const uint64_t id = ++posted_;
    QMetaObject::invokeMethod(this, [this, path, id] { do_verify(path, id); }, Qt::QueuedConnection);
}

void FileWorker::histogram(const QString& path, const QString& tensor, int bins) {
    QMetaObject::invokeMethod(this, [this, path, tensor, bins] { emit histogramReady(tensor_histogram(path, tensor, bins)); },
                              Qt::QueuedConnection);
}

void FileWorker::convert(const ConvertJob& job) {
    const uint64_t id = ++posted_;
    QMetaObject::invokeMethod(this, [this, job, id] { do_convert(job, id); }, Qt::QueuedConnection);
}

void FileWorker::cancel() { cancelled_.store(posted_.load()); }

void FileWorker::do_verify(const QString& path, uint64_t id) {
    if (cancelled(id)) {
        emit verifyCancelled(path);
        return;
    }
    tools::CheckOptions options;
    options.progress = [this, id](uint64_t done, uint64_t total) {
        if (cancelled(id)) return false;
        emit progress(done, total);
        return true;
    };
    tools::CheckReport report = tools::check_model(path.toStdString(), options);
    report.path = path.toStdString();
    if (report.cancelled) emit verifyCancelled(path);
    else emit verified(report);
}

void FileWorker::do_convert(const ConvertJob& job, uint64_t id) {
    if (cancelled(id)) {
        emit convertCancelled();
        return;
    }
    bool stopped = false;
    tools::ConvertOptions options;
    options.type = job.type;
    options.zstd = job.zstd;
    options.progress = [&](uint64_t done, uint64_t total) {
        if (cancelled(id)) {
            stopped = true;
            return false;
        }
        emit progress(static_cast<quint64>(1000.0 * static_cast<double>(done) / static_cast<double>(std::max<uint64_t>(total, 1))), 1000);
        return true;
    };
    // convert_model() tells an HF directory from a GGUF file and, with zstd, compresses after converting.
    auto summary = tools::convert_model(job.source.toStdString(), job.output.toStdString(), options);
    if (!summary) {
        if (stopped) emit convertCancelled();
        else emit convertFailed(qs(summary.message()));
        return;
    }
    emit progress(1000, 1000);
    QString what = tr("%1, %2 tensors, %3%4")
                       .arg(QString::fromUtf8(format::family_name(summary->family)))
                       .arg(summary->tensors)
                       .arg(human_bytes(summary->stored_size > 0 ? summary->stored_size : summary->file_size))
                       .arg(summary->has_tokenizer ? tr(", with tokenizer") : tr(", no tokenizer"));
    emit converted(job.output, what);
}

}  // namespace colibri::studio
