// EngineWorker on its own QThread, observed only through its signals: load, streamed generation with traces
// (greedy ids equal transformers' reference), stop within one token, and clear errors for damaged files (the
// model loaded before stays).
#include <QElapsedTimer>
#include <QTimer>
#include <atomic>

#include "../server/server_process.h"
#include "ui/engine_worker.h"
#include "ui/worker_thread.h"
#include "ui_test_support.h"

using namespace colibri;
using namespace colibri::studio;
using namespace colibri::test;

class TestEngineWorker : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    QString mixtral_;
    EngineWorker* worker_ = nullptr;
    std::unique_ptr<WorkerThread> thread_;

    GenerationRequest greedy(std::vector<int32_t> ids, int max_tokens) {
        GenerationRequest r;
        r.token_ids = std::move(ids);
        r.sampling.greedy = true;
        r.max_tokens = max_tokens;
        return r;
    }

    void load(const QString& path) {
        QSignalSpy loaded(worker_, &EngineWorker::loaded);
        worker_->load(path);
        QVERIFY(wait_for(loaded, 1));
    }

private slots:
    void initTestCase() {
        mixtral_ = convert_reference(dir_, QStringLiteral("mixtral"));
        QVERIFY(!mixtral_.isEmpty());
        worker_ = new EngineWorker;
        thread_ = std::make_unique<WorkerThread>(worker_, QStringLiteral("engine"), [w = worker_] { w->requestStop(); });
    }

    void cleanupTestCase() { thread_.reset(); }

    void load_reports_the_model() {
        QSignalSpy loaded(worker_, &EngineWorker::loaded);
        QSignalSpy failed(worker_, &EngineWorker::loadFailed);
        worker_->load(mixtral_);
        QVERIFY(wait_for(loaded, 1));
        QCOMPARE(failed.count(), 0);
        const auto summary = loaded.at(0).at(0).value<ModelSummary>();
        QCOMPARE(summary.family, QStringLiteral("mixtral"));
        QCOMPARE(summary.layers, 2);
        QCOMPARE(summary.moe_layers, 2);
        QCOMPARE(summary.experts, 8);
        QCOMPARE(summary.active_experts, 2);
        QCOMPARE(summary.vocab_size, 32000);
        QVERIFY(!summary.has_tokenizer);
        QCOMPARE(summary.path, mixtral_);
        QVERIFY(summary.context > 0);
        const auto counters = loaded.at(0).at(1).value<CounterSet>();
        if (counters.names.isEmpty()) QVERIFY(!counters.software_status.isEmpty());  // no counters: it says why
    }

    void generation_streams_tokens_with_traces() {
        load(mixtral_);
        const std::vector<int32_t> prompt = reference_input_ids(QStringLiteral("mixtral"));
        QSignalSpy generated(worker_, &EngineWorker::tokenGenerated);
        QSignalSpy evaluated(worker_, &EngineWorker::tokenEvaluated);
        QSignalSpy finished(worker_, &EngineWorker::generationFinished);
        worker_->generate(greedy(prompt, 8));
        QVERIFY(wait_for(finished, 1));
        QCOMPARE(generated.count(), 8);
        // Every position is evaluated once, prompt and generated, in order, with routing at both MoE layers.
        QCOMPARE(evaluated.count(), 16 + 8);
        for (int i = 0; i < evaluated.count(); ++i) {
            const auto t = evaluated.at(i).at(0).value<TokenTrace>();
            QCOMPARE(t.position, i);
            QCOMPARE(t.generated, i >= 16);
            QCOMPARE(static_cast<int>(t.routing.size()), 2);
            QCOMPARE(static_cast<int>(t.layers.size()), 2);
            for (const LayerRouting& r : t.routing) {
                QCOMPARE(static_cast<int>(r.experts.size()), 2);
                QCOMPARE(static_cast<int>(r.probs.size()), 8);
                QVERIFY(r.weights[0] >= r.weights[1]);
            }
            QVERIFY(t.layers[0].attention_ns + t.layers[0].experts_ns > 0);
        }
        // Greedy ids equal transformers' generate() on the same model.
        const QJsonArray expected = read_json(reference("hf/mixtral/ref/generate.json"))["new_ids"].toArray();
        for (int i = 0; i < 8; ++i) {
            QCOMPARE(generated.at(i).at(0).toInt(), 16 + i);  // position
            QCOMPARE(generated.at(i).at(1).toInt(), expected[i].toInt());
        }
        const auto stats = finished.at(0).at(0).value<GenerationStats>();
        QCOMPARE(stats.generated, 8);
        // Every generated token is evaluated (the trace of the last too): 8 decode steps in decode_seconds.
        QCOMPARE(stats.decode_evaluated, 8);
        QCOMPARE(stats.decode_tokens_per_second(), 8 / stats.decode_seconds);
        QCOMPARE(stats.prompt_tokens, 16);
        QCOMPARE(stats.context_used, 24);
        QVERIFY(!stats.stopped);
    }

    void a_remote_engine_gives_what_the_local_one_gives() {
        // File ▸ Connect to server: the same model served by `colibri serve`; the worker's signals carry the
        // same tokens (transformers' greedy ids) and, for every position the server evaluated, the same routing.
        ServerProcess server;
        QVERIFY2(server.start({"-m", mixtral_, "--slots", "1", "-t", "1", "-c", "256", "--quiet"}), qPrintable(server.error()));
        QSignalSpy loaded(worker_, &EngineWorker::loaded);
        worker_->connectRemote(server.url());
        QVERIFY(wait_for(loaded, 1));
        const auto summary = loaded.at(0).at(0).value<ModelSummary>();
        QVERIFY(summary.remote);
        QCOMPARE(summary.family, QStringLiteral("mixtral"));
        QCOMPARE(summary.layers, 2);
        QCOMPARE(summary.moe_layer_ids, (QVector<int>{0, 1}));
        QCOMPARE(summary.experts, 8);
        QCOMPARE(summary.active_experts, 2);
        QCOMPARE(summary.context, 256);

        const std::vector<int32_t> prompt = reference_input_ids(QStringLiteral("mixtral"));
        auto run = [&](QList<QList<QVariant>>& tokens, std::vector<TokenTrace>& traces) {
            QSignalSpy generated(worker_, &EngineWorker::tokenGenerated);
            QSignalSpy evaluated(worker_, &EngineWorker::tokenEvaluated);
            QSignalSpy finished(worker_, &EngineWorker::generationFinished);
            worker_->generate(greedy(prompt, 8));
            QVERIFY(wait_for(finished, 1));
            tokens = generated;
            for (const auto& e : evaluated) traces.push_back(e.at(0).value<TokenTrace>());
            const auto stats = finished.at(0).at(0).value<GenerationStats>();
            QCOMPARE(stats.generated, 8);
            QCOMPARE(stats.prompt_tokens, 16);
        };
        QList<QList<QVariant>> remote_tokens, local_tokens;
        std::vector<TokenTrace> remote_traces, local_traces;
        run(remote_tokens, remote_traces);
        if (QTest::currentTestFailed()) return;
        load(mixtral_);
        run(local_tokens, local_traces);
        if (QTest::currentTestFailed()) return;

        const QJsonArray expected = read_json(reference("hf/mixtral/ref/generate.json"))["new_ids"].toArray();
        QCOMPARE(remote_tokens.size(), 8);
        for (int i = 0; i < 8; ++i) {
            QCOMPARE(remote_tokens[i].at(0).toInt(), 16 + i);  // position
            QCOMPARE(remote_tokens[i].at(1).toInt(), expected[i].toInt());
            QCOMPARE(remote_tokens[i].at(1).toInt(), local_tokens[i].at(1).toInt());
        }
        // The server does not evaluate the last token it samples; the local worker does.
        QCOMPARE(static_cast<int>(remote_traces.size()), 16 + 7);
        for (size_t i = 0; i < remote_traces.size(); ++i) {
            const TokenTrace& r = remote_traces[i];
            const TokenTrace& l = local_traces[i];
            QCOMPARE(r.position, static_cast<int>(i));
            QCOMPARE(r.token, l.token);
            QCOMPARE(r.generated, l.generated);
            QCOMPARE(r.routing.size(), l.routing.size());
            for (size_t k = 0; k < r.routing.size(); ++k) {
                QCOMPARE(r.routing[k].layer, l.routing[k].layer);
                QCOMPARE(r.routing[k].experts, l.routing[k].experts);
                QCOMPARE(r.routing[k].weights, l.routing[k].weights);
                QCOMPARE(r.routing[k].probs.size(), size_t(8));
            }
            QCOMPARE(r.layers.size(), size_t(2));
            QVERIFY(r.step_ns > 0);
        }

        // An address where nothing listens: a clear error, not a hang.
        QSignalSpy failed(worker_, &EngineWorker::loadFailed);
        worker_->connectRemote(QStringLiteral("http://127.0.0.1:1"));
        QVERIFY(wait_for(failed, 1));
        QVERIFY2(failed.at(0).at(1).toString().contains(QStringLiteral("did not answer")), qPrintable(failed.at(0).at(1).toString()));
        QCOMPARE(failed.at(0).at(2).value<LoadFailure>(), LoadFailure::Server);
        server.stop();
    }

    void next_turn_reuses_the_cache() {
        load(mixtral_);
        std::vector<int32_t> prompt = reference_input_ids(QStringLiteral("mixtral"));
        QSignalSpy finished(worker_, &EngineWorker::generationFinished);
        worker_->generate(greedy(prompt, 4));
        QVERIFY(wait_for(finished, 1));
        prompt.push_back(7);  // a longer prompt with the same prefix: only the new token is evaluated
        QSignalSpy started(worker_, &EngineWorker::generationStarted);
        worker_->generate(greedy(prompt, 2));
        QVERIFY(wait_for(finished, 2));
        QCOMPARE(started.at(0).at(0).toInt(), 16);
        QCOMPARE(finished.at(1).at(0).value<GenerationStats>().prompt_tokens, 1);
    }

    void stop_from_the_worker_thread_ends_before_the_next_token() {
        load(mixtral_);
        QSignalSpy finished(worker_, &EngineWorker::generationFinished);
        std::atomic<int> seen{0};
        // Direct: runs on the engine thread right after the token is sampled, so the count is exact.
        auto c = connect(worker_, &EngineWorker::tokenGenerated, worker_, [&](int, int, const QString&, bool) {
            if (++seen == 3) worker_->requestStop();
        }, Qt::DirectConnection);
        worker_->generate(greedy({1, 2, 3}, 1000));
        QVERIFY(wait_for(finished, 1));
        disconnect(c);
        const auto stats = finished.at(0).at(0).value<GenerationStats>();
        QVERIFY(stats.stopped);
        QCOMPARE(stats.generated, 3);
        QCOMPARE(seen.load(), 3);
    }

    void stop_from_the_ui_thread_cancels_within_one_token() {
        load(mixtral_);
        QSignalSpy finished(worker_, &EngineWorker::generationFinished);
        std::atomic<int> sampled{0};
        auto c = connect(worker_, &EngineWorker::tokenGenerated, worker_, [&](int, int, const QString&, bool) { ++sampled; },
                         Qt::DirectConnection);
        int at_stop = -1;
        // Stop once the stream is flowing, from this (the UI) thread, and count what the worker still sampled.
        QSignalSpy generated(worker_, &EngineWorker::tokenGenerated);
        worker_->generate(greedy({1, 2, 3}, 1000));
        QVERIFY(wait_for(generated, 1));
        at_stop = sampled.load();
        worker_->requestStop();
        QVERIFY(wait_for(finished, 1));
        disconnect(c);
        const auto stats = finished.at(0).at(0).value<GenerationStats>();
        QVERIFY(stats.stopped);
        // The token being sampled or evaluated when stop came may finish; no further one starts.
        QVERIFY2(stats.generated - at_stop <= 1, qPrintable(QStringLiteral("%1 tokens after stop").arg(stats.generated - at_stop)));
        QVERIFY(stats.generated < 1000);
        // The worker takes new requests after a stop.
        worker_->generate(greedy({1, 2, 3}, 2));
        QVERIFY(wait_for(finished, 2));
        QCOMPARE(finished.at(1).at(0).value<GenerationStats>().generated, 2);
    }

    void damaged_files_fail_with_a_clear_error() {
        // No model: a generation is refused with words, not a crash.
        QSignalSpy unloaded(worker_, &EngineWorker::unloaded);
        worker_->unload();
        QVERIFY(wait_for(unloaded, 1));
        QSignalSpy no_model(worker_, &EngineWorker::generationFailed);
        worker_->generate(greedy({1, 2}, 1));
        QVERIFY(wait_for(no_model, 1));
        QCOMPARE(no_model.at(0).at(0).toString(), QStringLiteral("no model is loaded"));
        load(mixtral_);
        struct Case {
            const char* name;
            qint64 offset;  // byte to flip; -1 truncates to half
        };
        const QByteArray good = read_all(mixtral_);
        for (const Case& c : {Case{"magic", 0}, Case{"section table", 300}, Case{"truncated", -1}}) {
            QByteArray bytes = good;
            if (c.offset < 0) bytes.truncate(bytes.size() / 2);
            else bytes[c.offset] = static_cast<char>(bytes[c.offset] ^ 0xFF);
            const QString path = write_all(dir_.filePath(QStringLiteral("damaged-%1.bin").arg(c.name)), bytes);
            QSignalSpy failed(worker_, &EngineWorker::loadFailed);
            QSignalSpy loaded(worker_, &EngineWorker::loaded);
            worker_->load(path);
            QVERIFY2(wait_for(failed, 1), c.name);
            QCOMPARE(loaded.count(), 0);
            QCOMPARE(failed.at(0).at(0).toString(), path);
            const QString error = failed.at(0).at(1).toString();
            QVERIFY2(!error.isEmpty() && !error.contains('\n'), qPrintable(error));
            QCOMPARE(failed.at(0).at(2).value<LoadFailure>(), LoadFailure::File);
            // The model loaded before is still there and answers.
            QSignalSpy finished(worker_, &EngineWorker::generationFinished);
            worker_->generate(greedy({1, 2}, 1));
            QVERIFY2(wait_for(finished, 1), c.name);
        }
        QSignalSpy failed(worker_, &EngineWorker::loadFailed);
        worker_->load(dir_.filePath(QStringLiteral("does-not-exist.bin")));
        QVERIFY(wait_for(failed, 1));
        QCOMPARE(failed.at(0).at(2).value<LoadFailure>(), LoadFailure::File);
        // Settings a good file cannot run with: the model in use stays too.
        LoadOptions tiny;
        tiny.ram_budget.bytes = 4096;
        worker_->load(mixtral_, tiny);
        QVERIFY(wait_for(failed, 2));
        QCOMPARE(failed.at(1).at(2).value<LoadFailure>(), LoadFailure::Options);
        // A context beyond the model's: the one wording of every front end (engine/core/open_model.h).
        LoadOptions too_long;
        too_long.context = 4000000000u;
        worker_->load(mixtral_, too_long);
        QVERIFY(wait_for(failed, 3));
        QCOMPARE(failed.at(2).at(2).value<LoadFailure>(), LoadFailure::Options);
        QVERIFY2(failed.at(2).at(1).toString().startsWith(QStringLiteral("context 4000000000 exceeds the model's maximum of ")),
                 qPrintable(failed.at(2).at(1).toString()));
        QSignalSpy finished(worker_, &EngineWorker::generationFinished);
        worker_->generate(greedy({1, 2}, 1));
        QVERIFY(wait_for(finished, 1));
    }

    void bad_requests_fail_without_a_crash() {
        load(mixtral_);
        QSignalSpy gen_failed(worker_, &EngineWorker::generationFailed);
        worker_->generate(greedy({1, 32000}, 1));  // vocabulary is 32000
        QVERIFY(wait_for(gen_failed, 1));
        QVERIFY(gen_failed.at(0).at(0).toString().contains(QStringLiteral("32000")));
        GenerationRequest text;  // text needs a tokenizer, which this model lacks
        text.messages = {{QStringLiteral("user"), QStringLiteral("hello")}};
        worker_->generate(text);
        QVERIFY(wait_for(gen_failed, 2));
        QVERIFY(gen_failed.at(1).at(0).toString().contains(QStringLiteral("tokenizer")));
    }

    void event_loop_keeps_running_during_generation() {
        load(mixtral_);
        QSignalSpy finished(worker_, &EngineWorker::generationFinished);
        QElapsedTimer clock;
        qint64 last = 0, max_gap = 0;
        int ticks = 0;
        QTimer timer;
        timer.setInterval(10);
        connect(&timer, &QTimer::timeout, this, [&] {
            const qint64 now = clock.elapsed();
            max_gap = std::max(max_gap, now - last);
            last = now;
            ++ticks;
        });
        clock.start();
        timer.start();
        // A long generation, stopped after 1.5 s: long enough for a stall to show.
        worker_->generate(greedy(reference_input_ids(QStringLiteral("mixtral")), 2000));
        QTimer::singleShot(1500, this, [this] { worker_->requestStop(); });
        QVERIFY(wait_for(finished, 1, 120000));
        timer.stop();
        const auto stats = finished.at(0).at(0).value<GenerationStats>();
        qInfo("%d tokens in %lld ms; %d timer ticks, longest gap %lld ms", stats.generated, clock.elapsed(), ticks, max_gap);
        QVERIFY(stats.generated > 0);
        QVERIFY2(max_gap < 500 * build_slowdown(), qPrintable(QStringLiteral("the event loop stalled for %1 ms").arg(max_gap)));
    }
};

QTEST_GUILESS_MAIN(TestEngineWorker)
#include "test_ui_engine_worker.moc"
