// Routing analyses: the statistics on hand-made traces with known answers (co-activation, top tokens,
// consecutive-token repetition and its random baselines, next-layer predictability, comparison of two runs),
// then the analyses view on a real conversation (its matrix against the heatmap's counts) and comparisons with
// another model: an identical copy agrees everywhere, a q4_k copy diverges at positions the view lists.
#include <QComboBox>
#include <QLabel>
#include <QTabWidget>

#include "ui/replay_worker.h"
#include "ui/routing_stats.h"
#include "ui/trace_stats.h"
#include "ui/views/analysis_view.h"
#include "ui/views/bar_chart.h"
#include "ui/views/main_window.h"
#include "ui_test_support.h"

using namespace colibri;
using namespace colibri::studio;
using namespace colibri::test;

namespace {

// A trace at `position` routed to `experts` (first choice first) at each given layer.
TokenTrace trace(int position, int32_t token, const std::vector<std::pair<int, std::vector<int32_t>>>& layers) {
    TokenTrace t;
    t.position = position;
    t.token = token;
    t.text = QStringLiteral("t%1").arg(token);
    for (const auto& [layer, experts] : layers) {
        LayerRouting r;
        r.layer = layer;
        r.experts = experts;
        r.weights.assign(experts.size(), 1.0f / static_cast<float>(experts.size()));
        t.routing.push_back(r);
    }
    return t;
}

}  // namespace

class TestAnalysis : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

