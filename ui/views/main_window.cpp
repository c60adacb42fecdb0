#include "ui/views/main_window.h"

#include <QAction>
#include <QCheckBox>
#include <QApplication>
#include <QCloseEvent>
#include <QDockWidget>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QHeaderView>
#include <QJsonDocument>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QSaveFile>
#include <QSettings>
#include <QStatusBar>
#include <QTableView>

#include "ui/views/chat_view.h"
#include "ui/views/convert_dialog.h"
#include "ui/views/heatmap_view.h"
#include "ui/views/kernels_view.h"
#include "ui/views/profiler_view.h"
#include "ui/views/routing_view.h"
#include "ui/views/validator_view.h"

namespace colibri::studio {

namespace {
constexpr int kRecentFiles = 8;
// Files up to this size are verified as soon as they load (well under a second of hashing, pages mostly cached).
constexpr quint64 kAutoVerifyBytes = quint64(1) << 30;
}

bool is_model_file(const QString& path) {
    return path.endsWith(QLatin1String(".bin"), Qt::CaseInsensitive) || path.endsWith(QLatin1String(".bin.zst"), Qt::CaseInsensitive);
}

MainWindow::MainWindow(const MainWindowOptions& options, QWidget* parent)
    : QMainWindow(parent), options_(options), worker_(new EngineWorker),
      engine_thread_(std::make_unique<WorkerThread>(worker_, QStringLiteral("engine"), [w = worker_] { w->requestStop(); })),
      chat_(new ChatController(worker_, &conversation_, this)) {
    setWindowTitle(tr("Colibri Studio"));
    setAcceptDrops(true);
    setDockOptions(AllowTabbedDocks | AllowNestedDocks | AnimatedDocks);

    chat_view_ = new ChatView(chat_, &conversation_);
    setCentralWidget(chat_view_);
    summary_view_ = new QTableView;
    summary_view_->setModel(&summary_);
    summary_view_->verticalHeader()->hide();
    summary_view_->horizontalHeader()->setStretchLastSection(true);
    summary_view_->setMinimumWidth(260);  // property names and values readable without scrolling
    routing_view_ = new RoutingView(&conversation_);
    heatmap_view_ = new HeatmapView(&conversation_);
    profiler_view_ = new ProfilerView(&conversation_);
    kernels_view_ = new KernelsView;
    validator_view_ = new ValidatorView;

    add_dock(summary_view_, tr("Model"), QStringLiteral("model"), Qt::LeftDockWidgetArea);
    add_dock(routing_view_, tr("Routing"), QStringLiteral("routing"), Qt::RightDockWidgetArea);
    QDockWidget* heat = add_dock(heatmap_view_, tr("Expert heatmap"), QStringLiteral("heatmap"), Qt::BottomDockWidgetArea);
    QDockWidget* prof = add_dock(profiler_view_, tr("Profiler"), QStringLiteral("profiler"), Qt::BottomDockWidgetArea);
    QDockWidget* kern = add_dock(kernels_view_, tr("Kernels"), QStringLiteral("kernels"), Qt::BottomDockWidgetArea);
    QDockWidget* valid = add_dock(validator_view_, tr("Validator"), QStringLiteral("validator"), Qt::BottomDockWidgetArea);
    tabifyDockWidget(heat, prof);
    tabifyDockWidget(prof, kern);
    tabifyDockWidget(kern, valid);
    heat->raise();

    model_label_ = new QLabel(tr("no model"));
    statusBar()->addPermanentWidget(model_label_);
    connect(worker_, &EngineWorker::loaded, this, &MainWindow::on_loaded);
    connect(worker_, &EngineWorker::loadFailed, this, &MainWindow::on_load_failed);
    connect(profiler_view_, &ProfilerView::countingChanged, worker_, [this](bool on) { worker_->setCounting(on); });
    connect(chat_, &ChatController::failed, this, [this](const QString& e) { statusBar()->showMessage(e, 8000); });
    connect(&conversation_, &Conversation::selectionChanged, this, [this](int position) {
        if (position >= 0) dock_of(routing_view_)->raise();
    });

    build_menus();
    resize(1400, 900);
    if (options_.persist_settings) restore_settings();
}

MainWindow::~MainWindow() {
    // The engine thread first: nothing may arrive for views that are going away.
    engine_thread_.reset();
}

QDockWidget* MainWindow::add_dock(QWidget* view, const QString& title, const QString& name, Qt::DockWidgetArea area) {
    auto* dock = new QDockWidget(title, this);
    dock->setObjectName(name);  // saveState() keys on it
    dock->setWidget(view);
    addDockWidget(area, dock);
    return dock;
}

QDockWidget* MainWindow::dock_of(QWidget* view) const {
    for (QDockWidget* d : findChildren<QDockWidget*>())
        if (d->widget() == view) return d;
    return nullptr;
}

void MainWindow::build_menus() {
    QMenu* file = menuBar()->addMenu(tr("&File"));
    file->addAction(tr("&Open model…"), QKeySequence::Open, this, &MainWindow::open_dialog);
    recent_menu_ = file->addMenu(tr("Open &recent"));
    file->addAction(tr("&Convert…"), this, &MainWindow::show_convert_dialog);
    file->addAction(tr("&Validate a file…"), this, &MainWindow::validate_dialog);
    file->addSeparator();
    file->addAction(tr("&Save conversation…"), QKeySequence::Save, this, &MainWindow::save_conversation_dialog);
    file->addAction(tr("&Load conversation…"), this, &MainWindow::load_conversation_dialog);
    file->addAction(tr("&Import tune report…"), kernels_view_, &KernelsView::import_dialog);
    file->addSeparator();
    file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);
    view_menu_ = menuBar()->addMenu(tr("&View"));
    for (QDockWidget* d : findChildren<QDockWidget*>()) view_menu_->addAction(d->toggleViewAction());
    QMenu* help = menuBar()->addMenu(tr("&Help"));
    help->addAction(tr("&About"), this, [this] {
        QMessageBox::about(this, tr("About Colibri Studio"),
                           tr("Colibri Studio %1: chat, routing, expert heatmaps, profiling and model files for "
                              "Mixture-of-Experts models on the Colibri engine.").arg(QApplication::applicationVersion()));
    });
    rebuild_recent_menu();
}

