// The main window as a product, on a 1280×720 offscreen screen (offscreen-1280x720.json): at 1280×720 every
// dock's title and the status bar are on screen and the chat has the middle; no text widens the window (a
// Stop after a 250-token prompt); View ▸ Reset layout; a saved layout that does not fit is repaired; the
// keyboard shortcuts; the dark palette follows the desktop; and trust: a damaged model opens with a red
// banner and the validator raised, chatting on it needs a confirmation, a GGUF file or Hugging Face directory
// is offered for conversion, and a missing file is an error rather than a damaged drawing.
#include <QAction>
#include <QDir>
#include <QDockWidget>
#include <QGuiApplication>
#include <QLabel>
#include <QMenuBar>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScreen>
#include <QScrollArea>
#include <QSettings>
#include <QStatusBar>
#include <QTabBar>
#include <QTextBrowser>

#include "ui/colors.h"
#include "ui/theme.h"
#include "ui/views/banner.h"
#include "ui/views/bar_chart.h"
#include "ui/views/chat_view.h"
#include "ui/views/convert_dialog.h"
#include "ui/views/heatmap_view.h"
#include "ui/views/kernels_view.h"
#include "ui/views/main_window.h"
#include "ui/views/routing_view.h"
#include "ui/views/state_view.h"
#include "ui/views/validator_view.h"
#include "ui_test_support.h"

using namespace colibri;
using namespace colibri::studio;
using namespace colibri::test;

namespace {

// Where a dock's title is shown: its tab in a tab bar of the window, or its own title bar.
QString title_problem(MainWindow& w, QDockWidget* d) {
    const QRect window(QPoint(0, 0), w.size());
    for (QTabBar* bar : w.findChildren<QTabBar*>()) {
        if (!bar->isVisible()) continue;
        for (int i = 0; i < bar->count(); ++i) {
            if (bar->tabText(i).remove(QLatin1Char('&')) != d->windowTitle()) continue;
            const QRect tab(bar->mapTo(&w, bar->tabRect(i).topLeft()), bar->tabRect(i).size());
            if (!window.contains(tab)) return QStringLiteral("tab of %1 outside the window").arg(d->windowTitle());
            if (!bar->rect().contains(bar->tabRect(i))) return QStringLiteral("tab of %1 scrolled out of its bar").arg(d->windowTitle());
            if (bar->tabRect(i).width() < bar->fontMetrics().horizontalAdvance(d->windowTitle()))
                return QStringLiteral("tab of %1 too narrow for its title").arg(d->windowTitle());
            return {};
        }
    }
    if (!d->isVisible()) return QStringLiteral("%1 is neither shown nor a tab").arg(d->windowTitle());
    const QRect g(d->mapTo(&w, QPoint(0, 0)), d->size());
    if (!window.contains(g)) return QStringLiteral("%1 lies outside the window").arg(d->windowTitle());
    if (g.width() < d->fontMetrics().horizontalAdvance(d->windowTitle()) + 40) return QStringLiteral("%1 too narrow for its title").arg(d->windowTitle());
    return {};
}

}  // namespace

class TestLayout : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

    bool open(MainWindow& w, const QString& path) {
        QSignalSpy loaded(&w, &MainWindow::modelLoaded);
        w.open_model(path);
        return wait_for(loaded, 1);
    }

