// The C API gives the same logits and greedy ids as the CLI path, and reports errors without crashing.
#include <QTemporaryDir>
#include <QtTest>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "../test_support.h"
#include "colibri/colibri.h"
#include "engine/core/model.h"

extern "C" int colibri_c_header_check(void);

using namespace colibri::test;

class TestCApi : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    QString model_path_;

private slots:
    void initTestCase() {
        model_path_ = dir_.filePath("mixtral.bin");
        const CliResult r = run_cli({"convert", reference("hf/mixtral/model"), "-o", model_path_, "-q"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        QCOMPARE(colibri_c_header_check(), 0);
    }

    void open_errors() {
        QVERIFY(colibri_model_open(nullptr) == nullptr);
        QVERIFY(colibri_model_open("/nonexistent/model.bin") == nullptr);
        QVERIFY(QString(colibri_last_error()).contains("No such file"));
        // The one context check of every front end (engine/core/open_model.h), in its one wording.
        colibri_model* m = colibri_model_open(model_path_.toUtf8().constData());
        QVERIFY2(m != nullptr, colibri_last_error());
        auto probe = colibri::Model::load(model_path_.toStdString());
        QVERIFY(probe);
        const uint32_t max = probe.value()->hparams().max_position;
        QVERIFY(colibri_session_new(m, 1, max + 1) == nullptr);
        QCOMPARE(QString(colibri_last_error()), QStringLiteral("context %1 exceeds the model's maximum of %2").arg(max + 1).arg(max));
        colibri_session* s = colibri_session_new(m, 1, max);
        QVERIFY2(s != nullptr, colibri_last_error());
        colibri_session_free(s);
        colibri_model_close(m);
    }

    // One process is rank 0 of 1: it drives its sessions, and following is refused (mpirun: test_mpi_ranks).
    void one_process_is_rank_0_of_1() {
        colibri_model* m = colibri_model_open(model_path_.toUtf8().constData());
        QVERIFY2(m != nullptr, colibri_last_error());
        QCOMPARE(colibri_model_rank(m), 0);
        QCOMPARE(colibri_model_rank_count(m), 1);
        QCOMPARE(colibri_model_rank(nullptr), -1);
        colibri_session* s = colibri_session_new(m, 1, 64);
        QVERIFY2(s != nullptr, colibri_last_error());
        QCOMPARE(colibri_session_follow(s), -1);
        QVERIFY(QString(colibri_last_error()).contains("this process drives its session"));
        // Sessions are not limited to one in one process.
        colibri_session* t = colibri_session_new(m, 1, 64);
        QVERIFY2(t != nullptr, colibri_last_error());
        const int32_t token = 1;
        QCOMPARE(colibri_session_eval(s, &token, 1, nullptr), 0);
        colibri_session_free(t);
        colibri_session_free(s);
        colibri_model_close(m);
    }

    // A RAM budget of top-k slots per layer: the same logits, counters that saw the misses; a budget too small
    // and an unknown policy are errors.
    void ram_budget() {
        auto probe = colibri::Model::load(model_path_.toStdString());
        QVERIFY(probe);
        colibri::ExpertCacheConfig all;
        all.ram_budget = uint64_t(1) << 50;
        QVERIFY(probe.value()->use_expert_cache(all));
        const colibri::ExpertCache& c = *probe.value()->expert_cache();
        const uint64_t budget = c.resident_bytes() + 2 * c.slot_bytes() * probe.value()->moe_layer_count();

        colibri_model_options o = colibri_model_options_defaults();
        QCOMPARE(o.ram_budget, uint64_t(0));
        o.ram_budget = budget - 1;
        QVERIFY(colibri_model_open_with(model_path_.toUtf8().constData(), &o) == nullptr);
        QVERIFY2(QString(colibri_last_error()).contains("too small"), colibri_last_error());
        o.ram_budget = budget;
        o.cache_policy = "fifo";
        QVERIFY(colibri_model_open_with(model_path_.toUtf8().constData(), &o) == nullptr);
        o.cache_policy = "lfru";
        colibri_model* b = colibri_model_open_with(model_path_.toUtf8().constData(), &o);
        QVERIFY2(b != nullptr, colibri_last_error());
        colibri_model* m = colibri_model_open(model_path_.toUtf8().constData());
        colibri_cache_stats st{};
        QCOMPARE(colibri_model_cache_stats(m, &st), -1);

        const int32_t ids[] = {1, 300, 17, 4000, 9, 22, 31000, 5, 5, 600};
        std::vector<float> want(32000), got(32000);
        colibri_session* sm = colibri_session_new(m, 2, 0);
        colibri_session* sb = colibri_session_new(b, 2, 0);
        QCOMPARE(colibri_session_eval(sm, ids, 10, want.data()), 0);
        QCOMPARE(colibri_session_eval(sb, ids, 10, got.data()), 0);
        QVERIFY(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0);
        QCOMPARE(colibri_model_cache_stats(b, &st), 0);
        QCOMPARE(st.slots_per_layer, 2u);
        QVERIFY(st.misses > 0 && st.bytes_read > 0);
        QCOMPARE(st.predicted, uint64_t(0));  // no prefetch asked for

        // Prefetch on: the same logits, and the prediction's counters.
        QCOMPARE(o.prefetch, 0);
        o.prefetch = 1;
        colibri_model* p = colibri_model_open_with(model_path_.toUtf8().constData(), &o);
        QVERIFY2(p != nullptr, colibri_last_error());
        colibri_session* sp = colibri_session_new(p, 2, 0);
        QCOMPARE(colibri_session_eval(sp, ids, 10, got.data()), 0);
        QVERIFY(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0);
        QCOMPARE(colibri_model_cache_stats(p, &st), 0);
        if (colibri_model_layer_count(p) > 1) QVERIFY(st.predicted > 0);
        QVERIFY(st.predicted_right <= st.predicted);
        colibri_session_free(sp);
        colibri_model_close(p);
        colibri_session_free(sm);
        colibri_session_free(sb);
        colibri_model_close(m);
        colibri_model_close(b);
    }

    void logits_and_generation_match_reference() {
        colibri_model* m = colibri_model_open(model_path_.toUtf8().constData());
        QVERIFY2(m != nullptr, colibri_last_error());
        QCOMPARE(colibri_model_vocab_size(m), 32000);
        QCOMPARE(QString(colibri_model_family(m)), QString("mixtral"));
        QCOMPARE(colibri_model_expert_count(m), 8);
        QVERIFY(colibri_tokenize(m, "hi", 1, nullptr, 0) == -1);  // no tokenizer in this model
        colibri_session* s = colibri_session_new(m, 2, 0);
        QVERIFY(s != nullptr);

        const QJsonArray input = read_json(reference("hf/mixtral/ref/input_ids.json")).array();
        std::vector<int32_t> ids;
        for (const auto& v : input) ids.push_back(v.toInt());
        const std::vector<float> want = read_f32(reference("hf/mixtral/ref/logits.f32"));
        std::vector<float> logits(32000);
        double max_diff = 0;
        for (size_t p = 0; p < ids.size(); ++p) {
            QCOMPARE(colibri_session_eval(s, &ids[p], 1, logits.data()), 0);
            for (size_t i = 0; i < logits.size(); ++i)
                max_diff = std::max(max_diff, std::fabs(double(logits[i]) - want[p * 32000 + i]));
        }
        QVERIFY(max_diff < 1e-3);
        int32_t bad = 40000;
        QCOMPARE(colibri_session_eval(s, &bad, 1, nullptr), -1);
        QVERIFY(QString(colibri_last_error()).contains("out of range"));

        colibri_session_reset(s);
        QCOMPARE(colibri_session_position(s), 0u);
        colibri_sampler_params p = colibri_sampler_defaults();
        p.greedy = 1;
        std::vector<int32_t> out(16);
        int calls = 0;
        const int32_t n = colibri_generate(s, ids.data(), ids.size(), 16, &p, out.data(), out.size(),
                                           [](int32_t, void* u) { ++*static_cast<int*>(u); return 1; }, &calls);
        QCOMPARE(n, 16);
        QCOMPARE(calls, 16);
        const QJsonArray want_ids = read_json(reference("hf/mixtral/ref/generate.json")).object()["new_ids"].toArray();
        for (int i = 0; i < 16; ++i) QCOMPARE(out[i], want_ids[i].toInt());
        colibri_session_free(s);
        colibri_model_close(m);
    }

    // A sigmoid, group-limited router through the C API: how the model routes, and per token and layer the
    // experts, weights and selection scores deepseek_v3's reference lists (weights summing to the scaling factor,
    // not 1); the LUT router refuses such a model.
    void routing_of_a_sigmoid_router() {
        const QString path = dir_.filePath("deepseek_v3.bin");
        const CliResult r = run_cli({"convert", reference("hf/deepseek_v3/model"), "-o", path, "-q"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        colibri_model* m = colibri_model_open(path.toUtf8().constData());
        QVERIFY2(m != nullptr, colibri_last_error());
        colibri_routing_info info{};
        QCOMPARE(colibri_model_routing(m, &info), 0);
        QCOMPARE(QString(info.scoring), QString("sigmoid"));
        QCOMPARE(info.renormalise, 1);
        QCOMPARE(info.scaling, 2.5f);
        QCOMPARE(info.selection_bias, 1);
        QCOMPARE(info.n_group, 4u);
        QCOMPARE(info.topk_group, 2u);
        QCOMPARE(info.top_k, 4u);
        QCOMPARE(colibri_model_routing(m, nullptr), -1);

        colibri_session* s = colibri_session_new(m, 2, 0);
        QCOMPARE(colibri_session_set_router(s, "lut"), -1);
        QVERIFY(QString(colibri_last_error()).contains("softmax routing only"));
        struct Seen {
            std::vector<colibri_route> routes;
            std::vector<std::vector<int32_t>> experts;
            std::vector<std::vector<float>> weights, selection;
            std::vector<std::vector<uint32_t>> groups;
        } seen;
        QCOMPARE(colibri_session_set_route_callback(s, [](const colibri_route* r, void* u) {
            auto* z = static_cast<Seen*>(u);
            z->routes.push_back(*r);
            z->experts.emplace_back(r->experts, r->experts + r->k);
            z->weights.emplace_back(r->weights, r->weights + r->k);
            z->selection.emplace_back(r->selection_scores, r->selection_scores + r->k);
            z->groups.emplace_back(r->groups, r->groups + r->group_count);
        }, &seen), 0);
        std::vector<int32_t> ids;
        for (const auto& v : read_json(reference("hf/deepseek_v3/ref/input_ids.json")).array()) ids.push_back(v.toInt());
        QCOMPARE(colibri_session_eval(s, ids.data(), ids.size(), nullptr), 0);
        const QJsonArray layers = read_json(reference("hf/deepseek_v3/ref/router.json")).object()["layers"].toArray();
        QCOMPARE(seen.routes.size(), size_t(layers.size()) * ids.size());
        for (size_t i = 0; i < seen.routes.size(); ++i) {
            const colibri_route& r = seen.routes[i];
            QCOMPARE(r.k, 4u);
            QCOMPARE(r.group_count, 2u);
            const QJsonObject want = layers[int(r.layer) - 1].toObject();  // layer 0 is dense
            QCOMPARE(int(r.layer), want["layer"].toInt());
            float sum = 0;
            for (uint32_t j = 0; j < r.k; ++j) {
                QCOMPARE(seen.experts[i][j], want["experts"].toArray()[int(r.position)].toArray()[int(j)].toInt());
                QVERIFY(std::fabs(seen.weights[i][j] - want["weights"].toArray()[int(r.position)].toArray()[int(j)].toDouble()) < 1e-4);
                const int e = seen.experts[i][j];
                QVERIFY(std::fabs(seen.selection[i][j] - want["selection_scores"].toArray()[int(r.position)].toArray()[e].toDouble()) < 1e-4);
                QVERIFY(std::find(seen.groups[i].begin(), seen.groups[i].end(), uint32_t(e / 4)) != seen.groups[i].end());
                sum += seen.weights[i][j];
            }
            QVERIFY(std::fabs(sum - 2.5f) < 1e-4);  // renormalised, times routed_scaling_factor
        }
        QCOMPARE(colibri_session_set_route_callback(s, nullptr, nullptr), 0);
        colibri_session_free(s);
        colibri_model_close(m);
    }

    void chat_turns_stream_text_and_reuse_the_conversation() {
        // The chat service through C: text arrives in whole characters, the reply comes back as a message, and
        // the second turn gives what a fresh chat gives on the same conversation.
        colibri_model* m = colibri_model_open(COLIBRI_BUILD_DIR "/demo/demo.bin");
        QVERIFY2(m != nullptr, colibri_last_error());
        colibri_session* s = colibri_session_new(m, 2, 512);
        colibri_chat* chat = colibri_chat_new(s);
        QVERIFY(chat != nullptr);
        colibri_sampler_params p = colibri_sampler_defaults();
        p.greedy = 1;
        struct Shown {
            std::string text;
            int tokens = 0;
        } shown;
        auto collect = [](const char* text, size_t n, int32_t, void* u) {
            auto* s = static_cast<Shown*>(u);
            s->text.append(text, n);
            ++s->tokens;
            return 1;
        };
        colibri_chat_message first[] = {{"user", "Hello"}};
        const int32_t n = colibri_chat_turn(chat, first, 1, 6, &p, collect, &shown);
        QVERIFY2(n > 0 && n <= 6, colibri_last_error());
        QCOMPARE(shown.tokens, n);
        const std::string reply = colibri_chat_reply(chat);
        colibri_chat_message second[] = {{"user", "Hello"}, {"assistant", reply.c_str()}, {"user", "More"}};
        Shown again, fresh;
        QVERIFY(colibri_chat_turn(chat, second, 3, 6, &p, collect, &again) > 0);
        colibri_chat_reset(chat);
        QVERIFY(colibri_chat_turn(chat, second, 3, 6, &p, collect, &fresh) > 0);
        QCOMPARE(QString::fromStdString(again.text), QString::fromStdString(fresh.text));
        // Errors are reported, not crashed on.
        QCOMPARE(colibri_chat_turn(chat, nullptr, 0, 4, &p, nullptr, nullptr), -1);
        colibri_chat_message no_role[] = {{nullptr, "x"}};
        QCOMPARE(colibri_chat_turn(chat, no_role, 1, 4, &p, nullptr, nullptr), -1);
        QCOMPARE(colibri_chat_turn(chat, first, 1, 100000, &p, nullptr, nullptr), -1);
        QVERIFY(QString(colibri_last_error()).contains("context"));
        colibri_chat_free(chat);
        colibri_session_free(s);
        colibri_model_close(m);
    }
};

QTEST_GUILESS_MAIN(TestCApi)
#include "test_c_api.moc"
