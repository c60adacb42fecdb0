// HF import paths beyond the reference files: sharded checkpoints, f16 and bf16 source tensors, dense layers,
// tied embeddings and the tokenizer inside the .bin.
#include <QDir>
#include <QTemporaryDir>
#include <QtTest>

#include "../bin_bytes.h"
#include "../test_support.h"
#include "tools/safetensors.h"

using namespace colibri;
using namespace colibri::test;

namespace {
std::vector<tools::OutputTensor> load_reference(const QString& family, tools::SourceDType dtype) {
    auto f = tools::SafetensorsFile::open(reference("hf/" + family + "/model/model.safetensors").toStdString());
    std::vector<tools::OutputTensor> out;
    if (!f) return out;
    for (const auto& [name, t] : f.value()->tensors()) {
        tools::OutputTensor o{name, t.shape, std::vector<float>(t.elements()), dtype};
        for (uint64_t i = 0; i < t.elements(); ++i) o.values[i] = tools::source_element(t, i);
        out.push_back(std::move(o));
    }
    return out;
}
}  // namespace

class TestConvert : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

    QString hf_dir(const QString& name, const QString& family) {
        const QString d = dir_.filePath(name);
        QDir().mkpath(d);
        QFile::copy(reference("hf/" + family + "/model/config.json"), d + "/config.json");
        QFile::copy(reference("hf/" + family + "/model/generation_config.json"), d + "/generation_config.json");
        return d;
    }

    QByteArray logits_of(const QString& model, const QString& ids) {
        const QString out = model + ".logits";
        const CliResult r = run_cli({"logits", "-m", model, "--tokens", ids, "--out", out});
        if (r.exit_code != 0) qWarning("%s", r.err.constData());
        return read_all(out);
    }

    QString convert(const QString& dir, const QString& type) {
        const QString out = dir + "-" + type + ".bin";
        const CliResult r = run_cli({"convert", dir, "-o", out, "--type", type, "-q"});
        if (r.exit_code != 0) qWarning("%s", r.err.constData());
        return r.exit_code == 0 ? out : QString();
    }

