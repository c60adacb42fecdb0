// Quantised GGUF tensors (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K by llama.cpp's llama-quantize, MXFP4 by gguf-py): dequantised
// exactly as gguf-py's numpy dequantiser does (tests/data/gguf/*.expected.json: first and last rows, sums and
// the SHA-256 of every value), by the dequantiser itself; and imported by `colibri convert` without double
// quantisation: each quantised matrix keeps its ggml type and every one of its values, checked the same way on
// the .bin's own dequantisation (kernels::dequantize_row).
#include <QCryptographicHash>
#include <QTemporaryDir>
#include <QtTest>
#include <bit>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "../test_support.h"
#include "engine/file/model_file.h"
#include "kernels/matvec.h"
#include "tools/ggml_dequant.h"
#include "tools/gguf.h"

using namespace colibri;
using namespace colibri::test;
using nlohmann::json;

namespace {

// GGUF files with gguf-py's expected values beside them (tests/data/gguf/README.md says how each was made).
struct QuantFile {
    const char* name;  // <name>.gguf and <name>.expected.json
    bool permuted_qk;  // llama architecture: llama.cpp interleaves q/k rows per head
};
const QuantFile kFiles[] = {
    {"mixtral-256-quant", true},
    {"qwen2moe-256-q4_k_m", false},
    {"gpt_oss-mxfp4", false},
};

QString data_path(const char* name, const char* suffix) {
    return QStringLiteral(COLIBRI_TEST_DATA_DIR "/gguf/") + name + suffix;
}

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

// Everything the expected file says about one tensor's values, checked on `values` (all of them, ggml order).
void check_values(const std::vector<float>& values, const json& want, const std::string& what) {
    const uint64_t row = want["ne"][0].get<uint64_t>();
    std::string why;
    QVERIFY2(same_floats(values.data(), want["first_row"], &why), (what + " first row, " + why).c_str());
    QVERIFY2(same_floats(values.data() + values.size() - row, want["last_row"], &why), (what + " last row, " + why).c_str());
    double sum = 0, squares = 0;
    for (float v : values) sum += v, squares += double(v) * v;
    QVERIFY2(close_sum(sum, want["sum"].get<double>()) && close_sum(squares, want["sum_squares"].get<double>()), what.c_str());
    const QByteArray bytes(reinterpret_cast<const char*>(values.data()), qsizetype(values.size() * sizeof(float)));
    QVERIFY2(QCryptographicHash::hash(bytes, QCryptographicHash::Sha256).toHex().toStdString() == want["sha256"].get<std::string>(),
             (what + ": the SHA-256 of all values differs from gguf-py's").c_str());
}

// The .bin tensors a GGUF matrix becomes (one, or the experts of a stack in order), for the architectures of the
// test files.
std::vector<std::string> bin_names(const std::string& gguf, uint64_t stacked) {
    if (gguf == "token_embd.weight") return {"embed"};
    if (gguf == "output.weight") return {"lm_head"};
    const size_t dot = gguf.find('.', 4);
    const std::string layer = "layers." + gguf.substr(4, dot - 4) + ".";
    std::string what = gguf.substr(dot + 1);
    what = what.substr(0, what.size() - std::string(".weight").size());
    static const std::map<std::string, std::string> attn = {{"attn_q", "attn.q"}, {"attn_k", "attn.k"}, {"attn_v", "attn.v"},
                                                            {"attn_output", "attn.o"}};
    if (auto it = attn.find(what); it != attn.end()) return {layer + it->second};
    for (const char* proj : {"gate", "up", "down"}) {
        const std::string p = std::string("ffn_") + proj;
        if (what == p + "_exps") {
            std::vector<std::string> out;
            for (uint64_t e = 0; e < stacked; ++e) out.push_back(layer + "experts." + std::to_string(e) + "." + proj);
            return out;
        }
        if (what == p + "_shexp") return {layer + "shared_expert." + proj};
        if (what == p) return {layer + "mlp." + proj};
    }
    return {};
}

}  // namespace

class TestGgufQuant : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

    QString convert(const QuantFile& f, const char* type) {
        const QString bin = dir_.filePath(QString("%1-%2.bin").arg(f.name, type));
        const CliResult r = run_cli({"convert", data_path(f.name, ".gguf"), "-o", bin, "--type", type, "-q"});
        return r.exit_code == 0 && !r.crashed ? bin : QString();
    }

