// Every row of the two tables that carry behaviour, walked through every path that reads it, so that a row added
// without one of its behaviours fails here (docs/ARCHITECTURE.md, "Adding a weight type" / "Adding a family").
//  - Weight types (kernels/weight_types.h): names, quantise → dequantise round trip and the quantiser's range
//    error, the random filler, the kernels of every variant this CPU runs (against dequantise + dot, and
//    bit-identical across variants), and the GGUF mapping (ggml id and geometry, carry and export of the blocks,
//    ggml's dequantiser against the engine's).
//  - Families (engine/file/schema.h): the reference config of the family plans, every planned tensor has its
//    Hugging Face name, colibri-make-model writes the family from the schema, and the model converts, passes
//    `colibri check`, runs, exports to GGUF and comes back with the same logits.
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <nlohmann/json.hpp>

#include "../test_support.h"
#include "engine/file/format.h"
#include "engine/file/schema.h"
#include "kernels/matvec.h"
#include "kernels/random_blocks.h"
#include "kernels/registry.h"
#include "kernels/weight_types.h"
#include "tools/convert_plan.h"
#include "tools/ggml_dequant.h"
#include "tools/gguf.h"
#include "tools/gguf_format.h"
#include "tools/quantize.h"
#include "tools/random_model.h"

using namespace colibri;
using namespace colibri::test;
using nlohmann::json;

namespace {

double rms(const float* a, const float* b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; ++i) s += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    return std::sqrt(s / double(n));
}

constexpr size_t kCols = 512;  // whole blocks of every type

}  // namespace

class TestTableRows : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

    static WeightType fetch_type() {
        QFETCH(int, type);
        return static_cast<WeightType>(type);
    }

