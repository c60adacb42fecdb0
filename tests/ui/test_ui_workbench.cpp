// The Studio as an analysis workbench (issue 36, items 1 and 3), on an offscreen screen of 1280×720 or 1920×1080
// (ctest runs it on both: tests/ui/offscreen-*.json). Layout: the workspace mode gives the analyses the room and
// the chat a narrow column, the chat mode the middle; the mode switches from the View menu and Ctrl+1/Ctrl+2 and
// is remembered; maximising and set_window_size size the docks; the window stays within the available area;
// every layer of the heatmap and every expert of the routing chart shows; headers are not clipped; docks float
// only on purpose. Routing views: the weight and the router probability named where each is shown, legends and
// axis titles, the selected token's experts framed on the heatmap, the co-activation matrix's colour scale, and
// Jensen-Shannon divergences with their digits and no empty columns.
#include <QAction>
#include <QComboBox>
#include <QDockWidget>
#include <QGuiApplication>
#include <QHeaderView>
#include <QLabel>
#include <QMenu>
#include <QScreen>
#include <QScrollArea>
#include <QProgressBar>
#include <QScrollBar>
#include <QSettings>
#include <QStatusBar>
#include <QTabBar>
#include <QTabWidget>
#include <QTableView>

#include "ui/colors.h"
#include "ui/models/heatmap_model.h"
#include "ui/models/stats_table_model.h"
#include "ui/views/analysis_view.h"
#include "ui/views/bar_chart.h"
#include "ui/views/heatmap_view.h"
#include "ui/views/kernels_view.h"
#include "ui/views/main_window.h"
#include "ui/views/routing_view.h"
#include "ui/views/state_view.h"
#include "ui_test_support.h"

using namespace colibri;
using namespace colibri::studio;
using namespace colibri::test;

namespace {

QRect in_window(QWidget* w, QWidget* child) { return QRect(child->mapTo(w, QPoint(0, 0)), child->size()); }

// Section texts of a table's horizontal header that do not fit their section ("ame first choice").
QStringList clipped_headers(QTableView* t) {
    QStringList out;
    const QFontMetrics fm(t->horizontalHeader()->font());
    for (int c = 0; c < t->model()->columnCount(); ++c) {
        if (t->horizontalHeader()->isSectionHidden(c)) continue;
        const QString text = t->model()->headerData(c, Qt::Horizontal).toString();
        // What the header's style needs for the text and its margins.
        if (std::max(fm.horizontalAdvance(text) + 4, t->horizontalHeader()->sectionSizeHint(c)) > t->horizontalHeader()->sectionSize(c))
            out << QStringLiteral("%1 (%2 px in %3)").arg(text).arg(fm.horizontalAdvance(text)).arg(t->horizontalHeader()->sectionSize(c));
    }
    return out;
}

// A dock's title, shown whole: its tab in the window's tab bar, or its own title bar.
QString title_problem(MainWindow& w, QDockWidget* d) {
    for (QTabBar* bar : w.findChildren<QTabBar*>()) {
        if (!bar->isVisible()) continue;
        for (int i = 0; i < bar->count(); ++i) {
            if (bar->tabText(i).remove(QLatin1Char('&')) != d->windowTitle()) continue;
            if (bar->tabRect(i).width() < bar->fontMetrics().horizontalAdvance(d->windowTitle()))
                return QStringLiteral("tab of %1 too narrow for its title").arg(d->windowTitle());
            if (!bar->rect().contains(bar->tabRect(i))) return QStringLiteral("tab of %1 scrolled out of its bar").arg(d->windowTitle());
            return {};
        }
    }
    return d->isVisible() ? QString() : QStringLiteral("%1 is neither shown nor a tab").arg(d->windowTitle());
}

}  // namespace

