#include "ui/views/main_window.h"

#include <QAction>
#include <QActionGroup>
#include <QApplication>
#include <QCloseEvent>
#include <QDir>
#include <QDateTime>
#include <QDockWidget>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QHeaderView>
#include <QJsonArray>
#include <QJsonDocument>
#include <QDialog>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QScreen>
#include <QScrollArea>
#include <QSettings>
#include <QStatusBar>
#include <QTableView>
#include <QTimer>
#include <QVBoxLayout>

#include "ui/file_output.h"
#include "ui/theme.h"
#include "ui/views/analysis_view.h"
#include "ui/views/banner.h"
#include "ui/views/budget_dialog.h"
#include "ui/views/cache_view.h"
#include "ui/views/chat_view.h"
#include "ui/views/conversation_list.h"
#include "ui/views/convert_dialog.h"
#include "ui/views/elided_label.h"
#include "ui/views/heatmap_view.h"
#include "ui/views/state_view.h"
#include "ui/views/kernels_view.h"
#include "ui/views/profiler_view.h"
#include "ui/views/routing_view.h"
#include "ui/views/validator_view.h"

namespace colibri::studio {

namespace {
constexpr int kRecentFiles = 8;
// Files up to this size are verified as soon as they load (well under a second of hashing, pages mostly cached).
constexpr quint64 kAutoVerifyBytes = quint64(1) << 30;
// saveState()'s version: layouts saved by an older arrangement of the docks are not restored.
constexpr int kLayoutVersion = 5;  // 4: the Recurrent state dock; 5: workspace and chat modes
// How long after showing the window's frame may still change (a window manager decorating it).
constexpr qint64 kFitAfterShowMs = 3000;
}  // namespace

bool is_model_file(const QString& path) {
    return path.endsWith(QLatin1String(".bin"), Qt::CaseInsensitive) || path.endsWith(QLatin1String(".bin.zst"), Qt::CaseInsensitive);
}

QString conversion_source(const QString& path) {
    const QFileInfo info(path);
    if (info.isFile() && path.endsWith(QLatin1String(".gguf"), Qt::CaseInsensitive)) return path;
    if (info.isDir() && QFileInfo::exists(QDir(path).filePath(QStringLiteral("config.json")))) return path;
    // A file inside a Hugging Face directory (model.safetensors, config.json) stands for the directory.
    if (info.isFile() && !is_model_file(path) && QFileInfo::exists(info.dir().filePath(QStringLiteral("config.json"))) &&
        (path.endsWith(QLatin1String(".safetensors")) || info.fileName() == QLatin1String("config.json")))
        return info.absolutePath();
    return {};
}

MainWindow::MainWindow(const MainWindowOptions& options, QWidget* parent)
    : QMainWindow(parent), options_(options), worker_(new EngineWorker),
      engine_thread_(std::make_unique<WorkerThread>(worker_, QStringLiteral("engine"), [w = worker_] { w->requestStop(); })),
      chat_(new ChatController(worker_, &conversation_, this)), store_(options.conversations_dir),
      autosave_(options.persist_settings || !options.conversations_dir.isEmpty()) {
    setWindowTitle(tr("Colibri Studio"));
    setWindowIcon(QIcon(QStringLiteral(":/colibri/colibri-studio.png")));
    setAcceptDrops(true);
    setDockOptions(AllowTabbedDocks | AllowNestedDocks | AnimatedDocks);
    // The routing inspector runs the full height on the right; the tabbed views below span the rest.
    setCorner(Qt::BottomRightCorner, Qt::RightDockWidgetArea);
    setCorner(Qt::TopRightCorner, Qt::RightDockWidgetArea);
    theme_ = new ThemeManager(this);

    chat_view_ = new ChatView(chat_, &conversation_);
    banner_ = new Banner;
    auto* central = new QWidget;
    auto* central_layout = new QVBoxLayout(central);
    central_layout->setContentsMargins(0, 0, 0, 0);
    central_layout->setSpacing(2);
    central_layout->addWidget(banner_);
    central_layout->addWidget(chat_view_, 1);
    setCentralWidget(central);

    summary_view_ = new QTableView;
    summary_view_->setObjectName(QStringLiteral("model_summary"));
    summary_view_->setModel(&summary_);
    summary_view_->verticalHeader()->hide();
    summary_view_->horizontalHeader()->setStretchLastSection(true);
    summary_view_->setWordWrap(true);
    summary_view_->setMinimumWidth(160);
    routing_view_ = new RoutingView(&conversation_);
    heatmap_view_ = new HeatmapView(&conversation_);
    profiler_view_ = new ProfilerView(&conversation_);
    kernels_view_ = new KernelsView;
    validator_view_ = new ValidatorView;
    analysis_view_ = new AnalysisView(&conversation_);
    cache_view_ = new CacheView(&conversation_);
    state_view_ = new StateView(&conversation_);

    QDockWidget* model = add_dock(summary_view_, tr("Model"), QStringLiteral("model"), Qt::LeftDockWidgetArea);
    QDockWidget* settings = add_dock(chat_view_->settings_panel(), tr("Chat settings"), QStringLiteral("settings"), Qt::LeftDockWidgetArea);
    tabifyDockWidget(model, settings);
    conversation_list_ = new ConversationList(&store_);
    tabifyDockWidget(model, add_dock(conversation_list_, tr("Conversations"), QStringLiteral("conversations"), Qt::LeftDockWidgetArea));
    model->raise();
    add_dock(routing_view_, tr("Routing"), QStringLiteral("routing"), Qt::RightDockWidgetArea);
    QDockWidget* heat = add_dock(heatmap_view_, tr("Expert heatmap"), QStringLiteral("heatmap"), Qt::BottomDockWidgetArea);
    QDockWidget* analysis = add_dock(analysis_view_, tr("Routing analyses"), QStringLiteral("analyses"), Qt::BottomDockWidgetArea);
    QDockWidget* prof = add_dock(profiler_view_, tr("Profiler"), QStringLiteral("profiler"), Qt::BottomDockWidgetArea);
    QDockWidget* kern = add_dock(kernels_view_, tr("Kernels"), QStringLiteral("kernels"), Qt::BottomDockWidgetArea);
    QDockWidget* valid = add_dock(validator_view_, tr("Validator"), QStringLiteral("validator"), Qt::BottomDockWidgetArea);
    QDockWidget* cache = add_dock(cache_view_, tr("Expert cache"), QStringLiteral("cache"), Qt::BottomDockWidgetArea);
    QDockWidget* state = add_dock(state_view_, tr("Recurrent state"), QStringLiteral("state"), Qt::BottomDockWidgetArea);
    tabifyDockWidget(heat, state);
    tabifyDockWidget(state, analysis);
    tabifyDockWidget(analysis, cache);
    tabifyDockWidget(cache, prof);
    tabifyDockWidget(prof, kern);
    tabifyDockWidget(kern, valid);
    heat->raise();

    model_label_ = new ElidedLabel(tr("no model"));
    model_label_->setObjectName(QStringLiteral("model_label"));
    statusBar()->addPermanentWidget(model_label_, 1);
    connect(worker_, &EngineWorker::loaded, this, &MainWindow::on_loaded);
    connect(worker_, &EngineWorker::loadFailed, this, &MainWindow::on_load_failed);
    connect(&conversation_, &Conversation::messagesChanged, this, [this] {
        if (conversation_.messages().isEmpty()) {  // a new conversation: the next message starts another file
            current_id_.clear();
            current_title_.clear();
            conversation_list_->model()->set_current({});
        }
        unsaved_ = !opening_conversation_ && !conversation_.messages().isEmpty();
        if (autosave_ && unsaved_) autosave_now();
    });
    chat_view_->set_discard_check([this](const QString& action) { return may_discard_conversation(action); });
    connect(conversation_list_, &ConversationList::openRequested, this, [this](const QString& id) { open_conversation(id); });
    connect(conversation_list_, &ConversationList::newRequested, chat_view_->new_action(), &QAction::trigger);
    connect(conversation_list_, &ConversationList::renamed, this, [this](const QString& id, const QString& title) {
        if (id == current_id_) current_title_ = title;
    });
    connect(conversation_list_, &ConversationList::removed, this, [this](const QString& id) {
        if (id == current_id_) chat_->new_conversation();  // what is shown was that file
    });
    if (autosave_) conversation_list_->refresh({});
    else conversation_list_->show_message(tr("Conversations are not kept in this session"), false);
    // Context `this`: the calls run on this thread and post to the worker's.
    connect(profiler_view_, &ProfilerView::countingChanged, this, [this](Counting mode) { worker_->setCounting(mode); });
    connect(chat_, &ChatController::finished, profiler_view_, &ProfilerView::note_generation);
    connect(kernels_view_, &KernelsView::sessionKernelChanged, this, [this](const QString& v) { worker_->setKernel(v); });
    connect(kernels_view_, &KernelsView::compareRequested, this, [this](const KernelComparisonRequest& r) {
        KernelComparisonRequest request = r;
        // The conversation's own tokens when there are enough of them: "the same prompt" as the chat.
        if (conversation_.size() >= request.prompt_tokens) request.prompt = conversation_.token_ids();
        if (chat_->generating()) {
            kernels_view_->comparison_failed(tr("a reply is still being generated"));
            return;
        }
        worker_->compareKernels(request);
    });
    connect(kernels_view_, &KernelsView::compareCancelled, this, [this] { worker_->requestStop(); });
    connect(worker_, &EngineWorker::kernelComparisonProgress, kernels_view_, &KernelsView::comparison_progress);
    connect(worker_, &EngineWorker::kernelComparisonFinished, kernels_view_, &KernelsView::comparison_finished);
    connect(worker_, &EngineWorker::kernelComparisonFinished, this, [this] {
        // The comparison used the session: the conversation's traces stay, its cache is rebuilt on the next turn.
        statusBar()->showMessage(tr("Kernel comparison finished"), 5000);
    });
    connect(chat_, &ChatController::failed, this, [this](const QString& e) { statusBar()->showMessage(e, 8000); });
    connect(chat_view_, &ChatView::copied, this, [this](const QString& what) { statusBar()->showMessage(tr("Copied the %1 to the clipboard").arg(what), 3000); });
    connect(&conversation_, &Conversation::selectionChanged, this, [this](int position) {
        if (position >= 0) dock_of(routing_view_)->raise();
    });
    connect(validator_view_, &ValidatorView::verifiedFile, this, &MainWindow::on_verified);

    build_menus();
    resize(1280, 720);
    default_state_ = saveState(kLayoutVersion);
    arrange_docks(LayoutMode::Workspace);
    workspace_state_ = saveState(kLayoutVersion);
    dock_of(state_view_)->hide();  // until a hybrid is loaded
    apply_default_dock_sizes();
    if (options_.persist_settings) restore_settings();
}

MainWindow::~MainWindow() {
    // The engine thread first: nothing may arrive for views that are going away.
    engine_thread_.reset();
}

QLabel* MainWindow::model_label() const { return model_label_; }

QDockWidget* MainWindow::add_dock(QWidget* view, const QString& title, const QString& name, Qt::DockWidgetArea area) {
    auto* dock = new QDockWidget(title, this);
    dock->setObjectName(name);  // saveState() keys on it
    // A dock smaller than its view scrolls instead of pushing the window beyond the screen.
    auto* scroll = new QScrollArea;
    scroll->setWidget(view);
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::NoFrame);
    scroll->setMinimumSize(120, 80);
    dock->setWidget(scroll);
    // Not floatable by dragging: a slight drag of the title moves the dock between areas at most. View ▸ Detach
    // floats it on purpose (float_dock).
    dock->setFeatures(QDockWidget::DockWidgetClosable | QDockWidget::DockWidgetMovable);
    connect(dock, &QDockWidget::topLevelChanged, this, [dock](bool floating) {
        if (!floating) dock->setFeatures(dock->features() & ~QDockWidget::DockWidgetFloatable);
    });
    addDockWidget(area, dock);
    return dock;
}

