#include "ui/views/convert_dialog.h"

#include <QCheckBox>
#include <QCloseEvent>
#include <QComboBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QHeaderView>
#include <QPushButton>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QTableWidget>
#include <QVBoxLayout>

#include "engine/file/format.h"
#include "ui/data/model_summary.h"
#include "ui/data/quantization_quality.h"

namespace colibri::studio {

ConvertDialog::ConvertDialog(QWidget* parent)
    : QDialog(parent), worker_(new FileWorker),
      thread_(std::make_unique<WorkerThread>(worker_, QStringLiteral("convert"), [w = worker_] { w->cancel(); })) {
    setWindowTitle(tr("Convert a model"));
    source_ = new QLineEdit;
    source_->setPlaceholderText(tr("Hugging Face model directory or .gguf file"));
    // A typed source is previewed once it is finished (not again on every focus change).
    connect(source_, &QLineEdit::editingFinished, this, [this] {
        if (source_->text() != shown_source_) set_source(source_->text());
    });
    auto* dir = new QPushButton(tr("Directory…"));
    auto* gguf = new QPushButton(tr("GGUF file…"));
    connect(dir, &QPushButton::clicked, this, &ConvertDialog::choose_directory);
    connect(gguf, &QPushButton::clicked, this, &ConvertDialog::choose_gguf);
    type_ = new QComboBox;
    // Every type the converter can write (the weight-type table) with what it is, f16 preselected.
    for (const WeightTypeInfo& w : weight_types()) {
        if (!w.quantisable) continue;
        type_->addItem(QStringLiteral("%1 — %2").arg(QString::fromLatin1(w.name), QString::fromLatin1(w.summary)), static_cast<int>(w.type));
        type_->setItemData(type_->count() - 1, quantization_quality().value(QString::fromLatin1(w.name)).summary(), Qt::ToolTipRole);
    }
    type_->setCurrentIndex(type_->findData(static_cast<int>(WeightType::F16)));
    summary_ = new QLabel(tr("Choose a source to see its family, size and the output per weight type."));
    summary_->setObjectName(QStringLiteral("source_summary"));
    summary_->setWordWrap(true);
    types_ = new QTableWidget(0, 4);
    types_->setHorizontalHeaderLabels({tr("weight type"), tr("what it is"), tr("output size"), tr("measured quality")});
    types_->horizontalHeaderItem(3)->setToolTip(tr("against f32, as docs/QUANTIZATION.md reports it: a trained model (the demo "
                                                   "model) and a random one at the bench shape"));
    types_->verticalHeader()->hide();
    types_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    types_->setSelectionBehavior(QAbstractItemView::SelectRows);
    types_->setSelectionMode(QAbstractItemView::SingleSelection);
    types_->horizontalHeader()->setStretchLastSection(true);
    types_->setWordWrap(true);
    fill_types();
    // The table and the box choose the same type.
    connect(types_, &QTableWidget::currentCellChanged, this, [this](int row) {
        if (row >= 0 && row < type_->count() && type_->currentIndex() != row) type_->setCurrentIndex(row);
    });
    connect(type_, &QComboBox::currentIndexChanged, this, [this](int i) {
        if (types_->currentRow() != i) types_->selectRow(i);
        suggest_output();
    });
    connect(worker_, &FileWorker::previewed, this, &ConvertDialog::on_preview);
    models_folder_ = default_models_folder();
    zstd_ = new QCheckBox(tr("compress with zstd (.bin.zst: one frame per section, experts decompressed on first use)"));
    connect(zstd_, &QCheckBox::toggled, this, [this](bool on) {
        QString out = output_->text();
        if (out.isEmpty()) return;
        const bool suggested = out == suggested_;
        if (on && !out.endsWith(QLatin1String(".zst"))) out += QStringLiteral(".zst");
        if (!on && out.endsWith(QLatin1String(".bin.zst"))) out.chop(4);
        output_->setText(out);
        if (suggested) suggested_ = out;
    });
    output_ = new QLineEdit;
    auto* browse = new QPushButton(tr("Browse…"));
    connect(browse, &QPushButton::clicked, this, &ConvertDialog::choose_output);
    progress_ = new QProgressBar;
    progress_->setRange(0, 1000);
    progress_->setValue(0);
    status_ = new QLabel;
    status_->setWordWrap(true);
    convert_ = new QPushButton(tr("Convert"));
    cancel_ = new QPushButton(tr("Cancel"));
    close_ = new QPushButton(tr("Close"));
    connect(convert_, &QPushButton::clicked, this, &ConvertDialog::start);
    connect(cancel_, &QPushButton::clicked, this, &ConvertDialog::cancel);
    connect(close_, &QPushButton::clicked, this, &QDialog::reject);

    connect(worker_, &FileWorker::progress, this, [this](quint64 done, quint64 total) {
        progress_->setValue(total ? static_cast<int>(1000.0 * done / total) : 0);
    });
    connect(worker_, &FileWorker::converted, this, [this](const QString& output, const QString& summary) {
        set_running(false);
        status_->setText(tr("Wrote %1: %2.").arg(output, summary));
        emit converted(output);
        emit finished(true);
    });
    connect(worker_, &FileWorker::convertFailed, this, [this](const QString& error) {
        set_running(false);
        status_->setText(tr("Conversion failed: %1").arg(error));
        emit finished(false);
    });
    connect(worker_, &FileWorker::convertCancelled, this, [this] {
        set_running(false);
        progress_->setValue(0);
        status_->setText(tr("Cancelled; nothing was written."));
        emit finished(false);
    });

    auto* source_row = new QHBoxLayout;
    source_row->addWidget(source_, 1);
    source_row->addWidget(dir);
    source_row->addWidget(gguf);
    auto* output_row = new QHBoxLayout;
    output_row->addWidget(output_, 1);
    output_row->addWidget(browse);
    auto* form = new QFormLayout;
    form->addRow(tr("source"), source_row);
    form->addRow(QString(), summary_);
    form->addRow(tr("weight type"), type_);
    form->addRow(QString(), zstd_);
    form->addRow(tr("output"), output_row);
    auto* buttons = new QHBoxLayout;
    buttons->addStretch();
    buttons->addWidget(convert_);
    buttons->addWidget(cancel_);
    buttons->addWidget(close_);
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(form);
    layout->addWidget(types_, 1);
    layout->addWidget(progress_);
    layout->addWidget(status_);
    layout->addLayout(buttons);
    set_running(false);
    resize(960, 600);
}

void ConvertDialog::fit_type_columns() {
    // Type and size as wide as they are; the description and the quality share the rest and wrap.
    types_->resizeColumnToContents(0);
    types_->resizeColumnToContents(2);
    types_->setColumnWidth(1, std::max(160, (types_->viewport()->width() - types_->columnWidth(0) - types_->columnWidth(2)) * 2 / 5));
    types_->resizeRowsToContents();
}

void ConvertDialog::resizeEvent(QResizeEvent* e) {
    QDialog::resizeEvent(e);
    fit_type_columns();
}

QString ConvertDialog::default_models_folder() {
    QString base = QStandardPaths::writableLocation(QStandardPaths::DocumentsLocation);
    if (base.isEmpty()) base = QStandardPaths::writableLocation(QStandardPaths::AppDataLocation);
    return QDir(base).filePath(tr("Colibri models"));
}

void ConvertDialog::set_models_folder(const QString& folder) {
    const bool replace = output_->text().isEmpty() || output_->text() == suggested_;
    models_folder_ = folder;
    if (replace) {
        output_->clear();
        suggest_output();
    }
}

QString ConvertDialog::output_name(const QString& source, const QString& type, bool zstd) {
    const QFileInfo src(source);
    QString name;
    if (src.isDir()) {
        // Walk up past names that say nothing about the model: "model", "hf", a hub snapshot's hash.
        QDir d(src.absoluteFilePath());
        static const QRegularExpression hash(QStringLiteral("^[0-9a-f]{16,}$"));
        for (int up = 0; up < 4; ++up) {
            const QString n = d.dirName();
            const bool generic = n.isEmpty() || hash.match(n).hasMatch() ||
                                 QStringList{"model", "models", "hf", "snapshots", "checkpoint", "weights"}.contains(n.toLower());
            if (!generic) {
                name = n;
                break;
            }
            if (!d.cdUp()) break;
        }
        // A hub cache directory: models--Org--Name.
        if (name.startsWith(QLatin1String("models--"))) name = name.section(QStringLiteral("--"), -1);
    } else {
        name = src.completeBaseName();
    }
    if (name.isEmpty()) name = QStringLiteral("model");
    return name + QLatin1Char('-') + type + (zstd ? QStringLiteral(".bin.zst") : QStringLiteral(".bin"));
}

QString ConvertDialog::type_name() const {
    return QString::fromLatin1(format::weight_type_name(static_cast<WeightType>(type_->currentData().toInt())));
}

ConvertDialog::~ConvertDialog() {
    // Hiding while destroyed moves the focus, which would finish the source's editing on a half-destroyed dialog.
    source_->disconnect(this);
}

void ConvertDialog::set_source(const QString& path) {
    shown_source_ = path;
    source_->setText(path);
    suggest_output();
    preview_ = SourcePreview{};
    fill_types();
    if (path.isEmpty() || !QFileInfo::exists(path)) {
        summary_->setText(path.isEmpty() ? tr("Choose a source to see its family, size and the output per weight type.")
                                         : tr("%1 does not exist.").arg(path));
        return;
    }
    summary_->setText(tr("Reading %1…").arg(QFileInfo(path).fileName()));
    worker_->preview(QFileInfo(path).absoluteFilePath());
}

void ConvertDialog::on_preview(const SourcePreview& p) {
    if (p.source != QFileInfo(source_->text()).absoluteFilePath()) return;  // an older source
    preview_ = p;
    if (!p.error.isEmpty()) {
        summary_->setText(tr("Cannot convert this source: %1").arg(p.error));
    } else {
        QString shape = p.layers == 1 ? tr("1 layer") : tr("%1 layers").arg(p.layers);
        if (p.linear_layers > 0) shape += tr(" (%1 linear attention)").arg(p.linear_layers);
        if (p.experts > 0) shape += tr(", %1 experts (top %2)").arg(p.experts).arg(p.active_experts);
        if (p.shared_expert) shape += tr(" + a shared expert");
        summary_->setText(tr("%1: %2; %3 parameters; %4 of weights on disk; %5")
                              .arg(p.family, shape, human_count(p.parameters), human_bytes(p.source_bytes),
                                   p.has_tokenizer ? tr("with its tokenizer") : tr("no tokenizer (the output will take token ids, not text)")));
    }
    fill_types();
    emit previewed();
}

void ConvertDialog::fill_types() {
    types_->setRowCount(type_->count());
    const auto& quality = quantization_quality();
    for (int i = 0; i < type_->count(); ++i) {
        const WeightTypeInfo& w = weight_type_info(static_cast<WeightType>(type_->itemData(i).toInt()));
        const QString name = QString::fromLatin1(w.name);
        QString size = QStringLiteral("—");
        for (const auto& [t, bytes] : preview_.output_bytes)
            if (t == name) size = human_bytes(bytes);
        const QStringList cells{name, QString::fromLatin1(w.summary), size, quality.value(name).summary()};
        for (int c = 0; c < cells.size(); ++c) {
            auto* item = new QTableWidgetItem(cells[c]);
            item->setToolTip(cells[c]);
            if (c == 2) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
            types_->setItem(i, c, item);
        }
    }
    fit_type_columns();
    types_->selectRow(type_->currentIndex());
}

void ConvertDialog::set_output(const QString& path) { output_->setText(path); }

void ConvertDialog::set_type(const QString& type_name) {
    WeightType t{};
    if (!format::weight_type_from_name(type_name.toStdString(), &t)) return;
    const int i = type_->findData(static_cast<int>(t));
    if (i >= 0) type_->setCurrentIndex(i);
}

void ConvertDialog::set_zstd(bool on) { zstd_->setChecked(on); }

void ConvertDialog::suggest_output() {
    // A path the user typed or chose stays; the suggestion follows the source and the type.
    if ((!output_->text().isEmpty() && output_->text() != suggested_) || source_->text().isEmpty()) return;
    suggested_ = QDir(models_folder_).filePath(output_name(source_->text(), type_name(), zstd_->isChecked()));
    output_->setText(suggested_);
}

void ConvertDialog::choose_directory() {
    const QString d = QFileDialog::getExistingDirectory(this, tr("Hugging Face model directory"));
    if (!d.isEmpty()) set_source(d);
}

void ConvertDialog::choose_gguf() {
    const QString f = QFileDialog::getOpenFileName(this, tr("GGUF file"), QString(), tr("GGUF files (*.gguf)"));
    if (!f.isEmpty()) set_source(f);
}

void ConvertDialog::choose_output() {
    const QString f = QFileDialog::getSaveFileName(this, tr("Output model"), output_->text(), tr("Colibri models (*.bin *.bin.zst)"));
    if (!f.isEmpty()) output_->setText(f);
}

bool ConvertDialog::start() {
    if (running_) return false;
    const QFileInfo src(source_->text());
    if (source_->text().isEmpty() || !src.exists()) {
        status_->setText(tr("Choose a Hugging Face directory or a .gguf file that exists."));
        return false;
    }
    if (output_->text().isEmpty()) {
        status_->setText(tr("Choose where to write the model."));
        return false;
    }
    // The models folder (or any other the path names) is made on demand.
    const QString folder = QFileInfo(output_->text()).absolutePath();
    if (!QDir().mkpath(folder) || !QFileInfo(folder).isWritable()) {
        status_->setText(tr("Cannot write to %1: choose another place with Browse…").arg(folder));
        return false;
    }
    ConvertJob job;
    job.source = src.absoluteFilePath();
    job.output = output_->text();
    job.type = static_cast<WeightType>(type_->currentData().toInt());
    job.zstd = zstd_->isChecked();
    progress_->setValue(0);
    status_->setText(tr("Converting…"));
    set_running(true);
    worker_->convert(job);
    return true;
}

void ConvertDialog::cancel() {
    if (running_) worker_->cancel();
}

void ConvertDialog::set_running(bool on) {
    running_ = on;
    convert_->setEnabled(!on);
    cancel_->setEnabled(on);
    close_->setEnabled(!on);
    for (QWidget* w : std::initializer_list<QWidget*>{source_, output_, type_, zstd_}) w->setEnabled(!on);
}

QString ConvertDialog::source() const { return source_->text(); }
QString ConvertDialog::output() const { return output_->text(); }

}  // namespace colibri::studio
