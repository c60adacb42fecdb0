// The Studio on a Gated DeltaNet hybrid: the layer kinds it shows equal the config's layer_types, the recurrent-state
// heatmap's norms equal those of an independent token-by-token engine run (read back from its state), β and the
// decay lie in their ranges and vary, a model without linear layers gets the note; and the expert heatmap's bins
// (hundreds of experts) sum the experts they hold and fit the width.
#include <QComboBox>
#include <QDockWidget>
#include <QHeaderView>
#include <QLabel>
#include <QStyle>
#include <QTableView>
#include <cmath>

#include "engine/core/model.h"
#include "engine/core/session.h"
#include "ui/views/cache_view.h"
#include "ui/views/heatmap_view.h"
#include "ui/views/main_window.h"
#include "ui/views/profiler_view.h"
#include "ui/views/routing_view.h"
#include "ui/views/state_view.h"
#include "ui_test_support.h"
#include "../expert_cache_budget.h"

using namespace colibri;
using namespace colibri::studio;
using namespace colibri::test;

class TestState : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    QString hybrid_;
    std::unique_ptr<MainWindow> window_;

    bool open(const QString& path) {
        QSignalSpy loaded(window_.get(), &MainWindow::modelLoaded);
        window_->open_model(path);
        return wait_for(loaded, 1);
    }