void MainWindow::open_model(const QString& path) {
    loading_ = path;
    statusBar()->showMessage(tr("Loading %1…").arg(QFileInfo(path).fileName()));
    if (chat_->generating()) chat_->stop();
    worker_->load(path, options_.load);
}

void MainWindow::on_loaded(const ModelSummary& summary, const CounterSet& counters) {
    conversation_.clear();
    chat_->set_model(summary);
    summary_.set_summary(summary);
    summary_view_->resizeColumnsToContents();
    routing_view_->set_model(summary);
    heatmap_view_->set_model(summary);
    profiler_view_->set_model(summary, counters);
    chat_view_->model_changed();
    // Verified in the background right away when hashing it is quick; a larger file waits for the Verify button.
    validator_view_->open(summary.path, summary.file_size <= kAutoVerifyBytes);
    remember_recent(summary.path);
    const QString name = QFileInfo(summary.path).fileName();
    setWindowTitle(tr("%1 — Colibri Studio").arg(name));
    model_label_->setText(tr("%1: %2, %3 layers, %4 experts (top-%5)").arg(name, summary.family).arg(summary.layers)
                              .arg(summary.experts).arg(summary.active_experts));
    statusBar()->showMessage(tr("Loaded %1").arg(name), 5000);
    emit modelLoaded(summary.path);
}

void MainWindow::on_load_failed(const QString& path, const QString& error) {
    // The worker let go of the previous model before it tried this one.
    chat_->clear_model();
    summary_.clear();
    chat_view_->model_changed();
    chat_view_->error_label()->setText(tr("Could not load %1: %2").arg(QFileInfo(path).fileName(), error));
    model_label_->setText(tr("no model"));
    setWindowTitle(tr("Colibri Studio"));
    // The file opens in the validator instead, with its damage shown.
    statusBar()->showMessage(tr("Could not load %1: %2").arg(QFileInfo(path).fileName(), error));
    validate_file(path);
    emit modelLoadFailed(path, error);
}

void MainWindow::validate_file(const QString& path) {
    validator_view_->open(path, true);
    if (QDockWidget* d = dock_of(validator_view_)) {
        d->show();
        d->raise();
    }
}

