// Parity with Hugging Face transformers on the reference models: convert each family, then compare logits,
// routing and greedy generation through the CLI, for f32 and f16 weights. The newer families (transformers 5.2)
// are converted from both config spellings: transformers 5's config.json (rope_parameters) and the hub's
// (config.hub_style.json: rope_theta / rope_scaling), which must give the same file.
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>
#include <cstring>
#include <string_view>

#include "../test_support.h"
#include "engine/core/model.h"
#include "engine/core/session.h"
#include "engine/core/thread_pool.h"

using namespace colibri::test;

namespace {
// The families of transformers 5.2's third reference set that run on softmax or latent attention.
constexpr const char* kLateFamilies[] = {"minimax_m2", "glm4_moe_lite"};

// kSanitized (test_support.h): the sanitized tree skips the rows that only repeat a path with other numbers (a hub
// spelling's f16 file, bit-identity over more weight types and repeated runs), which the release tree checks in
// full. They were 5 of this suite's 9 minutes under ASan on the 2-core VM.
}  // namespace

struct Tolerance {
    double logits;   // max |Δlogit|
    double weights;  // max |Δ routing weight|
    // Greedy ids are compared up to the first step whose reference top-1/top-2 gap is below this (0: all of them).
    double greedy_margin = 0.0;
};

class TestReferenceParity : public QObject {
    Q_OBJECT

private:
    QTemporaryDir dir_;

    // The reference model directory, or for "<family>/hub" a copy whose config.json is config.hub_style.json.
    QString model_dir(const QString& variant) {
        const QString family = variant.section('/', 0, 0);
        if (!variant.endsWith("/hub")) return reference("hf/" + family + "/model");  // (and /gguf: see convert)
        const QString d = dir_.filePath(family + "-hub");
        if (!QFile::exists(d + "/config.json")) {
            QDir().mkpath(d);
            const QString src = reference("hf/" + family + "/model");
            QFile::copy(src + "/config.hub_style.json", d + "/config.json");
            QFile::copy(src + "/generation_config.json", d + "/generation_config.json");
            QFile::link(src + "/model.safetensors", d + "/model.safetensors");
        }
        return d;
    }

    // "<family>/gguf": the f32 conversion exported to GGUF (as llama.cpp's converter would write it) and imported back.
    QString convert(const QString& variant, const QString& type) {
        const QString out = dir_.filePath(QString(variant).replace('/', '-') + "-" + type + ".bin");
        if (QFile::exists(out)) return out;
        QString source = model_dir(variant);
        if (variant.endsWith("/gguf")) {
            const QString bin = convert(variant.section('/', 0, 0), "f32");
            source = dir_.filePath(QString(variant).replace('/', '-') + ".gguf");
            if (bin.isEmpty() || run_cli({"export", bin, "-o", source}).exit_code != 0) return QString();
        }
        const CliResult r = run_cli({"convert", source, "-o", out, "--type", type, "-q"});
        if (r.crashed || r.exit_code != 0) qWarning("convert failed: %s", r.err.constData());
        return r.exit_code == 0 ? out : QString();
    }

