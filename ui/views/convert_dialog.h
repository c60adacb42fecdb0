// Convert: a Hugging Face directory or a GGUF file into a .bin (or .bin.zst), with the weight type; runs on
// its own worker thread with progress and cancel, and hands the result to the validator. Before anything is
// written it previews the source (family, layers, experts, parameters, size) and, for every weight type, the
// output's size and its measured quality (docs/QUANTIZATION.md); the output goes by default to the user's models
// folder (created on demand), named from the source and the type.
#pragma once
#include <QDialog>
#include <QString>
#include <memory>

#include "ui/file_worker.h"
#include "ui/worker_thread.h"

class QCheckBox;
class QComboBox;
class QDialogButtonBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QTableWidget;

namespace colibri::studio {

class ConvertDialog : public QDialog {
    Q_OBJECT
public:
    explicit ConvertDialog(QWidget* parent = nullptr);
    ~ConvertDialog() override;

    void set_source(const QString& path);
    void set_output(const QString& path);
    void set_type(const QString& type_name);
    void set_zstd(bool on);
    QString source() const;
    QString output() const;
    // Starts the conversion (what the Convert button does); false with a message when the form is incomplete.
    bool start();
    void cancel();
    bool running() const { return running_; }
    QLabel* status_label() const { return status_; }
    QProgressBar* progress_bar() const { return progress_; }
    QComboBox* type_box() const { return type_; }
    QLabel* source_summary() const { return summary_; }
    // One row per weight type: type, what it is, the output's size, its measured quality.
    QTableWidget* type_table() const { return types_; }
    const SourcePreview& preview() const { return preview_; }
    // Where outputs go unless the user picks another place: Documents/Colibri models (tests point it elsewhere).
    static QString default_models_folder();
    void set_models_folder(const QString& folder);
    QString models_folder() const { return models_folder_; }
    // "Qwen1.5-MoE-A2.7B-q8_0.bin": the source's own name (its model directory's, not a generic "model" or a
    // snapshot hash) and the weight type.
    static QString output_name(const QString& source, const QString& type, bool zstd);

signals:
    void previewed();

    void converted(const QString& output);
    // After every conversion that started: written, failed or cancelled.
    void finished(bool written);

private:
    void choose_directory();
    void choose_gguf();
    void choose_output();
    void suggest_output();
    void set_running(bool on);
    void on_preview(const SourcePreview& p);
    void fill_types();
    void fit_type_columns();
    void resizeEvent(QResizeEvent* e) override;
    QString type_name() const;

    FileWorker* worker_;
    std::unique_ptr<WorkerThread> thread_;
    QLineEdit* source_ = nullptr;
    QLineEdit* output_ = nullptr;
    QComboBox* type_ = nullptr;
    QCheckBox* zstd_ = nullptr;
    QProgressBar* progress_ = nullptr;
    QLabel* status_ = nullptr;
    QPushButton *convert_ = nullptr, *cancel_ = nullptr, *close_ = nullptr;
    bool running_ = false;
    QLabel* summary_ = nullptr;
    QTableWidget* types_ = nullptr;
    SourcePreview preview_;
    QString models_folder_;
    QString shown_source_;  // the source the preview is of
    QString suggested_;  // the output last suggested: replaced when the source or type changes, a typed one is kept
};

}  // namespace colibri::studio
