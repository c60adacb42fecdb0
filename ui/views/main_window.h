// The main window: the chat in the middle (with a banner above it for what needs the user's attention), every
// other view in a dock (model and chat settings on the left, routing on the right, heatmap, recurrent state,
// profiler, kernels, validator and routing analyses tabbed below); File, Chat and View menus with keyboard
// shortcuts; drag and drop of model files. The layout fits 1280×720 and scales up: no text widens the window, View ▸ Reset layout
// restores the default, and a saved layout that does not fit the screen is repaired when it is restored.
#pragma once
#include <QByteArray>
#include <QMainWindow>
#include <QStringList>
#include <functional>
#include <memory>

#include "ui/chat_controller.h"
#include "ui/conversation.h"
#include "ui/conversation_store.h"
#include "ui/engine_worker.h"
#include "ui/models/model_summary.h"
#include "ui/worker_thread.h"

class QAction;
class QDockWidget;
class QLabel;
class QMenu;
class QTableView;

namespace colibri::studio {

class AnalysisView;
class Banner;
class CacheView;
class ChatView;
class ConversationList;
class ConvertDialog;
class ElidedLabel;
class HeatmapView;
class KernelsView;
class ProfilerView;
class RoutingView;
class StateView;
class ThemeManager;
class ValidatorView;

// Workspace: the analyses large (heatmap and analyses beside the routing inspector), the chat narrow at the
// left. Chat: the chat in the middle, the views in docks around it.
enum class LayoutMode { Workspace, Chat };

// The answer to "this action ends a conversation that is not saved": save it first, discard it, or do nothing.
enum class DiscardAnswer { Save, Discard, Cancel };

struct MainWindowOptions {
    bool persist_settings = true;  // off for --screenshot and tests: they neither read nor write QSettings
    bool keep_on_screen = true;    // off for --screenshot: its pictures have the size asked for, whatever the screen
    LoadOptions load;
    QString demo_model;            // File ▸ Open the demo model (when the file is there)
    // Where conversations are kept (autosaved); empty: the user's data location, or with persist_settings off
    // (tests, --screenshot) nowhere: nothing is autosaved then.
    QString conversations_dir;
};

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    explicit MainWindow(const MainWindowOptions& options = {}, QWidget* parent = nullptr);
    ~MainWindow() override;

    // A .bin or .bin.zst loads; a GGUF file or a Hugging Face directory is offered for conversion; a path that
    // does not exist is an error in the banner.
    void open_model(const QString& path);
    // With load options of its own (File ▸ Open with a RAM budget).
    void open_model(const QString& path, const LoadOptions& options);
    // Attaches the Studio to a colibri serve (File ▸ Connect to server).
    void connect_server(const QString& url, const QString& api_key = {});
    void validate_file(const QString& path);
    Status save_conversation(const QString& path);
    // The kept conversations: the one shown is saved after every change (autosave) and listed in the
    // Conversations dock, from which any other reopens. Its id is "" until its first message.
    const QString& current_conversation_id() const { return current_id_; }
    ConversationList* conversation_list() const { return conversation_list_; }
    ConversationStore* conversation_store() { return &store_; }
    bool autosaves() const { return autosave_; }
    // Reopens a kept conversation (asking first when a reply is being generated); a damaged file is refused with
    // a one-line reason in the list and the status bar, and the conversation shown stays.
    Status open_conversation(const QString& id);
    // Writes the conversation shown now (what the autosave does after each change).
    Status autosave_now();
    Status load_conversation(const QString& path);
    Status export_markdown(const QString& path) const;
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
    AnalysisView* analysis_view() const { return analysis_view_; }
    CacheView* cache_view() const { return cache_view_; }
    StateView* state_view() const { return state_view_; }
    Banner* banner() const { return banner_; }
    ThemeManager* theme() const { return theme_; }
    QLabel* model_label() const;
    // The convert dialog (made on first use); a finished conversion opens in the validator.
    ConvertDialog* convert_dialog();
    ModelSummaryModel* summary_model() { return &summary_; }
    // The dock holding a view, to raise it.
    QDockWidget* dock_of(QWidget* view) const;
    QList<QDockWidget*> docks() const;
    bool model_loaded() const { return chat_->has_model(); }
    // Work that would be lost: a reply being generated, or messages not kept (autosave off, or it failed):
    // opening another model, connecting to a server, loading or starting a conversation, or quitting asks first.
    bool has_unsaved_conversation() const { return unsaved_ || chat_->generating(); }
    // Who answers that question (the action in words, "Opening demo.bin"); by default a QMessageBox on this
    // window. Tests answer it here.
    void set_discard_question(std::function<DiscardAnswer(const QString& action)> ask) { ask_discard_ = std::move(ask); }