class TestWorkbench : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    QRect screen_;

    static bool open(MainWindow& w, const QString& path) {
        QSignalSpy loaded(&w, &MainWindow::modelLoaded);
        w.open_model(path);
        return wait_for(loaded, 1);
    }

    // A window of this size (as --geometry gives it), shown; null when it was not exposed.
    static std::unique_ptr<MainWindow> shown_window(const QSize& size, bool persist = false) {
        MainWindowOptions options;
        options.persist_settings = persist;
        auto w = std::make_unique<MainWindow>(options);
        w->set_window_size(size);
        w->show();
        if (!QTest::qWaitForWindowExposed(w.get())) return nullptr;
        return w;
    }

    // A window at the screen's available size in its default (workspace) layout, the demo model open, one reply.
    std::unique_ptr<MainWindow> chatted_window() {
        auto w = shown_window(screen_.size());
        if (w == nullptr) return nullptr;
        w->reset_layout();
        if (!open(*w, QStringLiteral(COLIBRI_DEMO_MODEL))) return nullptr;
        if (!send_and_wait(*w, QStringLiteral("What is 23 plus 45?"), 12)) return nullptr;
        w->heatmap_view()->refresh();
        w->analysis_view()->refresh();
        QTest::qWait(50);
        return w;
    }

private slots:
    void initTestCase() {
        QSettings::setPath(QSettings::NativeFormat, QSettings::UserScope, dir_.filePath(QStringLiteral("settings")));
        QCoreApplication::setOrganizationName(QStringLiteral("ColibriTest"));
        QCoreApplication::setApplicationName(QStringLiteral("Workbench"));
        screen_ = QGuiApplication::primaryScreen()->availableGeometry();
        QVERIFY2(screen_.size() == QSize(1280, 720) || screen_.size() == QSize(1920, 1080),
                 "runs on tests/ui/offscreen-1280x720.json or offscreen-1920x1080.json");
        qInfo("screen %dx%d", screen_.width(), screen_.height());
    }

    // In a real window with a window manager (tests/ui/real_window.sh: Xvfb and openbox): the window, its title bar
    // included, within the available area at --geometry equal to the screen; maximised, the docks resize and the
    // raised ones show their whole view, every layer of the heatmap among them.
    void real_window_fits_and_docks_show_after_maximise() {
        if (QGuiApplication::platformName() != QLatin1String("xcb"))
            QSKIP("needs an X display with a window manager: ctest's test_ui_real_window runs it under Xvfb and openbox");
        auto shown = shown_window(screen_.size());  // --geometry equal to the screen
        QVERIFY(shown != nullptr);
        MainWindow& w = *shown;
        // The window manager's frame arrives after the window is mapped; then the window is fitted to it.
        QTRY_VERIFY_WITH_TIMEOUT(w.frameGeometry().height() > w.geometry().height(), 15000);
        QTRY_VERIFY2_WITH_TIMEOUT(screen_.contains(w.frameGeometry()),
                                  qPrintable(QStringLiteral("frame %1x%2 at %3,%4 on %5x%6").arg(w.frameGeometry().width()).arg(w.frameGeometry().height())
                                                 .arg(w.frameGeometry().x()).arg(w.frameGeometry().y()).arg(screen_.width()).arg(screen_.height())),
                                  5000);
        qInfo("window %dx%d, frame %dx%d at %d,%d", w.width(), w.height(), w.frameGeometry().width(), w.frameGeometry().height(),
              w.frameGeometry().x(), w.frameGeometry().y());
        QVERIFY(open(w, QStringLiteral(COLIBRI_DEMO_MODEL)));
        QVERIFY(send_and_wait(w, QStringLiteral("What is 23 plus 45?"), 12));
        w.conversation()->select(w.conversation()->size() - 2);
        w.showMaximized();
        QTRY_VERIFY_WITH_TIMEOUT(w.isMaximized(), 5000);
        QTest::qWait(500);
        // Maximised, the window manager places the frame (openbox puts its 1-px border beyond the edges): the
        // window's own area and its status bar are what must be on screen.
        const QRect status(w.statusBar()->mapToGlobal(QPoint(0, 0)), w.statusBar()->size());
        QVERIFY2(screen_.contains(status) && screen_.contains(w.geometry()),
                 qPrintable(QStringLiteral("maximised: window %1x%2 at %3,%4, status bar at y %5..%6").arg(w.width()).arg(w.height())
                                .arg(w.geometry().x()).arg(w.geometry().y()).arg(status.top()).arg(status.bottom())));
        QVERIFY(w.centralWidget()->width() <= w.width() / 3);
        w.heatmap_view()->refresh();
        QTest::qWait(100);
        // The docks on screen (tabs behind the raised one are parked outside the window) show their whole view.
        const QRect window(QPoint(0, 0), w.size());
        int on_screen = 0;
        for (QDockWidget* d : w.docks()) {
            if (!d->isVisible() || !window.contains(in_window(&w, d))) continue;
            ++on_screen;
            auto* scroll = qobject_cast<QScrollArea*>(d->widget());
            QVERIFY2(!scroll->horizontalScrollBar()->isVisible() && !scroll->verticalScrollBar()->isVisible(),
                     qPrintable(QStringLiteral("%1 scrolls: view needs %2x%3, dock gives %4x%5").arg(d->windowTitle())
                                    .arg(scroll->widget()->minimumSizeHint().width()).arg(scroll->widget()->minimumSizeHint().height())
                                    .arg(scroll->viewport()->width()).arg(scroll->viewport()->height())));
        }
        QVERIFY(on_screen >= 3);  // heatmap, routing, model
        QTableView* map = w.heatmap_view()->table();
        const int rows = w.heatmap_view()->heatmap_model()->rowCount();
        QCOMPARE(rows, 4);
        QVERIFY(map->rowViewportPosition(rows - 1) + map->rowHeight(rows - 1) <= map->viewport()->height());
        BarChart* chart = w.routing_view()->chart();
        chart->grab();
        QCOMPARE(chart->drawn_categories(), chart->categories());
        w.showNormal();
        QTRY_VERIFY_WITH_TIMEOUT(!w.isMaximized(), 5000);
        QTRY_VERIFY_WITH_TIMEOUT(screen_.contains(w.frameGeometry()), 5000);
    }

    // The workspace layout at this screen's size: the analyses large, the chat narrow, every layer and expert shown.
    void workspace_layout_gives_the_analyses_the_room() {
        auto w = chatted_window();
        QVERIFY(w != nullptr);
        QCOMPARE(w->layout_mode(), LayoutMode::Workspace);
        QVERIFY2(screen_.contains(w->frameGeometry()), qPrintable(QStringLiteral("window %1x%2").arg(w->width()).arg(w->height())));
        QDockWidget* heat = w->dock_of(w->heatmap_view());
        QDockWidget* routing = w->dock_of(w->routing_view());
        QWidget* chat = w->centralWidget();
        QVERIFY(heat->isVisible() && routing->isVisible());
        // The analyses larger than the chat; the chat a column at the left, at most a third of the width.
        QVERIFY2(heat->width() * heat->height() > chat->width() * chat->height(),
                 qPrintable(QStringLiteral("heatmap %1x%2, chat %3x%4").arg(heat->width()).arg(heat->height()).arg(chat->width()).arg(chat->height())));
        QVERIFY2(chat->width() <= w->width() / 3, qPrintable(QStringLiteral("chat %1 of %2 px").arg(chat->width()).arg(w->width())));
        QVERIFY(in_window(w.get(), chat).left() < in_window(w.get(), heat).left());
        for (QDockWidget* d : w->docks()) {
            if (d == w->dock_of(w->state_view())) {
                QVERIFY2(d->isHidden(), "the Recurrent state dock shows only for hybrids");
                continue;
            }
            QVERIFY2(title_problem(*w, d).isEmpty(), qPrintable(title_problem(*w, d)));
        }
        // Every layer of the heatmap shows, one column per expert, all within the table's viewport.
        QTableView* map = w->heatmap_view()->table();
        HeatmapModel* model = w->heatmap_view()->heatmap_model();
        QCOMPARE(model->rowCount(), 4);
        QCOMPARE(model->bin(), 1);
        QCOMPARE(model->columnCount(), 16);
        for (int r = 0; r < model->rowCount(); ++r) {
            const int bottom = map->rowViewportPosition(r) + map->rowHeight(r);
            QVERIFY2(map->rowViewportPosition(r) >= 0 && bottom <= map->viewport()->height(),
                     qPrintable(QStringLiteral("layer row %1 ends at %2 of %3 px").arg(r).arg(bottom).arg(map->viewport()->height())));
            QVERIFY(map->rowHeight(r) >= HeatmapView::kMinRow);
        }
        const int last = model->columnCount() - 1;
        QVERIFY2(map->columnViewportPosition(last) + map->columnWidth(last) <= map->viewport()->width(),
                 qPrintable(QStringLiteral("last expert ends at %1 of %2 px").arg(map->columnViewportPosition(last) + map->columnWidth(last)).arg(map->viewport()->width())));
        // The columns use the width: less than a column's width left over (16 experts at up to kMaxCellWidth fill
        // any map narrower than 2176 px; the chat layout's strip at 1920x1080 showed them in 1088 of its 1217 px
        // when a column grew to twice the cell width at most).
        const auto columns_fill = [&] {
            const int used = map->columnViewportPosition(last) + map->columnWidth(last);
            qInfo("map %d px wide, columns %d px", map->viewport()->width(), map->columnWidth(last));
            return map->viewport()->width() < 16 * HeatmapView::kMaxCellWidth && map->viewport()->width() - used < map->columnWidth(last);
        };
        QVERIFY(columns_fill());
        // The colour scale's numbers: the largest count on top, none (and "no data" drawn) for an empty span.
        HeatLegend* legend = w->heatmap_view()->findChild<HeatLegend*>();
        QVERIFY(legend != nullptr);
        QCOMPARE(legend->labels().size(), 3);
        QVERIFY(legend->labels().front().toDouble() > 0);
        w->heatmap_view()->set_span(TokenSpan{100000, -1, false});
        QVERIFY(legend->labels().isEmpty());
        QVERIFY(w->heatmap_view()->findChild<QLabel*>(QStringLiteral("heatmap_summary"))->text().startsWith(QStringLiteral("No routed tokens")));
        w->heatmap_view()->set_span(TokenSpan{});
        QCOMPARE(legend->labels().size(), 3);
        // The rows use the room: taller than the fixed 24 px of before when the map has it.
        if (map->viewport()->height() >= 4 * 30) QVERIFY(map->rowHeight(0) >= 30);
        // The heatmap and routing docks show their whole view: no scroll bars.
        for (QDockWidget* d : {heat, routing}) {
            auto* scroll = qobject_cast<QScrollArea*>(d->widget());
            QVERIFY2(!scroll->horizontalScrollBar()->isVisible(), qPrintable(d->windowTitle() + QStringLiteral(" scrolls sideways")));
            QVERIFY2(!scroll->verticalScrollBar()->isVisible(), qPrintable(d->windowTitle() + QStringLiteral(" scrolls")));
        }
        // Every expert labelled under the routing chart (a token's distribution drawn).
        w->conversation()->select(w->conversation()->size() - 2);
        QTest::qWait(50);
        BarChart* chart = w->routing_view()->chart();
        chart->grab();
        QCOMPARE(chart->categories().size(), 16);
        QCOMPARE(chart->drawn_categories(), chart->categories());
        // The chat layout's heatmap strip shows every layer too (it showed 2½ of 4 at 24 px a row).
        w->set_layout_mode(LayoutMode::Chat);
        QTest::qWait(100);
        for (int r = 0; r < model->rowCount(); ++r)
            QVERIFY2(map->rowViewportPosition(r) + map->rowHeight(r) <= map->viewport()->height(),
                     qPrintable(QStringLiteral("chat layout: layer row %1 ends at %2 of %3 px").arg(r).arg(map->rowViewportPosition(r) + map->rowHeight(r)).arg(map->viewport()->height())));
        QVERIFY(columns_fill());
        w->set_layout_mode(LayoutMode::Workspace);
        QTest::qWait(50);
        // No header clipped: heatmap, balance, routing table and every analysis table.
        QList<QTableView*> tables{map, w->routing_view()->table()};
        tables << w->heatmap_view()->findChildren<QTableView*>() << w->analysis_view()->findChildren<QTableView*>();
        for (QTableView* t : tables) {
            const QStringList clipped = clipped_headers(t);
            QVERIFY2(clipped.isEmpty(), qPrintable(clipped.join(QStringLiteral("; "))));
        }
        // The kernel comparison's tables too, raised and still empty ("prompt tok/s (min–max)" was clipped).
        w->dock_of(w->kernels_view())->raise();
        QTest::qWait(50);
        for (QTableView* t : w->kernels_view()->findChildren<QTableView*>()) {
            if (!t->isVisible()) continue;
            const QStringList clipped = clipped_headers(t);
            QVERIFY2(clipped.isEmpty(), qPrintable(QStringLiteral("kernels: ") + clipped.join(QStringLiteral("; "))));
        }
    }

    // View ▸ Workspace / Chat layout, Ctrl+1 / Ctrl+2: the docks move and resize, and the choice is remembered.
    void layout_modes_switch_and_are_remembered() {
        QSettings().clear();
        QSize workspace_chat;
        {
            auto shown = shown_window(screen_.size(), true);
            QVERIFY(shown != nullptr);
            MainWindow& w = *shown;
            QCOMPARE(w.layout_mode(), LayoutMode::Workspace);
            QTest::qWait(50);
            workspace_chat = w.centralWidget()->size();
            QDockWidget* heat = w.dock_of(w.heatmap_view());
            QCOMPARE(w.dockWidgetArea(heat), Qt::RightDockWidgetArea);
            const int heat_width = heat->width();
            auto* chat_mode = w.findChild<QAction*>(QStringLiteral("chat_layout"));
            auto* workspace_mode = w.findChild<QAction*>(QStringLiteral("workspace_layout"));
            QVERIFY(chat_mode != nullptr && workspace_mode != nullptr);
            QCOMPARE(chat_mode->shortcut(), QKeySequence(Qt::CTRL | Qt::Key_2));
            QCOMPARE(workspace_mode->shortcut(), QKeySequence(Qt::CTRL | Qt::Key_1));
            QVERIFY(workspace_mode->isChecked());
            chat_mode->trigger();
            QTest::qWait(50);
            QCOMPARE(w.layout_mode(), LayoutMode::Chat);
            QVERIFY(chat_mode->isChecked() && !workspace_mode->isChecked());
            QCOMPARE(w.dockWidgetArea(heat), Qt::BottomDockWidgetArea);
            // The chat has the middle: wider than in the workspace, the heatmap a strip below it.
            QVERIFY2(w.centralWidget()->width() > workspace_chat.width(),
                     qPrintable(QStringLiteral("chat %1 px, workspace chat %2 px").arg(w.centralWidget()->width()).arg(workspace_chat.width())));
            QVERIFY(heat->height() < w.centralWidget()->height());
            QVERIFY(heat->width() != heat_width || heat->height() < w.height() / 2);
            w.close();
        }
        QCOMPARE(QSettings().value("view/layout_mode").toInt(), static_cast<int>(LayoutMode::Chat));
        {
            MainWindowOptions options;
            options.persist_settings = true;
            MainWindow w(options);
            w.show();
            QVERIFY(QTest::qWaitForWindowExposed(&w));
            QCOMPARE(w.layout_mode(), LayoutMode::Chat);
            QVERIFY(w.findChild<QAction*>(QStringLiteral("chat_layout"))->isChecked());
            QCOMPARE(w.dockWidgetArea(w.dock_of(w.heatmap_view())), Qt::BottomDockWidgetArea);
            w.activateWindow();
            QVERIFY(QTest::qWaitForWindowActive(&w));
            QTest::keyClick(&w, Qt::Key_1, Qt::ControlModifier);
            QTest::qWait(50);
            QCOMPARE(w.layout_mode(), LayoutMode::Workspace);
            QCOMPARE(w.dockWidgetArea(w.dock_of(w.heatmap_view())), Qt::RightDockWidgetArea);
            QVERIFY(w.centralWidget()->width() <= w.width() / 3);
            w.close();
        }
        QCOMPARE(QSettings().value("view/layout_mode").toInt(), static_cast<int>(LayoutMode::Workspace));
        QSettings().clear();
    }

    // Maximised, the docks share the room as the default layout does; set_window_size (--geometry) the same, and
    // a size beyond the screen is brought within its available area.
    void docks_size_themselves_on_maximise_and_geometry() {
        auto shown = shown_window(QSize(960, 640));
        QVERIFY(shown != nullptr);
        MainWindow& w = *shown;
        QTest::qWait(50);
        QDockWidget* heat = w.dock_of(w.heatmap_view());
        const int small_heat = heat->width(), small_chat = w.centralWidget()->width();
        w.showMaximized();
        QTRY_VERIFY(w.isMaximized());
        QTRY_COMPARE(w.size(), screen_.size());
        QTest::qWait(200);
        qInfo("heatmap %d -> %d px, chat %d -> %d px", small_heat, heat->width(), small_chat, w.centralWidget()->width());
        // The heatmap took its share of the new width; the chat did not take it all.
        QVERIFY2(heat->width() - small_heat >= (screen_.width() - 960) / 3,
                 qPrintable(QStringLiteral("heatmap %1 -> %2 px").arg(small_heat).arg(heat->width())));
        QVERIFY(w.centralWidget()->width() <= w.width() / 3);
        w.showNormal();
        QTRY_VERIFY(!w.isMaximized());
        // Resized by hand to much larger (a window manager's drag, not a maximise): the same.
        QTest::qWait(300);  // the restore's own sizing done
        w.resize(960, 640);
        QTest::qWait(300);
        w.resize(screen_.size());
        QTest::qWait(100);
        QVERIFY2(w.centralWidget()->width() <= w.width() / 3,
                 qPrintable(QStringLiteral("chat %1 of %2 px after a resize").arg(w.centralWidget()->width()).arg(w.width())));
        // --geometry equal to the screen, or larger: within the available area, frame included.
        w.set_window_size(screen_.size() + QSize(200, 100));
        QTest::qWait(50);
        QVERIFY2(screen_.contains(w.frameGeometry()),
                 qPrintable(QStringLiteral("window %1x%2 at %3,%4").arg(w.frameGeometry().width()).arg(w.frameGeometry().height()).arg(w.x()).arg(w.y())));
        QVERIFY(w.centralWidget()->width() <= w.width() / 3);
    }

    // A drag does not tear a dock off; View ▸ Detach into a window does, and docking it again makes it fixed again.
    void docks_float_only_on_purpose() {
        auto shown = shown_window(screen_.size());
        QVERIFY(shown != nullptr);
        MainWindow& w = *shown;
        for (QDockWidget* d : w.docks()) {
            QVERIFY2(!(d->features() & QDockWidget::DockWidgetFloatable), qPrintable(d->windowTitle()));
            QVERIFY(d->features() & QDockWidget::DockWidgetMovable);
        }
        auto* detach = w.findChild<QMenu*>(QStringLiteral("detach_menu"));
        QVERIFY(detach != nullptr);
        QCOMPARE(detach->actions().size(), w.docks().size());
        QDockWidget* routing = w.dock_of(w.routing_view());
        for (QAction* a : detach->actions())
            if (a->text() == routing->windowTitle()) a->trigger();
        QTRY_VERIFY(routing->isFloating());
        QVERIFY(screen_.intersects(routing->frameGeometry()));
        routing->setFloating(false);
        QTRY_VERIFY(!(routing->features() & QDockWidget::DockWidgetFloatable));
    }

    // The routing table's weights and the chart's probabilities named where each is shown; legends and axis titles.
    void routing_views_explain_themselves() {
        auto w = chatted_window();
        QVERIFY(w != nullptr);
        const int position = w->conversation()->size() - 2;
        w->conversation()->select(position);
        QTest::qWait(50);
        RoutingView* routing = w->routing_view();
        const RoutingTableModel* table = routing->table_model();
        QVERIFY(table->rowCount() == 4);
        for (int c = 1; c < table->distribution_column(); ++c)
            QVERIFY(table->headerData(c, Qt::Horizontal).toString().contains(QStringLiteral("weight")));
        QVERIFY(table->headerData(table->distribution_column(), Qt::Horizontal).toString().contains(QStringLiteral("probability")));
        // The demo model's top-2 table fits its dock without scrolling sideways (it scrolled at 1280x720 with the
        // longer headers and a sparkline of fixed width).
        QTRY_COMPARE(routing->table()->horizontalScrollBar()->maximum(), 0);
        // The chat column's context bar holds its text on one line ("context 93 / 512" wrapped at 1280x720).
        auto* bar = w->chat_view()->findChild<QProgressBar*>(QStringLiteral("context"));
        QVERIFY(bar != nullptr);
        QVERIFY2(bar->width() >= bar->fontMetrics().horizontalAdvance(bar->text()) + 8,
                 qPrintable(QStringLiteral("%1 px for \"%2\"").arg(bar->width()).arg(bar->text())));
        QVERIFY(routing->weights_note()->isVisible());
        QVERIFY(routing->weights_note()->text().contains(QStringLiteral("weights")) &&
                routing->weights_note()->text().contains(QStringLiteral("router probability")) &&
                routing->weights_note()->text().contains(QStringLiteral("renormalised")));
        // The chart: probabilities (not the weights), with its axes titled and a legend for the colours.
        BarChart* chart = routing->chart();
        QVERIFY(chart->axis_title().contains(QStringLiteral("probability")));
        QCOMPARE(chart->x_axis_title(), QStringLiteral("expert"));
        QCOMPARE(chart->legend_names().size(), 2);
        QVERIFY(chart->legend_names()[0].startsWith(QStringLiteral("chosen")) && chart->legend_names()[1] == QStringLiteral("not chosen"));
        // Each chart of the analyses: a title on both axes, and a legend when it compares series.
        AnalysisView* a = w->analysis_view();
        for (BarChart* c : {a->repetition_chart(), a->predictability_chart(), a->comparison_chart()}) {
            QVERIFY2(!c->axis_title().isEmpty() && !c->x_axis_title().isEmpty(), qPrintable(c->objectName()));
            if (c->series().size() > 1) QCOMPARE(c->legend_names().size(), c->series().size());
        }

        // The selected token's experts framed on the heatmap: those cells and no others, and drawn so.
        const ConversationToken* t = w->conversation()->token(position);
        QVERIFY(t != nullptr && t->evaluated);
        HeatmapModel* heat = w->heatmap_view()->heatmap_model();
        QTableView* map = w->heatmap_view()->table();
        const QImage drawn = map->viewport()->grab().toImage();
        int marked = 0;
        for (int r = 0; r < heat->rowCount(); ++r)
            for (int c = 0; c < heat->columnCount(); ++c) {
                const LayerRouting* lr = t->trace.routing_at(heat->usage().layers[static_cast<size_t>(r)]);
                const bool chosen = lr && std::find(lr->experts.begin(), lr->experts.end(), c) != lr->experts.end();
                const QModelIndex i = heat->index(r, c);
                QCOMPARE(i.data(HeatmapModel::MarkedRole).toBool(), chosen);
                marked += chosen;
                // A frame in the text colour on the cell's edge; unmarked cells have their colour there.
                const QRect cell = map->visualRect(i);
                const QColor bg = i.data(Qt::BackgroundRole).value<QColor>();
                const QColor edge = drawn.pixelColor(cell.left() + 2, cell.center().y());
                QCOMPARE(edge.rgb(), chosen ? text_color_on(bg).rgb() : bg.rgb());
            }
        QCOMPARE(marked, 4 * 2);
        QVERIFY(w->heatmap_view()->mark_note()->text().contains(QStringLiteral("position %1").arg(position)));
        w->conversation()->select(-1);
        QCOMPARE(heat->marked().size(), 0);
        QVERIFY(w->heatmap_view()->mark_note()->text().startsWith(QStringLiteral("Select a token")));

        // The co-activation matrix: its colour scale (the largest pair count at the top), what the colour means,
        // and both axes titled.
        a->coactivation_layer()->setCurrentIndex(0);
        a->coactivation_mode()->setCurrentIndex(0);
        StatsTableModel* co = a->coactivation_model();
        int top = 0;
        for (int i = 0; i < co->rowCount(); ++i)
            for (int j = 0; j < co->columnCount(); ++j)
                if (i != j) top = std::max(top, co->index(i, j).data(Qt::EditRole).toInt());
        QVERIFY(top > 0);
        QCOMPARE(a->coactivation_legend()->labels().front(), QString::number(top));
        QVERIFY(a->coactivation_legend_caption().contains(QStringLiteral("both")));
        QVERIFY(a->coactivation_axis_title(Qt::Horizontal).startsWith(QStringLiteral("column")));
        QVERIFY(a->coactivation_axis_title(Qt::Vertical).startsWith(QStringLiteral("row")));
        a->coactivation_mode()->setCurrentIndex(1);
        QVERIFY(a->coactivation_legend()->labels().front().endsWith(QStringLiteral("%")));
        QVERIFY(a->coactivation_legend_caption().contains(QStringLiteral("%")));
    }

    // Divergences keep three significant digits however small ("0.0, 0.0, 0.1" said nothing).
    void divergence_digits() {
        QCOMPARE(significant(0.00312), QStringLiteral("0.00312"));
        QCOMPARE(significant(0.0431), QStringLiteral("0.0431"));
        QCOMPARE(significant(0.25), QStringLiteral("0.250"));
        QCOMPARE(significant(1.0), QStringLiteral("1.00"));
        QCOMPARE(significant(0.0), QStringLiteral("0"));
        QCOMPARE(significant(0.00001234), QStringLiteral("1.23e-05"));
        StatsTableModel m;
        m.set_table({QStringLiteral("layer"), QStringLiteral("JS")}, {StatsTableModel::Format::Integer, StatsTableModel::Format::Significant3},
                    {{{0}, {0.004217}}, {{1}, {0.0612}}});
        QCOMPARE(m.text(0, 1), QStringLiteral("0.00422"));
        QCOMPARE(m.text(1, 1), QStringLiteral("0.0612"));
    }

    // A saved conversation with other tokens compares by usage: the JS divergence column alone beside the layer,
    // with its digits in the table and on the chart, and no position table that could only stay empty.
    void comparison_by_usage_has_no_empty_columns() {
        auto w = chatted_window();
        QVERIFY(w != nullptr);
        const QString saved = dir_.filePath(QStringLiteral("other.json"));
        QVERIFY(w->save_conversation(saved).is_ok());
        w->chat()->new_conversation();
        QVERIFY(send_and_wait(*w, QStringLiteral("Spell garden backwards."), 12));
        AnalysisView* a = w->analysis_view();
        a->refresh();
        QSignalSpy compared(a, &AnalysisView::comparisonFinished);
        QVERIFY(a->compare_with_conversation(saved).is_ok());
        QVERIFY(wait_for(compared, 1, 120000));
        QVERIFY(compared.at(0).at(0).toBool());
        QVERIFY(!a->comparison().same_tokens);
        StatsTableModel* table = a->agreement_model();
        QCOMPARE(table->columnCount(), 2);
        QVERIFY(table->headerData(1, Qt::Horizontal).toString().contains(QStringLiteral("JS divergence")));
        QCOMPARE(table->rowCount(), 4);
        for (int r = 0; r < table->rowCount(); ++r)
            for (int c = 0; c < table->columnCount(); ++c) QVERIFY2(!table->text(r, c).isEmpty(), qPrintable(QStringLiteral("row %1 column %2 empty").arg(r).arg(c)));
        for (int r = 0; r < table->rowCount(); ++r) {
            const double js = a->comparison().usage[static_cast<size_t>(r)].js_bits;
            QCOMPARE(table->text(r, 1), significant(js));
            QCOMPARE(a->comparison_chart()->format_value(js), significant(js));
        }
        QVERIFY(a->divergence_table()->isHidden());
        QVERIFY(a->comparison_chart()->axis_title().contains(QStringLiteral("Jensen-Shannon")));
        const QStringList clipped = clipped_headers(a->findChildren<QTableView*>().front());
        QVERIFY2(clipped.isEmpty(), qPrintable(clipped.join(QStringLiteral("; "))));
    }
};

QTEST_MAIN(TestWorkbench)
#include "test_ui_workbench.moc"
