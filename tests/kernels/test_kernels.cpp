// Every kernel variant this CPU runs against the scalar reference, bit for bit (the canonical numerics,
// kernels/canonical.h), and the scalar reference against a double-precision dot product of the dequantised
// rows (block types: with the dequantised quantised activations, and separately against the f32 ones). Plain C++ without Qt so the same test cross-builds for aarch64 and runs under qemu (native NEON).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/canonical.h"
#include "kernels/half.h"
#include "kernels/matmul.h"
#include "kernels/matvec.h"
#include "kernels/random_blocks.h"
#include "kernels/registry.h"
#include "kernels/types.h"
#include "kernels/weight_types.h"

namespace {

using namespace colibri;
using namespace colibri::kernels;

int failures = 0;
int checks = 0;

void fail(const std::string& what) {
    if (++failures <= 20 || std::getenv("COLIBRI_TEST_ALL_FAILURES")) std::fprintf(stderr, "FAIL: %s\n", what.c_str());
}

void check(bool ok, const std::string& what) {
    ++checks;
    if (!ok) fail(what);
}


// Every matrix type of the weight-type table.
std::vector<WeightType> matrix_types() {
    std::vector<WeightType> out;
    for (const WeightTypeInfo& w : weight_types())
        if (w.matrix) out.push_back(w.type);
    return out;
}
const std::vector<WeightType> kTypes = matrix_types();

size_t block_values(WeightType t) { return weight_type_info(t).block_values; }

// Random rows in `type` from the one filler (kernels/random_blocks.h: gaussian floats, random codes under scales
// of realistic size), then the fields it keeps tame drawn over their whole range, since every byte pattern must
// give the reference's result: any q4_K / q5_K scale and min bytes, and mxfp4 scales 2^(e − 128) around 2^-7 with
// now and then the denormal (e < 2) and large ones.
std::vector<uint8_t> random_matrix(WeightType type, size_t rows, size_t cols, std::mt19937& rng) {
    std::vector<uint8_t> m(row_bytes(type, cols) * rows);
    kernels::random_matrix(type, rows, cols, 0.5f, rng(), m.data());
    std::uniform_int_distribution<int> byte(0, 255);
    const size_t bytes = weight_type_info(type).block_bytes;
    for (size_t b = 0; b < m.size() / bytes; ++b) {
        uint8_t* blk = &m[b * bytes];
        if (type == WeightType::Q4_K || type == WeightType::Q5_K) {
            for (size_t i = 4; i < 4 + blocks::kQ4_KScaleBytes; ++i) blk[i] = uint8_t(byte(rng));
        } else if (type == WeightType::MXFP4) {
            const int r = byte(rng);
            blk[0] = uint8_t(r < 4 ? r : r > 251 ? 140 + (r - 251) : 115 + r % 12);
        }
    }
    return m;
}

std::vector<float> random_vector(size_t n, std::mt19937& rng) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(n);
    for (float& v : x) v = normal(rng);
    return x;
}

// Every kernel set to compare with scalar: the supported variants, plus the AVX-512 variant's non-VNNI path
// and its q4_K matvec with the other prefetch hint.
struct Candidate {
    std::string name;
    const KernelSet* set;
};
std::vector<Candidate> candidates() {
    std::vector<Candidate> out;
    for (Variant v : supported_variants()) out.push_back({variant_name(v), kernel_set(v)});
    if (const KernelSet* k = avx512_no_vnni_kernel_set_for_tests()) out.push_back({"avx512 (no VNNI)", k});
    if (const KernelSet* k = avx512_other_prefetch_kernel_set_for_tests()) out.push_back({"avx512 (other q4_K prefetch)", k});
    return out;
}

bool is_block_type(WeightType t) { return block_values(t) > 1; }

