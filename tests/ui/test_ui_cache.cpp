// The Studio with a RAM budget (issue 23): EngineWorker opens a model with its experts in a cache of slots and
// gives the tokens it gives without one; every evaluation carries the cache's state (what it read, what it
// evicted, what stays) consistent with the cache's own counts; the conversation's routing replays exactly as
// `colibri route` + the cache-sim replay of the same tokens; and the Expert cache view shows all of it.
#include <QAbstractButton>
#include <QCheckBox>
#include <QChart>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QFileInfo>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QLineEdit>
#include <QProcess>
#include <QPushButton>
#include <QRegularExpression>
#include <QTableView>
#include <set>

#include "engine/core/model.h"
#include "tools/cache_sim.h"
#include "ui/cache_replay.h"
#include "ui/conversation.h"
#include "ui/engine_worker.h"
#include "ui/views/budget_dialog.h"
#include "ui/views/cache_view.h"
#include "ui/worker_thread.h"
#include "ui_test_support.h"
#include "../expert_cache_budget.h"

using namespace colibri;
using namespace colibri::studio;
using namespace colibri::test;

namespace {

const QString kDemo = QStringLiteral(COLIBRI_BUILD_DIR "/demo/demo.bin");

uint64_t budget_for(const QString& path, uint32_t n_slots) { return colibri::test::budget_for(path.toStdString(), n_slots); }

struct Run {
    ModelSummary summary;
    std::vector<int32_t> generated;
    std::vector<TokenTrace> traces;
    QString error;
};

// Loads path with options on a worker of its own, generates greedily from ids and collects what it sends.
Run generate(const QString& path, const LoadOptions& options, const std::vector<int32_t>& ids, int max_tokens) {
    Run run;
    auto* worker = new EngineWorker;
    WorkerThread thread(worker, QStringLiteral("engine"), [worker] { worker->requestStop(); });
    QSignalSpy loaded(worker, &EngineWorker::loaded);
    QSignalSpy failed(worker, &EngineWorker::loadFailed);
    worker->load(path, options);
    QDeadlineTimer deadline(60000);
    while (loaded.isEmpty() && failed.isEmpty() && !deadline.hasExpired()) QTest::qWait(2);
    if (!failed.isEmpty()) {
        run.error = failed.at(0).at(1).toString();
        return run;
    }
    if (loaded.isEmpty()) {
        run.error = QStringLiteral("no load in time");
        return run;
    }
    run.summary = loaded.at(0).at(0).value<ModelSummary>();
    QSignalSpy tokens(worker, &EngineWorker::tokenGenerated);
    QSignalSpy traces(worker, &EngineWorker::tokenEvaluated);
    QSignalSpy finished(worker, &EngineWorker::generationFinished);
    GenerationRequest r;
    r.token_ids = ids;
    r.sampling.greedy = true;
    r.max_tokens = max_tokens;
    worker->generate(r);
    if (!wait_for(finished, 1)) {
        run.error = QStringLiteral("no reply in time");
        return run;
    }
    for (const auto& t : tokens) run.generated.push_back(t.at(1).toInt());
    for (const auto& t : traces) run.traces.push_back(t.at(0).value<TokenTrace>());
    return run;
}

std::vector<int32_t> demo_prompt() {
    auto m = Model::load(kDemo.toStdString());
    if (!m) qFatal("%s", m.message().c_str());
    auto ids = m.value()->tokenizer()->encode("What is 23 plus 45? Tell me a fortune about the sea, then spell cat backwards.");
    if (!ids) qFatal("%s", ids.message().c_str());
    return ids.value();
}

}  // namespace

class TestUiCache : public QObject {
    Q_OBJECT
    std::vector<int32_t> prompt_;
    Run plain_, budgeted_, prefetching_;
    uint32_t slots_ = 4;

private slots:
    void initTestCase() {
        prompt_ = demo_prompt();
        plain_ = generate(kDemo, LoadOptions{}, prompt_, 24);
        QVERIFY2(plain_.error.isEmpty(), qPrintable(plain_.error));
        LoadOptions o;
        o.ram_budget.bytes = budget_for(kDemo, slots_);  // 4 of 16 experts per layer
        budgeted_ = generate(kDemo, o, prompt_, 24);
        QVERIFY2(budgeted_.error.isEmpty(), qPrintable(budgeted_.error));
        o.cache_prefetch = true;
        prefetching_ = generate(kDemo, o, prompt_, 24);
        QVERIFY2(prefetching_.error.isEmpty(), qPrintable(prefetching_.error));
    }