    // The default arrangement of the docks for the current mode, sized for the window as it is now.
    void reset_layout();
    // View ▸ Workspace layout (Ctrl+1) / Chat layout (Ctrl+2): arranges the docks for the mode; remembered.
    void set_layout_mode(LayoutMode mode);
    LayoutMode layout_mode() const { return mode_; }
    // Resizes the window (within the screen's available area, frame included) and sizes the docks for it.
    void set_window_size(const QSize& size);
    // Explicitly detaches a dock into a window of its own (docks are not torn off by dragging).
    void float_dock(QDockWidget* dock);
    // With nothing open: a banner that says how to start (open a model, drop one, or the demo model).
    void show_welcome();
    // Makes a restored layout fit the screen: a window larger than the screen shrinks into it, and dock
    // arrangements whose minimum size does not fit are replaced by the default. True when something changed.
    bool fit_to_screen();
    void restore_settings();
    void save_settings() const;

signals:
    void modelLoaded(const QString& path);
    void modelLoadFailed(const QString& path, const QString& error);

protected:
    void closeEvent(QCloseEvent* e) override;
    void showEvent(QShowEvent* e) override;
    void resizeEvent(QResizeEvent* e) override;
    void moveEvent(QMoveEvent* e) override;
    void changeEvent(QEvent* e) override;
    void dragEnterEvent(QDragEnterEvent* e) override;
    void dropEvent(QDropEvent* e) override;

private:
    void build_menus();
    QDockWidget* add_dock(QWidget* view, const QString& title, const QString& name, Qt::DockWidgetArea area);
    void on_loaded(const ModelSummary& summary, const CounterSet& counters);
    void on_load_failed(const QString& path, const QString& error, LoadFailure failure);
    // True when the conversation may go: nothing unsaved, or the user saved or discarded it.
    bool may_discard_conversation(const QString& action);
    DiscardAnswer ask_discard_with_box(const QString& action);
    QString model_display_name() const;
    void on_verified(const QString& path, bool valid);
    void offer_conversion(const QString& source, const QString& what);
    void remember_recent(const QString& path);
    void rebuild_recent_menu();
    void open_dialog();
    void open_budget_dialog();
    void connect_dialog();
    void open_directory_dialog();
    void show_convert_dialog();
    void validate_dialog();
    void compare_files_dialog();
    bool save_conversation_dialog();  // true when it was saved
    void load_conversation_dialog();
    void export_markdown_dialog();
    void apply_default_dock_sizes();
    // The window within the screen's available area, frame included (a window manager's title bar counts).
    bool fit_window_to_screen();
    void arrange_docks(LayoutMode mode);

    MainWindowOptions options_;
    EngineWorker* worker_;
    std::unique_ptr<WorkerThread> engine_thread_;
    Conversation conversation_;
    ChatController* chat_;
    ModelSummaryModel summary_;
    ThemeManager* theme_ = nullptr;
    Banner* banner_ = nullptr;
    ChatView* chat_view_ = nullptr;
    RoutingView* routing_view_ = nullptr;
    HeatmapView* heatmap_view_ = nullptr;
    ProfilerView* profiler_view_ = nullptr;
    KernelsView* kernels_view_ = nullptr;
    ValidatorView* validator_view_ = nullptr;
    AnalysisView* analysis_view_ = nullptr;
    CacheView* cache_view_ = nullptr;
    StateView* state_view_ = nullptr;
    QTableView* summary_view_ = nullptr;
    ConvertDialog* convert_ = nullptr;
    bool open_after_convert_ = false;
    QMenu* recent_menu_ = nullptr;
    QMenu* view_menu_ = nullptr;
    ElidedLabel* model_label_ = nullptr;
    QStringList recent_;
    QString loading_;       // path being loaded
    LoadOptions loading_options_;
    bool unsaved_ = false;
    ConversationStore store_;
    ConversationList* conversation_list_ = nullptr;
    bool autosave_ = false;
    bool opening_conversation_ = false;  // a conversation being put in place is not a change to save
    QString current_id_, current_title_;
    QString save_error_;  // why the last autosave failed ("" when it worked)
    std::function<DiscardAnswer(const QString&)> ask_discard_;
    QString loaded_path_;   // the model the chat runs on
    QByteArray default_state_;    // the chat mode's arrangement
    QByteArray workspace_state_;  // the workspace mode's
    LayoutMode mode_ = LayoutMode::Workspace;
    bool hybrid_ = false;  // the model has recurrent (Gated DeltaNet) layers: the Recurrent state dock shows
    QList<QAction*> mode_actions_;
    bool sized_for_maximized_ = false;
    QSize sized_for_{1280, 720};  // the size the docks were last sized for
    qint64 fit_until_ms_ = 0;  // shortly after showing, the window manager's frame arrives: fit the window again
};

// Whether a path names something the Studio opens as a model.
bool is_model_file(const QString& path);
// A GGUF file, or a directory (or a file in one) with a Hugging Face config.json: something to convert. Returns
// the source to convert ("" when it is neither).
QString conversion_source(const QString& path);

}  // namespace colibri::studio