// x as the block types' kernels see it: d_x·q per block of 32 (kernels/canonical.h, 2a), and d_x per column.
std::vector<float> quantised_activations(const std::vector<float>& x, std::vector<float>* dx) {
    std::vector<float> out(x.size());
    dx->assign(x.size(), 0.0f);
    canonical::dequantize_activations(x.data(), x.size(), out.data(), dx->data());
    return out;
}

bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

std::string shape(const char* what, WeightType t, size_t rows, size_t cols, const std::string& v) {
    return std::string(what) + " " + weight_type_label(t) + " " + std::to_string(rows) + "x" + std::to_string(cols) +
           " " + v;
}
std::string shape(const char* what, WeightType t, size_t rows, size_t cols, Variant v) {
    return shape(what, t, rows, cols, std::string(variant_name(v)));
}

// The scalar kernel is the dot product of the dequantised row, to within f32 summation error: with x itself
// for the float types, with the quantised activations d_x·q for the block types (a tight bound), and for the
// block types also against x itself within the activation rounding, Σ|w|·(d_x/2) (plus slack for rounding).
// For q4_K and q5_K the magnitude counts both terms, (d·sc)·q and dmin·m, since the kernel sums them separately.
void check_scalar_accuracy(WeightType t, const std::vector<uint8_t>& w, size_t rows, size_t cols,
                           const std::vector<float>& x, const float* y) {
    std::vector<float> row(cols), dx;
    const bool block = is_block_type(t);
    const std::vector<float> xq = block ? quantised_activations(x, &dx) : x;
    for (size_t r = 0; r < rows; ++r) {
        dequantize_row(t, w.data(), cols, r, row.data());
        double ref = 0, mag = 0, ref_x = 0, act = 0;
        for (size_t c = 0; c < cols; ++c) {
            ref += double(row[c]) * xq[c];
            mag += std::fabs(double(row[c]) * xq[c]);
            ref_x += double(row[c]) * x[c];
            if (block) act += std::fabs(double(row[c])) * (0.5001 * dx[c] + 1e-6 * std::fabs(x[c]));
        }
        if (t == WeightType::Q4_K || t == WeightType::Q5_K) {
            const uint8_t* base = w.data() + r * row_bytes(t, cols);
            for (size_t c = 0; c < cols; ++c) {
                const uint8_t* blk = base + (c / 256) * weight_type_info(t).block_bytes;
                uint8_t sc, mn;
                blocks::q4_k_scale_min(blk + 4, (c % 256) / 32, &sc, &mn);
                mag += 2 * double(f16_to_f32(uint16_t(blk[2] | blk[3] << 8))) * mn * std::fabs(xq[c]);
            }
        }
        check(std::fabs(ref - y[r]) <= 1e-6 * mag + 1e-30,
              shape("scalar accuracy", t, rows, cols, Variant::Scalar) + " row " + std::to_string(r) + ": " +
                  std::to_string(y[r]) + " vs " + std::to_string(ref));
        if (block) {
            check(std::fabs(ref_x - y[r]) <= 1e-6 * mag + act + 1e-30,
                  shape("scalar vs f32 activations", t, rows, cols, Variant::Scalar) + " row " + std::to_string(r) +
                      ": " + std::to_string(y[r]) + " vs " + std::to_string(ref_x) + " bound " + std::to_string(act));
        }
    }
}