    void check_family(const QString& variant, const QString& type, const Tolerance& tol) {
        const QString family = variant.section('/', 0, 0);
        const QString model = convert(variant, type);
        QVERIFY2(!model.isEmpty(), "conversion failed");
        const QJsonArray input = read_json(reference("hf/" + family + "/ref/input_ids.json")).array();
        QCOMPARE(input.size(), 16);
        const QString ids = ids_arg(input);

        // Logits at every position.
        const QString logits_path = dir_.filePath(QString(variant).replace('/', '-') + "-" + type + ".f32");
        CliResult r = run_cli({"logits", "-m", model, "--tokens", ids, "--out", logits_path});
        QVERIFY2(r.exit_code == 0 && !r.crashed, r.err.constData());
        const std::vector<float> got = read_f32(logits_path);
        const std::vector<float> want = read_f32(reference("hf/" + family + "/ref/logits.f32"));
        QCOMPARE(got.size(), want.size());
        double max_diff = 0.0;
        for (size_t i = 0; i < got.size(); ++i) max_diff = std::max(max_diff, std::fabs(double(got[i]) - double(want[i])));
        qInfo("%s %s: max |dlogit| = %.3g (bound %.3g)", qPrintable(family), qPrintable(type), max_diff, tol.logits);
        QVERIFY2(max_diff <= tol.logits, qPrintable(QString("max |dlogit| %1 > %2").arg(max_diff).arg(tol.logits)));

        // Routing: the same experts in the same order (descending weight) for every MoE layer and token, the
        // weights that multiply each expert's output close; where the reference gives each expert's selection
        // score (score + correction bias), the selected experts' selection scores close too.
        r = run_cli({"route", "-m", model, "--tokens", ids, "--json"});
        QVERIFY2(r.exit_code == 0 && !r.crashed, r.err.constData());
        const QJsonArray got_layers = QJsonDocument::fromJson(r.out).object()["layers"].toArray();
        const QJsonArray want_layers = read_json(reference("hf/" + family + "/ref/router.json")).object()["layers"].toArray();
        QCOMPARE(got_layers.size(), want_layers.size());
        double max_w = 0.0;
        for (int l = 0; l < want_layers.size(); ++l) {
            const QJsonObject g = got_layers[l].toObject(), w = want_layers[l].toObject();
            QCOMPARE(g["layer"].toInt(), w["layer"].toInt());
            const QJsonArray ge = g["experts"].toArray(), we = w["experts"].toArray();
            const QJsonArray gw = g["weights"].toArray(), ww = w["weights"].toArray();
            const QJsonArray gs = g["selection_scores"].toArray(), ws = w["selection_scores"].toArray();
            QCOMPARE(ge.size(), we.size());
            QCOMPARE(gs.size(), ge.size());
            for (int t = 0; t < we.size(); ++t) {
                // The same experts in the reference's order (descending weight). Two experts may trade places only
                // where the reference's weights are closer than the tolerance: the order of weights that close is
                // the rounding's (f16: deepseek_v3's layer 2, token 11 has two weights 1.3e-4 apart).
                const QJsonArray gt = ge[t].toArray(), wt = we[t].toArray();
                QCOMPARE(gt.size(), wt.size());
                for (int k = 0; k < wt.size(); ++k) {
                    int j = 0;
                    while (j < gt.size() && gt[j] != wt[k]) ++j;
                    QVERIFY2(j < gt.size(), qPrintable(QString("layer %1 token %2: expert %3 not selected").arg(l).arg(t).arg(wt[k].toInt())));
                    if (j != k)
                        QVERIFY2(std::fabs(ww[t].toArray()[j].toDouble() - ww[t].toArray()[k].toDouble()) <= tol.weights,
                                 qPrintable(QString("layer %1 token %2: experts in another order").arg(l).arg(t)));
                    max_w = std::max(max_w, std::fabs(gw[t].toArray()[j].toDouble() - ww[t].toArray()[k].toDouble()));
                    if (!ws.isEmpty())  // the selection score of expert wt[k]: score + bias (gpt_oss: its biased logit)
                        max_w = std::max(max_w, std::fabs(gs[t].toArray()[j].toDouble() - ws[t].toArray()[wt[k].toInt()].toDouble()));
                }
            }
        }
        qInfo("%s %s: max |dweight| = %.3g (bound %.3g)", qPrintable(family), qPrintable(type), max_w, tol.weights);
        QVERIFY(max_w <= tol.weights);

        // Greedy generation: exactly the reference ids.
        r = run_cli({"generate", "-m", model, "--tokens", ids, "-n", "16", "--greedy", "--json"});
        QVERIFY2(r.exit_code == 0 && !r.crashed, r.err.constData());
        const QJsonArray new_ids = QJsonDocument::fromJson(r.out).object()["new_ids"].toArray();
        const QJsonObject want_gen = read_json(reference("hf/" + family + "/ref/generate.json")).object();
        QJsonArray want_ids = want_gen["new_ids"].toArray();
        const QJsonArray gaps = want_gen["top1_top2_logit_gap"].toArray();
        QJsonArray got_ids = new_ids;
        for (int i = 0; i < gaps.size() && i < want_ids.size(); ++i)
            if (gaps[i].toDouble() < tol.greedy_margin) {
                qInfo("%s %s: greedy ids compared up to step %d (reference gap %.3g)", qPrintable(family), qPrintable(type), i,
                      gaps[i].toDouble());
                while (want_ids.size() > i) want_ids.removeLast();
                while (got_ids.size() > i) got_ids.removeLast();
                break;
            }
        QCOMPARE(got_ids, want_ids);
    }

private slots:
    void initTestCase() { QVERIFY(dir_.isValid()); }