    // The logits do not change with a budget, so neither do greedy tokens; the summary says what the cache is.
    void a_budget_gives_the_same_tokens() {
        QCOMPARE(budgeted_.generated, plain_.generated);
        QCOMPARE(prefetching_.generated, plain_.generated);
        QVERIFY(prefetching_.summary.cache.prefetch);
        QVERIFY(budgeted_.generated.size() >= 8);
        const ModelSummary::Cache& c = budgeted_.summary.cache;
        QCOMPARE(c.slot_count, int(slots_));
        QCOMPARE(c.policy, QStringLiteral("lru"));
        QVERIFY(c.budget > 0 && c.resident_bytes > 0 && c.slot_bytes > 0);
        QCOMPARE(plain_.summary.cache.budget, quint64(0));
        for (const TokenTrace& t : plain_.traces) {
            QVERIFY(!t.cache_state);
            QVERIFY(t.cache.empty());
        }
    }

    // Each evaluation's last position carries every MoE layer's slots after it. A generated token is evaluated
    // alone: its experts are in slots afterwards, what the cache read for it is exactly its misses, and what
    // it evicted is at most that; nothing is ever in more slots than there are.
    void every_evaluation_carries_the_slots_state() {
        const int moe = budgeted_.summary.moe_layers;
        int states = 0, generated_checked = 0;
        uint64_t misses_total = 0, evicted_total = 0;
        for (size_t i = 0; i < budgeted_.traces.size(); ++i) {
            const TokenTrace& t = budgeted_.traces[i];
            if (!t.cache_state) continue;
            ++states;
            const CacheSnapshot& s = *t.cache_state;
            QCOMPARE(int(s.layers.size()), moe);
            QCOMPARE(s.n_experts, budgeted_.summary.experts);
            QCOMPARE(s.slot_count, int(slots_));
            for (int li = 0; li < moe; ++li) {
                const int in_slots = s.count(li, CacheCell::Resident) + s.count(li, CacheCell::Loaded) + s.count(li, CacheCell::Loading);
                QVERIFY(in_slots <= int(slots_));
                QCOMPARE(s.count(li, CacheCell::Loading), 0);  // no prefetch
            }
            if (!t.generated) continue;
            // A generated token's records are its own (one token per evaluation).
            QCOMPARE(int(t.cache.size()), moe);
            for (int li = 0; li < moe; ++li) {
                const LayerCacheStep& step = t.cache[size_t(li)];
                QCOMPARE(step.layer, s.layers[size_t(li)]);
                QCOMPARE(step.tokens, 1u);
                const LayerRouting* r = t.routing_at(step.layer);
                QVERIFY(r != nullptr);
                QCOMPARE(step.hits + step.misses, uint64_t(r->experts.size()));
                for (int32_t e : r->experts) {
                    const CacheCell c = s.at(li, e);
                    QVERIFY2(c == CacheCell::Resident || c == CacheCell::Loaded, cache_cell_name(c));
                }
                QCOMPARE(uint64_t(s.count(li, CacheCell::Loaded)), step.misses);
                QVERIFY(uint64_t(s.count(li, CacheCell::Evicted)) <= step.misses);
                misses_total += step.misses;
                evicted_total += uint64_t(s.count(li, CacheCell::Evicted));
            }
            ++generated_checked;
        }
        // One state per evaluation: the prompt's chunk and every generated token.
        QCOMPARE(states, 1 + int(budgeted_.generated.size()));
        QCOMPARE(generated_checked, int(budgeted_.generated.size()));
        QVERIFY2(misses_total > 0 && evicted_total > 0, "4 slots of 16 must make the cache work");
        // The prompt's chunk: its records on its first position, counting the chunk's tokens.
        const TokenTrace& first = budgeted_.traces.front();
        QCOMPARE(int(first.cache.size()), moe);
        QCOMPARE(first.cache.front().tokens, uint32_t(prompt_.size()));
        QVERIFY(budgeted_.traces[prompt_.size() - 1].cache_state != nullptr);
    }