QDockWidget* MainWindow::dock_of(QWidget* view) const {
    for (QDockWidget* d : findChildren<QDockWidget*>()) {
        if (d->widget() == view) return d;
        if (auto* scroll = qobject_cast<QScrollArea*>(d->widget()); scroll != nullptr && scroll->widget() == view) return d;
    }
    return nullptr;
}

QList<QDockWidget*> MainWindow::docks() const { return findChildren<QDockWidget*>(); }

void MainWindow::apply_default_dock_sizes() {
    sized_for_ = size();
    const int w = std::max(width(), 800), h = std::max(height(), 600);
    if (mode_ == LayoutMode::Workspace) {
        // The chat a narrow column at the left; the heatmap and analyses take what the routing inspector leaves.
        // The chat's own minimum counts: the docks get what it leaves, not a share it would take back.
        const int chat = std::max(std::clamp(w * 24 / 100, 300, 520), centralWidget()->minimumSizeHint().width());
        const int routing = std::clamp(w * 23 / 100, 296, 520);
        resizeDocks({dock_of(heatmap_view_), dock_of(routing_view_)}, {std::max(w - chat - routing, 300), routing}, Qt::Horizontal);
        resizeDocks({dock_of(summary_view_)}, {h * 30 / 100}, Qt::Vertical);
        return;
    }
    resizeDocks({dock_of(summary_view_)}, {std::clamp(w * 18 / 100, 200, 320)}, Qt::Horizontal);
    resizeDocks({dock_of(routing_view_)}, {std::clamp(w * 30 / 100, 320, 560)}, Qt::Horizontal);
    resizeDocks({dock_of(heatmap_view_)}, {std::clamp(h * 36 / 100, 200, 440)}, Qt::Vertical);
}