private slots:
    void initTestCase() {
        hybrid_ = convert_reference(dir_, QStringLiteral("qwen3_next"));
        QVERIFY(!hybrid_.isEmpty());
        MainWindowOptions options;
        options.persist_settings = false;
        window_ = std::make_unique<MainWindow>(options);
        window_->set_discard_question([](const QString&) { return DiscardAnswer::Discard; });
        window_->resize(1400, 900);
        window_->show();
        QVERIFY(QTest::qWaitForWindowExposed(window_.get()));
    }
    void cleanupTestCase() { window_.reset(); }

    // Which layers are linear: the summary, the layer strip and the heatmap's rows say what config.json's
    // layer_types says.
    void layer_kinds_follow_the_config() {
        QVERIFY(open(hybrid_));
        const QJsonArray types = read_json(reference("hf/qwen3_next/model/config.json")).object()["layer_types"].toArray();
        QVector<int> linear;
        for (int l = 0; l < types.size(); ++l)
            if (types[l].toString() == QLatin1String("linear_attention")) linear << l;
        QVERIFY(!linear.isEmpty() && linear.size() < types.size());
        StateView* view = window_->state_view();
        QVERIFY(view->hybrid());
        QVERIFY(!view->layer_strip()->isHidden());
        QCOMPARE(view->state_model()->layer_count(), linear.size());
        QCOMPARE(view->state_model()->heads(), 4);  // linear_num_value_heads
        for (int r = 0; r < view->state_model()->rowCount(); ++r) QCOMPARE(view->state_model()->layer_of(r), linear[r / 4]);
        HeatmapModel* heat = window_->heatmap_view()->heatmap_model();
        QVERIFY(send_and_wait(*window_, QStringLiteral("1, 2, 3"), 2));
        window_->heatmap_view()->refresh();
        QCOMPARE(heat->rowCount(), types.size());
        for (int r = 0; r < heat->rowCount(); ++r) {
            const int layer = heat->usage().layers[static_cast<size_t>(r)];
            const QString want = linear.contains(layer) ? QStringLiteral("linear") : QStringLiteral("full");
            QVERIFY2(heat->headerData(r, Qt::Vertical).toString().endsWith(want), qPrintable(heat->headerData(r, Qt::Vertical).toString()));
        }
    }

    // A prompt of three chunks and a reply: every evaluated position has a column, and each cell's norm equals the
    // Frobenius norm of that head's state after that token in a separate, untraced session fed one token at a time.
    void state_norms_equal_an_independent_run() {
        QVERIFY(open(hybrid_));
        QStringList ids;
        for (int i = 0; i < 150; ++i) ids << QString::number((17 + 53 * i) % 4096);
        QVERIFY(send_and_wait(*window_, ids.join(QStringLiteral(", ")), 10));
        StateView* view = window_->state_view();
        view->refresh();
        LinearStateModel* m = view->state_model();
        const std::vector<int32_t> tokens = window_->conversation()->token_ids();
        QVERIFY(m->columnCount() >= 150);
        QCOMPARE(m->columnCount(), window_->conversation()->evaluated_count());

        auto model = Model::load(hybrid_.toStdString());
        QVERIFY2(model.is_ok(), model.message().c_str());
        ThreadPool pool(1);
        Session session(*model.value(), pool);
        const auto& hp = model.value()->hparams();
        const size_t cells = size_t(hp.linear_key_dim) * hp.linear_value_dim;
        m->set_quantity(LinearStateModel::Quantity::Norm);
        int column = 0;
        for (size_t p = 0; p < tokens.size() && column < m->columnCount(); ++p) {
            QVERIFY(session.eval(tokens[p]).is_ok());
            QCOMPARE(m->position_of(column), int(p));
            for (int r = 0; r < m->rowCount(); ++r) {
                const std::span<const float> state = session.linear_recurrent_state(uint32_t(m->layer_of(r)));
                QVERIFY(!state.empty());
                double ss = 0.0;
                for (size_t i = 0; i < cells; ++i) ss += double(state[size_t(m->head_of(r)) * cells + i]) * state[size_t(m->head_of(r)) * cells + i];
                const double want = std::sqrt(ss), got = m->index(r, column).data(LinearStateModel::ValueRole).toDouble();
                QVERIFY2(std::abs(got - want) <= 1e-5 * std::max(want, 1.0),
                         qPrintable(QString("row %1, position %2: %3, independent %4").arg(r).arg(p).arg(got).arg(want)));
            }
            ++column;
        }
        QCOMPARE(column, m->columnCount());
        // β in (0, 1) and the decay in (0, 1], each varying from token to token (they are read, not made up).
        for (const auto q : {LinearStateModel::Quantity::Beta, LinearStateModel::Quantity::Decay}) {
            view->set_quantity(q);
            double lo = 2, hi = -1;
            for (int r = 0; r < m->rowCount(); ++r)
                for (int c = 0; c < m->columnCount(); ++c) {
                    const double v = m->index(r, c).data(LinearStateModel::ValueRole).toDouble();
                    QVERIFY2(v > 0.0 && (q == LinearStateModel::Quantity::Decay ? v <= 1.0 : v < 1.0), qPrintable(QString::number(v)));
                    lo = std::min(lo, v), hi = std::max(hi, v);
                }
            QVERIFY(hi - lo > 1e-3);
            QCOMPARE(m->scale_max(), 1.0);
        }
        view->set_quantity(LinearStateModel::Quantity::Norm);
        QVERIFY(view->summary_label()->text().startsWith(QStringLiteral("3 Gated DeltaNet layers × 4 heads over %1 tokens").arg(m->columnCount())));
        // The CSV holds the same numbers.
        const QString csv = dir_.filePath(QStringLiteral("states.csv"));
        QVERIFY(view->export_csv(csv).is_ok());
        const QStringList lines = QString::fromUtf8(read_all(csv)).split('\n', Qt::SkipEmptyParts);
        QCOMPARE(lines.size(), 1 + m->rowCount());
        QCOMPARE(lines[1].split(',').size(), 2 + m->columnCount());
        QCOMPARE(lines[1].split(',')[2].toFloat(), m->index(0, 0).data(LinearStateModel::ValueRole).toFloat());
        // A further turn adds columns without resetting the model (the view keeps its place).
        QSignalSpy reset(m, &QAbstractItemModel::modelReset);
        QSignalSpy inserted(m, &QAbstractItemModel::columnsInserted);
        const int before = m->columnCount();
        QVERIFY(send_and_wait(*window_, QStringLiteral("5, 6"), 3));
        view->refresh();
        QVERIFY(m->columnCount() > before);
        QCOMPARE(reset.count(), 0);
        QVERIFY(inserted.count() >= 1);
    }

    // The profiler splits each linear layer's mixer into its steps: every step timed, together within the layer's
    // token-mixer time; full-attention rows blank; a plain model has no step columns.
    void profiler_splits_linear_layers() {
        QVERIFY(open(hybrid_));
        QVERIFY(send_and_wait(*window_, QStringLiteral("1, 2, 3, 4, 5, 6, 7, 8"), 6));
        ProfilerView* profiler = window_->profiler_view();
        profiler->refresh();
        LayerProfileModel* layers = profiler->layer_model();
        const int first = layers->first_step_column();
        QCOMPARE(layers->columnCount(), first + int(kDeltaNetSteps));
        QCOMPARE(layers->headerData(first + 3, Qt::Horizontal).toString(), QStringLiteral("delta rule µs"));
        const ModelSummary& summary = window_->chat()->model();
        QCOMPARE(layers->rowCount(), summary.layers);
        for (int r = 0; r < layers->rowCount(); ++r) {
            const int layer = layers->totals().layers[size_t(r)];
            double sum = 0;
            for (size_t s = 0; s < kDeltaNetSteps; ++s) {
                const double us = layers->mean_step_us(r, DeltaNetStep(s));
                QVERIFY2((us > 0) == summary.is_linear(layer), qPrintable(QString("layer %1 step %2: %3 µs").arg(layer).arg(s).arg(us)));
                QCOMPARE(layers->index(r, first + int(s)).data().isValid(), summary.is_linear(layer));
                sum += us;
            }
            QVERIFY(sum <= layers->mean_us(r, LayerProfileModel::Attention) + 1e-3);
        }
        QVERIFY(open(QStringLiteral(COLIBRI_UI_TEST_MODEL)));
        QCOMPARE(layers->columnCount(), layers->first_step_column());
    }

    // A model without linear layers: the note, no strip, no rows; the heatmap's rows name no kind.
    void plain_model_gets_the_note() {
        QVERIFY(open(QStringLiteral(COLIBRI_UI_TEST_MODEL)));
        StateView* view = window_->state_view();
        QVERIFY(!view->hybrid());
        QVERIFY(view->layer_strip()->isHidden());
        QCOMPARE(view->state_model()->rowCount(), 0);
        QVERIFY(send_and_wait(*window_, QStringLiteral("Hello"), 2));
        view->refresh();
        QCOMPARE(view->state_model()->columnCount(), 0);
        window_->heatmap_view()->refresh();
        QCOMPARE(window_->heatmap_view()->heatmap_model()->headerData(0, Qt::Vertical).toString(), QStringLiteral("layer 0"));
    }

    // 256 experts: each heatmap column sums the experts of its bin (the per-expert CSV unchanged); "fit width"
    // picks the fewest experts per column (a power of two) whose columns fit the table, which then fill it; the
    // router chart shows the 32 most likely experts in descending order with their probabilities; the legend
    // lists no more than 24 experts.
    void many_experts_stay_readable() {
        const QString hf = dir_.filePath(QStringLiteral("e256-hf")), path = dir_.filePath(QStringLiteral("e256.bin"));
        QVERIFY(make_model(hf, {"--family", "qwen2_moe", "--vocab", "512", "--hidden", "64", "--layers", "2", "--heads", "2",
                                "--kv-heads", "1", "--experts", "256", "--top-k", "8", "--ffn", "8", "--shared-ffn", "16"}));
        QCOMPARE(run_cli({"convert", hf, "-o", path, "-q"}).exit_code, 0);
        QVERIFY(open(path));
        QVERIFY(send_and_wait(*window_, QStringLiteral("1, 2, 3, 4, 5, 6, 7, 8, 9, 10"), 12));
        HeatmapView* view = window_->heatmap_view();
        window_->dock_of(view)->raise();
        QTest::qWait(20);
        HeatmapModel* m = view->heatmap_model();
        view->set_bin(1);
        view->refresh();
        QCOMPARE(m->columnCount(), 256);
        std::vector<std::vector<int>> single(size_t(m->rowCount()));
        for (int r = 0; r < m->rowCount(); ++r)
            for (int c = 0; c < 256; ++c) single[size_t(r)].push_back(m->index(r, c).data().toInt());
        view->set_bin(8);
        QCOMPARE(m->columnCount(), 32);
        QCOMPARE(m->headerData(31, Qt::Horizontal).toString(), QStringLiteral("248–255"));
        int max = 0;
        for (int r = 0; r < m->rowCount(); ++r)
            for (int c = 0; c < 32; ++c) {
                int want = 0;
                for (int e = 8 * c; e < 8 * c + 8; ++e) want += single[size_t(r)][size_t(e)];
                QCOMPARE(m->index(r, c).data().toInt(), want);
                max = std::max(max, want);
            }
        QCOMPARE(m->max_cell(), max);
        QVERIFY(m->to_csv().startsWith(QStringLiteral("layer,E0,E1,E2,")));
        QCOMPARE(m->to_csv().split('\n')[0].count(','), 256);
        view->set_bin(0);
        const int width = view->table()->viewport()->width(), section = view->table()->horizontalHeader()->defaultSectionSize();
        const auto columns = [](int bin) { return (256 + bin - 1) / bin; };
        QVERIFY(m->bin() > 1);  // 256 columns of 34 pixels fit no screen
        QCOMPARE(m->columnCount(), columns(m->bin()));
        QVERIFY2(section >= view->min_section(m->bin()) && m->columnCount() * section <= width,
                 qPrintable(QString("bin %1, section %2, width %3").arg(m->bin()).arg(section).arg(width)));
        QVERIFY(columns(m->bin() / 2) * view->min_section(m->bin() / 2) > width);  // the fewest per column that fit
        // Every column is wide enough for its label in the header's face.
        const QFontMetrics metrics(view->table()->horizontalHeader()->font());
        // The header draws a label within its section less the style's margin on either side (QStyle::SE_HeaderLabel).
        QHeaderView* header = view->table()->horizontalHeader();
        const int margins = 2 * header->style()->pixelMetric(QStyle::PM_HeaderMargin, nullptr, header);
        for (int c = 0; c < m->columnCount(); ++c)
            QVERIFY2(metrics.horizontalAdvance(m->headerData(c, Qt::Horizontal).toString()) + margins <= section,
                     qPrintable(QString("%1 in %2 px").arg(m->headerData(c, Qt::Horizontal).toString()).arg(section)));
        // A narrower table fits more experts per column.
        QCOMPARE(view->fit(256 * HeatmapView::kCellWidth).first, 1);
        QVERIFY(view->fit(width / 2).first > m->bin());

        RoutingView* routing = window_->routing_view();
        window_->conversation()->select(3);
        routing->refresh();
        const QList<qreal> bars = routing->chart_values();
        const QStringList names = routing->chart_categories();
        QCOMPARE(bars.size(), RoutingView::kChartedExperts);
        const LayerRouting* r = routing->table_model()->routing(0);
        QVERIFY(r != nullptr);
        std::vector<float> sorted(r->probs);
        std::sort(sorted.begin(), sorted.end(), std::greater<>());
        for (int i = 0; i < bars.size(); ++i) {
            QCOMPARE(float(bars[i]), sorted[size_t(i)]);
            QCOMPARE(float(bars[i]), r->probs[size_t(names[i].mid(1).toInt())]);
        }
        QCOMPARE(names[0], QStringLiteral("E%1").arg(r->experts.front()));
        QVERIFY(routing->legend_text().count(QStringLiteral("<span")) <= RoutingView::kLegendExperts);
        QVERIFY(routing->legend_text().contains(QStringLiteral("of 256 experts come first here")));

        // With a RAM budget the cache map wraps each layer's 256 experts into rows that fit: every cell is the
        // snapshot's cell of (layer, row offset + column), and the rows say their offsets.
        LoadOptions budgeted;
        budgeted.ram_budget.bytes = budget_for(path.toStdString(), 64);
        QSignalSpy loaded(window_.get(), &MainWindow::modelLoaded);
        window_->open_model(path, budgeted);
        QVERIFY(wait_for(loaded, 1));
        QVERIFY(send_and_wait(*window_, QStringLiteral("1, 2, 3, 4, 5, 6, 7, 8, 9, 10"), 12));
        CacheView* cache = window_->cache_view();
        window_->dock_of(cache)->raise();
        QTest::qWait(20);
        cache->refresh();
        CacheMapModel* map = cache->map_model();
        QVERIFY(map->state() != nullptr);
        const int wrap = map->wrap();
        QVERIFY2(wrap == 16 || wrap == 32 || wrap == 64, qPrintable(QString::number(wrap)));
        QCOMPARE(map->columnCount(), wrap);
        QCOMPARE(map->rowCount(), 2 * 256 / wrap);
        QCOMPARE(map->headerData(1, Qt::Vertical).toString(), QStringLiteral("+%1").arg(wrap));
        for (int r = 0; r < map->rowCount(); ++r)
            for (int c = 0; c < wrap; ++c) {
                const int li = r / (256 / wrap), e = (r % (256 / wrap)) * wrap + c;
                QCOMPARE(map->index(r, c).data(CacheMapModel::CellRole).toInt(), int(map->state()->cell[map->state()->index(li, e)]));
            }
    }
};

QTEST_MAIN(TestState)
#include "test_ui_state.moc"