private slots:
    void sharded_checkpoint_equals_single_file() {
        const QString family = "qwen2_moe";
        auto tensors = load_reference(family, tools::SourceDType::F32);
        QVERIFY(tensors.size() > 10);
        const QString d = hf_dir("sharded", family);
        // Three shards, tensors dealt round-robin, and the index that names them.
        std::vector<std::vector<tools::OutputTensor>> shards(3);
        QJsonObject weight_map;
        for (size_t i = 0; i < tensors.size(); ++i) {
            const QString shard = QString("model-%1-of-00003.safetensors").arg(i % 3 + 1, 5, 10, QChar('0'));
            weight_map[QString::fromStdString(tensors[i].name)] = shard;
            shards[i % 3].push_back(tensors[i]);
        }
        for (int s = 0; s < 3; ++s) {
            const QString shard = QString("%1/model-%2-of-00003.safetensors").arg(d).arg(s + 1, 5, 10, QChar('0'));
            QVERIFY(tools::write_safetensors(shard.toStdString(), shards[s]).is_ok());
        }
        QFile index(d + "/model.safetensors.index.json");
        QVERIFY(index.open(QIODevice::WriteOnly));
        index.write(QJsonDocument(QJsonObject{{"metadata", QJsonObject{}}, {"weight_map", weight_map}}).toJson());
        index.close();

        const QString ids = ids_arg(read_json(reference("hf/" + family + "/ref/input_ids.json")).array());
        const QString direct = dir_.filePath("direct.bin");
        QCOMPARE(run_cli({"convert", reference("hf/" + family + "/model"), "-o", direct, "-q"}).exit_code, 0);
        const QString sharded = convert(d, "f32");
        QVERIFY(!sharded.isEmpty());
        const QByteArray a = logits_of(direct, ids), b = logits_of(sharded, ids);
        QVERIFY(!a.isEmpty());
        QVERIFY(a == b);

        // An index naming a missing shard is an error, not a crash.
        QFile::remove(QString("%1/model-00002-of-00003.safetensors").arg(d));
        const CliResult r = run_cli({"convert", d, "-o", dir_.filePath("broken.bin")});
        QVERIFY(r.exit_code != 0 && !r.crashed);
        QVERIFY(r.err.startsWith("colibri: convert: "));
    }

    // A checkpoint stored in f16 (bf16) holds exactly the values that --type f16 (bf16) rounds an f32 checkpoint
    // to, so both paths must give the same logits bit for bit, whichever storage type the .bin uses.
    void half_precision_sources_data() {
        QTest::addColumn<int>("dtype");
        QTest::addColumn<QString>("type");
        QTest::newRow("f16") << int(tools::SourceDType::F16) << "f16";
        QTest::newRow("bf16") << int(tools::SourceDType::BF16) << "bf16";
    }

    void half_precision_sources() {
        QFETCH(int, dtype);
        QFETCH(QString, type);
        const QString family = "mixtral";
        auto tensors = load_reference(family, static_cast<tools::SourceDType>(dtype));
        // Norms stay f32 in the .bin whatever the type; keep them f32 in the source too so both paths agree.
        for (auto& t : tensors)
            if (t.shape.size() == 1 || t.name.find(".gate.weight") != std::string::npos) t.dtype = tools::SourceDType::F32;
        const QString d = hf_dir("src-" + type, family);
        QVERIFY(tools::write_safetensors((d + "/model.safetensors").toStdString(), tensors).is_ok());
        const QString ids = ids_arg(read_json(reference("hf/" + family + "/ref/input_ids.json")).array());
        const QString from_half = convert(d, type);
        const QString rounded = dir_.filePath("rounded-" + type + ".bin");
        QCOMPARE(run_cli({"convert", reference("hf/" + family + "/model"), "-o", rounded, "--type", type, "-q"}).exit_code, 0);
        QVERIFY(!from_half.isEmpty());
        const QByteArray a = logits_of(from_half, ids), b = logits_of(rounded, ids);
        QVERIFY(!a.isEmpty());
        QVERIFY(a == b);
        // Widened to f32 storage, the same values through the f32 kernel: identical too.
        const QString widened = convert(d, "f32");
        QVERIFY(logits_of(widened, ids) == a);
    }

    QJsonArray route_layers(const QString& model) {
        const CliResult r = run_cli({"route", "-m", model, "--tokens", "1,7,99,1000,5", "--json"});
        return QJsonDocument::fromJson(r.out).object()["layers"].toArray();
    }

    // norm_topk_prob: the selected weights sum to one when set, and are the plain softmax shares otherwise.
    void norm_topk_prob_data() {
        QTest::addColumn<QString>("family");
        QTest::newRow("olmoe") << "olmoe";
        QTest::newRow("qwen2_moe") << "qwen2_moe";
    }
    void norm_topk_prob() {
        QFETCH(QString, family);
        const QStringList common{"--family", family, "--hidden", "64", "--layers", "2", "--experts", "6", "--ffn", "32", "--seed", "5"};
        QVERIFY(make_model(dir_.filePath("plain-" + family), common));
        QVERIFY(make_model(dir_.filePath("norm-" + family), common + QStringList{"--norm-topk-prob"}));
        const QJsonArray plain = route_layers(convert(dir_.filePath("plain-" + family), "f32"));
        const QJsonArray norm = route_layers(convert(dir_.filePath("norm-" + family), "f32"));
        QCOMPARE(plain.size(), 2);
        QCOMPARE(norm.size(), 2);
        for (int l = 0; l < 2; ++l) {
            const QJsonArray pw = plain[l].toObject()["weights"].toArray(), nw = norm[l].toObject()["weights"].toArray();
            // Layer 0 sees the same input in both models, so the same choice; later layers see different states.
            if (l == 0) QCOMPARE(plain[l].toObject()["experts"], norm[l].toObject()["experts"]);
            for (int t = 0; t < pw.size(); ++t) {
                const double p0 = pw[t].toArray()[0].toDouble(), p1 = pw[t].toArray()[1].toDouble();
                const double n0 = nw[t].toArray()[0].toDouble(), n1 = nw[t].toArray()[1].toDouble();
                QVERIFY(p0 + p1 < 1.0 - 1e-3);
                QVERIFY(std::fabs(n0 + n1 - 1.0) < 1e-6);
                if (l == 0) QVERIFY(std::fabs(n0 - p0 / (p0 + p1)) < 1e-6);
            }
        }
    }

    // clip_qkv: a bound no activation reaches changes nothing; a tight one changes the logits.
    void clip_qkv() {
        const QStringList common{"--family", "olmoe", "--hidden", "64", "--layers", "2", "--experts", "4", "--ffn", "32",
                                 "--init", "0.5", "--seed", "9"};
        QVERIFY(make_model(dir_.filePath("clip-none"), common));
        QVERIFY(make_model(dir_.filePath("clip-loose"), common + QStringList{"--clip-qkv", "1e30"}));
        QVERIFY(make_model(dir_.filePath("clip-tight"), common + QStringList{"--clip-qkv", "0.05"}));
        const QString ids = "1,2,3,4";
        const QByteArray none = logits_of(convert(dir_.filePath("clip-none"), "f32"), ids);
        QVERIFY(!none.isEmpty());
        QVERIFY(logits_of(convert(dir_.filePath("clip-loose"), "f32"), ids) == none);
        const QByteArray tight = logits_of(convert(dir_.filePath("clip-tight"), "f32"), ids);
        QVERIFY(!tight.isEmpty() && tight != none);
        const CliResult r = run_cli({"info", dir_.filePath("clip-tight-f32.bin"), "--json"});
        QCOMPARE(QJsonDocument::fromJson(r.out).object()["clip_qkv"].toDouble(), 0.05f);
    }

    // Sliding-window attention as transformers 5.2 runs it: qwen3_moe limits every layer when use_sliding_window is
    // true (it has no max_window_layers), qwen2_moe the layers of layer_types or else the even ones below
    // max_window_layers, mixtral every layer when sliding_window is not null; a window absent from the config is
    // 4096. The context stays max_position_embeddings (before, the window became the context: a 4-position model).
    void sliding_window_data() {
        QTest::addColumn<QString>("family");
        QTest::addColumn<QString>("edit");  // JSON merged into the reference config ("absent": the key removed)
        QTest::addColumn<uint32_t>("window");
        QTest::addColumn<QString>("sliding");  // the layers with the sliding bit
        QTest::newRow("qwen3_moe on") << "qwen3_moe" << R"({"use_sliding_window": true, "sliding_window": 4})" << 4u << "0,1";
        QTest::newRow("qwen3_moe off") << "qwen3_moe" << R"({"use_sliding_window": false, "sliding_window": 4})" << 0u << "";
        QTest::newRow("qwen3_moe on, null") << "qwen3_moe" << R"({"use_sliding_window": true, "sliding_window": null})" << 0u << "";
        QTest::newRow("qwen3_moe on, default") << "qwen3_moe" << R"({"use_sliding_window": true, "sliding_window": "absent"})" << 4096u << "0,1";
        QTest::newRow("qwen3_moe ignores max_window_layers")
            << "qwen3_moe" << R"({"use_sliding_window": true, "sliding_window": 4, "max_window_layers": 1})" << 4u << "0,1";
        QTest::newRow("qwen2_moe on") << "qwen2_moe" << R"({"use_sliding_window": true, "sliding_window": 4})" << 4u << "0";
        QTest::newRow("qwen2_moe none below max_window_layers")
            << "qwen2_moe" << R"({"use_sliding_window": true, "sliding_window": 4, "max_window_layers": 0})" << 0u << "";
        QTest::newRow("qwen2_moe layer_types")
            << "qwen2_moe" << R"({"use_sliding_window": true, "sliding_window": 4, "layer_types": ["full_attention", "sliding_attention"]})" << 4u << "1";
        QTest::newRow("mixtral") << "mixtral" << R"({"sliding_window": 4})" << 4u << "0,1";
        QTest::newRow("mixtral, window as long as the context") << "mixtral" << R"({"sliding_window": 4096})" << 0u << "";
    }
    void sliding_window() {
        QFETCH(QString, family);
        QFETCH(QString, edit);
        QFETCH(uint32_t, window);
        QFETCH(QString, sliding);
        static int row = 0;
        const QString d = dir_.filePath("sliding-" + QString::number(row++));
        QDir().mkpath(d);
        QJsonObject cfg = read_json(reference("hf/" + family + "/model/config.json")).object();
        const QJsonObject changes = QJsonDocument::fromJson(edit.toUtf8()).object();
        for (auto it = changes.begin(); it != changes.end(); ++it) {
            if (it.value() == QJsonValue("absent")) cfg.remove(it.key());
            else cfg[it.key()] = it.value();
        }
        write_all(d + "/config.json", QJsonDocument(cfg).toJson());
        QFile::copy(reference("hf/" + family + "/model/generation_config.json"), d + "/generation_config.json");
        QFile::link(reference("hf/" + family + "/model/model.safetensors"), d + "/model.safetensors");
        const QString bin = convert(d, "f32");
        QVERIFY(!bin.isEmpty());
        const BinBytes b(read_all(bin));
        const HyperParams hp = b.header().hparams;
        QCOMPARE(hp.max_position, static_cast<uint32_t>(cfg["max_position_embeddings"].toInt()));
        QCOMPARE(hp.sliding_window, window);
        QStringList layers;
        for (uint32_t l = 0; l < hp.n_layers; ++l)
            if (b.layer(l).is_moe & kLayerSliding) layers << QString::number(l);
        QCOMPARE(layers.join(','), sliding);
    }

    // What the window does: with 2 layers and a window of 4, the last position sees the last 7 tokens only, so its
    // logits are those of those 7 tokens alone (RoPE depends on relative positions); without a window they are not.
    void sliding_window_limits_attention() {
        const QString d = dir_.filePath("qwen3-window");
        QDir().mkpath(d);
        QJsonObject cfg = read_json(reference("hf/qwen3_moe/model/config.json")).object();
        cfg["use_sliding_window"] = true;
        cfg["sliding_window"] = 4;
        write_all(d + "/config.json", QJsonDocument(cfg).toJson());
        QFile::link(reference("hf/qwen3_moe/model/model.safetensors"), d + "/model.safetensors");
        const QString windowed = convert(d, "f32"), full = convert(reference("hf/qwen3_moe/model"), "f32");
        QVERIFY(!windowed.isEmpty());
        QVERIFY(!full.isEmpty());
        const QString all = "11,12,13,14,15,16,17,18,19,20,21,22", last7 = "16,17,18,19,20,21,22";
        const auto last_row = [&](const QString& model, const QString& ids) {
            const QByteArray b = logits_of(model, ids);
            const qsizetype row = qsizetype(4) * cfg["vocab_size"].toInt();
            if (b.size() < row) return std::vector<float>();  // logits failed (before: a context of 4 positions)
            std::vector<float> v(static_cast<size_t>(row / 4));
            std::memcpy(v.data(), b.constData() + b.size() - row, static_cast<size_t>(row));
            return v;
        };
        const auto max_diff = [](const std::vector<float>& a, const std::vector<float>& b) {
            double m = 0;
            for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - b[i]));
            return m;
        };
        const std::vector<float> w_all = last_row(windowed, all), w_last = last_row(windowed, last7);
        const std::vector<float> f_all = last_row(full, all), f_last = last_row(full, last7);
        QVERIFY(!w_all.empty() && !w_last.empty() && !f_all.empty() && !f_last.empty());
        const double windowed_diff = max_diff(w_all, w_last), full_diff = max_diff(f_all, f_last);
        qInfo("last position, 12 tokens vs their last 7: max |delta logit| %.3g with the window, %.3g without", windowed_diff, full_diff);
        QVERIFY(windowed_diff < 1e-3);
        QVERIFY(full_diff > 100 * windowed_diff);
    }

    void generated_model_with_dense_layer_and_tokenizer() {
        const QString d = dir_.filePath("gen");
        QVERIFY(make_model(d, {"--family", "qwen2_moe", "--vocab", "151936", "--hidden", "64", "--layers", "3", "--experts", "4",
                               "--top-k", "2", "--ffn", "64", "--shared-ffn", "64", "--tied", "--mlp-only-layers", "1",
                               "--tokenizer", reference("tokenizers/qwen3")}));
        const QString bin = convert(d, "f16");
        QVERIFY(!bin.isEmpty());
        CliResult r = run_cli({"info", bin, "--json"});
        QCOMPARE(r.exit_code, 0);
        const QJsonObject info = QJsonDocument::fromJson(r.out).object();
        QCOMPARE(info["layers"].toInt(), 3);
        QCOMPARE(info["moe_layers"].toInt(), 2);
        QCOMPARE(info["dense_ffn"].toInt(), 256);
        QCOMPARE(info["tokenizer"].toString(), QString("byte-level BPE"));
        QVERIFY(info["chat_template"].toBool());
        QVERIFY(!info.contains("lm_head"));
        // Route lists only the MoE layers, by their real indices.
        r = run_cli({"route", "-m", bin, "--prompt", "Hello, world", "--json"});
        QCOMPARE(r.exit_code, 0);
        const QJsonObject route = QJsonDocument::fromJson(r.out).object();
        const QJsonArray layers = route["layers"].toArray();
        QCOMPARE(layers.size(), 2);
        QCOMPARE(layers[0].toObject()["layer"].toInt(), 0);
        QCOMPARE(layers[1].toObject()["layer"].toInt(), 2);
        // "Hello" "," " world" in the Qwen3 vocabulary (no BOS: its post-processor adds none).
        QCOMPARE(route["tokens"].toArray(), (QJsonArray{9707, 11, 1879}));
        // Prompt text and its token ids give the same generation.
        r = run_cli({"generate", "-m", bin, "--prompt", "Hello, world", "-n", "8", "--greedy", "--json"});
        QCOMPARE(r.exit_code, 0);
        const QJsonObject g = QJsonDocument::fromJson(r.out).object();
        const QString ids = ids_arg(g["prompt_ids"].toArray());
        const CliResult r2 = run_cli({"generate", "-m", bin, "--tokens", ids, "-n", "8", "--greedy", "--json"});
        QCOMPARE(QJsonDocument::fromJson(r2.out).object()["new_ids"], g["new_ids"]);
    }
};

QTEST_GUILESS_MAIN(TestConvert)
#include "test_convert.moc"
