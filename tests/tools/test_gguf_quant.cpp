// Quantised GGUF tensors (Q8_0, Q4_0, Q4_K, Q6_K, made by llama.cpp's llama-quantize): dequantised exactly as
// gguf-py's numpy dequantiser does (tests/data/gguf/mixtral-256-quant.expected.json), by the dequantiser itself
// and through `colibri convert` into a .bin.
#include <QTemporaryDir>
#include <QtTest>
#include <bit>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "../test_support.h"
#include "engine/model_file.h"
#include "tools/ggml_dequant.h"
#include "tools/gguf.h"

using namespace colibri;
using namespace colibri::test;
using nlohmann::json;

namespace {

const QString kQuantGguf = QStringLiteral(COLIBRI_TEST_DATA_DIR "/gguf/mixtral-256-quant.gguf");
const QString kExpected = QStringLiteral(COLIBRI_TEST_DATA_DIR "/gguf/mixtral-256-quant.expected.json");

// Bitwise equality (so -0.0 and 0.0 differ, as they would in the stored weights).
bool same_floats(const float* got, const json& want, std::string* why) {
    for (size_t i = 0; i < want.size(); ++i) {
        const float w = static_cast<float>(want[i].get<double>());
        if (std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(w)) {
            *why = "value " + std::to_string(i) + ": " + std::to_string(got[i]) + " != " + std::to_string(w);
            return false;
        }
    }
    return true;
}

bool close_sum(double got, double want) { return std::fabs(got - want) <= 1e-9 * std::max(1.0, std::fabs(want)); }

struct Sums {
    double sum = 0, squares = 0;
    void add(const float* v, uint64_t n) {
        for (uint64_t i = 0; i < n; ++i) sum += v[i], squares += double(v[i]) * v[i];
    }
};

const json& expected_tensor(const json& doc, const std::string& name) {
    for (const json& t : doc["tensors"])
        if (t["name"] == name) return t;
    static const json none;
    return none;
}

}  // namespace

class TestGgufQuant : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

private slots:
    void dequantiser_matches_gguf_py() {
        auto file = tools::GgufFile::open(kQuantGguf.toStdString());
        QVERIFY2(file, file.message().c_str());
        const json doc = json::parse(read_all(kExpected).toStdString());
        std::set<std::string> types;
        for (const json& t : doc["tensors"]) {
            const std::string name = t["name"].get<std::string>();
            auto it = file.value()->tensors().find(name);
            QVERIFY2(it != file.value()->tensors().end(), name.c_str());
            const tools::GgufTensor& g = it->second;
            QCOMPARE(tools::ggml_type_name(g.type), t["type"].get<std::string>());
            QVERIFY(tools::ggml_is_dequantizable(g.type));
            uint64_t n = 1;
            for (uint64_t d : g.ne) n *= d;
            const uint64_t row = g.ne[0];
            QCOMPARE(g.size, n / tools::ggml_block_values(g.type) * tools::ggml_block_bytes(g.type));
            std::vector<float> v(n);
            tools::ggml_dequantize_row(g.type, g.data, v.data(), n);
            std::string why;
            QVERIFY2(same_floats(v.data(), t["first_row"], &why), (name + " first row, " + why).c_str());
            QVERIFY2(same_floats(v.data() + n - row, t["last_row"], &why), (name + " last row, " + why).c_str());
            Sums s;
            s.add(v.data(), n);
            QVERIFY2(close_sum(s.sum, t["sum"].get<double>()) && close_sum(s.squares, t["sum_squares"].get<double>()), name.c_str());
            types.insert(t["type"].get<std::string>());
        }
        QVERIFY(types == (std::set<std::string>{"q8_0", "q4_0", "q4_k", "q6_k"}));
    }

    // The .bin converted with --type f32 holds gguf-py's values, in HF order: experts sliced out of the stacks,
    // q/k rows un-permuted (which keeps each matrix's first and last row in place).
    void converted_weights_are_the_dequantised_ones() {
        const QString bin = dir_.filePath("quant.bin");
        const CliResult r = run_cli({"convert", kQuantGguf, "-o", bin, "--type", "f32", "-q"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        auto model = ModelFile::open(bin.toStdString());
        QVERIFY2(model, model.message().c_str());
        const json doc = json::parse(read_all(kExpected).toStdString());
        struct Case {
            const char* gguf;
            std::vector<std::string> bin;  // one tensor, or the experts of a stack in order
        };
        const std::vector<Case> cases = {
            {"token_embd.weight", {"embed"}},
            {"output.weight", {"lm_head"}},
            {"blk.0.attn_q.weight", {"layers.0.attn.q"}},
            {"blk.0.attn_k.weight", {"layers.0.attn.k"}},
            {"blk.0.attn_v.weight", {"layers.0.attn.v"}},
            {"blk.0.attn_output.weight", {"layers.0.attn.o"}},
            {"blk.0.ffn_gate_exps.weight", {"layers.0.experts.0.gate", "layers.0.experts.1.gate", "layers.0.experts.2.gate", "layers.0.experts.3.gate"}},
            {"blk.0.ffn_up_exps.weight", {"layers.0.experts.0.up", "layers.0.experts.1.up", "layers.0.experts.2.up", "layers.0.experts.3.up"}},
            {"blk.0.ffn_down_exps.weight", {"layers.0.experts.0.down", "layers.0.experts.1.down", "layers.0.experts.2.down", "layers.0.experts.3.down"}},
        };
        for (const Case& c : cases) {
            const json& want = expected_tensor(doc, c.gguf);
            QVERIFY2(!want.is_null(), c.gguf);
            Sums s;
            const TensorView* first = nullptr;
            const TensorView* last = nullptr;
            for (const std::string& name : c.bin) {
                const TensorView* t = model.value()->find_tensor(name);
                QVERIFY2(t && t->type == WeightType::F32, name.c_str());
                s.add(static_cast<const float*>(t->data), t->rows * t->cols);
                if (!first) first = t;
                last = t;
            }
            std::string why;
            const auto* f = static_cast<const float*>(first->data);
            const auto* l = static_cast<const float*>(last->data) + (last->rows - 1) * last->cols;
            QCOMPARE(first->cols, want["ne"][0].get<uint64_t>());
            QVERIFY2(same_floats(f, want["first_row"], &why), (std::string(c.gguf) + " first row, " + why).c_str());
            QVERIFY2(same_floats(l, want["last_row"], &why), (std::string(c.gguf) + " last row, " + why).c_str());
            QVERIFY2(close_sum(s.sum, want["sum"].get<double>()) && close_sum(s.squares, want["sum_squares"].get<double>()), c.gguf);
        }
    }

    // Quantised sources convert to every storage type and run.
    void quantised_model_runs() {
        for (const char* type : {"f16", "q8_0"}) {
            const QString bin = dir_.filePath(QString("quant-%1.bin").arg(type));
            CliResult r = run_cli({"convert", kQuantGguf, "-o", bin, "--type", type, "-q"});
            QVERIFY2(r.exit_code == 0, r.err.constData());
            r = run_cli({"logits", "-m", bin, "--tokens", "1,5,9,300", "--out", bin + ".f32"});
            QVERIFY2(r.exit_code == 0, r.err.constData());
            const std::vector<float> logits = read_f32(bin + ".f32");
            QCOMPARE(logits.size(), size_t(4 * 320));
            QVERIFY(std::all_of(logits.begin(), logits.end(), [](float x) { return std::isfinite(x); }));
        }
    }
};

QTEST_GUILESS_MAIN(TestGgufQuant)
#include "test_gguf_quant.moc"