// matvec of every variant equals scalar bit for bit, over the whole matrix and over sub-ranges of rows.
void check_matvec(WeightType t, size_t rows, size_t cols, std::mt19937& rng) {
    const std::vector<uint8_t> w = random_matrix(t, rows, cols, rng);
    const std::vector<float> x = random_vector(cols, rng);
    std::vector<float> ref(rows);
    kernel_set(Variant::Scalar)->matvec[size_t(t)](w.data(), cols, x.data(), ref.data(), 0, rows);
    check_scalar_accuracy(t, w, rows, cols, x, ref.data());
    for (const Candidate& cand : candidates()) {
        const KernelSet* k = cand.set;
        const std::string& v = cand.name;
        std::vector<float> y(rows + 1, 12345.0f);
        k->matvec[size_t(t)](w.data(), cols, x.data(), y.data(), 0, rows);
        check(same_bits(y.data(), ref.data(), rows), shape("matvec", t, rows, cols, v));
        check(y[rows] == 12345.0f, shape("matvec writes past row_end", t, rows, cols, v));
        for (size_t begin : {size_t(0), rows / 3, rows - 1}) {
            const size_t end = std::min(rows, begin + 1 + rows / 2);
            std::vector<float> part(end - begin);
            k->matvec[size_t(t)](w.data(), cols, x.data(), part.data(), begin, end);
            check(same_bits(part.data(), ref.data() + begin, end - begin),
                  shape("matvec rows", t, rows, cols, v) + " [" + std::to_string(begin) + "," + std::to_string(end) + ")");
        }
    }
}

// matmul of every variant, for n = 1..9 vectors, equals matvec of each vector bit for bit; ldy > rows and
// the padding between output rows stays untouched.
void check_matmul(WeightType t, size_t rows, size_t cols, std::mt19937& rng) {
    const std::vector<uint8_t> w = random_matrix(t, rows, cols, rng);
    const size_t max_n = 9;
    const std::vector<float> x = random_vector(cols * max_n, rng);
    std::vector<float> ref(rows * max_n);
    const KernelSet* scalar = kernel_set(Variant::Scalar);
    for (size_t i = 0; i < max_n; ++i) scalar->matvec[size_t(t)](w.data(), cols, x.data() + i * cols, ref.data() + i * rows, 0, rows);
    for (const Candidate& cand : candidates()) {
        const KernelSet* k = cand.set;
        const std::string& v = cand.name;
        for (size_t n = 1; n <= max_n; ++n) {
            const size_t begin = n % 2 ? 0 : rows / 4, end = rows;
            const size_t ldy = end - begin + 3;
            std::vector<float> y(ldy * n, -7.0f);
            k->matmul[size_t(t)](w.data(), cols, x.data(), n, y.data(), ldy, begin, end);
            for (size_t i = 0; i < n; ++i) {
                check(same_bits(y.data() + i * ldy, ref.data() + i * rows + begin, end - begin),
                      shape("matmul", t, rows, cols, v) + " n=" + std::to_string(n) + " i=" + std::to_string(i));
                for (size_t p = end - begin; p < ldy; ++p) {
                    check(y[i * ldy + p] == -7.0f, shape("matmul writes past row_end", t, rows, cols, v));
                }
            }
        }
    }
}

// The public entry points follow the selection, and every selection gives the same bits.
void check_dispatch(std::mt19937& rng) {
    const size_t rows = 17, cols = 512;
    for (WeightType t : kTypes) {
        const std::vector<uint8_t> w = random_matrix(t, rows, cols, rng);
        const std::vector<float> x = random_vector(cols * 3, rng);
        std::vector<float> first(rows * 3), y(rows * 3);
        bool have_first = false;
        for (Variant v : supported_variants()) {
            check(select_variant(v), std::string("select ") + variant_name(v));
            check(selected_variant(Op::Matvec, t) == v && selected_variant(Op::Matmul, t) == v,
                  std::string("selected ") + variant_name(v));
            matmul_rows(t, w.data(), cols, x.data(), 3, y.data(), rows, 0, rows);
            if (!have_first) first = y, have_first = true;
            check(same_bits(first.data(), y.data(), y.size()), std::string("matmul_rows ") + variant_name(v));
            matvec_rows(t, w.data(), cols, x.data() + cols, y.data(), 0, rows);
            check(same_bits(first.data() + rows, y.data(), rows), std::string("matvec_rows ") + variant_name(v));
        }
    }
    for (size_t i = 0; i < kVariantCount; ++i) {
        const Variant v = Variant(i);
        if (!variant_supported(v)) {
            check(!select_variant(v), std::string("unsupported variant refused: ") + variant_name(v));
            check(kernel_set(v) == nullptr, std::string("no table for unsupported ") + variant_name(v));
        }
        Variant back;
        check(variant_from_name(variant_name(v), &back) && back == v, std::string("name round trip ") + variant_name(v));
    }
    Variant unused;
    check(!variant_from_name("sse9", &unused), "unknown variant name");
    select_best();
    check(selected_variant(Op::Matvec, WeightType::Q8_0) == best_variant(), "select_best");
}

