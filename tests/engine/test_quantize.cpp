// The 4- and 8-bit block types: quantiser round trips on random and adversarial blocks, the scalar kernels
// against dequantise + f32 dot, thread-split determinism, clear errors for unquantisable input, and the
// reference models converted with --type q4_k / q4_0 against transformers' f32 logits.
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>
#include <cstring>
#include <random>

#include "../test_support.h"
#include "engine/file/format.h"
#include "kernels/canonical.h"
#include "kernels/half.h"
#include "kernels/matvec.h"
#include "tools/quantize.h"

using namespace colibri;
using namespace colibri::test;

namespace {

std::vector<float> round_trip(WeightType t, const std::vector<float>& x) {
    std::vector<uint8_t> q(kernels::row_bytes(t, x.size()));
    const Status s = tools::quantize_row(t, x.data(), x.size(), q.data());
    if (!s) qFatal("quantize_row: %s", s.message().c_str());
    std::vector<float> back(x.size());
    kernels::dequantize_row(t, q.data(), x.size(), 0, back.data());
    return back;
}

double rms(const std::vector<float>& a, const std::vector<float>& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    return std::sqrt(s / double(a.size()));
}

// max|x|/127 with q rounded against the stored f16 scale: the plain q8_0 quantiser.
double plain_q8_0_sse(const float* x) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float d = kernels::f16_to_f32(kernels::f32_to_f16(amax / 127.0f));
    double sse = 0;
    for (int i = 0; i < 32; ++i) {
        const float q = d > 0 ? std::clamp(std::nearbyint(x[i] / d), -127.0f, 127.0f) : 0.0f;
        sse += (double(x[i]) - d * q) * (double(x[i]) - d * q);
    }
    return sse;
}

// Min/max scaling for q4_K done by hand from the layout: per sub-block step (max − min)/15, offset −min, the
// 6-bit codes rounded from max step / 63 and max offset / 63.
double plain_q4_k_sse(const float* x) {
    float step[8], off[8];
    for (int j = 0; j < 8; ++j) {
        float lo = 0, hi = x[j * 32];
        for (int i = 0; i < 32; ++i) lo = std::min(lo, x[j * 32 + i]), hi = std::max(hi, x[j * 32 + i]);
        step[j] = (hi - lo) / 15, off[j] = -lo;
    }
    const float d = kernels::f16_to_f32(kernels::f32_to_f16(*std::max_element(step, step + 8) / 63));
    const float dm = kernels::f16_to_f32(kernels::f32_to_f16(*std::max_element(off, off + 8) / 63));
    double sse = 0;
    for (int j = 0; j < 8; ++j) {
        const float s = d * std::min(63.0f, std::nearbyint(step[j] / d)), m = dm * std::min(63.0f, std::nearbyint(off[j] / dm));
        for (int i = 0; i < 32; ++i) {
            const float v = x[j * 32 + i];
            const float q = s > 0 ? std::clamp(std::nearbyint((v + m) / s), 0.0f, 15.0f) : 0.0f;
            sse += (double(v) - (s * q - m)) * (double(v) - (s * q - m));
        }
    }
    return sse;
}

}  // namespace

class TestQuantize : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;

    QString convert(const QString& family, const QString& type) {
        const QString out = dir_.filePath(family + "-" + type + ".bin");
        if (QFile::exists(out)) return out;
        const CliResult r = run_cli({"convert", reference("hf/" + family + "/model"), "-o", out, "--type", type, "-q"});
        return r.exit_code == 0 && !r.crashed ? out : QString();
    }