void MainWindow::arrange_docks(LayoutMode mode) {
    // Built once from the chat arrangement: the tabbed views and the routing inspector side by side on the right,
    // the model and chat settings under the chat.
    QDockWidget *heat = dock_of(heatmap_view_), *routing = dock_of(routing_view_), *model = dock_of(summary_view_),
                *settings = dock_of(chat_view_->settings_panel());
    if (mode == LayoutMode::Workspace) {
        addDockWidget(Qt::RightDockWidgetArea, heat);
        splitDockWidget(heat, routing, Qt::Horizontal);
        for (QWidget* v : std::initializer_list<QWidget*>{state_view_, analysis_view_, cache_view_, profiler_view_, kernels_view_, validator_view_})
            tabifyDockWidget(heat, dock_of(v));
        // Under the chat (the bottom area ends where the right one begins).
        addDockWidget(Qt::BottomDockWidgetArea, model);
        tabifyDockWidget(model, settings);
        tabifyDockWidget(model, dock_of(conversation_list_));
    }
    model->raise();
    heat->raise();
}

void MainWindow::reset_layout() {
    for (QDockWidget* d : docks()) {
        d->setFloating(false);
        d->show();
    }
    restoreState(mode_ == LayoutMode::Workspace ? workspace_state_ : default_state_, kLayoutVersion);
    for (QDockWidget* d : docks()) d->show();
    // The recurrent state exists only in hybrids: without one its tab would only take room (View shows it).
    dock_of(state_view_)->setVisible(hybrid_);
    dock_of(summary_view_)->raise();
    dock_of(heatmap_view_)->raise();
    apply_default_dock_sizes();
}

void MainWindow::set_layout_mode(LayoutMode mode) {
    for (QAction* a : mode_actions_) a->setChecked(a->data().toInt() == static_cast<int>(mode));
    if (mode == mode_) return;
    mode_ = mode;
    reset_layout();
}

void MainWindow::set_window_size(const QSize& size) {
    if (isMaximized() || isFullScreen()) showNormal();
    resize(size);
    fit_window_to_screen();
    apply_default_dock_sizes();
}

void MainWindow::float_dock(QDockWidget* dock) {
    dock->setFeatures(dock->features() | QDockWidget::DockWidgetFloatable);
    dock->show();
    dock->setFloating(true);
    // Beside the window's centre, within the screen.
    const QRect avail = (screen() ? screen() : QGuiApplication::primaryScreen())->availableGeometry();
    QRect g(QPoint(0, 0), dock->size().boundedTo(avail.size() * 3 / 4).expandedTo(QSize(320, 240)));
    g.moveCenter(frameGeometry().center());
    dock->setGeometry(g.intersected(avail));
}

bool MainWindow::fit_window_to_screen() {
    QScreen* s = screen() ? screen() : QGuiApplication::primaryScreen();
    if (s == nullptr || isMaximized() || isFullScreen() || !options_.keep_on_screen) return false;
    const QRect avail = s->availableGeometry();
    bool changed = false;
    const QMargins frame(geometry().left() - frameGeometry().left(), geometry().top() - frameGeometry().top(),
                         frameGeometry().right() - geometry().right(), frameGeometry().bottom() - geometry().bottom());
    const QSize max_size(avail.width() - frame.left() - frame.right(), avail.height() - frame.top() - frame.bottom());
    if (width() > max_size.width() || height() > max_size.height()) {
        resize(std::min(width(), max_size.width()), std::min(height(), max_size.height()));
        apply_default_dock_sizes();
        changed = true;
    }
    if (!avail.contains(frameGeometry())) {
        QRect g = frameGeometry();
        g.setSize(QSize(width() + frame.left() + frame.right(), height() + frame.top() + frame.bottom()));
        g.moveLeft(std::clamp(g.left(), avail.left(), std::max(avail.left(), avail.right() - g.width() + 1)));
        g.moveTop(std::clamp(g.top(), avail.top(), std::max(avail.top(), avail.bottom() - g.height() + 1)));
        if (g.topLeft() != frameGeometry().topLeft()) {
            move(g.topLeft());
            changed = true;
        }
    }
    return changed;
}

void MainWindow::showEvent(QShowEvent* e) {
    QMainWindow::showEvent(e);
    fit_until_ms_ = QDateTime::currentMSecsSinceEpoch() + kFitAfterShowMs;
    QTimer::singleShot(0, this, [this] { fit_window_to_screen(); });
}

void MainWindow::moveEvent(QMoveEvent* e) {
    QMainWindow::moveEvent(e);
    // The window manager's frame (and with it the frame geometry) is known only after it has decorated the window.
    if (QDateTime::currentMSecsSinceEpoch() < fit_until_ms_) QTimer::singleShot(0, this, [this] { fit_window_to_screen(); });
}