private slots:
    void statistics_on_known_traces() {
        // Layer 0 routes token i to {i % 4, (i + 1) % 4}; layer 1 to {(i % 4) + 4, 0}: layer 1's first choice is
        // determined by layer 0's.
        std::vector<TokenTrace> run;
        for (int i = 0; i < 8; ++i) run.push_back(trace(i, 100 + i % 2, {{0, {i % 4, (i + 1) % 4}}, {1, {(i % 4) + 4, 0}}}));
        const std::vector<CoActivation> co = co_activation(run, 8);
        QCOMPARE(co.size(), size_t(2));
        QCOMPARE(co[0].tokens, 8);
        QCOMPARE(co[0].at(0, 0), 4);  // expert 0: tokens 0, 3, 4, 7
        QCOMPARE(co[0].at(0, 1), 2);  // tokens 0 and 4 chose {0, 1}
        QCOMPARE(co[0].at(1, 0), 2);
        QCOMPARE(co[0].at(0, 2), 0);
        QCOMPARE(co[0].conditional(0, 1), 0.5);
        // Top tokens of layer 0, expert 0: token 100 (positions 0, 4) and 101 (3, 7), twice each, of 4 occurrences.
        const auto top = top_tokens(run, 0, 8, 3);
        QCOMPARE(top[0].activations, 4);
        QCOMPARE(top[0].top.size(), size_t(2));
        QCOMPARE(top[0].top[0].token, 100);
        QCOMPARE(top[0].top[0].count, 2);
        QCOMPARE(top[0].top[0].occurrences, 4);
        QVERIFY(top[5].top.empty());
        // Consecutive tokens: layer 0's first choice never repeats, its sets always overlap ((i+1)%4 is next's
        // first); layer 1's sets always share expert 0.
        const auto rep = consecutive_repetition(run);
        QCOMPARE(rep.size(), size_t(2));
        QCOMPARE(rep[0].pairs, 7);
        QCOMPARE(rep[0].same_first, 0.0);
        QCOMPARE(rep[0].overlap, 1.0);
        QCOMPARE(rep[1].overlap, 1.0);
        // Random routing's figures, as the Mixtral paper quotes them for 8 experts, top-2.
        QCOMPARE(random_same_first(8), 0.125);
        QVERIFY(std::abs(random_overlap(8, 2) - (1.0 - 15.0 / 28.0)) < 1e-12);
        QCOMPARE(random_overlap(4, 3), 1.0);
        // Next layer: determined, so guessed every time and the mutual information is the whole entropy.
        const auto pred = next_layer_predictability(run);
        QCOMPARE(pred.size(), size_t(1));
        QCOMPARE(pred[0].tokens, 8);
        QCOMPARE(pred[0].accuracy, 1.0);
        QCOMPARE(pred[0].baseline, 0.25);
        QVERIFY(std::abs(pred[0].mutual_information - 2.0) < 1e-12);
        QVERIFY(std::abs(pred[0].normalized_mi - 1.0) < 1e-12);
        // Compared with itself: agreement everywhere; with one position changed at layer 1: that position listed.
        RoutingComparison same = compare_routing(run, run, 8);
        QVERIFY(same.same_tokens);
        QCOMPARE(same.layers[0].same_set, 1.0);
        QVERIFY(same.divergent.empty());
        QCOMPARE(same.usage[1].js_bits, 0.0);
        std::vector<TokenTrace> other = run;
        other[5].routing[1].experts = {3, 0};
        const RoutingComparison diff = compare_routing(run, other, 8);
        QCOMPARE(diff.divergent.size(), size_t(1));
        QCOMPARE(diff.divergent[0].position, 5);
        QCOMPARE(diff.divergent[0].layer, 1);
        QCOMPARE(diff.layers[0].same_set, 1.0);
        QCOMPARE(diff.layers[1].same_set, 7.0 / 8.0);
        QCOMPARE(diff.layers[1].jaccard, (7.0 + 1.0 / 3.0) / 8.0);
        QVERIFY(diff.usage[1].js_bits > 0.0);
        // Different tokens: no per-position comparison, the usage still.
        std::vector<TokenTrace> shifted = run;
        shifted[0].token = 999;
        const RoutingComparison usage_only = compare_routing(run, shifted, 8);
        QVERIFY(!usage_only.same_tokens);
        QVERIFY(usage_only.layers.empty());
        QCOMPARE(usage_only.usage.size(), size_t(2));
    }

    // A comparison's replay opens the other model as every front end does: the CLI's wording for a context the
    // model cannot hold and for a file that does not open, and the token-id check says why ids do not fit.
    void replay_errors_are_worded_as_every_front_end_words_them() {
        const QString f32 = convert_reference(dir_, QStringLiteral("mixtral"));
        QVERIFY(!f32.isEmpty());
        Replayer replayer;
        QSignalSpy finished(&replayer, &Replayer::finished);
        auto replay_error = [&](const QString& path, const std::vector<int32_t>& ids) {
            const int before = finished.count();
            replayer.start(path, ids, 1);
            if (!wait_for(finished, before + 1, 120000)) return QStringLiteral("(no answer)");
            return finished.at(before).at(0).value<ReplayResult>().error;
        };
        const std::vector<int32_t> too_long(4097, 1);  // the reference mixtral's context is 4,096
        const QString context_error = replay_error(f32, too_long);
        QCOMPARE(context_error, QStringLiteral("context 4097 exceeds the model's maximum of 4096"));
        const CliResult cli = run_cli({"logits", "-m", f32, "--tokens", "1", "-c", "4097"});
        QVERIFY(cli.exit_code != 0);
        QVERIFY2(cli.err.contains(context_error.toUtf8()), cli.err.constData());
        QCOMPARE(replay_error(f32, {1, 99999}),
                 QStringLiteral("token id 99999 out of range (vocabulary 32000): the two models do not share a tokenizer"));
        const QString missing = dir_.filePath(QStringLiteral("missing.bin"));
        const CliResult cli_missing = run_cli({"logits", "-m", missing, "--tokens", "1"});
        const QString missing_error = replay_error(missing, {1});
        QVERIFY(!missing_error.isEmpty());
        QVERIFY2(cli_missing.err.contains(missing_error.toUtf8()), cli_missing.err.constData());
        QVERIFY(replay_error(f32, {1, 2, 3}).isEmpty());
    }

    void analyses_of_a_conversation_and_a_comparison_with_another_model() {
        const QString f32 = convert_reference(dir_, QStringLiteral("mixtral"));
        QVERIFY(!f32.isEmpty());
        const QString copy = dir_.filePath(QStringLiteral("mixtral-copy.bin"));
        QVERIFY(QFile::copy(f32, copy));
        const QString q4 = dir_.filePath(QStringLiteral("mixtral-q4_k.bin"));
        QCOMPARE(run_cli({"convert", reference(QStringLiteral("hf/mixtral/model")), "-o", q4, "--type", "q4_k", "-q"}).exit_code, 0);
        MainWindowOptions options;
        options.persist_settings = false;
        MainWindow w(options);
        w.resize(1280, 720);
        w.show();
        QSignalSpy loaded(&w, &MainWindow::modelLoaded);
        w.open_model(f32);
        QVERIFY(wait_for(loaded, 1));
        QSignalSpy finished(w.chat(), &ChatController::finished);
        QVERIFY(w.chat()->send(join_ids(reference_input_ids(QStringLiteral("mixtral"))), greedy(16)).is_ok());
        QVERIFY(wait_for(finished, 1));
        AnalysisView* a = w.analysis_view();
        a->refresh();
        // The co-activation diagonal counts what the heatmap counts.
        const ExpertUsage usage = expert_usage(*w.conversation(), TokenSpan{}, 8);
        for (int li = 0; li < a->coactivation_layer()->count(); ++li) {
            a->coactivation_layer()->setCurrentIndex(li);
            StatsTableModel* m = a->coactivation_model();
            QCOMPARE(m->rowCount(), 8);
            QCOMPARE(m->columnCount(), 8);
            for (int e = 0; e < 8; ++e) QCOMPARE(m->index(e, e).data(Qt::EditRole).toInt(), usage.counts[static_cast<size_t>(li)][static_cast<size_t>(e)]);
        }
        QCOMPARE(a->top_tokens_model()->rowCount(), 8);
        QCOMPARE(a->repetition_model()->rowCount(), 2);
        QCOMPARE(a->repetition_model()->index(0, 1).data(Qt::EditRole).toInt(), 32 - 1);  // consecutive pairs
        QCOMPARE(a->repetition_chart()->categories(), QStringList({"L0", "L1"}));
        QCOMPARE(a->predictability_model()->rowCount(), 1);
        // The same tokens through an identical copy: agreement everywhere.
        QSignalSpy compared(a, &AnalysisView::comparisonFinished);
        a->compare_with_model(copy);
        QVERIFY(wait_for(compared, 1, 120000));
        QCOMPARE(compared.at(0).at(0).toBool(), true);
        QVERIFY(a->comparison().same_tokens);
        QCOMPARE(a->comparison().positions, 32);
        for (const LayerAgreement& g : a->comparison().layers) QCOMPARE(g.same_set, 1.0);
        QVERIFY(a->comparison().divergent.empty());
        QCOMPARE(a->divergence_model()->rowCount(), 0);
        // Through the q4_k quantisation: whatever differs is listed, position by position.
        a->compare_with_model(q4);
        QVERIFY(wait_for(compared, 2, 120000));
        QCOMPARE(compared.at(1).at(0).toBool(), true);
        const RoutingComparison& c = a->comparison();
        QCOMPARE(static_cast<int>(c.layers.size()), 2);
        int differing = 0;
        for (const LayerAgreement& g : c.layers) {
            QVERIFY(g.same_set >= 0.0 && g.same_set <= 1.0 && g.same_first <= 1.0);
            differing += g.positions - static_cast<int>(std::lround(g.same_set * g.positions));
        }
        QCOMPARE(a->divergence_model()->rowCount(), static_cast<int>(c.divergent.size()));
        QVERIFY(static_cast<int>(c.divergent.size()) <= differing);
        qInfo("f32 against q4_k: %d of 64 layer decisions differ, at %zu positions", differing, c.divergent.size());
        QVERIFY(a->comparison_status()->text().contains(QStringLiteral("mixtral-q4_k.bin")));
        QCOMPARE(a->comparison_chart()->categories(), QStringList({"L0", "L1"}));
        // A model whose vocabulary the tokens do not fit: a clear error, no comparison.
        a->compare_with_model(QStringLiteral(COLIBRI_UI_TEST_MODEL));
        QVERIFY(wait_for(compared, 3, 120000));
        if (compared.at(2).at(0).toBool() == false) QVERIFY(a->comparison_status()->text().startsWith(QStringLiteral("The comparison failed")));
        // A saved conversation with other tokens: compared by expert usage.
        QVERIFY(w.chat()->send(QStringLiteral("5, 6, 7"), greedy(4)).is_ok());
        QVERIFY(wait_for(finished, 2));
        const QString saved = dir_.filePath(QStringLiteral("saved.json"));
        QVERIFY(w.save_conversation(saved).is_ok());
        w.chat()->new_conversation();
        QVERIFY(w.chat()->send(QStringLiteral("1, 9, 9, 9, 4"), greedy(8)).is_ok());
        QVERIFY(wait_for(finished, 3));
        a->refresh();
        QVERIFY(a->compare_with_conversation(saved).is_ok());
        QVERIFY(wait_for(compared, 4, 120000));
        QVERIFY(!a->comparison().same_tokens);
        QCOMPARE(a->comparison().usage.size(), size_t(2));
        QVERIFY(a->comparison_status()->text().contains(QStringLiteral("expert usage")));
        QVERIFY(!a->compare_with_conversation(dir_.filePath(QStringLiteral("missing.json"))).is_ok());
    }
};

QTEST_MAIN(TestAnalysis)
#include "test_ui_analysis.moc"