    // With prefetch, what was read ahead is told apart from what was read on a miss: cells read on a miss are
    // exactly the token's misses, cells read ahead at most what the cache read ahead, and the token's experts
    // are in slots either way.
    void read_ahead_is_told_apart_from_misses() {
        const int moe = prefetching_.summary.moe_layers;
        uint64_t ahead_total = 0, prefetched_total = 0;
        for (const TokenTrace& t : prefetching_.traces) {
            if (!t.cache_state || !t.generated) continue;
            const CacheSnapshot& s = *t.cache_state;
            for (int li = 0; li < moe; ++li) {
                const LayerCacheStep& step = t.cache[size_t(li)];
                const LayerRouting* r = t.routing_at(step.layer);
                QVERIFY(r != nullptr);
                for (int32_t e : r->experts) {
                    const CacheCell c = s.at(li, e);
                    QVERIFY2(c == CacheCell::Resident || c == CacheCell::Loaded || c == CacheCell::ReadAhead, cache_cell_name(c));
                }
                QCOMPARE(uint64_t(s.count(li, CacheCell::Loaded)), step.misses);
                QVERIFY(uint64_t(s.count(li, CacheCell::ReadAhead)) <= step.prefetched);
                QVERIFY(s.count(li, CacheCell::Resident) + s.count(li, CacheCell::Loaded) + s.count(li, CacheCell::ReadAhead) <= int(slots_));
                ahead_total += uint64_t(s.count(li, CacheCell::ReadAhead));
                prefetched_total += step.prefetched;
            }
        }
        QVERIFY(prefetched_total > 0);
        QVERIFY(ahead_total > 0);
    }

    // A kernel comparison runs its own tokens through the cache; the next reply's states are taken against the
    // cache as the comparison left it, so what a token read is still exactly its misses.
    void a_kernel_comparison_does_not_leak_into_the_next_state() {
        auto* worker = new EngineWorker;
        WorkerThread thread(worker, QStringLiteral("engine"), [worker] { worker->requestStop(); });
        QSignalSpy loaded(worker, &EngineWorker::loaded);
        LoadOptions o;
        o.ram_budget.bytes = budget_for(kDemo, 12);
        worker->load(kDemo, o);
        QVERIFY(wait_for(loaded, 1));
        QSignalSpy compared(worker, &EngineWorker::kernelComparisonFinished);
        KernelComparisonRequest c;
        c.prompt_tokens = 12;
        c.decode_tokens = 6;
        c.reps = 1;
        c.variants = {QStringLiteral("scalar")};
        worker->compareKernels(c);
        QVERIFY(wait_for(compared, 1));
        QVERIFY2(compared.at(0).at(0).value<KernelComparison>().error.isEmpty(),
                 qPrintable(compared.at(0).at(0).value<KernelComparison>().error));
        QSignalSpy traces(worker, &EngineWorker::tokenEvaluated);
        QSignalSpy finished(worker, &EngineWorker::generationFinished);
        GenerationRequest r;
        r.token_ids = prompt_;
        r.sampling.greedy = true;
        r.max_tokens = 4;

        worker->generate(r);
        QVERIFY(wait_for(finished, 1));
        QVERIFY2(traces.count() >= int(prompt_.size()), qPrintable(QStringLiteral("%1 traces").arg(traces.count())));
        // The prompt's chunk is the first evaluation after the comparison: every expert it shows as read was
        // chosen by one of its tokens (with most experts in slots, some the comparison read stay resident).
        const TokenTrace last_of_prompt = traces.at(int(prompt_.size()) - 1).at(0).value<TokenTrace>();
        QVERIFY(last_of_prompt.cache_state != nullptr);
        const CacheSnapshot& s = *last_of_prompt.cache_state;
        int read = 0, resident = 0;
        for (int li = 0; li < int(s.layers.size()); ++li) {
            std::set<int32_t> chosen;
            for (size_t p = 0; p < prompt_.size(); ++p) {
                const TokenTrace t = traces.at(int(p)).at(0).value<TokenTrace>();
                if (const LayerRouting* r = t.routing_at(s.layers[size_t(li)])) chosen.insert(r->experts.begin(), r->experts.end());
            }
            for (int e = 0; e < s.n_experts; ++e) {
                resident += s.at(li, e) == CacheCell::Resident;
                if (s.at(li, e) != CacheCell::Loaded) continue;
                ++read;
                QVERIFY2(chosen.count(e), qPrintable(QStringLiteral("layer %1 expert %2 shown as read by the prompt, which did not choose it")
                                                         .arg(s.layers[size_t(li)]).arg(e)));
            }
        }
        QVERIFY(read > 0);
        QVERIFY(resident > 0);  // left by the comparison, and not counted as the prompt's reads
    }