void MainWindow::resizeEvent(QResizeEvent* e) {
    QMainWindow::resizeEvent(e);
    if (QDateTime::currentMSecsSinceEpoch() < fit_until_ms_) QTimer::singleShot(0, this, [this] { fit_window_to_screen(); });
    // Maximised, restored or much resized: the docks share the new size as the default layout does, not the chat
    // alone (QMainWindow gives the central widget all of it).
    const bool maximized = isMaximized() || isFullScreen();
    const QSize size = e->size();
    const bool much = std::abs(size.width() - sized_for_.width()) * 5 > sized_for_.width() ||
                      std::abs(size.height() - sized_for_.height()) * 5 > sized_for_.height();
    if (maximized != sized_for_maximized_ || (isVisible() && much)) {
        sized_for_maximized_ = maximized;
        sized_for_ = size;
        QTimer::singleShot(0, this, &MainWindow::apply_default_dock_sizes);
    }
}

void MainWindow::changeEvent(QEvent* e) {
    QMainWindow::changeEvent(e);
    if (e->type() != QEvent::WindowStateChange) return;
    const bool maximized = isMaximized() || isFullScreen();
    if (maximized != sized_for_maximized_) {
        sized_for_maximized_ = maximized;
        // After the layout has the new size (the resize may arrive after the state change).
        QTimer::singleShot(0, this, &MainWindow::apply_default_dock_sizes);
        QTimer::singleShot(100, this, &MainWindow::apply_default_dock_sizes);
    }
}

bool MainWindow::fit_to_screen() {
    QScreen* s = screen() ? screen() : QGuiApplication::primaryScreen();
    if (s == nullptr) return false;
    const QRect avail = s->availableGeometry();
    bool changed = false;
    // Dock arrangements that need more room than the screen has: the default instead.
    const QSize need = minimumSizeHint();
    if (need.width() > avail.width() || need.height() > avail.height()) {
        reset_layout();
        changed = true;
    }
    for (QDockWidget* d : docks())
        if (d->isFloating() && !avail.intersects(d->frameGeometry())) {
            d->setFloating(false);
            changed = true;
        }
    // The window itself: within the screen, frame included.
    return fit_window_to_screen() || changed;
}

void MainWindow::build_menus() {
    QMenu* file = menuBar()->addMenu(tr("&File"));
    file->addAction(tr("&Open model…"), QKeySequence::Open, this, &MainWindow::open_dialog);
    file->addAction(tr("Open with a RAM &budget…"), this, &MainWindow::open_budget_dialog)->setObjectName(QStringLiteral("open_budget"));
    file->addAction(tr("Open a &Hugging Face directory…"), this, &MainWindow::open_directory_dialog);
    if (!options_.demo_model.isEmpty() && QFileInfo::exists(options_.demo_model))
        file->addAction(tr("Open the &demo model"), this, [this] { open_model(options_.demo_model); })->setObjectName(QStringLiteral("open_demo"));
    recent_menu_ = file->addMenu(tr("Open &recent"));
    file->addSeparator();
    file->addAction(tr("Connect to &server…"), this, &MainWindow::connect_dialog)->setObjectName(QStringLiteral("connect_server"));
    file->addSeparator();
    file->addAction(tr("&Convert…"), this, &MainWindow::show_convert_dialog);
    file->addAction(tr("&Validate a file…"), this, &MainWindow::validate_dialog);
    file->addAction(tr("Co&mpare two model files…"), this, &MainWindow::compare_files_dialog);
    file->addAction(tr("&Import tune report…"), kernels_view_, &KernelsView::import_dialog);
    file->addSeparator();
    file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close)->setObjectName(QStringLiteral("quit"));

    QMenu* chat = menuBar()->addMenu(tr("&Chat"));
    for (QAction* a : chat_view_->chat_actions()) chat->addAction(a);
    chat->addSeparator();
    chat->addAction(tr("&Export as Markdown…"), QKeySequence(Qt::CTRL | Qt::Key_E), this, &MainWindow::export_markdown_dialog);
    chat->addAction(tr("&Save conversation…"), QKeySequence::Save, this, &MainWindow::save_conversation_dialog);
    chat->addAction(tr("&Load conversation…"), this, &MainWindow::load_conversation_dialog);

    view_menu_ = menuBar()->addMenu(tr("&View"));
    const std::tuple<QString, LayoutMode, QKeySequence, QString> modes[] = {
        {tr("&Workspace layout (analyses large)"), LayoutMode::Workspace, QKeySequence(Qt::CTRL | Qt::Key_1), QStringLiteral("workspace_layout")},
        {tr("C&hat layout (chat in the middle)"), LayoutMode::Chat, QKeySequence(Qt::CTRL | Qt::Key_2), QStringLiteral("chat_layout")}};
    auto* mode_group = new QActionGroup(this);
    for (const auto& [label, mode, key, name] : modes) {
        QAction* a = view_menu_->addAction(label);
        a->setObjectName(name);
        a->setShortcut(key);
        a->setCheckable(true);
        a->setChecked(mode == mode_);
        a->setData(static_cast<int>(mode));
        mode_group->addAction(a);
        mode_actions_ << a;
        connect(a, &QAction::triggered, this, [this, mode = mode] { set_layout_mode(mode); });
    }
    view_menu_->addSeparator();
    for (QDockWidget* d : docks()) view_menu_->addAction(d->toggleViewAction());
    QMenu* detach = view_menu_->addMenu(tr("&Detach into a window"));
    detach->setObjectName(QStringLiteral("detach_menu"));
    for (QDockWidget* d : docks()) detach->addAction(d->windowTitle(), this, [this, d] { float_dock(d); });
    view_menu_->addSeparator();
    QAction* reset = view_menu_->addAction(tr("&Reset layout"), this, &MainWindow::reset_layout);
    reset->setObjectName(QStringLiteral("reset_layout"));
    QMenu* colours = view_menu_->addMenu(tr("&Colours"));
    auto* group = new QActionGroup(this);
    const std::pair<QString, ColorScheme> schemes[] = {
        {tr("Follow the &desktop"), ColorScheme::FollowDesktop}, {tr("&Light"), ColorScheme::Light}, {tr("Dar&k"), ColorScheme::Dark}};
    for (const auto& [label, scheme] : schemes) {
        QAction* a = colours->addAction(label);
        a->setCheckable(true);
        a->setChecked(theme_->scheme() == scheme);
        a->setData(static_cast<int>(scheme));
        group->addAction(a);
        connect(a, &QAction::triggered, this, [this, scheme = scheme] { theme_->set_scheme(scheme); });
    }
    QMenu* help = menuBar()->addMenu(tr("&Help"));
    help->addAction(tr("&About"), this, [this] {
        QMessageBox::about(this, tr("About Colibri Studio"),
                           tr("Colibri Studio %1: chat, routing, expert heatmaps, profiling, kernel comparison and model files "
                              "for Mixture-of-Experts models on the Colibri engine.").arg(QApplication::applicationVersion()));
    });
    rebuild_recent_menu();
}