Status MainWindow::save_conversation(const QString& path) const {
    QJsonObject o = conversation_.to_json();
    if (chat_->has_model()) o["model"] = chat_->model().path;
    QSaveFile f(path);
    if (!f.open(QIODevice::WriteOnly)) return error((path + ": " + f.errorString()).toStdString());
    f.write(QJsonDocument(o).toJson(QJsonDocument::Indented));
    if (!f.commit()) return error((path + ": " + f.errorString()).toStdString());
    return Status::ok();
}

Status MainWindow::load_conversation(const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return error((path + ": " + f.errorString()).toStdString());
    QJsonParseError perr;
    const QJsonDocument doc = QJsonDocument::fromJson(f.readAll(), &perr);
    if (perr.error != QJsonParseError::NoError) return error((path + ": not JSON (" + perr.errorString() + ")").toStdString());
    if (chat_->generating()) return error("a reply is still being generated");
    if (Status s = conversation_.from_json(doc.object()); !s) return error(path.toStdString() + ": " + s.message());
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
    const QString path = QFileDialog::getOpenFileName(this, tr("Open a model"), QString(), tr("Colibri models (*.bin *.bin.zst);;All files (*)"));
    if (!path.isEmpty()) open_model(path);
}

ConvertDialog* MainWindow::convert_dialog() {
    if (convert_ == nullptr) {
        convert_ = new ConvertDialog(this);
        connect(convert_, &ConvertDialog::converted, this, &MainWindow::validate_file);
    }
    return convert_;
}

void MainWindow::show_convert_dialog() {
    convert_dialog()->show();
    convert_dialog()->raise();
}

void MainWindow::validate_dialog() {
    const QString path = QFileDialog::getOpenFileName(this, tr("Validate a model file"), QString(), tr("Colibri models (*.bin *.bin.zst);;All files (*)"));
    if (!path.isEmpty()) validate_file(path);
}

void MainWindow::save_conversation_dialog() {
    const QString path = QFileDialog::getSaveFileName(this, tr("Save conversation"), QStringLiteral("conversation.json"), tr("Conversations (*.json)"));
    if (path.isEmpty()) return;
    if (Status s = save_conversation(path); !s) statusBar()->showMessage(QString::fromStdString(s.message()), 8000);
}

void MainWindow::load_conversation_dialog() {
    const QString path = QFileDialog::getOpenFileName(this, tr("Load conversation"), QString(), tr("Conversations (*.json)"));
    if (path.isEmpty()) return;
    if (Status s = load_conversation(path); !s) statusBar()->showMessage(QString::fromStdString(s.message()), 8000);
}

void MainWindow::restore_settings() {
    QSettings s;
    restoreGeometry(s.value("window/geometry").toByteArray());
    restoreState(s.value("window/state").toByteArray());
    recent_ = s.value("recent").toStringList();
    rebuild_recent_menu();
    chat_view_->restore_settings(s);
    kernels_view_->restore_settings(s);
    profiler_view_->counting_box()->setChecked(s.value("profiler/counting", true).toBool());
}

void MainWindow::save_settings() const {
    QSettings s;
    s.setValue("window/geometry", saveGeometry());
    s.setValue("window/state", saveState());
    s.setValue("recent", recent_);
    chat_view_->save_settings(s);
    kernels_view_->save_settings(s);
    s.setValue("profiler/counting", profiler_view_->counting_box()->isChecked());
}

void MainWindow::closeEvent(QCloseEvent* e) {
    if (options_.persist_settings) save_settings();
    e->accept();
}

void MainWindow::dragEnterEvent(QDragEnterEvent* e) {
    for (const QUrl& url : e->mimeData()->urls())
        if (url.isLocalFile() && is_model_file(url.toLocalFile())) {
            e->acceptProposedAction();
            return;
        }
}

void MainWindow::dropEvent(QDropEvent* e) {
    for (const QUrl& url : e->mimeData()->urls())
        if (url.isLocalFile() && is_model_file(url.toLocalFile())) {
            open_model(url.toLocalFile());
            e->acceptProposedAction();
            return;
        }
}

}  // namespace colibri::studio