private slots:
    void weight_types_data() {
        QTest::addColumn<int>("type");
        for (const WeightTypeInfo& w : weight_types()) QTest::newRow(w.name) << int(w.type);
    }
    void family_rows_data() {
        QTest::addColumn<int>("family");
        for (const schema::FamilyInfo& f : schema::families()) QTest::newRow(f.name) << int(f.id);
    }

    // Names both ways, geometry, entry points.
    void weight_type_row_is_complete_data() { weight_types_data(); }
    void weight_type_row_is_complete() {
        const WeightType t = fetch_type();
        const WeightTypeInfo& w = weight_type_info(t);
        WeightType back;
        QVERIFY(format::weight_type_from_name(w.name, &back));
        QCOMPARE(int(back), int(t));
        QCOMPARE(std::string(format::weight_type_name(t)), std::string(w.name));
        QVERIFY(w.block_values >= 1 && w.block_bytes >= 1);
        QCOMPARE(kCols % w.block_values, size_t(0));
        QVERIFY(w.label && *w.label && w.summary && *w.summary && w.range && *w.range);
        QVERIFY(w.dequantize && w.quantize && w.random);
        QVERIFY(weight_type_info(w.fallback).block_values <= w.block_values);  // the converter's fallback chain ends
    }

    // quantise → dequantise: the values come back (f32 exactly, the others within a quarter of the values' sd);
    // values past the type's range are refused with a message naming the type and what bounds it.
    void weight_type_round_trip_data() { weight_types_data(); }
    void weight_type_round_trip() {
        const WeightType t = fetch_type();
        const WeightTypeInfo& w = weight_type_info(t);
        const std::vector<float> x = gaussian(kCols, 0.02f, 11);
        std::vector<uint8_t> q(weight_row_bytes(t, kCols));
        const Status s = tools::quantize_row(t, x.data(), kCols, q.data());
        QVERIFY2(s, s.message().c_str());
        std::vector<float> y(kCols);
        kernels::dequantize_row(t, q.data(), kCols, 0, y.data());
        const double err = rms(x.data(), y.data(), kCols) / 0.02;
        qInfo("%s: rms error %.4f of the sd", w.name, err);
        if (t == WeightType::F32) QCOMPARE(err, 0.0);
        else QVERIFY(err < 0.25);

        // The largest f32: refused with a message naming the type, what bounds it and the block, or (types whose
        // scales reach past f32: f32, mxfp4) stored so that it comes back finite.
        std::vector<float> huge = x;
        huge[37] = FLT_MAX;
        const Status refused = tools::quantize_row(t, huge.data(), kCols, q.data());
        if (refused) {
            kernels::dequantize_row(t, q.data(), kCols, 0, y.data());
            for (float v : y) QVERIFY(std::isfinite(v));
            QVERIFY(y[37] > FLT_MAX / 4);
            return;
        }
        const std::string why = refused.message();
        QVERIFY2(why.find(w.name) != std::string::npos && why.find(w.range) != std::string::npos, why.c_str());
        QVERIFY2(why.find(std::to_string(37 / w.block_values * w.block_values)) != std::string::npos, why.c_str());
    }

    // The random filler: finite values of about the asked standard deviation.
    void weight_type_random_rows_data() { weight_types_data(); }
    void weight_type_random_rows() {
        const WeightType t = fetch_type();
        const size_t rows = 16;
        std::vector<uint8_t> q(rows * weight_row_bytes(t, kCols));
        kernels::random_matrix(t, rows, kCols, 0.02f, 3, q.data());
        std::vector<float> y(kCols);
        double squares = 0;
        for (size_t r = 0; r < rows; ++r) {
            kernels::dequantize_row(t, q.data(), kCols, r, y.data());
            for (float v : y) {
                QVERIFY(std::isfinite(v));
                squares += double(v) * v;
            }
        }
        const double sd = std::sqrt(squares / double(rows * kCols));
        QVERIFY2(sd > 0.01 && sd < 0.04, qPrintable(QString("sd %1").arg(sd)));
    }

    // Every variant this CPU runs has matvec and matmul for the type; they agree with dequantise + dot (within
    // the 8-bit activations' error for the block types) and with each other bit for bit.
    void weight_type_kernels_data() { weight_types_data(); }
    void weight_type_kernels() {
        const WeightType t = fetch_type();
        const WeightTypeInfo& w = weight_type_info(t);
        QVERIFY(w.matrix);
        const size_t rows = 8, n = 3;
        std::vector<uint8_t> m(rows * weight_row_bytes(t, kCols));
        kernels::random_matrix(t, rows, kCols, 0.02f, 9, m.data());
        const std::vector<float> x = gaussian(kCols * n, 1.0f, 5);
        std::vector<float> want(rows * n), scale(rows * n), row(kCols);
        for (size_t r = 0; r < rows; ++r) {
            kernels::dequantize_row(t, m.data(), kCols, r, row.data());
            for (size_t i = 0; i < n; ++i) {
                double dot = 0, mag = 0;
                for (size_t c = 0; c < kCols; ++c) dot += double(row[c]) * x[i * kCols + c], mag += std::fabs(double(row[c]) * x[i * kCols + c]);
                want[i * rows + r] = float(dot);
                scale[i * rows + r] = float(mag);
            }
        }
        const double tolerance = w.block_values == 1 ? 1e-5 : 2e-2;  // relative to Σ|w·x|
        std::vector<float> first;
        for (kernels::Variant v : kernels::supported_variants()) {
            const kernels::KernelSet* k = kernels::kernel_set(v);
            QVERIFY(k && k->matvec[size_t(t)] && k->matmul[size_t(t)]);
            std::vector<float> y(rows * n);
            k->matmul[size_t(t)](m.data(), kCols, x.data(), n, y.data(), rows, 0, rows);
            std::vector<float> y0(rows);
            k->matvec[size_t(t)](m.data(), kCols, x.data(), y0.data(), 0, rows);
            for (size_t i = 0; i < rows * n; ++i)
                QVERIFY2(std::fabs(y[i] - want[i]) <= tolerance * scale[i],
                         qPrintable(QString("%1 %2: output %3 is %4, dequantise + dot %5").arg(kernels::variant_name(v)).arg(w.name).arg(i).arg(y[i]).arg(want[i])));
            QVERIFY2(std::memcmp(y0.data(), y.data(), rows * sizeof(float)) == 0, kernels::variant_name(v));
            if (first.empty()) first = y;
            QVERIFY2(std::memcmp(first.data(), y.data(), y.size() * sizeof(float)) == 0, kernels::variant_name(v));
        }
    }

    // GGUF: the ggml id names a ggml type of the same geometry and name; a block type's blocks are carried in and
    // exported out unchanged (q4_K's nibbles re-laid out both ways), and ggml's dequantiser reads the exported
    // blocks as the engine reads its own.
    void weight_type_gguf_data() { weight_types_data(); }
    void weight_type_gguf() {
        const WeightType t = fetch_type();
        const WeightTypeInfo& w = weight_type_info(t);
        const uint32_t id = tools::ggml_type_of(t);
        QCOMPARE(id, w.ggml_type);
        const gguf::GgmlTypeInfo* g = gguf::ggml_type_info(id);
        QVERIFY(g != nullptr);
        QCOMPARE(g->block, w.block_values);
        QCOMPARE(g->bytes, w.block_bytes);
        QCOMPARE(tools::ggml_type_name(id), std::string(w.name));
        if (w.block_values == 1) {
            QVERIFY(!tools::ggml_carried_type(id));
            return;
        }
        QVERIFY(tools::ggml_is_dequantizable(id));
        QCOMPARE(int(tools::ggml_carried_type(id).value_or(WeightType::F32)), int(t));
        const size_t bytes = weight_row_bytes(t, kCols);
        std::vector<uint8_t> ours(bytes), theirs(bytes), back(bytes);
        kernels::random_row(t, kCols, 0.02f, 4, 0, ours.data());
        tools::ggml_export_row(t, ours.data(), theirs.data(), kCols);
        tools::ggml_carry_row(id, theirs.data(), back.data(), kCols);
        QVERIFY(ours == back);
        std::vector<float> a(kCols), b(kCols);
        kernels::dequantize_row(t, ours.data(), kCols, 0, a.data());
        tools::ggml_dequantize_row(id, theirs.data(), b.data(), kCols);
        for (size_t i = 0; i < kCols; ++i)
            QVERIFY2(std::fabs(a[i] - b[i]) <= 1e-6f * std::fabs(a[i]), qPrintable(QString("value %1: %2 against ggml's %3").arg(i).arg(a[i]).arg(b[i])));
    }

    // A family row: its reference config plans, every planned tensor has a Hugging Face name, and a random model
    // written from the plan converts, is checked, runs, and survives GGUF export and import with the same logits.
    void family_row_is_complete_data() { family_rows_data(); }
    void family_row_is_complete() {
        QFETCH(int, family);
        const schema::FamilyInfo* f = schema::find_family(uint32_t(family));
        QVERIFY(f != nullptr);
        const QString cfg_path = reference(QString("hf/%1/model/config.json").arg(f->name));
        const QByteArray text = read_all(cfg_path);
        QVERIFY2(!text.isEmpty(), qPrintable("no reference config for family " + QString(f->name) + " at " + cfg_path));
        const json cfg = json::parse(text.toStdString());
        auto plan = tools::plan_model(cfg, {}, WeightType::Q8_0);
        QVERIFY2(plan, plan.message().c_str());
        QCOMPARE(int(plan.value().family), family);
        QCOMPARE(plan.value().sources.size(), plan.value().specs.size());
        for (const std::string& s : plan.value().sources) QVERIFY(!s.empty());

        const QString bin = dir_.filePath(QString(f->name) + ".bin");
        tools::RandomModelOptions options;
        options.matrix_type = WeightType::Q8_0;
        auto written = tools::write_random_model(cfg, bin.toStdString(), options);
        QVERIFY2(written, written.message().c_str());
        CliResult r = run_cli({"check", bin, "--quiet"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        r = run_cli({"logits", "-m", bin, "--tokens", "1,2,3", "--out", bin + ".f32"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        const std::vector<float> logits = read_f32(bin + ".f32");
        QCOMPARE(logits.size(), size_t(3) * plan.value().hp.vocab_size);
        for (float v : logits) QVERIFY(std::isfinite(v));

        const QString gguf = dir_.filePath(QString(f->name) + ".gguf"), again = dir_.filePath(QString(f->name) + "-again.bin");
        r = run_cli({"export", bin, "-o", gguf});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        r = run_cli({"convert", gguf, "-o", again, "--type", "q8_0", "-q"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        r = run_cli({"logits", "-m", again, "--tokens", "1,2,3", "--out", again + ".f32"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        QVERIFY(read_f32(again + ".f32") == logits);

        // colibri-make-model writes the family's Hugging Face checkpoint from the same schema: from the reference
        // config.json it has exactly the reference checkpoint's tensor names and shapes (stacked ones included), and
        // it converts and passes `colibri check`.
        const QString from_config = dir_.filePath(QString(f->name) + "-from-config");
        QVERIFY2(make_model({"-o", from_config, "--config", cfg_path}), f->name);
        auto ours = tools::SafetensorsFile::open((from_config + "/model.safetensors").toStdString());
        auto theirs = tools::SafetensorsFile::open(reference(QString("hf/%1/model/model.safetensors").arg(f->name)).toStdString());
        QVERIFY2(ours && theirs, "the made or the reference checkpoint does not open");
        QCOMPARE(ours.value()->tensors().size(), theirs.value()->tensors().size());
        for (const auto& [name, t] : theirs.value()->tensors()) {
            auto it = ours.value()->tensors().find(name);
            QVERIFY2(it != ours.value()->tensors().end(), qPrintable(QString("%1: %2 is not made").arg(f->name, name.c_str())));
            QVERIFY2(it->second.shape == t.shape, qPrintable(QString("%1: %2 has another shape").arg(f->name, name.c_str())));
        }
        CliResult made = run_cli({"convert", from_config, "-o", from_config + ".bin", "-q"});
        QVERIFY2(made.exit_code == 0, made.err.constData());
        made = run_cli({"check", from_config + ".bin", "--quiet"});
        QVERIFY2(made.exit_code == 0, made.err.constData());

        // The families its shape options build a config for: made at a small shape, converted, checked and run.
        static const QStringList kShapeBuilt{"mixtral",     "qwen2_moe", "olmoe",         "qwen3_moe", "gpt_oss",
                                             "deepseek_v3", "glm4_moe",  "glm4_moe_lite", "minimax_m2"};
        if (!kShapeBuilt.contains(f->name)) return;
        const QString hf = dir_.filePath(QString(f->name) + "-hf"), bin_made = hf + ".bin";
        QVERIFY2(make_model({"-o", hf, "--family", f->name, "--vocab", "256", "--hidden", "64", "--layers", "2", "--heads", "4",
                             "--kv-heads", "2", "--experts", "4", "--top-k", "2", "--ffn", "64", "--seed", "2"}),
                 f->name);
        r = run_cli({"convert", hf, "-o", bin_made, "-q"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        r = run_cli({"check", bin_made, "--quiet"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        r = run_cli({"logits", "-m", bin_made, "--tokens", "1,2,3", "--out", bin_made + ".f32"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        for (float v : read_f32(bin_made + ".f32")) QVERIFY(std::isfinite(v));
    }

private:
    // Runs colibri-make-model; false (after printing its error) when it fails.
    static bool make_model(const QStringList& args) {
        QProcess make;
        make.start(QStringLiteral(COLIBRI_BUILD_DIR "/bin/colibri-make-model"), args);
        if (!make.waitForFinished(120000)) return false;
        if (make.exitCode() != 0) qWarning("colibri-make-model: %s", make.readAllStandardError().constData());
        return make.exitStatus() == QProcess::NormalExit && make.exitCode() == 0;
    }
};

QTEST_GUILESS_MAIN(TestTableRows)
#include "test_table_rows.moc"