void MainWindow::open_model(const QString& path) { open_model(path, options_.load); }

void MainWindow::open_model(const QString& path, const LoadOptions& options) {
    if (!QFileInfo::exists(path)) {
        // Not a damaged file: there is no file. Nothing is drawn in the validator.
        banner_->show_message(Banner::Kind::Error, tr("Could not open %1: no such file or directory.").arg(path));
        statusBar()->showMessage(tr("%1: no such file").arg(path), 8000);
        if (recent_.removeAll(path) > 0) rebuild_recent_menu();
        return;
    }
    if (!is_model_file(path)) {
        const QString source = conversion_source(path);
        if (!source.isEmpty()) {
            offer_conversion(source, source.endsWith(QLatin1String(".gguf"), Qt::CaseInsensitive) ? tr("a GGUF file") : tr("a Hugging Face model directory"));
            return;
        }
    }
    if (!may_discard_conversation(tr("Opening %1").arg(QFileInfo(path).fileName()))) return;
    loading_ = path;
    loading_options_ = options;
    statusBar()->showMessage(tr("Loading %1…").arg(QFileInfo(path).fileName()));
    if (chat_->generating()) chat_->stop();
    worker_->load(path, options);
}

void MainWindow::connect_dialog() {
    QDialog dialog(this);
    dialog.setWindowTitle(tr("Connect to a server"));
    auto* form = new QFormLayout(&dialog);
    auto* url = new QLineEdit(QStringLiteral("http://127.0.0.1:8080"), &dialog);
    url->setObjectName(QStringLiteral("server_url"));
    auto* key = new QLineEdit(qEnvironmentVariable("COLIBRI_API_KEY"), &dialog);
    key->setEchoMode(QLineEdit::Password);
    key->setPlaceholderText(tr("none"));
    auto* about = new QLabel(tr("A model served by <tt>colibri serve</tt>: chats run there, and its routing and timings fill "
                                "the views here (perf counters and kernel comparisons stay local)."), &dialog);
    about->setWordWrap(true);
    form->addRow(about);
    dialog.setMinimumWidth(420);
    form->addRow(tr("Address"), url);
    form->addRow(tr("API key"), key);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, &dialog);
    buttons->button(QDialogButtonBox::Ok)->setText(tr("Connect"));
    connect(buttons, &QDialogButtonBox::accepted, &dialog, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, &dialog, &QDialog::reject);
    form->addRow(buttons);
    if (dialog.exec() == QDialog::Accepted) connect_server(url->text(), key->text());
}

void MainWindow::connect_server(const QString& url, const QString& api_key) {
    if (!may_discard_conversation(tr("Connecting to %1").arg(url))) return;
    loading_ = url;
    statusBar()->showMessage(tr("Connecting to %1…").arg(url));
    if (chat_->generating()) chat_->stop();
    worker_->connectRemote(url, api_key);
}

void MainWindow::show_welcome() {
    QList<Banner::Action> actions;
    if (!options_.demo_model.isEmpty() && QFileInfo::exists(options_.demo_model))
        actions.push_back({tr("Open the demo model"), [this] { open_model(options_.demo_model); }});
    actions.push_back({tr("Open…"), [this] { open_dialog(); }});
    banner_->show_message(Banner::Kind::Info,
                          tr("No model is open. Open a .bin model (File ▸ Open, Ctrl+O) or drop one here; a GGUF file or a Hugging Face "
                             "directory is offered for conversion."),
                          actions);
}

void MainWindow::offer_conversion(const QString& source, const QString& what) {
    const QString name = QFileInfo(source).fileName();
    banner_->show_message(Banner::Kind::Info,
                          tr("%1 is %2. Colibri Studio runs models in its own .bin format: convert it first (the source is only read).")
                              .arg(name, what),
                          {{tr("Convert…"), [this, source] {
                                ConvertDialog* d = convert_dialog();
                                d->set_source(source);
                                open_after_convert_ = true;
                                d->show();
                                d->raise();
                            }}});
}

void MainWindow::on_loaded(const ModelSummary& summary, const CounterSet& counters) {
    banner_->dismiss();
    conversation_.clear();
    chat_->set_model(summary);
    summary_.set_summary(summary);
    summary_view_->resizeColumnToContents(0);
    routing_view_->set_model(summary);
    heatmap_view_->set_model(summary);
    profiler_view_->set_model(summary, counters);
    analysis_view_->set_model(summary);
    cache_view_->set_model(summary);
    state_view_->set_model(summary);
    if (hybrid_ != !summary.linear_layer_ids.isEmpty()) {
        hybrid_ = !summary.linear_layer_ids.isEmpty();
        dock_of(state_view_)->setVisible(hybrid_);
    }
    kernels_view_->set_model_loaded(!summary.remote);
    chat_view_->model_changed();
    loaded_path_ = summary.path;
    if (summary.remote) {  // no file here to verify or remember
        setWindowTitle(tr("%1 — Colibri Studio").arg(summary.path));
        model_label_->setText(tr("%1: %2, %3 layers, %4 experts (top-%5), on the server")
                                  .arg(summary.path, summary.family).arg(summary.layers).arg(summary.experts).arg(summary.active_experts));
        statusBar()->showMessage(tr("Connected to %1").arg(summary.path), 5000);
        emit modelLoaded(summary.path);
        return;
    }
    // Verified in the background right away when hashing it is quick; a larger file waits for the Verify button.
    const bool verify = summary.file_size <= kAutoVerifyBytes;
    validator_view_->open(summary.path, verify);
    if (!verify)
        banner_->show_message(Banner::Kind::Warning,
                              tr("%1 (%2) was not verified: hashing it takes a while. Its checksums are checked when you verify it.")
                                  .arg(QFileInfo(summary.path).fileName(), human_bytes(summary.file_size)),
                              {{tr("Verify now"), [this] {
                                    validator_view_->verify();
                                    if (QDockWidget* d = dock_of(validator_view_)) d->raise();
                                }}});
    remember_recent(summary.path);
    const QString name = QFileInfo(summary.path).fileName();
    setWindowTitle(tr("%1 — Colibri Studio").arg(name));
    model_label_->setText(tr("%1: %2, %3 layers, %4 experts (top-%5), %6 threads").arg(name, summary.family).arg(summary.layers)
                              .arg(summary.experts).arg(summary.active_experts).arg(summary.threads));
    statusBar()->showMessage(tr("Loaded %1").arg(name), 5000);
    emit modelLoaded(summary.path);
}