// Special values: zero rows and vectors give +0; NaN and infinities in the vector do not crash (the block
// types' result is unspecified then, canonical.h 2a) and stay identical across variants for the float
// types' propagation.
void check_special_values() {
    const size_t rows = 3, cols = 256;
    for (WeightType t : kTypes) {
        std::vector<uint8_t> w(row_bytes(t, cols) * rows, 0);
        std::vector<float> x(cols, 1.0f), y(rows);
        for (const Candidate& c : candidates()) {
            c.set->matvec[size_t(t)](w.data(), cols, x.data(), y.data(), 0, rows);
            for (float f : y) check(f == 0.0f && !std::signbit(f), shape("zero weights", t, rows, cols, c.name));
        }
    }
    std::mt19937 rng(7);
    for (WeightType t : kTypes) {
        const std::vector<uint8_t> w = random_matrix(t, rows, cols, rng);
        std::vector<float> zero(cols, 0.0f), y(rows);
        for (const Candidate& c : candidates()) {
            c.set->matvec[size_t(t)](w.data(), cols, zero.data(), y.data(), 0, rows);
            for (float f : y) check(f == 0.0f, shape("zero vector", t, rows, cols, c.name));
        }
        std::vector<float> bad = random_vector(cols, rng);
        bad[3] = NAN, bad[40] = INFINITY, bad[77] = -INFINITY, bad[100] = 1e-40f;
        for (size_t i = 128; i < 160; ++i) bad[i] = 1e-41f;  // a block of denormals only
        std::vector<float> ref(rows);
        kernel_set(Variant::Scalar)->matvec[size_t(t)](w.data(), cols, bad.data(), ref.data(), 0, rows);
        for (const Candidate& c : candidates()) {
            c.set->matvec[size_t(t)](w.data(), cols, bad.data(), y.data(), 0, rows);
            check(same_bits(y.data(), ref.data(), rows), shape("NaN/Inf vector", t, rows, cols, c.name));
        }
    }
}

// The activation quantiser (canonical.h, 2a) on chosen values.
void check_quantizer() {
    float x[32] = {}, d = -1;
    int8_t q[32];
    int32_t sum = -1;
    canonical::quantize_block(x, q, &d, &sum);
    bool zero = d == 0.0f && sum == 0;
    for (int8_t v : q) zero = zero && v == 0;
    check(zero, "quantize_block: all-zero block");
    // amax 127: x·inv is x itself; ties round to even, the maximum maps to ±127.
    for (size_t i = 0; i < 32; ++i) x[i] = 0.0f;
    x[0] = 127.0f, x[1] = -127.0f, x[2] = 2.5f, x[3] = 3.5f, x[4] = -2.5f, x[5] = 0.49f, x[6] = -126.5f;
    canonical::quantize_block(x, q, &d, &sum);
    check(d == 1.0f && q[0] == 127 && q[1] == -127 && q[2] == 2 && q[3] == 4 && q[4] == -2 && q[5] == 0 &&
              q[6] == -126 && sum == 127 - 127 + 2 + 4 - 2 - 126,
          "quantize_block: rounding to nearest even, clamp, sum");
    for (size_t i = 0; i < 32; ++i) x[i] = float(i) - 16.0f;
    x[9] = NAN;
    canonical::quantize_block(x, q, &d, &sum);
    check(q[9] == 0 && q[0] == -127 && d == 16.0f / 127.0f, "quantize_block: NaN gives 0 and is not amax");
    x[9] = INFINITY;
    canonical::quantize_block(x, q, &d, &sum);  // garbage, but defined
    check(std::isinf(d), "quantize_block: Inf gives d = Inf");
}

