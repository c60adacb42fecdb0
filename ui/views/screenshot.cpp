#include "ui/views/screenshot.h"

#include <QApplication>
#include <QDir>
#include <QDockWidget>
#include <QEventLoop>
#include <QLabel>
#include <QLineEdit>
#include <QTableView>
#include <QTemporaryDir>
#include <QTimer>

#include "ui/views/analysis_view.h"
#include "ui/views/chat_view.h"
#include "ui/views/convert_dialog.h"
#include "ui/views/heatmap_view.h"
#include "ui/views/kernels_view.h"
#include "ui/views/cache_view.h"
#include "ui/views/main_window.h"
#include "ui/views/profiler_view.h"
#include "ui/views/routing_view.h"
#include "ui/views/state_view.h"
#include "ui/views/validator_view.h"

namespace colibri::studio {

namespace {

// Connects before the action that emits, so a signal that comes at once is not missed.
class SignalWaiter {
public:
    template <typename Sender, typename Signal>
    SignalWaiter(Sender* sender, Signal signal) {
        QObject::connect(sender, signal, &loop_, [this] {
            fired_ = true;
            loop_.quit();
        });
    }
    bool wait(int timeout_ms) {
        if (fired_) return true;
        QTimer::singleShot(timeout_ms, &loop_, [this] { loop_.exit(1); });
        loop_.exec();
        return fired_;
    }

private:
    QEventLoop loop_;
    bool fired_ = false;
};

void settle() {
    for (int i = 0; i < 5; ++i) QApplication::processEvents(QEventLoop::AllEvents, 50);
}

Status save(QWidget* widget, const QString& path) {
    settle();
    const QPixmap shot = widget->grab();
    if (shot.isNull() || !shot.save(path, "PNG")) return error((path + ": could not write the screenshot").toStdString());
    return Status::ok();
}

}  // namespace

Result<QStringList> take_screenshots(MainWindow& w, const ScreenshotOptions& o) {
    if (!QDir().mkpath(o.dir)) return error((o.dir + ": cannot create the directory").toStdString());
    if (o.geometry.width() < 320 || o.geometry.height() < 240) return error("the geometry must be at least 320x240");
    w.resize(o.geometry);
    w.show();
    settle();
    w.reset_layout();
    settle();

    {
        QEventLoop loop;
        bool loaded = false;
        QString failure = QStringLiteral("the model did not load in time");
        QObject::connect(&w, &MainWindow::modelLoaded, &loop, [&] {
            loaded = true;
            loop.quit();
        });
        QObject::connect(&w, &MainWindow::modelLoadFailed, &loop, [&](const QString&, const QString& e) {
            failure = e;
            loop.quit();
        });
        QTimer::singleShot(o.timeout_ms, &loop, &QEventLoop::quit);
        w.open_model(o.model);
        loop.exec();
        if (!loaded) return error((o.model + ": " + failure).toStdString());
    }
    for (const QString& report : o.tune_reports) COLIBRI_TRY(w.import_tune_report(report));
    if (o.tune) {
        TuneRunner* tuner = w.kernels_view()->tuner();
        kernels::TuneOptions quick;
        quick.quick = true;
        tuner->set_options(quick);
        tuner->set_cache_path(QString());
        SignalWaiter tuned(tuner, &TuneRunner::finished);
        w.kernels_view()->run_tuner();
        if (!tuned.wait(o.timeout_ms)) return error("tune: the tuner did not finish in time");
    }

    ChatSettings chat;
    chat.sampling.greedy = true;
    chat.random_seed = false;
    chat.max_tokens = o.max_tokens;
    w.chat_view()->set_settings(chat);
    // A model without a tokenizer is driven by token ids: a few small ones, within any vocabulary.
    QStringList messages = o.messages;
    if (w.chat()->uses_token_ids()) {
        const int vocab = std::max(w.chat()->model().vocab_size, 2);
        messages = {QStringLiteral("1, %1, %2, %3").arg(2 % vocab).arg(3 % vocab).arg(4 % vocab), QStringLiteral("%1, %2").arg(5 % vocab).arg(6 % vocab)};
    }
    // The picture is of a model that passed or failed verification alike: the banner shows which.
    w.chat()->confirm_untrusted();
    for (const QString& message : messages) {
        QEventLoop loop;
        bool finished = false;
        QString failure = QStringLiteral("the reply did not finish in time");
        QObject::connect(w.chat(), &ChatController::finished, &loop, [&] {
            finished = true;
            loop.quit();
        });
        QObject::connect(w.chat(), &ChatController::failed, &loop, [&](const QString& e) {
            failure = e;
            loop.quit();
        });
        QTimer::singleShot(o.timeout_ms, &loop, &QEventLoop::quit);
        COLIBRI_TRY(w.chat()->send(message, chat));
        loop.exec();
        if (!finished) return error(("chat: " + failure).toStdString());
        // The profiler's picture compares the last reply with the first, kept as its baseline.
        if (&message == &messages.front() && messages.size() > 1) {
            COLIBRI_TRY(w.profiler_view()->keep_as_baseline());
            w.profiler_view()->tabs()->setCurrentIndex(1);  // per layer: the baseline's markers over this run's bars
        }
    }
    for (const ConversationToken& t : w.conversation()->tokens())
        if (t.trace.generated) {
            w.conversation()->select(t.trace.position);
            break;
        }
    {
        SignalWaiter verified(w.validator_view(), &ValidatorView::verifiedFile);
        w.validator_view()->verify();
        if (!verified.wait(o.timeout_ms)) return error("verification did not finish in time");
    }
    {
        // The histogram of the first expert's gate (or of the first tensor, for a dense model).
        SignalWaiter shown(w.validator_view(), &ValidatorView::histogramShown);
        ValidatorView* v = w.validator_view();
        v->filter_edit()->setText(QStringLiteral("experts.0.gate"));
        if (v->tensor_filter()->rowCount() == 0) v->filter_edit()->clear();
        if (v->tensor_filter()->rowCount() > 0) {
            v->tensor_table()->setCurrentIndex(v->tensor_filter()->index(0, 0));
            shown.wait(o.timeout_ms);
        }
    }
    if (o.compare_kernels) {
        SignalWaiter compared(w.worker(), &EngineWorker::kernelComparisonFinished);
        w.kernels_view()->set_comparison_size(16, 8, 3);  // three repetitions: the picture shows their spread
        w.kernels_view()->start_comparison();
        if (!compared.wait(o.timeout_ms)) return error("kernels: the comparison did not finish in time");
    }
    w.routing_view()->refresh();
    w.heatmap_view()->refresh();
    w.profiler_view()->refresh();
    w.analysis_view()->refresh();
    w.cache_view()->refresh();
    w.state_view()->refresh();
    {
        SignalWaiter replayed(w.cache_view(), &CacheView::replayFinished);
        w.cache_view()->replay();
        if (!replayed.wait(o.timeout_ms)) return error("cache: the replay did not finish in time");
    }
    w.chat_view()->flush();

    QStringList written;
    auto shot = [&](QWidget* widget, const QString& name) -> Status {
        const QString path = QDir(o.dir).filePath(name + QStringLiteral(".png"));
        COLIBRI_TRY(save(widget, path));
        written << path;
        return Status::ok();
    };
    COLIBRI_TRY(shot(&w, QStringLiteral("main")));
    // A hybrid: the whole window again with its recurrent states in the bottom dock.
    if (w.state_view()->hybrid()) {
        w.dock_of(w.state_view())->raise();
        COLIBRI_TRY(shot(&w, QStringLiteral("main-state")));
        w.dock_of(w.heatmap_view())->raise();
    }
    // Each docked view alone, floated to a readable size; the chat with the docks out of the way.
    const QList<QDockWidget*> docks = w.findChildren<QDockWidget*>();
    for (QDockWidget* d : docks)
        if (d->objectName() != QLatin1String("settings")) d->hide();
    COLIBRI_TRY(shot(&w, QStringLiteral("chat")));
    for (QDockWidget* d : docks) d->hide();
    // The recurrent states only where the model has them (elsewhere the view is a note).
    std::vector<std::pair<QWidget*, const char*>> views = {{w.routing_view(), "routing"}, {w.heatmap_view(), "heatmap"},
                                                           {w.analysis_view(), "analyses"}, {w.cache_view(), "cache"}, {w.profiler_view(), "profiler"},
                                                           {w.kernels_view(), "kernels"}, {w.validator_view(), "validator"}};
    if (w.state_view()->hybrid()) views.insert(views.begin() + 2, {w.state_view(), "state"});
    const QSize view_size(o.geometry.width(), std::max(400, o.geometry.height() * 3 / 4));
    for (const auto& [view, name] : views) {
        QDockWidget* d = w.dock_of(view);
        d->setFloating(true);
        d->resize(view_size);
        d->show();
        const Status s = shot(view, QString::fromLatin1(name));
        d->hide();
        d->setFloating(false);
        COLIBRI_TRY(s);
    }
    for (QDockWidget* d : docks) d->show();

    ConvertDialog* convert = w.convert_dialog();
    QTemporaryDir scratch;
    convert->set_type(QStringLiteral("f16"));
    if (!o.convert_source.isEmpty()) {
        if (!scratch.isValid()) return error("convert: no temporary directory");
        // Into a models folder of its own, under the name the dialog gives the output.
        convert->set_models_folder(scratch.filePath(QStringLiteral("Colibri models")));
        convert->set_source(o.convert_source);
        SignalWaiter done(convert, &ConvertDialog::finished);
        if (!convert->start()) return error(("convert: " + convert->status_label()->text()).toStdString());
        if (!done.wait(o.timeout_ms)) return error("convert: the conversion did not finish in time");
    }
    convert->show();
    const Status s = shot(convert, QStringLiteral("convert"));
    convert->hide();
    COLIBRI_TRY(s);
    return written;
}

}  // namespace colibri::studio