void MainWindow::on_verified(const QString& path, bool valid) {
    if (path != loaded_path_ || !chat_->has_model()) return;
    if (valid) {
        if (banner_->isVisible() && banner_->kind() == Banner::Kind::Warning) banner_->dismiss();
        return;
    }
    const tools::CheckReport* report = validator_view_->report();
    QString first = tr("a checksum does not match");
    int count = 1;
    if (report != nullptr && !report->problems.empty()) {
        first = QString::fromStdString(report->problems.front());
        count = static_cast<int>(report->problems.size());
    }
    const QString reason = count > 1 ? tr("%1 (and %n more)", nullptr, count - 1).arg(first) : first;
    chat_->set_untrusted(reason);
    banner_->show_message(Banner::Kind::Error,
                          tr("%1 failed verification: %2. Its replies cannot be trusted; chatting needs your confirmation.")
                              .arg(QFileInfo(path).fileName(), reason),
                          {{tr("Show the damage"), [this] {
                                if (QDockWidget* d = dock_of(validator_view_)) d->raise();
                            }, false},
                           {tr("Chat anyway"), [this] {
                                chat_->confirm_untrusted();
                                statusBar()->showMessage(tr("Chatting on a model that failed verification"), 5000);
                            }}});
    if (QDockWidget* d = dock_of(validator_view_)) {
        d->show();
        d->raise();
    }
}

void MainWindow::on_load_failed(const QString& path, const QString& error, LoadFailure failure) {
    // The worker kept the model in use: the chat, every view and the conversation stay as they were.
    const QString kept = chat_->has_model() ? tr(" %1 is still open.").arg(model_display_name()) : QString();
    const bool server = failure == LoadFailure::Server;
    statusBar()->showMessage(server ? tr("Could not connect to %1").arg(path) : tr("Could not load %1").arg(QFileInfo(path).fileName()), 8000);
    if (server) {
        banner_->show_message(Banner::Kind::Error, tr("Could not connect to %1: %2.%3").arg(path, error, kept));
    } else if (!QFileInfo::exists(path)) {
        banner_->show_message(Banner::Kind::Error, tr("Could not open %1: no such file or directory.%2").arg(path, kept));
    } else if (failure == LoadFailure::Options) {
        // A good file and settings it cannot run with (a RAM budget too small): nothing to show in the validator.
        QList<Banner::Action> actions;
        if (loading_options_.ram_budget.is_set() && path == loading_)
            actions.push_back({tr("Change the budget…"), [this, path, options = loading_options_] {
                                   BudgetDialog dialog(path, options, this);
                                   if (dialog.exec() == QDialog::Accepted) open_model(path, dialog.options());
                               }});
        banner_->show_message(Banner::Kind::Error, tr("Could not load %1 with these settings: %2.%3").arg(QFileInfo(path).fileName(), error, kept), actions);
    } else {
        banner_->show_message(Banner::Kind::Error, tr("Could not load %1: %2.%3").arg(QFileInfo(path).fileName(), error, kept),
                              {{tr("Show the damage"), [this] {
                                    if (QDockWidget* d = dock_of(validator_view_)) d->raise();
                                }, false}});
        // The file opens in the validator instead, with its damage shown.
        validate_file(path);
    }
    emit modelLoadFailed(path, error);
}

QString MainWindow::model_display_name() const {
    const QString& path = chat_->model().path;
    return chat_->model().remote ? path : QFileInfo(path).fileName();
}

bool MainWindow::may_discard_conversation(const QString& action) {
    if (!has_unsaved_conversation()) return true;
    const bool only_the_reply = chat_->generating() && !unsaved_;  // the messages are kept; the reply would be cut
    switch (ask_discard_ ? ask_discard_(action) : ask_discard_with_box(action)) {
    case DiscardAnswer::Discard: break;
    case DiscardAnswer::Save:
        if (only_the_reply) break;  // kept: what the reply wrote so far is saved below
        return save_conversation_dialog();
    case DiscardAnswer::Cancel: return false;
    }
    if (chat_->generating()) autosave_now();  // the tokens so far, before the reply is stopped
    return true;
}

DiscardAnswer MainWindow::ask_discard_with_box(const QString& action) {
    const bool only_the_reply = chat_->generating() && !unsaved_;
    const QString why = only_the_reply ? tr("%1 stops the reply that is being generated.").arg(action)
                        : !save_error_.isEmpty() ? tr("%1 ends this conversation, which could not be saved (%2).").arg(action, save_error_)
                                                 : tr("%1 ends this conversation, which has not been saved.").arg(action);
    QMessageBox box(QMessageBox::Question, only_the_reply ? tr("Reply in progress") : tr("Unsaved conversation"), why,
                    only_the_reply ? QMessageBox::Discard | QMessageBox::Cancel : QMessageBox::Save | QMessageBox::Discard | QMessageBox::Cancel,
                    this);
    box.setObjectName(QStringLiteral("discard_question"));
    if (only_the_reply) {
        box.button(QMessageBox::Discard)->setText(tr("Stop the reply"));
        box.setInformativeText(tr("What it has written so far stays in the conversation."));
        box.setDefaultButton(QMessageBox::Cancel);
    } else {
        box.setInformativeText(tr("Save it first?"));
        box.setDefaultButton(QMessageBox::Save);
    }
    box.setEscapeButton(QMessageBox::Cancel);
    switch (box.exec()) {
    case QMessageBox::Save: return DiscardAnswer::Save;
    case QMessageBox::Discard: return DiscardAnswer::Discard;
    default: return DiscardAnswer::Cancel;
    }
}