private slots:
    void dequantiser_matches_gguf_py_data() {
        QTest::addColumn<int>("file");
        for (int i = 0; i < int(std::size(kFiles)); ++i) QTest::newRow(kFiles[i].name) << i;
    }
    void dequantiser_matches_gguf_py() {
        QFETCH(int, file);
        const QuantFile& f = kFiles[file];
        auto gguf = tools::GgufFile::open(data_path(f.name, ".gguf").toStdString());
        QVERIFY2(gguf, gguf.message().c_str());
        const json doc = json::parse(read_all(data_path(f.name, ".expected.json")).toStdString());
        QVERIFY(!doc["tensors"].empty());
        for (const json& t : doc["tensors"]) {
            const std::string name = t["name"].get<std::string>();
            auto it = gguf.value()->tensors().find(name);
            QVERIFY2(it != gguf.value()->tensors().end(), name.c_str());
            const tools::GgufTensor& g = it->second;
            QCOMPARE(tools::ggml_type_name(g.type), t["type"].get<std::string>());
            QVERIFY(tools::ggml_is_dequantizable(g.type));
            uint64_t n = 1;
            for (uint64_t d : g.ne) n *= d;
            QCOMPARE(g.size, n / tools::ggml_block_values(g.type) * tools::ggml_block_bytes(g.type));
            std::vector<float> v(n);
            tools::ggml_dequantize_row(g.type, g.data, v.data(), n);
            check_values(v, t, std::string(f.name) + " " + name);
            if (QTest::currentTestFailed()) return;
        }
    }

    // Every quantised type of the test files occurs: the two sections above then cover each of them.
    void test_files_cover_every_type() {
        std::set<std::string> types;
        for (const QuantFile& f : kFiles) {
            const json doc = json::parse(read_all(data_path(f.name, ".expected.json")).toStdString());  // outlives the loop
            for (const json& t : doc["tensors"]) types.insert(t["type"].get<std::string>());
        }
        QVERIFY(types == (std::set<std::string>{"q8_0", "q4_0", "q4_k", "q5_k", "q6_k", "mxfp4"}));
    }

    // Each quantised matrix of the GGUF is in the .bin in the same type, and its values, as the engine
    // dequantises them, are gguf-py's bit for bit: experts sliced out of the stacks in order, q/k rows
    // un-permuted for llama (put back into ggml's order here before hashing).
    void carried_over_without_requantisation_data() { dequantiser_matches_gguf_py_data(); }
    void carried_over_without_requantisation() {
        QFETCH(int, file);
        const QuantFile& f = kFiles[file];
        const QString bin = convert(f, "f32");
        QVERIFY(!bin.isEmpty());
        auto model = ModelFile::open(bin.toStdString());
        QVERIFY2(model, model.message().c_str());
        auto gguf = tools::GgufFile::open(data_path(f.name, ".gguf").toStdString());
        QVERIFY2(gguf, gguf.message().c_str());
        const json doc = json::parse(read_all(data_path(f.name, ".expected.json")).toStdString());
        int checked = 0;
        for (const json& want : doc["tensors"]) {
            const std::string name = want["name"].get<std::string>();
            const tools::GgufTensor& g = gguf.value()->tensors().at(name);
            if (name.find("ffn_gate_inp") != std::string::npos) continue;  // routers stay f32 (dequantised, exact)
            const std::vector<std::string> parts = bin_names(name, g.ne.size() == 3 ? g.ne[2] : 1);
            QVERIFY2(!parts.empty(), name.c_str());
            const std::optional<WeightType> carried = tools::ggml_carried_type(g.type);
            QVERIFY(carried);
            std::vector<float> values;
            for (const std::string& p : parts) {
                const TensorView* t = model.value()->find_tensor(p);
                QVERIFY2(t, p.c_str());
                QVERIFY2(t->type == *carried, (p + " is " + format::weight_type_name(t->type) + ", not " +
                                               format::weight_type_name(*carried)).c_str());
                const size_t at = values.size();
                values.resize(at + t->rows * t->cols);
                for (uint64_t r = 0; r < t->rows; ++r) kernels::dequantize_row(t->type, t->data, t->cols, r, values.data() + at + r * t->cols);
            }
            const bool q = name.find("attn_q.") != std::string::npos, k = name.find("attn_k.") != std::string::npos;
            if (f.permuted_qk && (q || k)) {
                // ggml row h·hd + 2i + t is HF row h·hd + t·hd/2 + i.
                const uint64_t cols = g.ne[0], rows = g.ne[1];
                const uint64_t heads = model.value()->hparams().*(q ? &format::HyperParams::n_heads : &format::HyperParams::n_kv_heads);
                const uint64_t hd = rows / heads, half = hd / 2;
                std::vector<float> ggml_order(values.size());
                for (uint64_t h = 0; h < heads; ++h)
                    for (uint64_t i = 0; i < half; ++i)
                        for (uint64_t t = 0; t < 2; ++t)
                            std::copy_n(values.data() + (h * hd + t * half + i) * cols, cols, ggml_order.data() + (h * hd + 2 * i + t) * cols);
                values.swap(ggml_order);
            }
            check_values(values, want, std::string(f.name) + " " + name + " in the .bin");
            if (QTest::currentTestFailed()) return;
            ++checked;
        }
        QVERIFY(checked >= 5);
    }

    // --type applies to float matrices only: with every matrix quantised in the GGUF, the tensors are the same
    // bytes whatever type is asked for.
    void requested_type_does_not_requantise() {
        const QuantFile& f = kFiles[0];
        auto a = ModelFile::open(convert(f, "f32").toStdString());
        auto b = ModelFile::open(convert(f, "q4_0").toStdString());
        QVERIFY(a && b);
        QCOMPARE(a.value()->tensors().size(), b.value()->tensors().size());
        for (size_t i = 0; i < a.value()->tensors().size(); ++i) {
            const TensorView& x = a.value()->tensors()[i];
            const TensorView& y = b.value()->tensors()[i];
            QCOMPARE(x.type, y.type);
            QVERIFY2(x.size == y.size && std::memcmp(x.data, y.data, x.size) == 0, x.name.c_str());
        }
    }

    // The imported models run (logits finite), on every file.
    void quantised_model_runs_data() { dequantiser_matches_gguf_py_data(); }
    void quantised_model_runs() {
        QFETCH(int, file);
        const QString bin = convert(kFiles[file], "q8_0");
        QVERIFY(!bin.isEmpty());
        const CliResult r = run_cli({"logits", "-m", bin, "--tokens", "1,5,9,300", "--out", bin + ".f32"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        const std::vector<float> logits = read_f32(bin + ".f32");
        QVERIFY(logits.size() >= 4 * 300);
        QVERIFY(std::all_of(logits.begin(), logits.end(), [](float x) { return std::isfinite(x); }));
    }
};

QTEST_GUILESS_MAIN(TestGgufQuant)
#include "test_gguf_quant.moc"
