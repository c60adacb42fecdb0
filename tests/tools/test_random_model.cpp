// colibri-make-model's real-size presets (tools/random_model.h): the presets' configs plan exactly the published
// parameter counts of Qwen3-30B-A3B and gpt-oss-20b; random rows drawn straight in each storage type have about
// the asked standard deviation, centred, deterministic per (seed, stream); a model written from a shrunken preset
// config has the preset's types, passes `colibri check`, runs, and is byte-identical when written again; a larger
// embedding (embedding_init) spreads a sequence's routing over the experts.
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <xxhash.h>

#include "../test_support.h"
#include "engine/file/model_file.h"
#include "kernels/matvec.h"
#include "kernels/weight_types.h"
#include "tools/convert_plan.h"
#include "tools/random_model.h"

using namespace colibri;
using namespace colibri::test;
using nlohmann::json;

class TestRandomModel : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

    json preset_config(const QString& preset) {
        const QString out = dir_.filePath(preset + "-config");
        QProcess make;
        make.start(QStringLiteral(COLIBRI_BUILD_DIR "/bin/colibri-make-model"), {"--preset", preset, "--config-only", "-o", out});
        if (!make.waitForFinished(60000) || make.exitCode() != 0) return json();
        return json::parse(read_all(out + "/config.json").toStdString(), nullptr, false);
    }

    // Recorded from the filler before it moved (see random_rows_are_pinned); a type without an entry fails.
    static qulonglong pinned_row_hash(WeightType t) {
        static const std::map<std::string, qulonglong> pinned = {
            {"f32", 0xf678af92addfa2b4ull},  {"f16", 0xad443d6fcf3db980ull},  {"bf16", 0x4bbe4da3ada4c287ull},
            {"q8_0", 0x2463a717f58d8968ull}, {"q4_k", 0x4e42e3306582e97dull}, {"q4_0", 0xde7138bc79e7184dull},
            {"q5_k", 0x5fdb12269cb57f5eull}, {"q6_k", 0xd7e1f423cac9400cull}, {"mxfp4", 0x1ee10b52a55b829bull},
        };
        auto it = pinned.find(weight_type_info(t).name);
        return it == pinned.end() ? 0 : it->second;
    }