void MainWindow::validate_file(const QString& path) {
    validator_view_->open(path, true);
    if (QDockWidget* d = dock_of(validator_view_)) {
        d->show();
        d->raise();
    }
}

Status MainWindow::save_conversation(const QString& path) {
    QJsonObject o = conversation_.to_json();
    if (chat_->has_model()) o["model"] = chat_->model().path;
    if (Status saved = save_file(path, QJsonDocument(o).toJson(QJsonDocument::Indented)); !saved) return saved;
    unsaved_ = false;
    return Status::ok();
}

Status MainWindow::autosave_now() {
    if (!autosave_ || conversation_.messages().isEmpty()) return Status::ok();
    if (current_id_.isEmpty()) {
        current_id_ = ConversationStore::new_id();
        for (const ConversationMessage& m : conversation_.messages())
            if (m.role == QLatin1String("user")) {
                current_title_ = ConversationStore::title_from(m.content);
                break;
            }
        if (current_title_.isEmpty()) current_title_ = tr("Conversation");
    }
    const QString model = chat_->has_model() ? chat_->model().path : QString();
    if (Status s = store_.write(current_id_, conversation_.to_json(), current_title_, model); !s) {
        const bool first = save_error_.isEmpty();
        save_error_ = QString::fromStdString(s.message());
        unsaved_ = true;
        if (first) statusBar()->showMessage(tr("Could not save the conversation: %1").arg(save_error_), 8000);
        conversation_list_->show_message(tr("Not saved: %1").arg(save_error_), true);
        return s;
    }
    conversation_list_->clear_error();  // a failed save or a damaged file's line is stale now
    save_error_.clear();
    unsaved_ = false;
    StoredConversation kept;
    kept.id = current_id_;
    kept.title = current_title_;
    kept.model = model;
    kept.updated = QDateTime::currentDateTime();
    kept.messages = static_cast<int>(conversation_.messages().size());
    conversation_list_->saved(kept);
    return Status::ok();
}

Status MainWindow::open_conversation(const QString& id) {
    if (id == current_id_) return Status::ok();
    auto doc = store_.read(id);
    if (!doc) {  // damaged: say why in one line; what is shown stays
        const QString why = QString::fromStdString(doc.message());
        conversation_list_->show_message(why, true);
        conversation_list_->select(current_id_);
        statusBar()->showMessage(tr("Could not open the conversation: %1").arg(why), 8000);
        return doc.status();
    }
    QJsonObject o = doc.value();
    const QString title = o.value("title").toString();
    if (!may_discard_conversation(tr("Opening “%1”").arg(title))) {
        conversation_list_->select(current_id_);
        return error("cancelled");
    }
    if (chat_->generating()) chat_->new_conversation();  // the reply stops; what it wrote was saved
    // Token ids belong to the model that produced them: with another model only the messages are reopened
    // (the next turn encodes them again).
    if (!chat_->has_model() || o.value("model").toString() != chat_->model().path) {
        QJsonArray messages;
        for (const QJsonValue& v : o.value("messages").toArray()) {
            QJsonObject m = v.toObject();
            m.remove(QStringLiteral("first_token"));
            m.remove(QStringLiteral("token_count"));
            messages.append(m);
        }
        o["messages"] = messages;
        o["tokens"] = QJsonArray();
    }
    opening_conversation_ = true;
    const Status loaded = conversation_.from_json(o);
    opening_conversation_ = false;
    if (!loaded) return loaded;  // read() checked it the same way
    current_id_ = id;
    current_title_ = title;
    unsaved_ = false;
    conversation_list_->show_message({}, false);
    conversation_list_->model()->set_current(id);
    conversation_list_->select(id);
    worker_->resetConversation();
    if (chat_->has_model() && conversation_.size() > 0) return chat_->replay();
    return Status::ok();
}

Status MainWindow::export_markdown(const QString& path) const {
    return save_file(path, conversation_.to_markdown().toUtf8());
}

Status MainWindow::load_conversation(const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return error((path + ": " + f.errorString()).toStdString());
    QJsonParseError perr;
    const QJsonDocument doc = QJsonDocument::fromJson(f.readAll(), &perr);
    if (perr.error != QJsonParseError::NoError) return error((path + ": not JSON (" + perr.errorString() + ")").toStdString());
    if (chat_->generating()) return error("a reply is still being generated");
    opening_conversation_ = true;
    const Status loaded = conversation_.from_json(doc.object());
    opening_conversation_ = false;
    if (!loaded) return error(path.toStdString() + ": " + loaded.message());
    // What is shown is that file; kept as a new conversation from its next change on.
    current_id_.clear();
    current_title_ = ConversationStore::title_from(QFileInfo(path).completeBaseName());
    conversation_list_->model()->set_current({});
    unsaved_ = false;
    worker_->resetConversation();
    // With a model loaded, evaluate the tokens again so every view has its traces.
    if (chat_->has_model() && conversation_.size() > 0) return chat_->replay();
    return Status::ok();
}

Status MainWindow::import_tune_report(const QString& path) { return kernels_view_->import_report(path); }

void MainWindow::remember_recent(const QString& path) {
    recent_.removeAll(path);
    recent_.prepend(path);
    while (recent_.size() > kRecentFiles) recent_.removeLast();
    rebuild_recent_menu();
}

void MainWindow::rebuild_recent_menu() {
    recent_menu_->clear();
    for (const QString& p : recent_) recent_menu_->addAction(QFileInfo(p).fileName(), this, [this, p] { open_model(p); })->setToolTip(p);
    recent_menu_->setEnabled(!recent_.isEmpty());
}