    // The conversation's routing, as the cache view replays it, is `colibri route --predict` of the same tokens,
    // and the replay's curves are the cache-sim replay of that trace.
    void the_replay_is_route_and_cache_sim_of_the_same_tokens() {
        Conversation conversation;
        for (const TokenTrace& t : budgeted_.traces) conversation.add_trace(t);
        const tools::RoutingTrace mine = conversation_routing(conversation, budgeted_.summary.experts, budgeted_.summary.active_experts);
        std::vector<int32_t> ids;
        for (const TokenTrace& t : budgeted_.traces) ids.push_back(t.token);
        const CliResult r = run_cli({"route", "-m", kDemo, "--tokens", join_ids(ids), "--predict", "--json"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        auto cli = tools::parse_routing_trace(r.out.toStdString());
        QVERIFY2(cli, cli.message().c_str());
        QCOMPARE(mine.layers, cli->layers);
        QCOMPARE(mine.top_k, cli->top_k);
        QCOMPARE(mine.choices, cli->choices);
        QVERIFY(mine.has_predictions());
        QCOMPARE(mine.predicted, cli->predicted);

        const std::vector<uint32_t> counts = curve_slot_counts(mine.top_k, mine.n_experts, slots_);
        QVERIFY(std::find(counts.begin(), counts.end(), slots_) != counts.end());
        QCOMPARE(counts.front(), mine.top_k);
        QCOMPARE(counts.back(), mine.n_experts);
        std::atomic<bool> cancel{false};
        const CacheCurves curves = replay_curves(mine, counts, cancel);
        QCOMPARE(curves.curves.size(), size_t(5));
        QCOMPARE(curves.positions, int(ids.size()));
        for (size_t j = 0; j < counts.size(); ++j) {
            QCOMPARE(curves.curve("LRU")->rate[j], tools::replay(*cli, CachePolicy::Lru, counts[j], *cli).rate());
            QCOMPARE(curves.curve("LFRU")->rate[j], tools::replay(*cli, CachePolicy::Lfru, counts[j], *cli).rate());
            QCOMPARE(curves.curve("pinned")->rate[j], tools::replay(*cli, CachePolicy::Pinned, counts[j], *cli).rate());
            QCOMPARE(curves.curve("Belady")->rate[j], tools::replay_belady(*cli, counts[j]).rate());
            QCOMPARE(curves.curve("LRU + prediction")->rate[j], tools::replay(*cli, CachePolicy::Lru, counts[j], *cli, true).rate());
            for (const char* online : {"LRU", "LFRU", "pinned"}) QVERIFY(curves.curve(online)->rate[j] <= curves.curve("Belady")->rate[j]);
        }
        // With every expert in a slot only first uses miss.
        uint64_t accesses = 0, distinct = 0;
        for (const auto& layer : mine.choices) {
            std::set<uint32_t> seen;
            for (const auto& choice : layer) {
                accesses += choice.size();
                seen.insert(choice.begin(), choice.end());
            }
            distinct += seen.size();
        }
        QCOMPARE(curves.curve("LRU")->rate.back(), double(accesses - distinct) / double(accesses));
        QVERIFY(curves.prediction_accuracy > 0.0 && curves.prediction_accuracy <= 1.0);
        std::atomic<bool> cancelled{true};
        QVERIFY(replay_curves(mine, counts, cancelled).cancelled);
    }

    // The view: the map follows the selected token (its experts marked, in slots), the totals are the traces'
    // sums, and the replay draws one curve per policy plus the budget's mark.
    void the_cache_view_shows_state_totals_and_curves() {
        Conversation conversation;
        CacheView view(&conversation);
        view.resize(1280, 540);
        view.set_model(budgeted_.summary);
        for (const TokenTrace& t : budgeted_.traces) conversation.add_trace(t);
        int selected = -1;
        for (const TokenTrace& t : budgeted_.traces)
            if (t.generated) selected = t.position;  // the last generated token
        conversation.select(selected);
        view.refresh();
        const TokenTrace& shown = budgeted_.traces[size_t(selected)];
        CacheMapModel* map = view.map_model();
        QCOMPARE(map->rowCount(), budgeted_.summary.moe_layers);
        QCOMPARE(map->columnCount(), budgeted_.summary.experts);
        for (int li = 0; li < map->rowCount(); ++li) {
            const LayerRouting* r = shown.routing_at(shown.cache_state->layers[size_t(li)]);
            QVERIFY(r != nullptr);
            for (int e = 0; e < map->columnCount(); ++e) {
                const bool chosen = std::find(r->experts.begin(), r->experts.end(), e) != r->experts.end();
                const QModelIndex i = map->index(li, e);
                QCOMPARE(map->data(i).toString() == QStringLiteral("●"), chosen);
                QCOMPARE(map->data(i, CacheMapModel::CellRole).toInt(), int(shown.cache_state->at(li, e)));
                QVERIFY(map->data(i, Qt::BackgroundRole).value<QColor>().isValid());
                QVERIFY(map->data(i, Qt::ToolTipRole).toString().contains(QStringLiteral("expert %1").arg(e)));
            }
        }
        QVERIFY(view.summary_label()->text().contains(QStringLiteral("RAM budget")));
        QVERIFY(view.summary_label()->text().contains(QStringLiteral("After token %1").arg(selected)));
        // Totals per layer: the sums of the traces' records.
        const auto& totals = view.layers_model()->totals();
        QCOMPARE(int(totals.size()), budgeted_.summary.moe_layers);
        for (const CacheLayerTotals& lt : totals) {
            uint64_t hits = 0, misses = 0;
            for (const TokenTrace& t : budgeted_.traces)
                for (const LayerCacheStep& s : t.cache)
                    if (s.layer == lt.layer) {
                        hits += s.hits;
                        misses += s.misses;
                    }
            QCOMPARE(lt.hits, hits);
            QCOMPARE(lt.misses, misses);
        }
        // Selecting a prompt token shows the state after its chunk, with that token's experts marked.
        conversation.select(2);
        view.refresh();
        QVERIFY(view.summary_label()->text().contains(QStringLiteral("prompt chunk 0–%1").arg(prompt_.size() - 1)));

        QSignalSpy replayed(&view, &CacheView::replayFinished);
        view.replay();
        QVERIFY(wait_for(replayed, 1));
        QCOMPARE(view.curves().curves.size(), size_t(5));
        QCOMPARE(view.curves_chart()->series().size(), 6);  // five policies and this budget's mark

        // Without a budget the map says why it is empty; the replay still works from routing.
        Conversation plain_conversation;
        CacheView plain_view(&plain_conversation);
        plain_view.set_model(plain_.summary);
        for (const TokenTrace& t : plain_.traces) plain_conversation.add_trace(t);
        plain_view.show();
        plain_view.refresh();
        QVERIFY(plain_view.findChild<QLabel*>(QStringLiteral("cache_no_budget"))->isVisible());
        QCOMPARE(plain_view.map_model()->rowCount(), 0);
        QSignalSpy plain_replayed(&plain_view, &CacheView::replayFinished);
        plain_view.replay();
        QVERIFY(wait_for(plain_replayed, 1));
        QCOMPARE(plain_view.curves().curves.size(), size_t(4));  // no predictions without a budget
    }

    // A share of the model file (the Studio's --ram-budget 50%, as the CLI's) resolves against the loaded file and
    // changes nothing in the tokens.
    void a_share_of_the_file_is_a_budget() {
        LoadOptions half;
        half.ram_budget.file_share = 0.5;
        QVERIFY(half.ram_budget.is_set());
        const Run r = generate(kDemo, half, prompt_, 24);
        QVERIFY2(r.error.isEmpty(), qPrintable(r.error));
        QCOMPARE(r.generated, plain_.generated);
        QCOMPARE(r.summary.cache.budget, quint64(half.ram_budget.resolve(QFileInfo(kDemo).size())));
        QVERIFY(r.summary.cache.slot_count > 0);
    }

    void the_budget_dialog_builds_the_load_options() {
        LoadOptions base;
        base.threads = 1;
        BudgetDialog d(kDemo, base);
        d.budget_box()->setValue(12.0);
        QAbstractButton* ok = d.findChild<QDialogButtonBox*>()->button(QDialogButtonBox::Ok);
        LoadOptions o = d.options();
        QCOMPARE(o.threads, 1u);
        QCOMPARE(o.ram_budget.bytes, uint64_t(12) << 20);
        QCOMPARE(o.cache_policy, CachePolicy::Lru);
        QVERIFY(o.hot_trace.isEmpty());
        QVERIFY(ok->isEnabled());
        d.policy_box()->setCurrentIndex(d.policy_box()->findData(int(CachePolicy::Pinned)));
        d.hot_trace_edit()->clear();
        QVERIFY(!ok->isEnabled());  // pinned needs a trace
        d.hot_trace_edit()->setText(QStringLiteral("/tmp/trace.json"));
        QVERIFY(ok->isEnabled());
        d.prefetch_box()->setChecked(true);
        o = d.options();
        QCOMPARE(o.cache_policy, CachePolicy::Pinned);
        QCOMPARE(o.hot_trace, QStringLiteral("/tmp/trace.json"));
        QVERIFY(o.cache_prefetch);
    }

    // Bad budgets: too small for what every token uses is refused at load with what it needs; a pinned policy
    // with an unreadable trace names the file; the Studio's command line rejects a size it cannot read.
    void bad_budgets_fail_clearly() {
        LoadOptions tiny;
        tiny.ram_budget.bytes = 4096;
        const Run r = generate(kDemo, tiny, prompt_, 1);
        QVERIFY(r.error.contains(QStringLiteral("budget")));
        LoadOptions pinned;
        pinned.ram_budget.bytes = budget_for(kDemo, slots_);
        pinned.cache_policy = CachePolicy::Pinned;
        pinned.hot_trace = QStringLiteral("/nonexistent/trace.json");
        const Run p = generate(kDemo, pinned, prompt_, 1);
        QVERIFY2(p.error.contains(QStringLiteral("/nonexistent/trace.json")), qPrintable(p.error));
        for (const QStringList& args : {QStringList{"--ram-budget", "12x"}, QStringList{"--cache-policy", "lfru"},
                                        QStringList{"--ram-budget", "1G", "--cache-policy", "fifo"}}) {
            QProcess studio;
            studio.start(QStringLiteral(COLIBRI_STUDIO), args + QStringList{"--screenshot", QDir::tempPath(), kDemo});
            QVERIFY(studio.waitForFinished(60000));
            QVERIFY(studio.exitCode() != 0);
            // One line of ours (Qt may add its own warnings about the platform).
            const QStringList ours = QString::fromUtf8(studio.readAllStandardError()).split(QLatin1Char('\n')).filter(QRegularExpression(QStringLiteral("^colibri-studio: ")));
            QCOMPARE(ours.size(), 1);
            QVERIFY2(ours.front().contains(QStringLiteral("--")), qPrintable(ours.front()));
        }
    }
};

QTEST_MAIN(TestUiCache)
#include "test_ui_cache.moc"
