// Convert: a Hugging Face directory or a GGUF file into a .bin (or .bin.zst), with the weight type; runs on
// its own worker thread with progress and cancel, and hands the result to the validator.
#pragma once
#include <QDialog>
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

namespace colibri::studio {

class ConvertDialog : public QDialog {
    Q_OBJECT
public:
    explicit ConvertDialog(QWidget* parent = nullptr);

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

signals:
    void converted(const QString& output);
    // After every conversion that started: written, failed or cancelled.
    void finished(bool written);

private:
    void choose_directory();
    void choose_gguf();
    void choose_output();
    void suggest_output();
    void set_running(bool on);

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
};

}  // namespace colibri::studio