// Every variant's activation quantiser (its vector version, if any) gives the reference's bytes: random
// blocks of several magnitudes, and blocks with NaN, ±Inf, −0, denormals, all zeros, exact ties (values
// whose x·inv lands on k + 0.5), a value only just under the maximum, and values beyond ±2^22·amax.
void check_quantizer_variants(std::mt19937& rng) {
    std::vector<float> x;
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_int_distribution<int> expo(-40, 40);
    for (size_t b = 0; b < 200; ++b)
        for (size_t i = 0; i < 32; ++i) x.push_back(std::ldexp(normal(rng), b % 4 == 0 ? expo(rng) : 0));
    auto block = [&](auto fill) {
        const size_t at = x.size();
        x.resize(at + 32, 0.0f);
        for (size_t i = 0; i < 32; ++i) fill(&x[at], i);
    };
    block([](float* v, size_t i) { v[i] = i == 5 ? NAN : float(i) - 7.0f; });
    block([](float* v, size_t i) { v[i] = NAN; });
    block([](float* v, size_t i) { v[i] = i == 0 ? INFINITY : i == 1 ? -INFINITY : 1.0f; });
    block([](float* v, size_t i) { v[i] = i == 3 ? INFINITY : i == 4 ? NAN : -2.0f; });
    block([](float* v, size_t i) { v[i] = i % 2 ? -0.0f : 0.0f; });
    block([](float* v, size_t i) { v[i] = 0.0f; });
    block([](float* v, size_t i) { v[i] = i % 3 ? 1e-41f : -3e-39f; });
    block([](float* v, size_t i) { v[i] = float(i) + 0.5f - 16.0f; v[31] = 127.0f; });       // ties, inv = 1
    block([](float* v, size_t i) { v[i] = std::nextafter(127.0f, 0.0f) - float(i); v[0] = -127.0f; });
    block([](float* v, size_t i) { v[i] = i == 0 ? 3e38f : 1e-30f * float(i); });
    block([](float* v, size_t i) { v[i] = i == 0 ? -1.0f : 1e-9f; });

    const size_t blocks = x.size() / 32;
    std::vector<int8_t> q_ref(x.size()), q(x.size());
    std::vector<float> d_ref(blocks), d(blocks), ns_ref(blocks), ns(blocks);
    std::vector<int32_t> s_ref(blocks), s(blocks);
    canonical::quantize_blocks(x.data(), blocks, q_ref.data(), d_ref.data(), s_ref.data(), ns_ref.data());
    for (size_t b = 0; b < blocks; ++b) {  // the reference is quantize_block, block by block
        int8_t q1[32];
        float d1;
        int32_t s1;
        canonical::quantize_block(&x[32 * b], q1, &d1, &s1);
        check(std::memcmp(q1, &q_ref[32 * b], 32) == 0 && std::memcmp(&d1, &d_ref[b], 4) == 0 && s1 == s_ref[b] &&
                  ns_ref[b] == -float(s1),
              "quantize_blocks equals quantize_block, block " + std::to_string(b));
    }
    for (const Candidate& c : candidates()) {
        std::fill(q.begin(), q.end(), int8_t(99));
        c.set->quantize(x.data(), blocks, q.data(), d.data(), s.data(), ns.data());
        for (size_t b = 0; b < blocks; ++b)
            check(std::memcmp(&q[32 * b], &q_ref[32 * b], 32) == 0 && std::memcmp(&d[b], &d_ref[b], 4) == 0 &&
                      s[b] == s_ref[b] && std::memcmp(&ns[b], &ns_ref[b], 4) == 0,
                  "activation quantiser of " + c.name + ", block " + std::to_string(b));
    }
}