private slots:
    // Every tensor of the real models, counted: 30,532,122,624 and 20,914,757,184 parameters.
    void presets_have_the_real_shapes_data() {
        QTest::addColumn<QString>("preset");
        QTest::addColumn<qulonglong>("parameters");
        QTest::newRow("qwen3-30b-a3b") << "qwen3-30b-a3b" << qulonglong(30532122624ull);
        QTest::newRow("gpt-oss-20b") << "gpt-oss-20b" << qulonglong(20914757184ull);
        // The hybrids' text models, summed module by module from transformers' Qwen3Next / Qwen3_5Moe code (embedding and
        // head 2·V·H; per linear-attention layer q|k|v|z, b, a, conv1d, dt_bias, A_log, the gated norm and out_proj; per
        // full layer the gated q, k, v, o and the q/k norms; per layer the router, the experts, the shared expert and
        // its gate). The published totals add what the presets leave out: Qwen3-Next-80B-A3B's 81.3 B its MTP layer
        // (1.6 B), Qwen3.5-35B-A3B's 36 B its MTP layer (0.8 B) and vision tower.
        QTest::newRow("qwen3.5-35b-a3b") << "qwen3.5-35b-a3b" << qulonglong(34660610688ull);
        QTest::newRow("qwen3-next-80b-a3b") << "qwen3-next-80b-a3b" << qulonglong(79674391296ull);
    }
    void presets_have_the_real_shapes() {
        QFETCH(QString, preset);
        QFETCH(qulonglong, parameters);
        const json cfg = preset_config(preset);
        QVERIFY(cfg.is_object());
        auto plan = tools::plan_model(cfg, {}, WeightType::Q4_K);
        QVERIFY2(plan, plan.message().c_str());
        uint64_t n = 0, bytes = 0;
        for (const PlannedSection& s : plan.value().sections)
            for (const PlannedTensor& t : s.tensors) n += t.rows * t.cols, bytes += t.rows * weight_row_bytes(t.type, t.cols);
        qInfo("%s: %llu parameters, %.2f GB of tensors as q4_k", qPrintable(preset), (unsigned long long)n, double(bytes) / 1e9);
        QCOMPARE(qulonglong(n), parameters);
    }

    // Drawn rows, 64 × 1024 values of sd 0.02: the sd within 25 % (mxfp4: a factor √2), the mean within 5 % of it.
    void random_rows_data() {
        QTest::addColumn<int>("type");
        for (const WeightTypeInfo& w : weight_types())
            if (w.matrix) QTest::newRow(w.name) << int(w.type);
    }
    void random_rows() {
        QFETCH(int, type);
        const WeightType t = static_cast<WeightType>(type);
        const size_t rows = 64, cols = 1024, rb = weight_row_bytes(t, cols);
        std::vector<uint8_t> q(rows * rb), again(rb);
        for (size_t r = 0; r < rows; ++r) tools::random_row(t, cols, 0.02f, 5, r, q.data() + r * rb);
        tools::random_row(t, cols, 0.02f, 5, 3, again.data());
        QVERIFY(std::memcmp(again.data(), q.data() + 3 * rb, rb) == 0);     // the same stream, the same bytes
        QVERIFY(std::memcmp(again.data(), q.data() + 4 * rb, rb) != 0);     // another stream, other bytes
        double sum = 0, squares = 0;
        std::vector<float> v(cols);
        for (size_t r = 0; r < rows; ++r) {
            kernels::dequantize_row(t, q.data(), cols, r, v.data());
            for (float x : v) {
                QVERIFY(std::isfinite(x));
                sum += x, squares += double(x) * x;
            }
        }
        const double n = double(rows * cols), mean = sum / n, sd = std::sqrt(squares / n - mean * mean);
        qInfo("%s: mean %.2e, sd %.4f", weight_type_info(t).name, mean, sd);
        const double tolerance = t == WeightType::MXFP4 ? 0.42 : 0.25;  // mxfp4's scales are powers of two
        QVERIFY(std::fabs(sd / 0.02 - 1) < tolerance);
        QVERIFY(std::fabs(mean) < 0.05 * 0.02);
    }

    // The drawn bytes are pinned: models written by colibri-make-model's presets (and the benchmarks run on them)
    // stay byte-identical whoever refactors the filler (kernels/random_blocks.h). Hashes of 3 rows of 512 values
    // (sd 0.02, seed 5, streams 0..2) per type, recorded from the filler as it was before it moved out of tools/.
    void random_rows_are_pinned_data() {
        QTest::addColumn<int>("type");
        QTest::addColumn<qulonglong>("xxh64");
        for (const WeightTypeInfo& w : weight_types()) QTest::newRow(w.name) << int(w.type) << pinned_row_hash(w.type);
    }
    void random_rows_are_pinned() {
        QFETCH(int, type);
        QFETCH(qulonglong, xxh64);
        const WeightType t = static_cast<WeightType>(type);
        const size_t cols = 512, rb = weight_row_bytes(t, cols);
        std::vector<uint8_t> q(3 * rb);
        for (size_t r = 0; r < 3; ++r) tools::random_row(t, cols, 0.02f, 5, r, q.data() + r * rb);
        const qulonglong got = XXH64(q.data(), q.size(), 0);
        qInfo("%s: 0x%016llxull", weight_type_info(t).name, got);
        QCOMPARE(got, xxh64);
    }

    // The presets' configs shrunk (2 layers, hidden 256, 8 experts, vocab 1024): written in the preset's types.
    void shrunken_presets_write_and_run_data() { presets_have_the_real_shapes_data(); }
    void shrunken_presets_write_and_run() {
        QFETCH(QString, preset);
        json cfg = preset_config(preset);
        QVERIFY(cfg.is_object());
        const bool gpt_oss = preset == "gpt-oss-20b";
        const bool hybrid = preset.startsWith("qwen3.5") || preset.startsWith("qwen3-next");
        json& text = cfg.contains("text_config") ? cfg["text_config"] : cfg;  // Qwen3.5's hub config nests the text model
        // Hybrids keep four layers: three Gated DeltaNet and the full-attention one.
        text["num_hidden_layers"] = hybrid ? 4 : 2;
        text["hidden_size"] = 256;
        text["vocab_size"] = 1024;
        // The special token ids move into the smaller vocabulary (a converter refuses ids past vocab_size).
        for (json* c : {&cfg, &text})
            for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id"})
                if (c->contains(key)) (*c)[key] = 1000;
        text["num_attention_heads"] = 4;
        text["num_key_value_heads"] = 2;
        text[gpt_oss ? "num_local_experts" : "num_experts"] = 8;
        text[gpt_oss ? "intermediate_size" : "moe_intermediate_size"] = 256;
        if (gpt_oss) text["layer_types"] = json::array({"sliding_attention", "full_attention"});
        if (hybrid) {
            text["num_experts_per_tok"] = 4;
            text["linear_num_key_heads"] = 2;
            text["linear_num_value_heads"] = 4;
            if (text.contains("layer_types"))
                text["layer_types"] = json::array({"linear_attention", "linear_attention", "linear_attention", "full_attention"});
        }
        tools::RandomModelOptions options;
        options.matrix_type = gpt_oss ? WeightType::Q8_0 : WeightType::Q4_K;
        if (gpt_oss) options.expert_type = WeightType::MXFP4;
        const QString a = dir_.filePath(preset + "-a.bin"), b = dir_.filePath(preset + "-b.bin");
        for (const QString& out : {a, b}) {
            auto written = tools::write_random_model(cfg, out.toStdString(), options);
            QVERIFY2(written, written.message().c_str());
        }
        QVERIFY(read_all(a) == read_all(b));
        auto model = ModelFile::open(a.toStdString());
        QVERIFY2(model, model.message().c_str());
        for (const TensorView& t : model.value()->tensors()) {
            const bool expert = t.name.find(".experts.") != std::string::npos && t.n_dims == 2;
            // Vectors, routers, the shared expert's one-row gate and a Gated DeltaNet's conv kernel (four taps per
            // channel, no row to quantise) stay f32.
            const bool exact = t.n_dims == 1 || t.name.find("router") != std::string::npos ||
                               t.name.find("shared_expert_gate") != std::string::npos ||
                               t.name.find(".linear.conv") != std::string::npos;
            const WeightType want = exact ? WeightType::F32 : expert && gpt_oss ? WeightType::MXFP4 : options.matrix_type;
            QVERIFY2(t.type == want, (t.name + " is " + weight_type_info(t.type).name).c_str());
        }
        QCOMPARE(run_cli({"check", a, "--quiet"}).exit_code, 0);
        const CliResult r = run_cli({"logits", "-m", a, "--tokens", "1,2,3,4", "--out", a + ".f32"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        const std::vector<float> logits = read_f32(a + ".f32");
        QCOMPARE(logits.size(), size_t(4 * 1024));
        QVERIFY(std::all_of(logits.begin(), logits.end(), [](float x) { return std::isfinite(x); }));
    }

    // RandomModelOptions::embedding_init (colibri-make-model --embedding-init): with the default embedding (sd 0.02)
    // a sequence's tokens route alike, since near-uniform attention hands every position the context's mean, far
    // larger than the token's own embedding; at sd 4 each token's identity dominates and routing spreads over the
    // experts. A shrunken qwen3-30b-a3b (4 layers, hidden 256, 64 experts top-8), 48 varied tokens in one sequence:
    // the default used 24 to 52 distinct experts per layer (median 31.5) when this test was written, sd 4 62 to 64
    // (uniform routing: 63.9 expected). Only the embedding's bytes change, and an embedding_init equal to init
    // writes the default's bytes.
    void embedding_init_spreads_routing() {
        json cfg = preset_config("qwen3-30b-a3b");
        QVERIFY(cfg.is_object());
        cfg["num_hidden_layers"] = 4;
        cfg["hidden_size"] = 256;
        cfg["vocab_size"] = 1024;
        cfg["bos_token_id"] = cfg["eos_token_id"] = 1000;
        cfg["num_attention_heads"] = 4;
        cfg["num_key_value_heads"] = 2;
        cfg["num_experts"] = 64;
        cfg["moe_intermediate_size"] = 128;
        const QString plain = dir_.filePath("routing-default.bin"), same = dir_.filePath("routing-same.bin"),
                      spread = dir_.filePath("routing-embedding-4.bin");
        tools::RandomModelOptions options;
        QVERIFY(tools::write_random_model(cfg, plain.toStdString(), options));
        options.embedding_init = options.init;
        QVERIFY(tools::write_random_model(cfg, same.toStdString(), options));
        options.embedding_init = 4.0f;
        QVERIFY(tools::write_random_model(cfg, spread.toStdString(), options));
        QVERIFY(read_all(plain) == read_all(same));
        {
            auto a = ModelFile::open(plain.toStdString()), b = ModelFile::open(spread.toStdString());
            QVERIFY(a && b);
            const auto& ta = a.value()->tensors();
            const auto& tb = b.value()->tensors();
            QCOMPARE(ta.size(), tb.size());
            for (size_t i = 0; i < ta.size(); ++i) {
                QCOMPARE(ta[i].name, tb[i].name);
                QCOMPARE(ta[i].size, tb[i].size);
                const bool equal = std::memcmp(ta[i].data, tb[i].data, ta[i].size) == 0;
                QVERIFY2(equal == (ta[i].name != "embed"), ta[i].name.c_str());
            }
        }
        QStringList ids;
        for (int i = 0; i < 48; ++i) ids << QString::number(1 + (i * 389) % 1000);
        auto distinct_per_layer = [&](const QString& model) {
            std::vector<int> distinct;
            const CliResult r = run_cli({"route", "-m", model, "--tokens", ids.join(','), "--json"});
            if (r.exit_code != 0) return distinct;
            const json j = json::parse(r.out.toStdString(), nullptr, false);
            if (j.is_discarded()) return distinct;
            for (const json& layer : j["layers"]) {
                std::set<int> used;
                for (const json& token : layer["experts"])
                    for (const json& e : token) used.insert(e.get<int>());
                distinct.push_back(int(used.size()));
            }
            return distinct;
        };
        std::vector<int> narrow = distinct_per_layer(plain), wide = distinct_per_layer(spread);
        QCOMPARE(narrow.size(), size_t(4));
        QCOMPARE(wide.size(), size_t(4));
        qInfo("distinct experts per layer of 64 over 48 tokens: default %d %d %d %d, embedding sd 4 %d %d %d %d", narrow[0],
              narrow[1], narrow[2], narrow[3], wide[0], wide[1], wide[2], wide[3]);
        for (int d : wide) QVERIFY2(d >= 56, "embedding_init 4: every layer uses at least 56 of its 64 experts");
        std::sort(narrow.begin(), narrow.end());
        QVERIFY2(narrow[1] + narrow[2] <= 2 * 40, "the default routes narrowly: a median of at most 40 experts");
    }

    // An unwritable path is a one-line error and leaves nothing.
    void bad_output_path() {
        json cfg = preset_config("qwen3-30b-a3b");
        QVERIFY(cfg.is_object());
        const QString out = dir_.filePath("missing-dir/model.bin");
        auto written = tools::write_random_model(cfg, out.toStdString(), tools::RandomModelOptions{});
        QVERIFY(!written);
        QVERIFY(!QFile::exists(out));
        QProcess make;
        make.start(QStringLiteral(COLIBRI_BUILD_DIR "/bin/colibri-make-model"), {"--preset", "gpt-oss-20b", "-o", out});
        QVERIFY(make.waitForFinished(60000));
        QCOMPARE(make.exitCode(), 1);
        const QByteArray err = make.readAllStandardError();
        QVERIFY2(err.startsWith("colibri-make-model: ") && err.count('\n') == 1, err.constData());
        QVERIFY(!QFile::exists(out));
    }
};

QTEST_GUILESS_MAIN(TestRandomModel)
#include "test_random_model.moc"
