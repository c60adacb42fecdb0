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
#include <QPushButton>
#include <QVBoxLayout>

#include "engine/file/format.h"

namespace colibri::studio {

ConvertDialog::ConvertDialog(QWidget* parent)
    : QDialog(parent), worker_(new FileWorker),
      thread_(std::make_unique<WorkerThread>(worker_, QStringLiteral("convert"), [w = worker_] { w->cancel(); })) {
    setWindowTitle(tr("Convert a model"));
    source_ = new QLineEdit;
    source_->setPlaceholderText(tr("Hugging Face model directory or .gguf file"));
    connect(source_, &QLineEdit::editingFinished, this, &ConvertDialog::suggest_output);
    auto* dir = new QPushButton(tr("Directory…"));
    auto* gguf = new QPushButton(tr("GGUF file…"));
    connect(dir, &QPushButton::clicked, this, &ConvertDialog::choose_directory);
    connect(gguf, &QPushButton::clicked, this, &ConvertDialog::choose_gguf);
    type_ = new QComboBox;
    // Every type the converter can write (the weight-type table), f16 preselected.
    for (const WeightTypeInfo& w : weight_types()) {
        if (!w.quantisable) continue;
        type_->addItem(QString::fromLatin1(w.name), static_cast<int>(w.type));
        type_->setItemData(type_->count() - 1, QString::fromLatin1(w.summary), Qt::ToolTipRole);
    }
    type_->setCurrentIndex(type_->findData(static_cast<int>(WeightType::F16)));
    zstd_ = new QCheckBox(tr("compress with zstd (.bin.zst: one frame per section, experts decompressed on first use)"));
    connect(zstd_, &QCheckBox::toggled, this, [this](bool on) {
        QString out = output_->text();
        if (out.isEmpty()) return;
        if (on && !out.endsWith(QLatin1String(".zst"))) out += QStringLiteral(".zst");
        if (!on && out.endsWith(QLatin1String(".bin.zst"))) out.chop(4);
        output_->setText(out);
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
    layout->addWidget(progress_);
    layout->addWidget(status_);
    layout->addLayout(buttons);
    set_running(false);
    resize(640, 260);
}

void ConvertDialog::set_source(const QString& path) {
    source_->setText(path);
    suggest_output();
}

void ConvertDialog::set_output(const QString& path) { output_->setText(path); }

void ConvertDialog::set_type(const QString& type_name) {
    const int i = type_->findText(type_name);
    if (i >= 0) type_->setCurrentIndex(i);
}

void ConvertDialog::set_zstd(bool on) { zstd_->setChecked(on); }

void ConvertDialog::suggest_output() {
    if (!output_->text().isEmpty() || source_->text().isEmpty()) return;
    const QFileInfo src(source_->text());
    const QString base = src.isDir() ? QDir(src.absoluteFilePath()).dirName() : src.completeBaseName();
    output_->setText(src.absoluteDir().filePath(base + (zstd_->isChecked() ? QStringLiteral(".bin.zst") : QStringLiteral(".bin"))));
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