    void parity_data() {
        QTest::addColumn<QString>("family");
        QTest::addColumn<QString>("type");
        QTest::addColumn<double>("logit_tol");
        QTest::addColumn<double>("weight_tol");
        QTest::addColumn<double>("greedy_margin");
        // f32: the reference README's bounds. f16: weights rounded to 11-bit mantissas (relative error
        // <= 2^-11 = 4.9e-4 each); over the ~7 chained projections to logits of magnitude ~4 that allows
        // ~7 * 4.9e-4 * 4 = 1.4e-2 in the worst case; measured 3.5e-3..4.9e-3, bound 1e-2.
        for (const char* fam : {"mixtral", "qwen2_moe", "olmoe", "qwen3_moe", "gpt_oss", "deepseek_v3", "glm4_moe", "qwen3_next",
                                "qwen3_5_moe", "qwen3_moe/hub", "gpt_oss/hub", "deepseek_v3/hub", "glm4_moe/hub", "qwen3_next/hub",
                                "qwen3_5_moe/hub", "qwen3_next/gguf", "qwen3_5_moe/gguf"}) {
            QTest::newRow(qPrintable(QString(fam) + "/f32")) << QString(fam) << "f32" << 1e-3 << 1e-4 << 0.0;
            // The Gated DeltaNet hybrids chain more f16 products per layer (q|k|v, z, b and a into a recurrent state
            // whose decay is exp(−exp(A_log)·softplus(a + dt_bias))) over four layers: measured 1.4e-2 (qwen3_next) and
            // 1.0e-2 (qwen3_5_moe), bound 2.5e-2; routing weights 1.4e-3 and 1.2e-3 (the same experts), bound 3e-3. Their
            // f16 state drifts further over a generation: greedy ids are compared up to the first step whose reference
            // margin is below 0.1 (qwen3_next's step 9, a gap of 0.084, flips in f16).
            const bool hybrid = QString(fam).startsWith("qwen3_next") || QString(fam).startsWith("qwen3_5_moe");
            if (kSanitized && QString(fam).endsWith("/hub")) continue;  // the same f16 path as the family's own row
            QTest::newRow(qPrintable(QString(fam) + "/f16")) << QString(fam) << "f16" << (hybrid ? 2.5e-2 : 1e-2) << (hybrid ? 3e-3 : 1e-3)
                                                             << (hybrid ? 0.1 : 0.0);
        }
        for (const char* late : kLateFamilies)
            for (const QString& fam : {QString(late), QString(late) + "/hub"}) {
                QTest::newRow(qPrintable(fam + "/f32")) << fam << "f32" << 1e-3 << 1e-4 << 0.0;
                if (!(kSanitized && fam.endsWith("/hub"))) QTest::newRow(qPrintable(fam + "/f16")) << fam << "f16" << 1e-2 << 1e-3 << 0.0;
            }
    }

