// The main window: the chat in the middle, every other view in a dock (model summary, routing, heatmap,
// profiler, kernels, validator); File menu with open, recent files, convert, validate, conversations and
// tune reports; drag and drop of model files; window layout and settings remembered in QSettings.
#pragma once
#include <QMainWindow>
#include <QStringList>
#include <memory>

#include "ui/chat_controller.h"
#include "ui/conversation.h"
#include "ui/engine_worker.h"
#include "ui/models/model_summary.h"
#include "ui/worker_thread.h"

class QDockWidget;
class QLabel;
class QMenu;
class QTableView;

namespace colibri::studio {

class ChatView;
class ConvertDialog;
class HeatmapView;
class KernelsView;
class ProfilerView;
class RoutingView;
class ValidatorView;

struct MainWindowOptions {
    bool persist_settings = true;  // off for --screenshot and tests: they neither read nor write QSettings
    LoadOptions load;
};

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    explicit MainWindow(const MainWindowOptions& options = {}, QWidget* parent = nullptr);
    ~MainWindow() override;

    void open_model(const QString& path);
    void validate_file(const QString& path);
    Status save_conversation(const QString& path) const;
    Status load_conversation(const QString& path);
    Status import_tune_report(const QString& path);
    QStringList recent_files() const { return recent_; }

    EngineWorker* worker() const { return worker_; }
    Conversation* conversation() { return &conversation_; }
    ChatController* chat() { return chat_; }
    ChatView* chat_view() const { return chat_view_; }
    RoutingView* routing_view() const { return routing_view_; }
    HeatmapView* heatmap_view() const { return heatmap_view_; }
    ProfilerView* profiler_view() const { return profiler_view_; }
    KernelsView* kernels_view() const { return kernels_view_; }
    ValidatorView* validator_view() const { return validator_view_; }
    // The convert dialog (made on first use); a finished conversion opens in the validator.
    ConvertDialog* convert_dialog();
    ModelSummaryModel* summary_model() { return &summary_; }
    // The dock holding a view, to raise it.
    QDockWidget* dock_of(QWidget* view) const;
    bool model_loaded() const { return chat_->has_model(); }

signals:
    void modelLoaded(const QString& path);
    void modelLoadFailed(const QString& path, const QString& error);

protected:
    void closeEvent(QCloseEvent* e) override;
    void dragEnterEvent(QDragEnterEvent* e) override;
    void dropEvent(QDropEvent* e) override;

private:
    void build_menus();
    QDockWidget* add_dock(QWidget* view, const QString& title, const QString& name, Qt::DockWidgetArea area);
    void on_loaded(const ModelSummary& summary, const CounterSet& counters);
    void on_load_failed(const QString& path, const QString& error);
    void remember_recent(const QString& path);
    void rebuild_recent_menu();
    void open_dialog();
    void show_convert_dialog();
    void validate_dialog();
    void save_conversation_dialog();
    void load_conversation_dialog();
    void restore_settings();
    void save_settings() const;

    MainWindowOptions options_;
    EngineWorker* worker_;
    std::unique_ptr<WorkerThread> engine_thread_;
    Conversation conversation_;
    ChatController* chat_;
    ModelSummaryModel summary_;
    ChatView* chat_view_ = nullptr;
    RoutingView* routing_view_ = nullptr;
    HeatmapView* heatmap_view_ = nullptr;
    ProfilerView* profiler_view_ = nullptr;
    KernelsView* kernels_view_ = nullptr;
    ValidatorView* validator_view_ = nullptr;
    QTableView* summary_view_ = nullptr;
    ConvertDialog* convert_ = nullptr;
    QMenu* recent_menu_ = nullptr;
    QMenu* view_menu_ = nullptr;
    QLabel* model_label_ = nullptr;
    QStringList recent_;
    QString loading_;  // path being loaded
};

// Whether a path names something the Studio opens as a model.
bool is_model_file(const QString& path);

}  // namespace colibri::studio