private slots:
    void initTestCase() { QVERIFY(dir_.isValid()); }

    void storage_type_per_row_width() {
        QCOMPARE(tools::storage_type(WeightType::Q4_K, 512), WeightType::Q4_K);
        QCOMPARE(tools::storage_type(WeightType::Q4_K, 128), WeightType::Q4_0);
        QCOMPARE(tools::storage_type(WeightType::Q4_K, 100), WeightType::F16);
        QCOMPARE(tools::storage_type(WeightType::Q4_0, 512), WeightType::Q4_0);
        QCOMPARE(tools::storage_type(WeightType::Q8_0, 48), WeightType::F16);
        QCOMPARE(tools::storage_type(WeightType::BF16, 48), WeightType::BF16);
        QCOMPARE(kernels::row_bytes(WeightType::Q4_K, 512), size_t(288));
        QCOMPARE(kernels::row_bytes(WeightType::Q4_0, 64), size_t(36));
    }

    // Gaussian rows: RMS error relative to the data's RMS, measured 0.0048 (q8_0), 0.081 (q4_0), 0.070
    // (q4_k); every block at most as bad as the plain quantiser it improves on.
    void random_round_trip() {
        const std::vector<float> x = gaussian(256 * 64, 0.1f, 7);
        const double q8 = rms(round_trip(WeightType::Q8_0, x), x) / 0.1;
        const double q40 = rms(round_trip(WeightType::Q4_0, x), x) / 0.1;
        const double q4k = rms(round_trip(WeightType::Q4_K, x), x) / 0.1;
        qInfo("relative rms error: q8_0 %.4f, q4_0 %.4f, q4_k %.4f", q8, q40, q4k);
        QVERIFY(q8 < 0.0055);
        QVERIFY(q40 < 0.088);
        QVERIFY(q4k < 0.075);
        const std::vector<float> b8 = round_trip(WeightType::Q8_0, x), b4 = round_trip(WeightType::Q4_K, x);
        for (size_t b = 0; b < x.size() / 32; ++b) {
            double sse = 0;
            for (size_t i = b * 32; i < b * 32 + 32; ++i) sse += (double(b8[i]) - x[i]) * (double(b8[i]) - x[i]);
            QVERIFY(sse <= plain_q8_0_sse(x.data() + b * 32) * (1 + 1e-5));
        }
        for (size_t b = 0; b < x.size() / 256; ++b) {
            double sse = 0;
            for (size_t i = b * 256; i < b * 256 + 256; ++i) sse += (double(b4[i]) - x[i]) * (double(b4[i]) - x[i]);
            QVERIFY(sse <= plain_q4_k_sse(x.data() + b * 256) * (1 + 1e-5));
        }
    }

    // q8_0 and q4_0 values are the nearest point of their block's grid d·l for the stored d.
    void symmetric_levels_are_nearest() {
        const std::vector<float> x = gaussian(32 * 32, 1.0f, 3);
        for (WeightType t : {WeightType::Q8_0, WeightType::Q4_0}) {
            std::vector<uint8_t> q(kernels::row_bytes(t, x.size()));
            QVERIFY(tools::quantize_row(t, x.data(), x.size(), q.data()));
            std::vector<float> back(x.size());
            kernels::dequantize_row(t, q.data(), x.size(), 0, back.data());
            const size_t block_bytes = t == WeightType::Q8_0 ? 34 : 18;
            const int lo = t == WeightType::Q8_0 ? -127 : -8, hi = t == WeightType::Q8_0 ? 127 : 7;
            for (size_t b = 0; b < x.size() / 32; ++b) {
                uint16_t bits;
                std::memcpy(&bits, q.data() + b * block_bytes, 2);
                const float d = kernels::f16_to_f32(bits);
                for (size_t i = b * 32; i < b * 32 + 32; ++i) {
                    float best = INFINITY;
                    for (int l = lo; l <= hi; ++l) best = std::min(best, std::fabs(x[i] - d * float(l)));
                    QVERIFY(std::fabs(back[i] - x[i]) <= best + 1e-6f * std::fabs(d));
                }
            }
        }
    }

    void adversarial_blocks_data() {
        QTest::addColumn<QString>("type");
        for (const char* t : {"q8_0", "q4_0", "q4_k", "q5_k", "q6_k"}) QTest::newRow(t) << QString(t);
    }

    // q5_K and q6_K: less error than q4_K on the same Gaussian rows, q6_K less than q5_K. Measured relative RMS
    // error: q4_k 0.069, q5_k 0.034, q6_k 0.017.
    void k_quant_round_trip() {
        const std::vector<float> x = gaussian(256 * 64, 0.1f, 7);
        const double q4k = rms(round_trip(WeightType::Q4_K, x), x) / 0.1;
        const double q5k = rms(round_trip(WeightType::Q5_K, x), x) / 0.1;
        const double q6k = rms(round_trip(WeightType::Q6_K, x), x) / 0.1;
        qInfo("relative rms error: q4_k %.4f, q5_k %.4f, q6_k %.4f", q4k, q5k, q6k);
        QVERIFY(q5k < 0.55 * q4k);
        QVERIFY(q6k < 0.6 * q5k);
    }

    // mxfp4: every value is the nearest e2m1 grid point of its block's exponent, and each block's error is at
    // most that of ggml's choice of exponent (floor(log2 max|x|) − 2 + 127, gguf-py's quantiser); relative RMS
    // error on Gaussian rows measured 0.112. Values beyond every e8m0 exponent do not exist in f32; NaN fails.
    void mxfp4_round_trip() {
        const std::vector<float> x = gaussian(32 * 512, 0.1f, 13);
        std::vector<uint8_t> q(kernels::row_bytes(WeightType::MXFP4, x.size()));
        QVERIFY(tools::quantize_row(WeightType::MXFP4, x.data(), x.size(), q.data()));
        std::vector<float> back(x.size());
        kernels::dequantize_row(WeightType::MXFP4, q.data(), x.size(), 0, back.data());
        static const float grid[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
        const auto block_sse = [&](const float* v, int e) {  // nearest grid points for exponent e
            const double scale = std::ldexp(1.0, e - 127);
            double sse = 0;
            for (int i = 0; i < 32; ++i) {
                double best = INFINITY;
                for (float g : grid) best = std::min(best, std::fabs(std::fabs(double(v[i])) - g * scale));
                sse += best * best;
            }
            return sse;
        };
        for (size_t b = 0; b < x.size() / 32; ++b) {
            const int e = q[b * 17];
            double sse = 0, amax = 0;
            for (size_t i = b * 32; i < b * 32 + 32; ++i) {
                sse += (double(back[i]) - x[i]) * (double(back[i]) - x[i]);
                amax = std::max(amax, std::fabs(double(x[i])));
            }
            QVERIFY2(std::fabs(sse - block_sse(x.data() + b * 32, e)) <= 1e-12 + 1e-9 * sse, qPrintable(QString("block %1").arg(b)));
            const int ggml_e = int(std::floor(std::log2(amax))) - 2 + 127;
            QVERIFY2(sse <= block_sse(x.data() + b * 32, ggml_e) * (1 + 1e-9), qPrintable(QString("block %1").arg(b)));
        }
        qInfo("mxfp4 relative rms error %.4f", rms(back, x) / 0.1);
        QVERIFY(rms(back, x) / 0.1 < 0.15);
        QCOMPARE(round_trip(WeightType::MXFP4, std::vector<float>(64, 0.0f)), std::vector<float>(64, 0.0f));
        std::vector<float> y(64, 0.5f);
        y[40] = std::nanf("");
        const Status s = tools::quantize_row(WeightType::MXFP4, y.data(), y.size(), q.data());
        QVERIFY(!s);
        QVERIFY2(QString::fromStdString(s.message()).contains("at column 40 is not finite"), s.message().c_str());
    }

    void adversarial_blocks() {
        QFETCH(QString, type);
        WeightType t;
        QVERIFY(format::weight_type_from_name(type.toStdString(), &t));
        const size_t n = 256;
        // All zeros: exact.
        QCOMPARE(round_trip(t, std::vector<float>(n, 0.0f)), std::vector<float>(n, 0.0f));
        // Constants, positive and negative: within f16 rounding of the scale.
        for (float c : {0.37f, -0.37f}) {
            const std::vector<float> back = round_trip(t, std::vector<float>(n, c));
            for (float v : back) QVERIFY2(std::fabs(v - c) <= 0.37f * 2e-3f, qPrintable(QString("%1 for %2").arg(v).arg(c)));
        }
        // One outlier in small values: the outlier survives within one step of its block; the rest stays small.
        std::vector<float> x = gaussian(n, 0.01f, 5);
        x[77] = 5.0f;
        std::vector<float> back = round_trip(t, x);
        QVERIFY(std::fabs(back[77] - 5.0f) < 5.0f / 7);
        for (size_t i = 0; i < n; ++i) QVERIFY(std::fabs(back[i] - x[i]) <= 5.0f / 7);
        // f32 denormals: below the f16 scales' reach, they come back as (near) zero, never as garbage.
        std::vector<float> tiny(n);
        for (size_t i = 0; i < n; ++i) tiny[i] = float(int(i % 7) - 3) * 1e-40f;
        back = round_trip(t, tiny);
        for (size_t i = 0; i < n; ++i) QVERIFY(std::isfinite(back[i]) && std::fabs(back[i] - tiny[i]) <= 1e-38f);
        // Large but representable values: relative error as for ordinary data.
        std::vector<float> big = gaussian(n, 1e4f, 9);
        back = round_trip(t, big);
        QVERIFY(rms(back, big) / 1e4 < (t == WeightType::Q8_0 ? 0.01 : 0.15));
        // Beyond the f16 scales: a clear error, naming the columns.
        std::vector<float> huge(n, 1.0f);
        huge[40] = 3e12f;
        std::vector<uint8_t> q(kernels::row_bytes(t, n));
        Status s = tools::quantize_row(t, huge.data(), n, q.data());
        QVERIFY(!s);
        QVERIFY2(QString::fromStdString(s.message()).contains("beyond what"), s.message().c_str());
        // NaN and infinities: an error naming the column.
        for (float bad : {std::nanf(""), INFINITY, -INFINITY}) {
            std::vector<float> y(n, 0.5f);
            y[123] = bad;
            s = tools::quantize_row(t, y.data(), n, q.data());
            QVERIFY(!s);
            QVERIFY2(QString::fromStdString(s.message()).contains("at column 123 is not finite"), s.message().c_str());
        }
    }

    // The kernels equal the dot product of the dequantised rows (odd row count) with the activations as the
    // kernels quantise them (d_x·q per block of 32, kernels/canonical.h), are within the activation rounding
    // of the dot product with x itself, and splitting the rows among "threads" changes no bit.
    void kernel_matches_dequantised_data() {
        adversarial_blocks_data();
        QTest::newRow("mxfp4") << QString("mxfp4");
    }
    void kernel_matches_dequantised() {
        QFETCH(QString, type);
        WeightType t;
        QVERIFY(format::weight_type_from_name(type.toStdString(), &t));
        const size_t rows = 7, cols = 768;
        const std::vector<float> w = gaussian(rows * cols, 0.05f, 11), x = gaussian(cols, 1.0f, 12);
        const size_t rb = kernels::row_bytes(t, cols);
        std::vector<uint8_t> q(rb * rows);
        for (size_t r = 0; r < rows; ++r) QVERIFY(tools::quantize_row(t, w.data() + r * cols, cols, q.data() + r * rb));
        std::vector<float> y(rows), row(cols);
        kernels::matvec_rows(t, q.data(), cols, x.data(), y.data(), 0, rows);
        std::vector<float> xq(cols), dx(cols);
        kernels::canonical::dequantize_activations(x.data(), cols, xq.data(), dx.data());
        for (size_t r = 0; r < rows; ++r) {
            kernels::dequantize_row(t, q.data(), cols, r, row.data());
            double ref = 0, mag = 0, ref_x = 0, act = 0;
            for (size_t c = 0; c < cols; ++c) {
                ref += double(row[c]) * xq[c], mag += std::fabs(double(row[c]) * xq[c]);
                ref_x += double(row[c]) * x[c], act += std::fabs(double(row[c])) * 0.5001 * dx[c];
            }
            QVERIFY2(std::fabs(ref - y[r]) <= 1e-5 * mag, qPrintable(QString("row %1: %2 vs %3").arg(r).arg(y[r]).arg(ref)));
            QVERIFY2(std::fabs(ref_x - y[r]) <= 1e-5 * mag + act,
                     qPrintable(QString("row %1: %2 vs f32 activations %3").arg(r).arg(y[r]).arg(ref_x)));
        }
        for (size_t split : {size_t(1), size_t(3), size_t(6)}) {
            std::vector<float> parts(rows);
            kernels::matvec_rows(t, q.data(), cols, x.data(), parts.data(), 0, split);
            kernels::matvec_rows(t, q.data(), cols, x.data(), parts.data() + split, split, rows);
            QVERIFY(std::memcmp(parts.data(), y.data(), rows * sizeof(float)) == 0);
        }
    }

    // The q4_K layout from the spec (docs/FORMAT.md), byte by byte: d = 1, dmin = 0.5, sub-block j scale j + 1
    // and min 2j (4..7 need the high-bit packing); code e of sub-block j is (3j + e) % 16, stored in piece
    // p = (e % 16) / 4, byte 4j + e % 4, low nibble for e < 16, high for the rest.
    void q4_k_layout() {
        uint8_t blk[144] = {};
        const uint16_t one = kernels::f32_to_f16(1.0f), half = kernels::f32_to_f16(0.5f);
        std::memcpy(blk, &one, 2);
        std::memcpy(blk + 2, &half, 2);
        uint8_t sc[8], mn[8];
        for (int j = 0; j < 8; ++j) sc[j] = uint8_t(j + 1 + (j >= 4 ? 40 : 0)), mn[j] = uint8_t(2 * j + (j >= 4 ? 30 : 0));
        uint8_t* s = blk + 4;
        for (int j = 0; j < 4; ++j) {
            s[j] = uint8_t(sc[j] | ((sc[j + 4] >> 4) << 6));
            s[j + 4] = uint8_t(mn[j] | ((mn[j + 4] >> 4) << 6));
            s[j + 8] = uint8_t((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
        }
        const auto code = [](int j, int e) { return (3 * j + e) % 16; };
        for (int p = 0; p < 4; ++p)
            for (int j = 0; j < 8; ++j)
                for (int b = 0; b < 4; ++b)
                    blk[16 + 32 * p + 4 * j + b] = uint8_t(code(j, 4 * p + b) | (code(j, 16 + 4 * p + b) << 4));
        std::vector<float> out(256);
        kernels::dequantize_row(WeightType::Q4_K, blk, 256, 0, out.data());
        for (int j = 0; j < 8; ++j)
            for (int e = 0; e < 32; ++e) QCOMPARE(out[j * 32 + e], float(sc[j]) * float(code(j, e)) - 0.5f * float(mn[j]));
    }

    // Unquantisable source values fail the conversion with the tensor, row and column named; nothing is written.
    void nan_in_source_fails_conversion() {
        const QString model = dir_.filePath("nan-model");
        QProcess make;
        make.start(QStringLiteral(COLIBRI_BUILD_DIR "/bin/colibri-make-model"),
                   {"-o", model, "--family", "mixtral", "--hidden", "256", "--ffn", "256", "--vocab", "512", "--layers", "1"});
        QVERIFY(make.waitForFinished(60000) && make.exitCode() == 0);
        QFile f(model + "/model.safetensors");
        QVERIFY(f.open(QIODevice::ReadWrite));
        const qint64 size = f.size();
        const float nan = std::nanf("");
        QVERIFY(f.seek(size / 2 / 4 * 4));  // the middle of the file lies in a weight matrix
        QCOMPARE(f.write(reinterpret_cast<const char*>(&nan), 4), qint64(4));
        f.close();
        for (const char* type : {"q8_0", "q4_k", "q4_0"}) {
            const QString out = dir_.filePath(QString("nan-%1.bin").arg(type));
            const CliResult r = run_cli({"convert", model, "-o", out, "--type", type});
            QCOMPARE(r.exit_code, 1);
            QVERIFY2(r.err.contains("is not finite") && r.err.contains("row "), r.err.constData());
            QVERIFY(!QFile::exists(out));
        }
    }

    // Teacher-forced against transformers' f32 logits on the 16 reference positions. Measured (64- and
    // 128-wide rows, so mostly q4_0; qwen2_moe's 256-wide shared-expert down projection is q4_K):
    //   q4_k: mixtral 7/16, mean KL 0.042; qwen2_moe 8/16, 0.059; olmoe 12/16, 0.026
    //   q4_0: mixtral 7/16, 0.042;         qwen2_moe 9/16, 0.057; olmoe 12/16, 0.026
    // Bounds: two positions and 1.5x the KL of slack.
    void reference_quality_data() {
        QTest::addColumn<QString>("family");
        QTest::addColumn<QString>("type");
        QTest::addColumn<int>("min_agree");
        QTest::addColumn<double>("max_kl");
        QTest::newRow("mixtral/q4_k") << "mixtral" << "q4_k" << 5 << 0.063;
        QTest::newRow("qwen2_moe/q4_k") << "qwen2_moe" << "q4_k" << 6 << 0.089;
        QTest::newRow("olmoe/q4_k") << "olmoe" << "q4_k" << 10 << 0.039;
        QTest::newRow("mixtral/q4_0") << "mixtral" << "q4_0" << 5 << 0.063;
        QTest::newRow("qwen2_moe/q4_0") << "qwen2_moe" << "q4_0" << 7 << 0.085;
        QTest::newRow("olmoe/q4_0") << "olmoe" << "q4_0" << 10 << 0.039;
    }

    void reference_quality() {
        QFETCH(QString, family);
        QFETCH(QString, type);
        QFETCH(int, min_agree);
        QFETCH(double, max_kl);
        const QString model = convert(family, type);
        QVERIFY(!model.isEmpty());
        const QString ids = ids_arg(read_json(reference("hf/" + family + "/ref/input_ids.json")).array());
        const CliResult r = run_cli({"compare", "-m", model, "--baseline-logits", reference("hf/" + family + "/ref/logits.f32"),
                                     "--tokens", ids, "--json"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        const QJsonObject j = QJsonDocument::fromJson(r.out).object();
        QCOMPARE(j["positions"].toInt(), 16);
        qInfo("%s %s: top-1 %d/16, mean KL %.3g", qPrintable(family), qPrintable(type), j["top1_agree"].toInt(),
              j["mean_kl"].toDouble());
        QVERIFY(j["top1_agree"].toInt() >= min_agree);
        QVERIFY(j["mean_kl"].toDouble() <= max_kl);
        // Bit-identical logits for any thread count.
        QByteArray first;
        for (const char* threads : {"1", "2"}) {
            const QString out = dir_.filePath(QString("det-%1-%2-%3.f32").arg(family, type, threads));
            const CliResult l = run_cli({"logits", "-m", model, "--tokens", ids, "-t", threads, "--out", out});
            QVERIFY2(l.exit_code == 0, l.err.constData());
            const QByteArray bytes = read_all(out);
            QVERIFY(!bytes.isEmpty());
            if (first.isEmpty()) first = bytes;
            QVERIFY(bytes == first);
        }
    }

    // `colibri info` names the new types.
    void info_lists_types() {
        const QString model = convert("qwen2_moe", "q4_k");
        QVERIFY(!model.isEmpty());
        const CliResult r = run_cli({"info", model, "--json"});
        QCOMPARE(r.exit_code, 0);
        const QJsonObject types = QJsonDocument::fromJson(r.out).object()["weight_bytes_by_type"].toObject();
        QVERIFY(types.contains("q4_k") && types.contains("q4_0") && types.contains("f32"));
    }
};

QTEST_GUILESS_MAIN(TestQuantize)
#include "test_quantize.moc"