    void parity() {
        QFETCH(QString, family);
        QFETCH(QString, type);
        QFETCH(double, logit_tol);
        QFETCH(double, weight_tol);
        QFETCH(double, greedy_margin);
        check_family(family, type, Tolerance{logit_tol, weight_tol, greedy_margin});
    }

    // Both config spellings of a family describe the same model: the two conversions are the same bytes.
    void config_spellings_agree_data() {
        QTest::addColumn<QString>("family");
        for (const char* fam : {"qwen3_moe", "gpt_oss", "deepseek_v3", "glm4_moe", "qwen3_next", "qwen3_5_moe"}) QTest::newRow(fam) << QString(fam);
        for (const char* fam : kLateFamilies) QTest::newRow(fam) << QString(fam);
    }

    void config_spellings_agree() {
        QFETCH(QString, family);
        const QString a = convert(family, "f32"), b = convert(family + "/hub", "f32");
        QVERIFY(!a.isEmpty() && !b.isEmpty());
        QVERIFY2(read_all(a) == read_all(b), "the two spellings gave different files");
    }

    // `colibri info` of a hybrid names its linear-attention layers (layer_types: three of four), their sizes and state.
    void hybrid_info_describes_linear_attention_data() {
        QTest::addColumn<QString>("family");
        QTest::addColumn<bool>("tiled");
        QTest::newRow("qwen3_next") << "qwen3_next" << false;
        QTest::newRow("qwen3_5_moe") << "qwen3_5_moe" << true;
    }
    void hybrid_info_describes_linear_attention() {
        QFETCH(QString, family);
        QFETCH(bool, tiled);
        const CliResult r = run_cli({"info", convert(family, "f32"), "--json"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        const QJsonObject j = QJsonDocument::fromJson(r.out).object();
        QVERIFY(j["attention_output_gate"].toBool());
        const QJsonObject lin = j["linear_attention"].toObject();
        QCOMPARE(lin["layers"].toArray(), (QJsonArray{0, 1, 2}));
        QCOMPARE(lin["key_heads"].toInt(), 2);
        QCOMPARE(lin["value_heads"].toInt(), 4);
        QCOMPARE(lin["value_heads_tiled"].toBool(), tiled);
        QCOMPARE(lin["state_bytes_per_layer"].toInt(), 4 * (4 * 16 * 16 + 3 * 128));  // recurrent state + 3 conv rows
    }

    // q8_0 against the f32 reference, teacher-forced at each of the 16 positions (colibri compare): top-1
    // agreement and mean KL(ref || q8_0). q8_0 matrices run on the integer path, so the activations are
    // quantised to 8 bits per block of 32 as in llama.cpp (kernels/canonical.h). Measured with that: mixtral
    // 15/16, 4.9e-4; qwen2_moe 13/16, 2.7e-4; olmoe 16/16, 1.4e-4 (with f32 activations it was 16/16, 9.7e-5;
    // 13/16, 1.4e-4; 16/16, 6.6e-5). The misses are near-ties: mixtral's position 12 has a reference top-1
    // margin of 0.026 logits, qwen2_moe's positions 8, 9 and 14 0.018, 0.011 and 0.005, below q8_0's logit
    // noise (max |dlogit| 0.1..0.4 on these random models), so no 8-bit scheme can promise them
    // (docs/QUANTIZATION.md). What is asserted instead: every position whose reference margin exceeds 0.03
    // agrees, and the mean KL stays within 1.5x of what was measured.
    void q8_0_quality_data() {
        QTest::addColumn<QString>("family");
        QTest::addColumn<double>("max_kl");
        // 1.5× the mean KL measured with 8-bit activations (docs/QUANTIZATION.md, table (a)).
        QTest::newRow("mixtral") << "mixtral" << 7.5e-4;
        QTest::newRow("qwen2_moe") << "qwen2_moe" << 4.0e-4;
        QTest::newRow("olmoe") << "olmoe" << 2.1e-4;
    }

    void q8_0_quality() {
        QFETCH(QString, family);
        QFETCH(double, max_kl);
        const QString model = convert(family, "q8_0");
        QVERIFY(!model.isEmpty());
        const QString ids = ids_arg(read_json(reference("hf/" + family + "/ref/input_ids.json")).array());
        const CliResult r = run_cli({"compare", "-m", model, "--baseline-logits", reference("hf/" + family + "/ref/logits.f32"),
                                     "--tokens", ids, "--json"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        const QJsonObject j = QJsonDocument::fromJson(r.out).object();
        QCOMPARE(j["positions"].toInt(), 16);
        qInfo("%s q8_0: top-1 %d/16, mean KL %.3g", qPrintable(family), j["top1_agree"].toInt(), j["mean_kl"].toDouble());
        for (const auto& d : j["disagreements"].toArray()) {
            const QJsonObject o = d.toObject();
            QVERIFY2(o["baseline_margin"].toDouble() <= 0.03,
                     qPrintable(QString("position %1 flipped with a reference margin of %2")
                                    .arg(o["position"].toInt()).arg(o["baseline_margin"].toDouble())));
        }
        QVERIFY(j["mean_kl"].toDouble() <= max_kl);
    }

    // Same logits, bit for bit, for -t 1 and -t 2 and across runs.
    void determinism_data() {
        QTest::addColumn<QString>("family");
        QTest::addColumn<QString>("type");
        for (const char* fam : {"mixtral", "qwen2_moe", "olmoe", "qwen3_moe", "gpt_oss", "deepseek_v3", "glm4_moe", "qwen3_next", "qwen3_5_moe"})
            for (const char* type : {"f32", "f16", "bf16", "q8_0"})
                if (!kSanitized || type == std::string_view("f32") || type == std::string_view("q8_0"))  // float and integer paths
                    QTest::newRow(qPrintable(QString(fam) + "/" + type)) << QString(fam) << QString(type);
        for (const char* fam : kLateFamilies)
            for (const char* type : {"f32", "q8_0"}) QTest::newRow(qPrintable(QString(fam) + "/" + type)) << QString(fam) << QString(type);
    }

    void determinism() {
        QFETCH(QString, family);
        QFETCH(QString, type);
        const QString model = convert(family, type);
        QVERIFY(!model.isEmpty());
        const QString ids = ids_arg(read_json(reference("hf/" + family + "/ref/input_ids.json")).array());
        QByteArray first;
        int run = 0;
        for (const char* threads : {"1", "2", "2", "1"}) {
            if (kSanitized && run == 2) break;  // -t 1 against -t 2 once
            const QString out = dir_.filePath(QString("det-%1-%2-%3.f32").arg(family, type).arg(run++));
            const CliResult r = run_cli({"logits", "-m", model, "--tokens", ids, "-t", threads, "--out", out});
            QVERIFY2(r.exit_code == 0, r.err.constData());
            const QByteArray bytes = read_all(out);
            QVERIFY(!bytes.isEmpty());
            if (first.isEmpty()) first = bytes;
            QVERIFY2(bytes == first, qPrintable(QString("logits differ with -t %1").arg(threads)));
        }
    }

    // Without the KV cache (transformers' generate(use_cache=False) recomputes the whole sequence each step): the
    // prompt and the reference's no-cache greedy ids as one sequence through `colibri logits`, whose argmax at each
    // of the last 16 positions must be the next id, and whose first 16 rows are the reference logits.
    void greedy_without_cache_data() {
        QTest::addColumn<QString>("family");
        for (const char* fam : kLateFamilies) QTest::newRow(fam) << QString(fam);
    }
    void greedy_without_cache() {
        QFETCH(QString, family);
        const QString model = convert(family, "f32");
        QVERIFY(!model.isEmpty());
        const QJsonObject gen = read_json(reference("hf/" + family + "/ref/generate.json")).object();
        QJsonArray seq = read_json(reference("hf/" + family + "/ref/input_ids.json")).array();
        const QJsonArray nocache = gen["new_ids_nocache"].toArray();
        QCOMPARE(nocache, gen["new_ids"].toArray());
        for (int i = 0; i + 1 < nocache.size(); ++i) seq.append(nocache[i]);
        const QString out = dir_.filePath(family + "-nocache.f32");
        const CliResult r = run_cli({"logits", "-m", model, "--tokens", ids_arg(seq), "--out", out});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        const std::vector<float> got = read_f32(out), want = read_f32(reference("hf/" + family + "/ref/logits.f32"));
        const size_t vocab = want.size() / 16;
        QCOMPARE(got.size(), size_t(seq.size()) * vocab);
        for (size_t i = 0; i < want.size(); ++i) QVERIFY(std::fabs(got[i] - want[i]) <= 1e-3);
        for (int k = 0; k < nocache.size(); ++k) {
            const float* row = got.data() + size_t(15 + k) * vocab;
            QCOMPARE(int(std::max_element(row, row + vocab) - row), nocache[k].toInt());
        }
    }

    // A prompt of 200 tokens (four blocks of the key cache, four prompt chunks): the reference prompt first, so its 16
    // rows are the reference logits; the whole prompt's logits are the same bits with -t 1 and -t 2, token by token
    // through the KV cache (a session with chunk 1) and in chunks of 37.
    void long_prompt_data() { greedy_without_cache_data(); }
    void long_prompt() {
        QFETCH(QString, family);
        const QString model = convert(family, "f32");
        QVERIFY(!model.isEmpty());
        const QJsonArray ref_ids = read_json(reference("hf/" + family + "/ref/input_ids.json")).array();
        const std::vector<float> want = read_f32(reference("hf/" + family + "/ref/logits.f32"));
        const size_t vocab = want.size() / 16, n = 200;
        std::vector<int32_t> seq;
        QJsonArray seq_json;
        for (size_t i = 0; i < n; ++i) {
            seq.push_back(i < 16 ? ref_ids[int(i)].toInt() : int32_t((7 + 389 * i) % vocab));
            seq_json.append(seq.back());
        }
        QByteArray first;
        for (const char* threads : {"1", "2"}) {
            const QString out = dir_.filePath(QString("%1-long-t%2.f32").arg(family, threads));
            const CliResult r = run_cli({"logits", "-m", model, "--tokens", ids_arg(seq_json), "-t", threads, "--out", out});
            QVERIFY2(r.exit_code == 0, r.err.constData());
            const QByteArray bytes = read_all(out);
            QCOMPARE(size_t(bytes.size()), n * vocab * sizeof(float));
            if (first.isEmpty()) first = bytes;
            QVERIFY2(bytes == first, "-t 1 and -t 2 differ");
        }
        const float* whole = reinterpret_cast<const float*>(first.constData());
        for (size_t i = 0; i < want.size(); ++i) QVERIFY(std::fabs(whole[i] - want[i]) <= 1e-3);

        auto loaded = colibri::Model::load(model.toStdString());
        QVERIFY2(loaded, loaded.message().c_str());
        colibri::ThreadPool pool(2);
        for (uint32_t chunk : {1u, 37u}) {
            colibri::SessionOptions options;
            options.chunk = chunk;
            colibri::Session session(*loaded.value(), pool, 256, options);
            for (size_t i = 0; i < n; i += chunk) {
                const size_t len = std::min<size_t>(chunk, n - i);
                auto logits = session.eval(std::span<const int32_t>(seq.data() + i, len));
                QVERIFY(logits.is_ok());
                QVERIFY2(std::equal(logits->begin(), logits->end(), whole + (i + len - 1) * vocab),
                         qPrintable(QString("chunk %1: position %2 differs").arg(chunk).arg(i + len - 1)));
            }
        }
    }
};

QTEST_GUILESS_MAIN(TestReferenceParity)
#include "test_reference_parity.moc"