// The transposed product (canonical.h, 3): every variant equals the definition, one std::fma chain per
// element over the rows in order, bit for bit; shapes with ragged column tails, panels of every width, 1..9
// vectors, a leading dimension wider than the columns, and zero rows (all +0).
void check_weighted_rows(std::mt19937& rng) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (size_t rows : {0, 1, 5, 64, 200}) {
        for (size_t cols : {1, 15, 16, 17, 48, 63, 64, 65, 130, 257}) {
            for (size_t n : {1, 3, 4, 5, 9}) {
                const size_t ld = cols + 3, lda = rows + 2, ldo = cols + 1;
                std::vector<float> m(rows * ld + 1), a(n * lda + 1), ref(n * ldo, -1.0f), out(n * ldo, -1.0f);
                for (float& v : m) v = normal(rng);
                for (float& v : a) v = normal(rng);
                for (size_t i = 0; i < n; ++i)
                    for (size_t c = 0; c < cols; ++c) {
                        float acc = 0.0f;
                        for (size_t r = 0; r < rows; ++r) acc = std::fma(a[i * lda + r], m[r * ld + c], acc);
                        ref[i * ldo + c] = acc;
                    }
                for (const Candidate& cand : candidates()) {
                    std::fill(out.begin(), out.end(), -1.0f);
                    cand.set->weighted_rows(m.data(), ld, rows, cols, a.data(), lda, n, out.data(), ldo);
                    check(same_bits(out.data(), ref.data(), out.size()),  // padding columns untouched too
                          "weighted_rows " + std::to_string(rows) + "x" + std::to_string(cols) + " n " +
                              std::to_string(n) + " " + cand.name);
                }
            }
        }
    }
    // The public entry point runs the f32 matvec's variant.
    std::vector<float> m(4 * 20, 0.5f), a(4, 2.0f), out(20);
    weighted_rows(m.data(), 20, 4, 20, a.data(), 4, 1, out.data(), 20);
    check(out[0] == 4.0f && out[19] == 4.0f, "weighted_rows entry point");
}

// The bandwidth probe reads every word once whatever the stream count (sizes that do not split evenly too).
void check_stream_sum(std::mt19937& rng) {
    for (size_t lines : {1, 3, 7, 64, 1001}) {
        std::vector<uint64_t> words(lines * 8);
        uint64_t want = 0;
        for (uint64_t& w : words) want += (w = (uint64_t(rng()) << 32) | rng());
        for (const Candidate& c : candidates())
            for (size_t streams : {1, 2, 4})
                for (bool prefetch : {false, true})
                    check(c.set->stream_sum(reinterpret_cast<const uint8_t*>(words.data()), lines * 64, streams, prefetch) == want,
                          "stream_sum " + std::to_string(lines) + " lines, " + std::to_string(streams) + " streams, " +
                              (prefetch ? "prefetch, " : "") + c.name);
    }
}

}  // namespace