void MainWindow::open_dialog() {
    const QString path = QFileDialog::getOpenFileName(this, tr("Open a model"), QString(),
                                                      tr("Models (*.bin *.bin.zst *.gguf);;Colibri models (*.bin *.bin.zst);;GGUF files (*.gguf);;All files (*)"));
    if (!path.isEmpty()) open_model(path);
}

void MainWindow::open_budget_dialog() {
    const QString path = QFileDialog::getOpenFileName(this, tr("Open a model with a RAM budget"), QFileInfo(loaded_path_).absolutePath(),
                                                      tr("Colibri models (*.bin *.bin.zst);;All files (*)"));
    if (path.isEmpty()) return;
    BudgetDialog dialog(path, options_.load, this);
    if (dialog.exec() == QDialog::Accepted) open_model(path, dialog.options());
}

void MainWindow::open_directory_dialog() {
    const QString dir = QFileDialog::getExistingDirectory(this, tr("Open a Hugging Face model directory"));
    if (!dir.isEmpty()) open_model(dir);
}

ConvertDialog* MainWindow::convert_dialog() {
    if (convert_ == nullptr) {
        convert_ = new ConvertDialog(this);
        connect(convert_, &ConvertDialog::converted, this, [this](const QString& output) {
            if (open_after_convert_) open_model(output);
            else validate_file(output);
            open_after_convert_ = false;
        });
    }
    return convert_;
}

void MainWindow::show_convert_dialog() {
    open_after_convert_ = false;
    convert_dialog()->show();
    convert_dialog()->raise();
}

void MainWindow::validate_dialog() {
    const QString path = QFileDialog::getOpenFileName(this, tr("Validate a model file"), QString(), tr("Colibri models (*.bin *.bin.zst);;All files (*)"));
    if (!path.isEmpty()) validate_file(path);
}

void MainWindow::compare_files_dialog() {
    validator_view_->compare_dialog();
    if (QDockWidget* d = dock_of(validator_view_)) {
        d->show();
        d->raise();
    }
}

bool MainWindow::save_conversation_dialog() {
    const QString path = QFileDialog::getSaveFileName(this, tr("Save conversation"), QStringLiteral("conversation.json"), tr("Conversations (*.json)"));
    if (path.isEmpty()) return false;
    if (Status s = save_conversation(path); !s) {
        statusBar()->showMessage(QString::fromStdString(s.message()), 8000);
        return false;
    }
    return true;
}

void MainWindow::export_markdown_dialog() {
    const QString path = QFileDialog::getSaveFileName(this, tr("Export the conversation as Markdown"), QStringLiteral("conversation.md"),
                                                      tr("Markdown (*.md)"));
    if (path.isEmpty()) return;
    if (Status s = export_markdown(path); !s) statusBar()->showMessage(QString::fromStdString(s.message()), 8000);
    else statusBar()->showMessage(tr("Exported to %1").arg(path), 5000);
}

void MainWindow::load_conversation_dialog() {
    const QString path = QFileDialog::getOpenFileName(this, tr("Load conversation"), QString(), tr("Conversations (*.json)"));
    if (path.isEmpty() || !may_discard_conversation(tr("Loading %1").arg(QFileInfo(path).fileName()))) return;
    if (Status s = load_conversation(path); !s) statusBar()->showMessage(QString::fromStdString(s.message()), 8000);
}

void MainWindow::restore_settings() {
    QSettings s;
    restoreGeometry(s.value("window/geometry").toByteArray());
    const auto mode = static_cast<LayoutMode>(std::clamp(s.value("view/layout_mode", 0).toInt(), 0, 1));
    set_layout_mode(mode);
    if (!restoreState(s.value("window/state").toByteArray(), kLayoutVersion)) reset_layout();
    for (QDockWidget* d : docks())  // a dock detached on purpose stays floatable until it is docked again
        if (d->isFloating()) d->setFeatures(d->features() | QDockWidget::DockWidgetFloatable);
    fit_to_screen();
    recent_ = s.value("recent").toStringList();
    rebuild_recent_menu();
    chat_view_->restore_settings(s);
    kernels_view_->restore_settings(s);
    profiler_view_->set_counting(static_cast<Counting>(std::clamp(s.value("profiler/counting_mode", 0).toInt(), 0, 2)));
    const int scheme = std::clamp(s.value("view/color_scheme", 0).toInt(), 0, 2);
    if (qEnvironmentVariableIsEmpty("COLIBRI_COLOR_SCHEME")) theme_->set_scheme(static_cast<ColorScheme>(scheme));
    for (QAction* a : findChildren<QAction*>())
        if (a->isCheckable() && a->data().isValid() && a->actionGroup() != nullptr && !mode_actions_.contains(a)) a->setChecked(a->data().toInt() == static_cast<int>(theme_->scheme()));
}

void MainWindow::save_settings() const {
    QSettings s;
    s.setValue("window/geometry", saveGeometry());
    s.setValue("window/state", saveState(kLayoutVersion));
    s.setValue("view/layout_mode", static_cast<int>(mode_));
    s.setValue("recent", recent_);
    chat_view_->save_settings(s);
    kernels_view_->save_settings(s);
    s.setValue("profiler/counting_mode", static_cast<int>(profiler_view_->counting()));
    s.setValue("view/color_scheme", static_cast<int>(theme_->scheme()));
}

void MainWindow::closeEvent(QCloseEvent* e) {
    if (!may_discard_conversation(tr("Quitting"))) {
        e->ignore();
        return;
    }
    if (chat_->generating()) chat_->stop();
    if (options_.persist_settings) save_settings();
    e->accept();
}

void MainWindow::dragEnterEvent(QDragEnterEvent* e) {
    for (const QUrl& url : e->mimeData()->urls())
        if (url.isLocalFile() && (is_model_file(url.toLocalFile()) || !conversion_source(url.toLocalFile()).isEmpty())) {
            e->acceptProposedAction();
            return;
        }
}

void MainWindow::dropEvent(QDropEvent* e) {
    for (const QUrl& url : e->mimeData()->urls())
        if (url.isLocalFile() && (is_model_file(url.toLocalFile()) || !conversion_source(url.toLocalFile()).isEmpty())) {
            open_model(url.toLocalFile());
            e->acceptProposedAction();
            return;
        }
}

}  // namespace colibri::studio