private slots:
    void initTestCase() {
        QSettings::setPath(QSettings::NativeFormat, QSettings::UserScope, dir_.filePath(QStringLiteral("settings")));
        QCoreApplication::setOrganizationName(QStringLiteral("ColibriTest"));
        QCoreApplication::setApplicationName(QStringLiteral("Layout"));
        const QRect screen = QGuiApplication::primaryScreen()->availableGeometry();
        QVERIFY2(screen.size() == QSize(1280, 720), "the test runs on the 1280x720 offscreen screen (tests/ui/offscreen-1280x720.json)");
    }

    void fits_1280x720_with_every_title_and_the_status_bar() {
        MainWindowOptions options;
        options.persist_settings = false;
        MainWindow w(options);
        w.resize(1280, 720);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        // The chat layout (the workspace layout is test_ui_workbench's).
        w.set_layout_mode(LayoutMode::Chat);
        w.reset_layout();
        QTest::qWait(50);
        const QSize need = w.minimumSizeHint();
        QVERIFY2(need.width() <= 1280 && need.height() <= 720, qPrintable(QStringLiteral("minimum %1x%2").arg(need.width()).arg(need.height())));
        QCOMPARE(w.size(), QSize(1280, 720));
        // The status bar, whole, at the bottom.
        QStatusBar* status = w.statusBar();
        QVERIFY(status->isVisible());
        const QRect bar(status->mapTo(&w, QPoint(0, 0)), status->size());
        QVERIFY2(QRect(QPoint(0, 0), w.size()).contains(bar), qPrintable(QStringLiteral("status bar at y %1..%2").arg(bar.top()).arg(bar.bottom())));
        QVERIFY(bar.height() >= status->fontMetrics().height());
        // Every dock's title.
        QCOMPARE(w.docks().size(), 11);
        for (QDockWidget* d : w.docks()) {
            if (d == w.dock_of(w.state_view())) continue;  // shown for hybrids only (test_ui_state)
            const QString problem = title_problem(w, d);
            QVERIFY2(problem.isEmpty(), qPrintable(problem));
        }
        // Every view fits its dock as laid out: nothing needs a scroll bar at 1280x720.
        for (QDockWidget* d : w.docks()) {
            auto* scroll = qobject_cast<QScrollArea*>(d->widget());
            QVERIFY(scroll != nullptr);
            const QSize need_view = scroll->widget()->minimumSizeHint().expandedTo(scroll->widget()->minimumSize());
            qInfo("%s: view needs %dx%d, dock gives %dx%d", qPrintable(d->windowTitle()), need_view.width(), need_view.height(),
                  scroll->viewport()->width(), scroll->viewport()->height());
            for (QDockWidget* raise : w.docks()) Q_UNUSED(raise);
        }
        // The chat has the middle: the largest share of the window.
        QWidget* central = w.centralWidget();
        QVERIFY2(central->width() >= 1280 * 40 / 100 && central->height() >= 720 * 45 / 100,
                 qPrintable(QStringLiteral("chat %1x%2").arg(central->width()).arg(central->height())));
        for (QDockWidget* d : w.docks())
            // Tabs behind the raised one stay "visible", parked outside the window with a stale size: not shown.
            if (d->isVisible() && QRect(QPoint(0, 0), w.size()).contains(QRect(d->mapTo(&w, QPoint(0, 0)), d->size())))
                QVERIFY2(d->width() * d->height() < central->width() * central->height(), qPrintable(d->windowTitle()));
        // The menus, and the views' own controls, are reachable: the chat's buttons lie inside the window.
        for (QPushButton* b : {w.chat_view()->send_button(), w.chat_view()->new_button()}) {
            const QRect r(b->mapTo(&w, QPoint(0, 0)), b->size());
            QVERIFY(QRect(QPoint(0, 0), w.size()).contains(r));
        }
        // Larger than this screen: brought back within its available area (test_ui_workbench_1920 scales up on a
        // 1920x1080 screen).
        w.resize(1920, 1080);
        QTest::qWait(50);
        QCOMPARE(w.size(), QSize(1280, 720));
        for (QDockWidget* d : w.docks())
            if (d != w.dock_of(w.state_view())) QVERIFY2(title_problem(w, d).isEmpty(), qPrintable(title_problem(w, d)));
    }

    // The speed line after a Stop is long; it is elided, and the window keeps its width.
    void stop_after_a_long_prompt_keeps_the_minimum_width() {
        MainWindowOptions options;
        options.persist_settings = false;
        MainWindow w(options);
        w.resize(1280, 720);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        QVERIFY(open(w, QStringLiteral(COLIBRI_UI_TEST_MODEL)));
        QStringList words;
        for (int i = 0; i < 250; ++i) words << QStringLiteral("w%1").arg(i % 10);
        QSignalSpy finished(w.chat(), &ChatController::finished);
        QSignalSpy generated(w.worker(), &EngineWorker::tokenGenerated);
        QVERIFY(w.chat()->send(words.join(QLatin1Char(' ')), greedy(2000)).is_ok());
        QVERIFY(wait_for(generated, 3, 120000));
        QTest::mouseClick(w.chat_view()->stop_button(), Qt::LeftButton);
        QVERIFY(wait_for(finished, 1, 60000));
        const GenerationStats stats = finished.at(0).at(0).value<GenerationStats>();
        QVERIFY(stats.stopped);
        QVERIFY2(stats.prompt_tokens + stats.reused_tokens >= 250, qPrintable(QString::number(stats.prompt_tokens)));
        QTest::qWait(100);
        QVERIFY(w.chat_view()->speed_label()->text().contains(QStringLiteral("stopped")));
        QVERIFY2(w.minimumSizeHint().width() <= 1280, qPrintable(QString::number(w.minimumSizeHint().width())));
        QVERIFY(w.minimumWidth() <= 1280);
        QCOMPARE(w.width(), 1280);
        // Squeezed, the labels elide rather than push: their full text stays in the tooltip.
        w.resize(900, 600);
        QTest::qWait(50);
        QVERIFY(w.minimumSizeHint().width() <= 900);
        QCOMPARE(w.width(), 900);
    }

    void reset_layout_restores_the_default() {
        MainWindowOptions options;
        options.persist_settings = false;
        MainWindow w(options);
        w.resize(1280, 720);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        w.set_layout_mode(LayoutMode::Chat);
        QDockWidget* routing = w.dock_of(w.routing_view());
        QDockWidget* kernels = w.dock_of(w.kernels_view());
        routing->setFloating(true);
        kernels->hide();
        w.addDockWidget(Qt::LeftDockWidgetArea, w.dock_of(w.validator_view()));
        QAction* reset = w.findChild<QAction*>(QStringLiteral("reset_layout"));
        QVERIFY(reset != nullptr);
        QVERIFY(w.menuBar()->actions().size() >= 3);
        reset->trigger();
        QTest::qWait(50);
        for (QDockWidget* d : w.docks()) {
            QVERIFY2(!d->isFloating(), qPrintable(d->windowTitle()));
            QVERIFY2(d->isHidden() == (d == w.dock_of(w.state_view())), qPrintable(d->windowTitle()));
        }
        QCOMPARE(w.dockWidgetArea(routing), Qt::RightDockWidgetArea);
        QCOMPARE(w.dockWidgetArea(w.dock_of(w.validator_view())), Qt::BottomDockWidgetArea);
        QCOMPARE(w.dockWidgetArea(w.dock_of(w.heatmap_view())), Qt::BottomDockWidgetArea);
        QCOMPARE(w.size(), QSize(1280, 720));
    }

    // A layout saved on a larger screen (a 2600×1600 window, a dock floated far away) is made to fit this one.
    void repairs_a_saved_layout_that_does_not_fit() {
        {
            MainWindowOptions options;
            options.persist_settings = false;
            MainWindow big(options);
            big.resize(2600, 1600);
            big.show();
            QVERIFY(QTest::qWaitForWindowExposed(&big));
            QDockWidget* routing = big.dock_of(big.routing_view());
            routing->setFloating(true);
            routing->setGeometry(4000, 3000, 900, 900);
            QTest::qWait(20);
            QSettings s;
            s.setValue("window/geometry", big.saveGeometry());
            s.setValue("window/state", big.saveState(2));
        }
        MainWindowOptions options;
        options.persist_settings = true;
        MainWindow w(options);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        w.fit_to_screen();
        const QRect screen = QGuiApplication::primaryScreen()->availableGeometry();
        QVERIFY2(screen.contains(w.frameGeometry()),
                 qPrintable(QStringLiteral("window %1x%2 at %3,%4").arg(w.width()).arg(w.height()).arg(w.x()).arg(w.y())));
        QVERIFY(w.minimumSizeHint().width() <= screen.width() && w.minimumSizeHint().height() <= screen.height());
        // The dock floated far beyond this screen is back on it (docked, or floating where it can be seen).
        QDockWidget* routing = w.dock_of(w.routing_view());
        QVERIFY2(!routing->isFloating() || screen.intersects(routing->frameGeometry()),
                 qPrintable(QStringLiteral("routing at %1,%2").arg(routing->x()).arg(routing->y())));
        QSettings().clear();
    }

    void keyboard_shortcuts() {
        MainWindowOptions options;
        options.persist_settings = false;
        MainWindow w(options);
        w.resize(1280, 720);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        QVERIFY(open(w, QStringLiteral(COLIBRI_UI_TEST_MODEL)));
        w.activateWindow();
        QVERIFY(QTest::qWaitForWindowActive(&w));
        // Every menu action with its shortcut: Ctrl+O opens, Ctrl+N new conversation, Ctrl+Return sends, Esc stops.
        QMap<QString, QKeySequence> shortcuts;
        for (QAction* a : w.findChildren<QAction*>())
            if (!a->shortcut().isEmpty()) shortcuts[a->text().remove(QLatin1Char('&')).remove(QStringLiteral("…"))] = a->shortcut();
        QCOMPARE(shortcuts.value(QStringLiteral("Open model")), QKeySequence(QKeySequence::Open));
        QCOMPARE(shortcuts.value(QStringLiteral("New conversation")), QKeySequence(QKeySequence::New));
        QCOMPARE(shortcuts.value(QStringLiteral("Send")), QKeySequence(Qt::CTRL | Qt::Key_Return));
        QCOMPARE(shortcuts.value(QStringLiteral("Stop")), QKeySequence(Qt::Key_Escape));
        QCOMPARE(shortcuts.value(QStringLiteral("Export as Markdown")), QKeySequence(Qt::CTRL | Qt::Key_E));
        // Typed into the message box and sent with Ctrl+Return; stopped with Esc.
        w.chat_view()->set_settings(greedy(2000));
        w.chat_view()->input()->setFocus();
        QTest::keyClicks(w.chat_view()->input(), QStringLiteral("Tell me a long story."));
        QSignalSpy generated(w.worker(), &EngineWorker::tokenGenerated);
        QSignalSpy finished(w.chat(), &ChatController::finished);
        QTest::keyClick(w.chat_view()->input(), Qt::Key_Return, Qt::ControlModifier);
        QVERIFY(w.chat()->generating());
        QVERIFY(w.chat_view()->input()->toPlainText().isEmpty());
        QVERIFY(wait_for(generated, 2, 60000));
        QTest::keyClick(w.chat_view()->input(), Qt::Key_Escape);
        QVERIFY(wait_for(finished, 1, 60000));
        QVERIFY(finished.at(0).at(0).value<GenerationStats>().stopped);
        QVERIFY(w.conversation()->size() > 0);
        // Ctrl+N ends a conversation this window does not keep (no conversations folder): asked first, answered Discard.
        QStringList asked;
        w.set_discard_question([&asked](const QString& action) {
            asked << action;
            return DiscardAnswer::Discard;
        });
        QTest::keyClick(&w, Qt::Key_N, Qt::ControlModifier);
        QCOMPARE(asked, QStringList{QStringLiteral("Starting a new conversation")});
        QCOMPARE(w.conversation()->size(), 0);
        QVERIFY(w.conversation()->messages().isEmpty());
    }

    // Dark when the desktop is: the palette, the charts drawn on it, and back to light.
    void dark_palette_follows_the_desktop() {
        MainWindowOptions options;
        options.persist_settings = false;
        MainWindow w(options);
        w.resize(1280, 720);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        ThemeManager* theme = w.theme();
        theme->set_scheme(ColorScheme::FollowDesktop);
        theme->set_desktop_dark(true);
        QVERIFY(theme->dark());
        QVERIFY(QGuiApplication::palette().color(QPalette::Window).lightness() < 80);
        QVERIFY(QGuiApplication::palette().color(QPalette::WindowText).lightness() > 180);
        QTest::qWait(20);
        // A chart and the chat are drawn dark.
        BarChart* chart = w.routing_view()->chart();
        const QImage shot = chart->grab().toImage();
        QVERIFY(!shot.isNull());
        QVERIFY2(shot.pixelColor(2, shot.height() - 2).lightness() < 80, qPrintable(shot.pixelColor(2, shot.height() - 2).name()));
        QVERIFY(w.chat_view()->transcript()->palette().color(QPalette::Base).lightness() < 80);
        // The user's choice beats the desktop's.
        theme->set_scheme(ColorScheme::Light);
        QVERIFY(!theme->dark());
        QVERIFY(QGuiApplication::palette().color(QPalette::Window).lightness() > 150);
        theme->set_scheme(ColorScheme::FollowDesktop);
        QVERIFY(theme->dark());
        theme->set_desktop_dark(false);
        QVERIFY(!theme->dark());
        QVERIFY(QGuiApplication::palette().color(QPalette::Window).lightness() > 150);
    }

    void damaged_model_shows_the_banner_and_needs_a_confirmation() {
        MainWindowOptions options;
        options.persist_settings = false;
        MainWindow w(options);
        w.resize(1280, 720);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        w.set_discard_question([](const QString&) { return DiscardAnswer::Discard; });  // it opens a model again after chatting
        const QString damaged = dir_.filePath(QStringLiteral("damaged-demo.bin"));
        const int section = damage_first_expert(QStringLiteral(COLIBRI_UI_TEST_MODEL), damaged);
        QVERIFY(section > 0);
        QSignalSpy verified(w.validator_view(), &ValidatorView::verifiedFile);
        QVERIFY(open(w, damaged));
        QVERIFY(wait_for(verified, 1));
        QCOMPARE(verified.at(0).at(1).toBool(), false);
        Banner* banner = w.banner();
        QVERIFY(banner->isVisible());
        QCOMPARE(banner->kind(), Banner::Kind::Error);
        QVERIFY2(banner->text().contains(QStringLiteral("failed verification")) && banner->text().contains(QStringLiteral("expert 0")) &&
                     banner->text().contains(QStringLiteral("mismatch")),
                 qPrintable(banner->text()));
        // Red: the banner's frame is drawn in the error colour.
        QVERIFY(banner->styleSheet().contains(status_color(StatusColor::Error).name()));
        // The validator is raised: its dock shown, its tab the current one.
        QDockWidget* validator = w.dock_of(w.validator_view());
        QVERIFY(validator->isVisible());
        QVERIFY(!w.validator_view()->visibleRegion().isEmpty());
        // Chatting needs the confirmation; the message stays in the box.
        w.chat_view()->input()->setPlainText(QStringLiteral("Hello"));
        QTest::mouseClick(w.chat_view()->send_button(), Qt::LeftButton);
        QVERIFY(!w.chat()->generating());
        QVERIFY2(w.chat_view()->error_label()->text().contains(QStringLiteral("failed verification")), qPrintable(w.chat_view()->error_label()->text()));
        QCOMPARE(w.chat_view()->input()->toPlainText(), QStringLiteral("Hello"));
        QPushButton* anyway = banner->button(QStringLiteral("Chat anyway"));
        QVERIFY(anyway != nullptr);
        QTest::mouseClick(anyway, Qt::LeftButton);
        QVERIFY(!banner->isVisible());
        QSignalSpy finished(w.chat(), &ChatController::finished);
        w.chat_view()->set_settings(greedy(4));
        QTest::mouseClick(w.chat_view()->send_button(), Qt::LeftButton);
        QVERIFY(wait_for(finished, 1, 60000));
        // A valid model again: no banner, no confirmation needed.
        QVERIFY(open(w, QStringLiteral(COLIBRI_UI_TEST_MODEL)));
        QVERIFY(!banner->isVisible());
        QVERIFY(!w.chat()->blocked());
    }

    void gguf_and_hugging_face_directories_are_offered_for_conversion() {
        MainWindowOptions options;
        options.persist_settings = false;
        MainWindow w(options);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        const QString gguf = QStringLiteral(COLIBRI_TEST_DATA_DIR "/gguf/olmoe-f32.gguf");
        w.open_model(gguf);
        QVERIFY(w.banner()->isVisible());
        QCOMPARE(w.banner()->kind(), Banner::Kind::Info);
        QVERIFY2(w.banner()->text().contains(QStringLiteral("a GGUF file")), qPrintable(w.banner()->text()));
        QPushButton* convert = w.banner()->button(QStringLiteral("Convert…"));
        QVERIFY(convert != nullptr);
        QTest::mouseClick(convert, Qt::LeftButton);
        QVERIFY(w.convert_dialog()->isVisible());
        QCOMPARE(w.convert_dialog()->source(), gguf);
        QVERIFY(w.convert_dialog()->output().endsWith(QStringLiteral(".bin")));
        w.convert_dialog()->hide();
        // A Hugging Face directory, or a file inside one, the same.
        const QString hf = reference(QStringLiteral("hf/mixtral/model"));
        QCOMPARE(QDir(conversion_source(hf + QStringLiteral("/config.json"))).canonicalPath(), QDir(hf).canonicalPath());
        w.open_model(hf);
        QVERIFY2(w.banner()->text().contains(QStringLiteral("Hugging Face model directory")), qPrintable(w.banner()->text()));
        QVERIFY(!w.model_loaded());
    }

    void a_missing_file_is_an_error_not_a_damaged_drawing() {
        MainWindowOptions options;
        options.persist_settings = false;
        MainWindow w(options);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        const QString missing = dir_.filePath(QStringLiteral("nowhere/missing.bin"));
        QSignalSpy failed(&w, &MainWindow::modelLoadFailed);
        w.open_model(missing);
        QVERIFY(w.banner()->isVisible());
        QCOMPARE(w.banner()->kind(), Banner::Kind::Error);
        QVERIFY2(w.banner()->text().contains(QStringLiteral("no such file")), qPrintable(w.banner()->text()));
        QTest::qWait(200);
        // The validator draws nothing: there is no file to be damaged.
        QVERIFY(w.validator_view()->file_layout().path.isEmpty());
        QVERIFY(w.validator_view()->file_layout().sections.empty());
        // Validating it directly says the same, in words.
        QSignalSpy verified(w.validator_view(), &ValidatorView::verifiedFile);
        w.validate_file(missing);
        QTRY_VERIFY_WITH_TIMEOUT(w.validator_view()->file_layout().unreadable, 10000);
        QVERIFY(w.validator_view()->file_layout().sections.empty());
        QVERIFY(w.validator_view()->status_label()->text().startsWith(QStringLiteral("Cannot open this file")));
        QTest::qWait(200);
        QCOMPARE(verified.count(), 0);
    }
};

QTEST_MAIN(TestLayout)
#include "test_ui_layout.moc"
