// Every item model of the Studio under QAbstractItemModelTester (fatal mode), filled with real data: a
// conversation generated on the reference Mixtral, its file layout, and tune reports written here.
#include <QAbstractItemModelTester>
#include <QSortFilterProxyModel>

#include "ui/chat_controller.h"
#include "ui/conversation.h"
#include "ui/engine_worker.h"
#include "ui/file_worker.h"
#include "ui/models/heatmap_model.h"
#include "ui/models/kernel_comparison_model.h"
#include "ui/data/kernel_results.h"
#include "ui/models/kernel_results_model.h"
#include "ui/models/table_model.h"
#include "ui/models/model_summary.h"
#include "ui/models/profiler_models.h"
#include "ui/models/rank_model.h"
#include "ui/models/routing_table_model.h"
#include "ui/models/stats_table_model.h"
#include "ui/models/validator_models.h"
#include "ui/colors.h"
#include "ui/rank_stats.h"
#include "ui/routing_stats.h"
#include "ui/trace_stats.h"
#include "ui/data/tune_report.h"
#include "ui/worker_thread.h"
#include "ui_test_support.h"

using namespace colibri;
using namespace colibri::studio;
using namespace colibri::test;

namespace {

constexpr auto kFatal = QAbstractItemModelTester::FailureReportingMode::Fatal;

QByteArray tune_json(const QString& cpu, const QStringList& variants, double scale) {
    QJsonArray results;
    for (const char* type : {"f16", "q8_0"})
        for (const QString& v : variants)
            for (int rows : {4096, 14336}) {
                const double ns = 1e5 * rows / 4096.0 / scale / (v == QLatin1String("scalar") ? 1.0 : 4.0);
                results.append(QJsonObject{{"op", "matvec"}, {"type", type}, {"rows", rows}, {"cols", 4096},
                                           {"variant", v}, {"ns_median", ns}, {"gflops", 2.0 * rows * 4096 / ns},
                                           {"gbps", 2.0 * rows * 4096 / ns}, {"chosen", v == variants.back()}});
            }
    return QJsonDocument(QJsonObject{{"colibri_version", "0.1.0"},
                                     {"cpu", QJsonObject{{"model", cpu}, {"features", QJsonArray{"sse4.2"}}}},
                                     {"results", results}})
        .toJson();
}

}  // namespace

class TestModels : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    QString mixtral_;
    EngineWorker* worker_ = nullptr;
    std::unique_ptr<WorkerThread> thread_;
    Conversation conversation_;
    ChatController* chat_ = nullptr;
    ModelSummary summary_;
    CounterSet counters_;

