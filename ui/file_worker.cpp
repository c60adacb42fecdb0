#include "ui/file_worker.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/file/format.h"
#include "engine/file/model_file.h"
#include "engine/file/schema.h"
#include "kernels/matvec.h"
#include "tools/convert.h"
#include "ui/data/model_summary.h"

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
    layout.unreadable = r.unreadable;
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

namespace {

QString shape_text(const TensorView& t) {
    return t.n_dims == 1 ? QStringLiteral("[%1]").arg(t.rows) : QStringLiteral("[%1, %2]").arg(t.rows).arg(t.cols);
}

}  // namespace

TensorComparison compare_tensors(const QString& a_path, const QString& b_path, const std::function<bool(quint64, quint64)>& progress) {
    TensorComparison out;
    out.path_a = a_path;
    out.path_b = b_path;
    auto fa = ModelFile::open(a_path.toStdString());
    if (!fa) {
        out.error = qs(fa.message());
        return out;
    }
    auto fb = ModelFile::open(b_path.toStdString());
    if (!fb) {
        out.error = qs(fb.message());
        return out;
    }
    const ModelFile& A = *fa.value();
    const ModelFile& B = *fb.value();
    quint64 total = 0, done = 0;
    for (const TensorView& t : A.tensors()) total += t.size;
    std::vector<float> ra, rb;
    for (const TensorView& ta : A.tensors()) {
        TensorDiff d;
        d.name = QString::fromStdString(ta.name);
        d.shape_a = shape_text(ta);
        d.type_a = QString::fromLatin1(format::weight_type_name(ta.type));
        const TensorView* tb = B.find_tensor(ta.name);
        if (tb == nullptr) {
            d.kind = TensorDiff::Kind::OnlyInA;
            out.tensors.push_back(std::move(d));
            done += ta.size;
            continue;
        }
        d.shape_b = shape_text(*tb);
        d.type_b = QString::fromLatin1(format::weight_type_name(tb->type));
        if (ta.n_dims != tb->n_dims || ta.rows != tb->rows || ta.cols != tb->cols) {
            d.kind = TensorDiff::Kind::ShapeDiffers;
            out.tensors.push_back(std::move(d));
            done += ta.size;
            continue;
        }
        if (Status s = A.ensure_section(ta.section); !s) {
            d.kind = TensorDiff::Kind::Unreadable;
            d.error = qs(s.message());
        } else if (Status s2 = B.ensure_section(tb->section); !s2) {
            d.kind = TensorDiff::Kind::Unreadable;
            d.error = qs(s2.message());
        }
        if (d.kind == TensorDiff::Kind::Unreadable) {
            out.tensors.push_back(std::move(d));
            done += ta.size;
            continue;
        }
        const uint64_t rows = ta.n_dims == 1 ? 1 : ta.rows, cols = ta.n_dims == 1 ? ta.rows : ta.cols;
        ra.resize(cols);
        rb.resize(cols);
        double sum_d2 = 0, sum_a2 = 0, sum_b2 = 0, sum_ab = 0;
        for (uint64_t r = 0; r < rows; ++r) {
            kernels::dequantize_row(ta.type, ta.data, cols, r, ra.data());
            kernels::dequantize_row(tb->type, tb->data, cols, r, rb.data());
            for (uint64_t c = 0; c < cols; ++c) {
                const double x = ra[c], y = rb[c], diff = x - y;
                d.max_abs = std::max(d.max_abs, std::fabs(diff));
                sum_d2 += diff * diff;
                sum_a2 += x * x;
                sum_b2 += y * y;
                sum_ab += x * y;
            }
            // Progress and cancel about every 4 MiB of A's bytes.
            if ((r & 63) == 63 && progress && !progress(done + ta.size * (r + 1) / rows, total)) {
                out.cancelled = true;
                return out;
            }
        }
        d.values = rows * cols;
        d.rms = d.values > 0 ? std::sqrt(sum_d2 / static_cast<double>(d.values)) : 0.0;
        const double rms_a = d.values > 0 ? std::sqrt(sum_a2 / static_cast<double>(d.values)) : 0.0;
        d.relative_rms = rms_a > 0 ? d.rms / rms_a : (d.rms > 0 ? 1.0 : 0.0);
        d.cosine = sum_a2 > 0 && sum_b2 > 0 ? sum_ab / std::sqrt(sum_a2 * sum_b2) : (sum_a2 == sum_b2 ? 1.0 : 0.0);
        d.kind = d.max_abs == 0.0 ? TensorDiff::Kind::Identical : TensorDiff::Kind::Differs;
        out.tensors.push_back(std::move(d));
        done += ta.size;
        if (progress && !progress(done, total)) {
            out.cancelled = true;
            return out;
        }
    }
    for (const TensorView& tb : B.tensors())
        if (A.find_tensor(tb.name) == nullptr) {
            TensorDiff d;
            d.name = QString::fromStdString(tb.name);
            d.shape_b = shape_text(tb);
            d.type_b = QString::fromLatin1(format::weight_type_name(tb.type));
            d.kind = TensorDiff::Kind::OnlyInB;
            out.tensors.push_back(std::move(d));
        }
    return out;
}

SourcePreview source_preview(const QString& source) {
    SourcePreview p;
    p.source = source;
    auto r = tools::preview_conversion(source.toStdString());
    if (!r) {
        p.error = qs(r.message());
        return p;
    }
    const tools::ConvertPreview& v = r.value();
    p.family = QString::fromUtf8(format::family_name(v.family));
    p.parameters = v.parameters;
    p.source_bytes = v.source_bytes;
    p.layers = static_cast<int>(v.layers);
    p.experts = static_cast<int>(v.experts);
    p.active_experts = static_cast<int>(v.active_experts);
    p.linear_layers = static_cast<int>(v.linear_layers);
    p.shared_expert = v.shared_expert;
    p.has_tokenizer = v.has_tokenizer;
    for (const auto& [type, bytes] : v.output_bytes) p.output_bytes.push_back({QString::fromLatin1(format::weight_type_name(type)), bytes});
    return p;
}

void FileWorker::preview(const QString& source) {
    QMetaObject::invokeMethod(this, [this, source] { emit previewed(source_preview(source)); }, Qt::QueuedConnection);
}

FileWorker::FileWorker() {
    qRegisterMetaType<SourcePreview>();
    qRegisterMetaType<TensorComparison>();
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

void FileWorker::compare(const QString& a, const QString& b) {
    const uint64_t id = ++posted_;
    QMetaObject::invokeMethod(this, [this, a, b, id] { do_compare(a, b, id); }, Qt::QueuedConnection);
}

void FileWorker::do_compare(const QString& a, const QString& b, uint64_t id) {
    TensorComparison c = compare_tensors(a, b, [this, id](quint64 done, quint64 total) {
        if (cancelled(id)) return false;
        emit progress(done, total);
        return true;
    });
    emit comparedFiles(c);
}

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