// quantize_activations hands back its last result when asked for the same values again (bit for bit): a value
// changed in place, under the same pointer, must be quantised anew, and so must the q4_K order made from it; the
// same values at another address may reuse it.
void check_quantized_reuse(std::mt19937& rng) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const size_t cols = 256, n = 3;
    std::vector<float> x(cols * n);
    for (float& v : x) v = normal(rng);
    const auto expect = [&](const canonical::QuantizedActivations& qa, const std::vector<float>& src, const std::string& what,
                            size_t n = 3) {
        for (size_t i = 0; i < n; ++i) {
            std::vector<int8_t> q(cols);
            std::vector<float> d(cols / 32), ns(cols / 32);
            std::vector<int32_t> s(cols / 32);
            canonical::quantize_blocks(src.data() + i * cols, cols / 32, q.data(), d.data(), s.data(), ns.data());
            check(std::memcmp(q.data(), qa.q + i * qa.stride * 32, cols) == 0 &&
                      std::memcmp(d.data(), qa.d + i * qa.stride, d.size() * 4) == 0,
                  what + ", vector " + std::to_string(i));
        }
        // The q4_K order of vector i, unit j: value 16h + 4p + b at 256·(j / 8) + 128(p/2) + 64h + 32(p%2) + 4(j%8) + b.
        const int8_t* k = canonical::q4_k_activations(qa, n);
        bool ok = true;
        for (size_t i = 0; i < n; ++i)
            for (size_t j = 0; j < cols / 32; ++j)
                for (size_t e = 0; e < 32; ++e) {
                    const size_t h = e / 16, p = (e % 16) / 4, b = e % 4;
                    const size_t at = i * qa.stride * 32 + 256 * (j / 8) + 128 * (p / 2) + 64 * h + 32 * (p % 2) + 4 * (j % 8) + b;
                    ok = ok && k[at] == qa.q[i * qa.stride * 32 + 32 * j + e];
                }
        check(ok, what + ": q4_K activation order");
    };
    expect(canonical::quantize_activations(x.data(), cols, n), x, "first quantisation");
    expect(canonical::quantize_activations(x.data(), cols, n), x, "the same values again");
    x[cols * 2 + 77] *= -3.0f;  // changed in place
    expect(canonical::quantize_activations(x.data(), cols, n), x, "a value changed in place");
    const std::vector<float> copy = x;
    expect(canonical::quantize_activations(copy.data(), cols, n), copy, "the same values elsewhere");
    expect(canonical::quantize_activations(x.data(), cols, n - 1), x, "fewer vectors", n - 1);
}

int main() {
    std::mt19937 rng(20261203);
    std::printf("variants:");
    for (const Candidate& c : candidates()) std::printf(" %s", c.name.c_str());
    std::printf(" (best %s)\n", variant_name(best_variant()));

    for (WeightType t : kTypes) {
        const size_t bv = block_values(t);
        std::vector<size_t> cols_list;
        if (bv == 1) {
            for (size_t c = 1; c <= 80; ++c) cols_list.push_back(c);
            for (size_t c : {127, 128, 129, 255, 1000, 1024, 2816, 4097}) cols_list.push_back(c);
        } else {
            for (size_t c = bv; c <= 4096; c += bv) cols_list.push_back(c);
        }
        for (size_t cols : cols_list) {
            for (size_t rows : {1, 3, 17}) check_matvec(t, rows, cols, rng);
        }
        for (size_t cols : {bv == 1 ? size_t(100) : bv, bv == 1 ? size_t(1024) : 4 * bv * (bv == 256 ? 1 : 8)}) {
            check_matvec(t, 257, cols, rng);
        }
        for (size_t rows : {1, 3, 17, 257}) {
            check_matmul(t, rows, bv == 1 ? 67 : bv * 2, rng);
        }
        check_matmul(t, 5, bv == 1 ? 1024 : (bv == 256 ? 1024 : 2816 / 32 * 32), rng);
        if (bv == 1) {
            // The float matmul's loop orders (kernels/generic_kernels.h): 1100 rows of 64 columns are more
            // than one group of rows (1024 rows of f16 or bf16, 512 of f32 per 128 KB), checked whole and
            // from row 275 on (check_matmul's even n); 2816 columns are too long for grouping (block by
            // block), and 9 rows leave a tail.
            check_matmul(t, 1100, 64, rng);
            check_matmul(t, 9, 2816, rng);
        }
        std::printf("%s: done\n", weight_type_label(t));
    }
    check_dispatch(rng);
    check_special_values();
    check_quantizer();
    check_quantizer_variants(rng);
    check_quantized_reuse(rng);
    check_weighted_rows(rng);
    check_stream_sum(rng);
    std::printf("%d checks, %d failures\n", checks, failures);
    return failures == 0 ? 0 : 1;
}