private slots:
    void initTestCase() {
        mixtral_ = convert_reference(dir_, QStringLiteral("mixtral"));
        QVERIFY(!mixtral_.isEmpty());
        worker_ = new EngineWorker;
        thread_ = std::make_unique<WorkerThread>(worker_, QStringLiteral("engine"), [w = worker_] { w->requestStop(); });
        chat_ = new ChatController(worker_, &conversation_, this);
        QSignalSpy loaded(worker_, &EngineWorker::loaded);
        worker_->load(mixtral_);
        QVERIFY(wait_for(loaded, 1));
        summary_ = loaded.at(0).at(0).value<ModelSummary>();
        counters_ = loaded.at(0).at(1).value<CounterSet>();
        chat_->set_model(summary_);
        // A model without a tokenizer is driven by ids: the reference prompt, then 6 greedy tokens.
        ChatSettings greedy;
        greedy.sampling.greedy = true;
        greedy.random_seed = false;
        greedy.max_tokens = 6;
        QSignalSpy finished(chat_, &ChatController::finished);
        QVERIFY(chat_->send(join_ids(reference_input_ids(QStringLiteral("mixtral"))), greedy).is_ok());
        QVERIFY(wait_for(finished, 1));
        QCOMPARE(conversation_.size(), 22);
        QCOMPARE(conversation_.evaluated_count(), 22);
    }

    void cleanupTestCase() { thread_.reset(); }

    void model_summary() {
        ModelSummaryModel m;
        QAbstractItemModelTester tester(&m, kFatal);
        m.set_summary(summary_);
        QCOMPARE(m.columnCount(), 2);
        QCOMPARE(m.value(QStringLiteral("family")), QStringLiteral("mixtral"));
        QCOMPARE(m.value(QStringLiteral("experts")), QStringLiteral("8"));
        QCOMPARE(m.value(QStringLiteral("active experts")), QStringLiteral("2"));
        QCOMPARE(m.value(QStringLiteral("tokenizer")), QStringLiteral("none"));
        QVERIFY(m.value(QStringLiteral("weight types")).startsWith(QStringLiteral("f32 ")));
        m.clear();
        QCOMPARE(m.rowCount(), 0);
    }

    void routing_table() {
        RoutingTableModel m;
        QAbstractItemModelTester tester(&m, kFatal);
        for (const ConversationToken& t : conversation_.tokens()) {
            m.set_token(&t, summary_.active_experts);
            QCOMPARE(m.rowCount(), 2);
            QCOMPARE(m.columnCount(), 2 + 2);
            for (int row = 0; row < 2; ++row) {
                const LayerRouting& r = t.trace.routing[static_cast<size_t>(row)];
                QCOMPARE(m.index(row, 1).data(RoutingTableModel::ExpertRole).toInt(), r.experts[0]);
                QCOMPARE(m.index(row, 2).data(RoutingTableModel::ExpertRole).toInt(), r.experts[1]);
                QCOMPARE(m.index(row, m.distribution_column()).data(RoutingTableModel::ProbsRole).value<QList<float>>().size(), 8);
            }
        }
        m.set_token(nullptr, summary_.active_experts);
        QCOMPARE(m.rowCount(), 0);
    }

    void heatmap_and_balance() {
        HeatmapModel heat;
        BalanceModel balance;
        QAbstractItemModelTester t1(&heat, kFatal), t2(&balance, kFatal);
        const ExpertUsage all = expert_usage(conversation_, TokenSpan{}, summary_.experts);
        heat.set_usage(all);
        balance.set_usage(all);
        QCOMPARE(heat.rowCount(), 2);
        QCOMPARE(heat.columnCount(), 8);
        int sum = 0;
        for (int r = 0; r < heat.rowCount(); ++r)
            for (int c = 0; c < heat.columnCount(); ++c) sum += heat.index(r, c).data(HeatmapModel::CountRole).toInt();
        QCOMPARE(sum, 22 * 2 * 2);
        // Same shape (updated in place), then another shape (reset).
        heat.set_usage(expert_usage(conversation_, TokenSpan{16, -1, true}, summary_.experts));
        heat.set_usage(ExpertUsage{});
        QCOMPARE(heat.rowCount(), 0);
        QCOMPARE(balance.rowCount(), 2);
        QCOMPARE(balance.index(0, BalanceModel::Selections).data(Qt::EditRole).toInt(), 44);
    }

    void profiler() {
        LayerProfileModel layers;
        ExpertCounterModel experts;
        QAbstractItemModelTester t1(&layers, kFatal), t2(&experts, kFatal);
        QSortFilterProxyModel sorted;
        sorted.setSourceModel(&experts);
        QAbstractItemModelTester t3(&sorted, kFatal);
        layers.set_counter_names(counters_.names);
        experts.set_counter_names(counters_.names);
        const ProfileTotals totals = profile_totals(conversation_, TokenSpan{}, static_cast<int>(counters_.names.size()));
        layers.set_totals(totals);
        experts.set_totals(totals);
        sorted.sort(ExpertCounterModel::Activations, Qt::DescendingOrder);
        QCOMPARE(layers.rowCount(), 2);
        QCOMPARE(layers.columnCount(), LayerProfileModel::FirstCounter + static_cast<int>(counters_.names.size()));
        int activations = 0;
        for (int r = 0; r < experts.rowCount(); ++r) activations += experts.index(r, ExpertCounterModel::Activations).data().toInt();
        QCOMPARE(activations, 22 * 2 * 2);
        QVERIFY(layers.mean_us(0, LayerProfileModel::Total) > 0);
    }

    // A server across ranks: five positions whose two MoE layers carry rank timings (rank 1 three times rank 0's
    // time), and one whose timings are for another rank count (left out). Per layer the medians, the slowest rank,
    // the exchange and the bytes; a column per rank, headed by its colour; other rank counts change the columns.
    void rank_times() {
        Conversation c;
        c.add_user_message(QStringLiteral("Q"));
        c.begin_pass(0);
        for (int p = 0; p < 6; ++p) {
            TokenTrace t;
            t.position = p;
            t.token = p + 1;
            t.text = QStringLiteral("x");
            t.step_ns = 10000;
            for (int layer = 0; layer < 2; ++layer) {
                LayerProfile l;
                l.layer = layer;
                l.attention_ns = 1000;
                l.router_ns = 100;
                l.experts_ns = 900;
                t.layers.push_back(l);
                LayerRanks r;
                r.layer = layer;
                r.experts_ns = p < 5 ? std::vector<uint64_t>{100u * (p + 1), 300u * (p + 1)} : std::vector<uint64_t>{1, 2, 3};
                r.exchange_ns = 50;
                r.bytes = 512;
                r.bytes_sent = r.bytes_received = 256;
                t.ranks.push_back(r);
            }
            c.add_trace(t);
        }
        c.finish_pass(6);
        const RankTotals totals = rank_totals(c, TokenSpan{}, 2);
        QCOMPARE(totals.tokens, 5);
        QCOMPARE(totals.layers.size(), size_t(2));
        QCOMPARE(totals.bytes_per_token, 1024.0);
        QCOMPARE(totals.exchange_share, 0.01);
        QCOMPARE(totals.slowest, 1);
        QCOMPARE(totals.slowest_layers, 2);
        QCOMPARE(totals.slowest_over_fastest, 3.0);
        QCOMPARE(rank_totals(c, TokenSpan{}, 1).tokens, 0);  // one rank: nothing to show

        RankTimeModel m;
        QAbstractItemModelTester tester(&m, kFatal);
        QSortFilterProxyModel sorted;
        sorted.setSourceModel(&m);
        sorted.setSortRole(Qt::EditRole);
        QAbstractItemModelTester t2(&sorted, kFatal);
        m.set_totals(totals);
        sorted.sort(RankTimeModel::Layer, Qt::DescendingOrder);
        QCOMPARE(m.rowCount(), 2);
        QCOMPARE(m.columnCount(), 1 + 2 + 3);
        QCOMPARE(m.index(0, RankTimeModel::FirstRank).data(Qt::EditRole).toDouble(), 0.3);  // median of 100..500 ns
        QCOMPARE(m.index(0, RankTimeModel::FirstRank + 1).data(Qt::EditRole).toDouble(), 0.9);
        QCOMPARE(m.index(1, m.slowest_column()).data().toString(), QStringLiteral("rank 1"));
        QCOMPARE(m.index(1, m.exchange_column()).data(Qt::EditRole).toDouble(), 0.05);
        QCOMPARE(m.index(1, m.bytes_column()).data().toString(), QStringLiteral("512 B"));
        QVERIFY(m.index(0, RankTimeModel::FirstRank + 1).data(Qt::FontRole).value<QFont>().bold());
        QVERIFY(!m.index(0, RankTimeModel::FirstRank).data(Qt::FontRole).isValid());
        const QIcon swatch = m.headerData(RankTimeModel::FirstRank + 1, Qt::Horizontal, Qt::DecorationRole).value<QIcon>();
        QCOMPARE(swatch.pixmap(10, 10).toImage().pixelColor(5, 5), rank_color(1));
        QCOMPARE(sorted.index(0, RankTimeModel::Layer).data().toInt(), 1);
        RankTotals three = totals;
        three.ranks = 3;
        for (RankLayerStats& l : three.layers) l.experts_us.push_back(0.1);
        m.set_totals(three);
        QCOMPARE(m.columnCount(), 1 + 3 + 3);
        m.set_totals(RankTotals{});
        QCOMPARE(m.rowCount(), 0);
        QCOMPARE(m.columnCount(), 1 + 3);
    }

    // The heatmap by rank: a cell takes its experts' rank's colour, a replicated expert or a bin across ranks none.
    void heatmap_by_rank() {
        HeatmapModel heat;
        QAbstractItemModelTester tester(&heat, kFatal);
        heat.set_usage(expert_usage(conversation_, TokenSpan{}, summary_.experts));
        RankPlacement placement;
        placement.ranks = 2;
        QVector<QVector<int>> layer0, layer1;
        for (int e = 0; e < 8; ++e) {
            layer0.push_back(e == 0 ? QVector<int>{0, 1} : QVector<int>{e % 2});
            layer1.push_back(QVector<int>{e < 4 ? 0 : 1});
        }
        placement.holders.insert(0, layer0);
        placement.holders.insert(1, layer1);
        const QColor heat_colour = heat.index(0, 3).data(Qt::BackgroundRole).value<QColor>();
        heat.set_placement(placement);
        QVERIFY(!heat.by_rank());
        QCOMPARE(heat.index(0, 3).data(Qt::BackgroundRole).value<QColor>(), heat_colour);
        heat.set_by_rank(true);
        QVERIFY(heat.by_rank());
        QCOMPARE(heat.index(0, 3).data(HeatmapModel::RankRole).toInt(), 1);
        QCOMPARE(heat.index(0, 0).data(HeatmapModel::RankRole).toInt(), -1);
        QVERIFY(heat.index(0, 0).data(HeatmapModel::ReplicatedRole).toBool());
        QVERIFY(!heat.index(0, 3).data(HeatmapModel::ReplicatedRole).toBool());
        QVERIFY(heat.index(0, 0).data(Qt::ToolTipRole).toString().contains(QStringLiteral("replicated on ranks 0, 1")));
        // Rank 1's hue, pale or full by the count: nearer rank 1's colour than rank 0's.
        const QColor c = heat.index(0, 3).data(Qt::BackgroundRole).value<QColor>();
        auto distance = [](const QColor& a, const QColor& b) {
            return std::abs(a.red() - b.red()) + std::abs(a.green() - b.green()) + std::abs(a.blue() - b.blue());
        };
        QVERIFY(distance(c, blend(QColor(250, 250, 250), rank_color(1), 0.5)) < distance(c, blend(QColor(250, 250, 250), rank_color(0), 0.5)));
        heat.set_bin(4);  // layer 1's bins each on one rank, layer 0's first bin across both
        QCOMPARE(heat.index(1, 0).data(HeatmapModel::RankRole).toInt(), 0);
        QCOMPARE(heat.index(1, 1).data(HeatmapModel::RankRole).toInt(), 1);
        QCOMPARE(heat.index(0, 1).data(HeatmapModel::RankRole).toInt(), -1);
        QVERIFY(heat.index(0, 1).data(Qt::ToolTipRole).toString().contains(QStringLiteral("on ranks 0, 1")));
        heat.set_placement(RankPlacement{});  // one process: the heat scale again
        QVERIFY(!heat.by_rank());
        QCOMPARE(heat.index(0, 0).data(HeatmapModel::RankRole).toInt(), -1);
    }

    // Every evaluated position is a row, and its stages add up to its total (other is what is left).
    void token_times() {
        TokenTimeModel m;
        QAbstractItemModelTester tester(&m, kFatal);
        QSortFilterProxyModel sorted;
        sorted.setSourceModel(&m);
        sorted.setSortRole(Qt::EditRole);
        QAbstractItemModelTester t2(&sorted, kFatal);
        m.set_tokens(conversation_, TokenSpan{});
        sorted.sort(TokenTimeModel::Total, Qt::DescendingOrder);
        QCOMPARE(m.rowCount(), 22);
        QCOMPARE(m.columnCount(), static_cast<int>(TokenTimeModel::ColumnCount));
        for (int r = 0; r < m.rowCount(); ++r) {
            QCOMPARE(m.index(r, TokenTimeModel::Position).data().toInt(), r);
            double parts = 0;
            for (int c : {TokenTimeModel::Attention, TokenTimeModel::Router, TokenTimeModel::Experts, TokenTimeModel::LmHead,
                          TokenTimeModel::Sampling, TokenTimeModel::Counters, TokenTimeModel::Other})
                parts += m.us(r, c);
            QVERIFY(std::abs(parts - m.us(r, TokenTimeModel::Total)) < 1e-6 * m.us(r, TokenTimeModel::Total) + 1e-3);
            QVERIFY(m.us(r, TokenTimeModel::Total) > 0);
            QCOMPARE(m.index(r, TokenTimeModel::Kind).data().toString(), r >= 16 ? QStringLiteral("generated") : QStringLiteral("prompt"));
            if (r >= 16) QVERIFY(m.us(r, TokenTimeModel::Sampling) > 0);  // the sampler ran for generated tokens
        }
        // The last prompt token computed the logits of the first generated one: it carries the lm head.
        QVERIFY(m.us(15, TokenTimeModel::LmHead) > 0);
        m.set_tokens(conversation_, TokenSpan{0, -1, true});
        QCOMPARE(m.rowCount(), 6);
    }

    void kernel_comparison() {
        KernelComparisonModel m;
        QAbstractItemModelTester tester(&m, kFatal);
        KernelComparison c;
        c.model = QStringLiteral("demo.bin");
        // tools::KernelRun, as tools::compare_kernels fills it: per repetition tokens/s, per layer its stages.
        auto run = [](kernels::Variant v, std::vector<double> prompt, std::vector<double> decode, std::vector<tools::LayerTimes> layers,
                      double lm_head_us, double token_us) {
            KernelRun r;
            r.variant = v;
            r.report.prompt_tps = tools::Spread::of(std::move(prompt));
            r.report.decode_tps = tools::Spread::of(std::move(decode));
            r.report.decode_layers = std::move(layers);
            r.report.decode_lm_head_us = lm_head_us;
            r.report.decode_token_us = token_us;
            r.decoded = {1, 2, 3};
            return r;
        };
        c.runs.push_back(run(kernels::Variant::Scalar, {10, 12, 11}, {5, 6, 7}, {{0, 60, 10, 30, 0}, {1, 70, 10, 30, 0}}, 30, 250));
        c.runs.push_back(run(kernels::Variant::Avx2, {40}, {20}, {{0, 12, 2, 6, 0}, {1, 12, 4, 6, 0}}, 6, 50));
        m.set_comparison(c);
        QCOMPARE(m.rowCount(), 2);
        QCOMPARE(m.index(0, KernelComparisonModel::DecodeTps).data(Qt::EditRole).toDouble(), 6.0);  // the median
        QCOMPARE(m.index(1, KernelComparisonModel::Speedup).data().toString(), QStringLiteral("×3.33"));
        QCOMPARE(m.index(1, KernelComparisonModel::LayersUs).data(Qt::EditRole).toDouble(), 42.0);
        QCOMPARE(m.index(1, KernelComparisonModel::SameOutput).data().toString(), QStringLiteral("yes"));
        QVERIFY(c.identical_output());
        // Round trip through the stored JSON, and the CSV's header and rows.
        auto back = KernelComparison::from_json(c.to_json());
        QVERIFY(back.is_ok());
        QCOMPARE(back->runs.size(), size_t(2));
        QCOMPARE(back->runs[0].report.decode_tps.samples, c.runs[0].report.decode_tps.samples);
        QCOMPARE(back->runs[1].report.decode_layers[1].router_us, 4.0);  // the stages are kept beside the totals
        QCOMPARE(back->runs[1].report.decode_layers[1].total_us(), 22.0);
        // A store written before the stages were kept (layer totals only) still reads, its totals unchanged.
        QJsonObject old_store = c.to_json();
        QJsonArray old_runs = old_store["runs"].toArray();
        for (qsizetype i = 0; i < old_runs.size(); ++i) {
            QJsonObject r = old_runs[i].toObject();
            r.remove(QStringLiteral("layer_stages_us"));
            old_runs[i] = r;
        }
        old_store["runs"] = old_runs;
        auto old_back = KernelComparison::from_json(old_store);
        QVERIFY(old_back.is_ok());
        QCOMPARE(old_back->runs[1].report.decode_layers[1].total_us(), 22.0);
        QCOMPARE(old_back->runs[1].report.decode_layers[1].router_us, 0.0);
        // A variant no build knows is refused, naming it.
        QJsonObject unknown = c.to_json();
        QJsonArray unknown_runs = unknown["runs"].toArray();
        QJsonObject first_run = unknown_runs[0].toObject();
        first_run["variant"] = QStringLiteral("sse9");
        unknown_runs[0] = first_run;
        unknown["runs"] = unknown_runs;
        const auto refused = KernelComparison::from_json(unknown);
        QVERIFY(!refused.is_ok() && refused.message().find("'sse9'") != std::string::npos);
        const QStringList csv = c.csv().split('\n', Qt::SkipEmptyParts);
        QCOMPARE(csv.size(), 3);
        QCOMPARE(csv[0], QStringLiteral("variant,prompt_tokens_per_s,decode_tokens_per_s,layer0_us,layer1_us,lm_head_us,token_us,"
                                    "prompt_min,prompt_max,decode_min,decode_max"));
        QVERIFY(csv[2].startsWith(QStringLiteral("avx2,40.00,20.00,20.00,22.00,6.00,50.00")));
        c.runs[1].decoded = {1, 2, 4};
        m.set_comparison(c);
        QCOMPARE(m.index(1, KernelComparisonModel::SameOutput).data().toString(), QStringLiteral("NO"));
        m.set_comparison({});
        QCOMPARE(m.rowCount(), 0);
    }

    // The routing analyses' table, filled from this conversation's co-activation matrix.
    void stats_table() {
        StatsTableModel m;
        QAbstractItemModelTester tester(&m, kFatal);
        QSortFilterProxyModel sorted;
        sorted.setSourceModel(&m);
        sorted.setSortRole(Qt::EditRole);
        QAbstractItemModelTester t2(&sorted, kFatal);
        std::vector<TokenTrace> traces;
        for (const ConversationToken& t : conversation_.tokens()) traces.push_back(t.trace);
        const std::vector<CoActivation> co = co_activation(traces, 8);
        QCOMPARE(co.size(), size_t(2));
        QVector<QVector<StatsTableModel::Cell>> rows;
        int diagonal = 0;
        for (int i = 0; i < 8; ++i) {
            QVector<StatsTableModel::Cell> row;
            for (int j = 0; j < 8; ++j) row.push_back({co[0].at(i, j), i == j ? QColor() : QColor(Qt::yellow), {}});
            diagonal += co[0].at(i, i);
            rows.push_back(row);
        }
        QCOMPARE(diagonal, 22 * 2);  // every token chose two experts at layer 0
        m.set_table({"E0", "E1", "E2", "E3", "E4", "E5", "E6", "E7"}, QVector<StatsTableModel::Format>(8, StatsTableModel::Format::Integer), rows);
        sorted.sort(0, Qt::DescendingOrder);
        QCOMPARE(m.rowCount(), 8);
        QCOMPARE(m.index(1, 1).data(Qt::EditRole).toInt(), co[0].at(1, 1));
        QCOMPARE(m.index(0, 1).data(Qt::BackgroundRole).value<QColor>(), QColor(Qt::yellow));
        m.set_table({"share"}, {StatsTableModel::Format::Percent}, {{{0.125}}});
        QCOMPARE(m.index(0, 0).data().toString(), QStringLiteral("12.5 %"));
        m.clear();
        QCOMPARE(m.rowCount(), 0);
    }

    void kernel_results() {
        KernelResultsModel m;
        QAbstractItemModelTester tester(&m, kFatal);
        QSortFilterProxyModel filter;
        filter.setSourceModel(&m);
        filter.setFilterKeyColumn(-1);
        QAbstractItemModelTester t2(&filter, kFatal);
        auto x86 = parse_tune_report(tune_json(QStringLiteral("x86 box"), {"scalar", "avx2", "avx512"}, 1.0), QStringLiteral("x86.json"));
        auto arm = parse_tune_report(tune_json(QStringLiteral("ARM board"), {"scalar", "neon"}, 0.5), QStringLiteral("arm.json"));
        QVERIFY(x86.is_ok() && arm.is_ok());
        m.add_report(x86.value());
        m.add_report(arm.value());
        QCOMPARE(m.rowCount(), 2 * 3 * 2 + 2 * 2 * 2);
        filter.setFilterFixedString(QStringLiteral("neon"));
        QCOMPARE(filter.rowCount(), 4);
        m.remove_report(0);
        QCOMPARE(m.rowCount(), 8);
        m.clear();
        QCOMPARE(m.rowCount(), 0);
    }

    // The tables' base: a model declares its columns once and the base answers every role from them.
    void table_model_base() {
        struct Rows final : TableModel {
            std::vector<std::pair<QString, double>> data{{QStringLiteral("b"), 2.5}, {QStringLiteral("a"), 10.04}};
            Rows() {
                set_columns({text(QStringLiteral("name"), [this](int r) { return QVariant(data[static_cast<size_t>(r)].first); }),
                             number(QStringLiteral("value"), [this](int r) { return data[static_cast<size_t>(r)].second; }, 1),
                             {QStringLiteral("tipped"), [](int) { return QVariant(QStringLiteral("x")); }, {}, Qt::AlignCenter,
                              [](int r) { return QVariant(QStringLiteral("row %1").arg(r)); }}});
            }
            int rows() const override { return static_cast<int>(data.size()); }
            QVariant other_data(int r, int, int role) const override { return role == Qt::UserRole ? QVariant(r * 10) : QVariant(); }
        } m;
        QAbstractItemModelTester tester(&m, kFatal);
        QCOMPARE(m.rowCount(), 2);
        QCOMPARE(m.columnCount(), 3);
        QCOMPARE(m.headerData(1, Qt::Horizontal).toString(), QStringLiteral("value"));
        QVERIFY(!m.headerData(0, Qt::Vertical).isValid());
        QCOMPARE(m.index(1, 1).data().toString(), QStringLiteral("10.0"));  // shown with its decimals
        QCOMPARE(m.index(1, 1).data(Qt::EditRole).toDouble(), 10.04);       // sorted by the number
        QCOMPARE(m.index(0, 0).data(Qt::EditRole).toString(), QStringLiteral("b"));  // no sort value: the shown one
        QCOMPARE(m.index(0, 0).data(Qt::TextAlignmentRole).toInt(), int(Qt::AlignLeft | Qt::AlignVCenter));
        QCOMPARE(m.index(0, 1).data(Qt::TextAlignmentRole).toInt(), int(Qt::AlignRight | Qt::AlignVCenter));
        QCOMPARE(m.index(1, 2).data(Qt::ToolTipRole).toString(), QStringLiteral("row 1"));
        QVERIFY(!m.index(1, 1).data(Qt::ToolTipRole).isValid());
        QCOMPARE(m.index(1, 0).data(Qt::UserRole).toInt(), 10);  // other roles: the model's own
        QSortFilterProxyModel sorted;
        sorted.setSourceModel(&m);
        sorted.setSortRole(Qt::EditRole);
        sorted.sort(1, Qt::DescendingOrder);
        QCOMPARE(sorted.index(0, 0).data().toString(), QStringLiteral("a"));
    }

    // The kernel results the Kernels view shows live outside it: kept in a store, read back, exported.
    void kernel_results_store() {
        const QString store = dir_.filePath(QStringLiteral("results/kernel-results.json"));
        KernelComparison c;
        c.model = QStringLiteral("demo.bin");
        c.when = QStringLiteral("2026-12-06T12:00:00");
        KernelRun run;
        run.variant = kernels::Variant::Scalar;
        run.report.decode_tps = tools::Spread::of({5, 6});
        run.report.decode_layers = {{0, 1, 2, 3, 0}};
        run.decoded = {1, 2};
        c.runs.push_back(run);
        auto report = parse_tune_report(tune_json(QStringLiteral("x86 box"), {"scalar", "avx2"}, 1.0), QStringLiteral("this machine"));
        QVERIFY(report.is_ok());
        {
            KernelResults results;
            results.set_store(store);  // nothing there yet: empty
            QVERIFY(results.comparisons().empty() && results.own_reports().empty());
            results.add_comparison(c);
            const TuneReport& kept = results.add_own_report(report.value());
            QVERIFY(kept.source.startsWith(QStringLiteral("this machine, ")));  // the time keeps runs apart
            QVERIFY(QFileInfo::exists(store));
        }
        KernelResults again;
        again.set_store(store);
        QCOMPARE(again.comparisons().size(), size_t(1));
        QCOMPARE(again.comparisons().front().runs.front().decoded, run.decoded);
        QCOMPARE(again.own_reports().size(), size_t(1));
        QCOMPARE(again.own_reports().front().results.size(), report->results.size());
        const QString csv = again.csv();
        QVERIFY2(csv.startsWith(QStringLiteral("# demo.bin, , 0 threads, 2026-12-06T12:00:00\nvariant,prompt_tokens_per_s,decode_tokens_per_s,layer0_us")),
                 qPrintable(csv));
        again.remove_own_report(again.own_reports().front().source);
        QVERIFY(again.own_reports().empty());
        KernelResults third;
        third.set_store(store);  // the removal was written back
        QVERIFY(third.own_reports().empty());
        QCOMPARE(third.comparisons().size(), size_t(1));
        // A file that is not a store is an empty one, and stays untouched until something is kept.
        const QString foreign = write_all(dir_.filePath(QStringLiteral("foreign.json")), R"({"format":"something else"})");
        KernelResults other;
        other.set_store(foreign);
        QVERIFY(other.comparisons().empty());
        QCOMPARE(read_all(foreign), QByteArray(R"({"format":"something else"})"));
    }

    void tensor_table() {
        TensorTableModel m;
        QAbstractItemModelTester tester(&m, kFatal);
        QSortFilterProxyModel filter;
        filter.setSourceModel(&m);
        filter.setSortRole(Qt::EditRole);
        QAbstractItemModelTester t2(&filter, kFatal);
        const FileLayout layout = read_layout(mixtral_);
        QVERIFY(layout.error.isEmpty());
        m.set_layout(layout);
        QCOMPARE(m.rowCount(), static_cast<int>(layout.tensors.size()));
        filter.sort(TensorTableModel::Size, Qt::DescendingOrder);
        quint64 largest = 0;
        for (const TensorInfo& t : layout.tensors) largest = std::max(largest, t.size);
        QCOMPARE(filter.index(0, TensorTableModel::Size).data(Qt::EditRole).toULongLong(), largest);
        std::vector<SectionState> states(layout.sections.size(), SectionState::Ok);
        m.set_states(states);
        for (int r = 0; r < m.rowCount(); ++r) QCOMPARE(m.index(r, TensorTableModel::Checksum).data().toString(), QStringLiteral("checksum ok"));
    }
};

QTEST_MAIN(TestModels)
#include "test_ui_models.moc"
