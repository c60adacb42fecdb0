// The multi-token-prediction head (format 2.3, engine/core/session_mtp.cpp, engine/core/mtp_drafter.h). No transformers
// reference carries MTP weights, so the head's forward is checked against an independent float64 implementation of its
// documented equations (docs/FORMAT.md, "The MTP head"), written here from them: x = eh_proj · [enorm(embed(t_{q+1}));
// hnorm(h_q)], one glm4_moe decoder layer at position q over the head's own rows, logits = lm_head(shared_head.norm(x)),
// a chained draft feeding x back. Also: drafts bit-identical across threads and chunkings, a rewound head equal to a
// fresh one, HF -> .bin -> GGUF -> .bin keeping the head byte for byte in both families' spellings, and clear errors.
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>

#include "../bin_bytes.h"
#include "../test_support.h"
#include "engine/core/model.h"
#include "engine/core/mtp_drafter.h"
#include "engine/core/session.h"
#include "engine/core/thread_pool.h"
#include "engine/file/model_file.h"

using namespace colibri;
using namespace colibri::test;
using nlohmann::json;

namespace {

constexpr uint32_t kHidden = 64, kHeads = 4, kKvHeads = 2, kLayers = 2, kVocab = 512;

// ---------------------------------------------------------------------------- safetensors edits
// The JSON header of model.safetensors, and where its data starts.
struct Safetensors {
    QByteArray bytes;
    json header;
    size_t data_at = 0;
};

Safetensors read_safetensors(const QString& path) {
    Safetensors s;
    s.bytes = read_all(path);
    uint64_t n = 0;
    std::memcpy(&n, s.bytes.constData(), 8);
    s.header = json::parse(std::string(s.bytes.constData() + 8, n));
    s.data_at = 8 + n;
    return s;
}

// Writes the header back in its old length (padded with spaces, as the format allows) and the data as it was.
void write_safetensors(const QString& path, const Safetensors& s) {
    std::string h = s.header.dump();
    const size_t old = s.data_at - 8;
    QVERIFY(h.size() <= old);
    h.resize(old, ' ');
    QByteArray out = s.bytes;
    std::memcpy(out.data() + 8, h.data(), h.size());
    write_all(path, out);
}

// Multiplies an f32 tensor's values by 1 + N(0, 0.3²) so that norms of ones become distinct.
void perturb(Safetensors& s, const std::string& name, uint32_t seed) {
    const json& t = s.header.at(name);
    const size_t b = t["data_offsets"][0].get<size_t>(), e = t["data_offsets"][1].get<size_t>();
    std::mt19937 g(seed);
    std::normal_distribution<float> d(0.0f, 0.3f);
    for (size_t at = s.data_at + b; at < s.data_at + e; at += 4) {
        float v;
        std::memcpy(&v, s.bytes.constData() + at, 4);
        v *= 1.0f + d(g);
        std::memcpy(s.bytes.data() + at, &v, 4);
    }
}

// ---------------------------------------------------------------------------- float64 reference
using Vec = std::vector<double>;

Vec values(const TensorView& t) {
    Vec v(t.rows * t.cols);
    const auto* f = static_cast<const float*>(t.data);
    for (size_t i = 0; i < v.size(); ++i) v[i] = f[i];
    return v;
}

Vec matvec(const TensorView& w, const Vec& x) {
    const Vec m = values(w);
    Vec y(w.rows, 0.0);
    for (size_t r = 0; r < w.rows; ++r)
        for (size_t c = 0; c < w.cols; ++c) y[r] += m[r * w.cols + c] * x[c];
    return y;
}

Vec rms(const Vec& x, const TensorView& w, double eps) {
    double ss = 0.0;
    for (double v : x) ss += v * v;
    const double inv = 1.0 / std::sqrt(ss / double(x.size()) + eps);
    const Vec g = values(w);
    Vec y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = g[i] * x[i] * inv;
    return y;
}

void add(Vec& x, const TensorView* bias) {
    if (bias == nullptr) return;
    const Vec b = values(*bias);
    for (size_t i = 0; i < x.size(); ++i) x[i] += b[i];
}

double silu(double x) { return x / (1.0 + std::exp(-x)); }

Vec swiglu(const FfnWeights& f, const Vec& x) {
    const Vec g = matvec(*f.gate, x), u = matvec(*f.up, x);
    Vec a(g.size());
    for (size_t i = 0; i < g.size(); ++i) a[i] = silu(g[i]) * u[i];
    return matvec(*f.down, a);
}

// The head as its equations say, over its rows 0.. (row q: the model's hidden state h_q, the token t_{q+1}, position
// q), GLM-4.5's layer: GQA with biases, RoPE on each head's first rotary_dim dims (halves), sigmoid router with the
// selection bias, top-k by score + bias, weights the scores (times routed_scaling), one ungated shared expert.
struct ReferenceHead {
    const Model& m;
    std::vector<Vec> keys, vals;  // per row: [kv head][head_dim]

    // Row q's output x (before the head's norm) from its two inputs.
    Vec row(uint32_t q, int32_t token, const Vec& hidden) {
        const format::HyperParams& hp = m.hparams();
        const LayerWeights& w = m.mtp_layers()[0];
        const size_t H = hp.hidden_size, hd = hp.head_dim;
        Vec e(H);
        const auto* emb = static_cast<const float*>(m.embedding().data) + size_t(token) * H;
        for (size_t i = 0; i < H; ++i) e[i] = emb[i];
        const Vec en = rms(e, *w.mtp_enorm, hp.rms_eps), hn = rms(hidden, *w.mtp_hnorm, hp.rms_eps);
        Vec cat(en);
        cat.insert(cat.end(), hn.begin(), hn.end());
        Vec x = matvec(*w.mtp_eh_proj, cat);
        // Attention.
        const Vec h = rms(x, *w.attn_norm, hp.rms_eps);
        Vec qv = matvec(*w.q, h), kv = matvec(*w.k, h), vv = matvec(*w.v, h);
        add(qv, w.q_bias), add(kv, w.k_bias), add(vv, w.v_bias);
        const uint32_t rot = m.rules().attention.rotary_dim, half = rot / 2;
        auto rope = [&](double* v) {
            for (uint32_t i = 0; i < half; ++i) {
                const double freq = 1.0 / std::pow(double(hp.rope_theta), double(2 * i) / double(rot)), a = double(q) * freq;
                const double x0 = v[i], x1 = v[i + half];
                v[i] = x0 * std::cos(a) - x1 * std::sin(a);
                v[i + half] = x1 * std::cos(a) + x0 * std::sin(a);
            }
        };
        for (uint32_t j = 0; j < hp.n_heads; ++j) rope(qv.data() + j * hd);
        for (uint32_t j = 0; j < hp.n_kv_heads; ++j) rope(kv.data() + j * hd);
        keys.resize(q + 1), vals.resize(q + 1);
        keys[q] = kv, vals[q] = vv;
        Vec att(size_t(hp.n_heads) * hd, 0.0);
        const uint32_t group = hp.n_heads / hp.n_kv_heads;
        for (uint32_t j = 0; j < hp.n_heads; ++j) {
            const uint32_t g = j / group;
            std::vector<double> s(q + 1);
            double mx = -1e300;
            for (uint32_t p = 0; p <= q; ++p) {
                double d = 0.0;
                for (size_t i = 0; i < hd; ++i) d += qv[j * hd + i] * keys[p][g * hd + i];
                s[p] = d / std::sqrt(double(hd));
                mx = std::max(mx, s[p]);
            }
            double sum = 0.0;
            for (double& v : s) sum += (v = std::exp(v - mx));
            for (uint32_t p = 0; p <= q; ++p)
                for (size_t i = 0; i < hd; ++i) att[j * hd + i] += s[p] / sum * vals[p][g * hd + i];
        }
        const Vec o = matvec(*w.o, att);
        for (size_t i = 0; i < H; ++i) x[i] += o[i];
        // MoE.
        const Vec f = rms(x, *w.ffn_norm, hp.rms_eps);
        const Vec logits = matvec(*w.router, f), bias = values(*w.selection_bias);
        std::vector<uint32_t> order(hp.n_experts);
        for (uint32_t i = 0; i < hp.n_experts; ++i) order[i] = i;
        auto score = [&](uint32_t i) { return 1.0 / (1.0 + std::exp(-logits[i])); };
        std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return score(a) + bias[a] > score(b) + bias[b]; });
        const double scaling = hp.routed_scaling > 0.0f ? hp.routed_scaling : 1.0;
        Vec moe = swiglu(w.shared_expert, f);
        for (uint32_t k = 0; k < hp.n_experts_active; ++k) {
            const Vec y = swiglu(w.experts[order[k]], f);
            for (size_t i = 0; i < H; ++i) moe[i] += score(order[k]) * scaling * y[i];
        }
        for (size_t i = 0; i < H; ++i) x[i] += moe[i];
        return x;
    }
    Vec logits(const Vec& x) {
        const Vec n = rms(x, *m.mtp_layers()[0].mtp_norm, m.hparams().rms_eps);
        return matvec(m.lm_head(), n);
    }
};

std::vector<int32_t> random_tokens(size_t n, uint32_t seed) {
    std::mt19937 g(seed);
    std::vector<int32_t> t(n);
    for (int32_t& v : t) v = int32_t(g() % kVocab);
    return t;
}

SessionOptions mtp_options(uint32_t chunk) {
    SessionOptions o;
    o.mtp = true;
    o.chunk = chunk;
    return o;
}

}  // namespace

class TestMtp : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;
    QString glm_hf_, glm_bin_;

    // A glm4_moe model with a one-layer head (its norms made distinct), converted in f32.
    bool make_glm(const QString& name, const QStringList& extra = {}) {
        const QString hf = dir_.filePath(name);
        if (!make_model(hf, QStringList{"--family", "glm4_moe", "--layers", QString::number(kLayers), "--hidden", QString::number(kHidden),
                                        "--heads", QString::number(kHeads), "--kv-heads", QString::number(kKvHeads), "--experts", "8",
                                        "--top-k", "2", "--ffn", "32", "--vocab", QString::number(kVocab), "--mtp-layers", "1",
                                        "--embedding-init", "1", "--init", "0.15"} + extra))
            return false;
        return true;
    }

private slots:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        QVERIFY(make_glm("glm"));
        glm_hf_ = dir_.filePath("glm");
        Safetensors s = read_safetensors(glm_hf_ + "/model.safetensors");
        uint32_t seed = 1;
        for (const char* n : {"enorm", "hnorm", "shared_head.norm", "input_layernorm", "post_attention_layernorm"})
            perturb(s, "model.layers.2." + std::string(n) + ".weight", seed++);
        write_safetensors(glm_hf_ + "/model.safetensors", s);
        glm_bin_ = dir_.filePath("glm.bin");
        const CliResult r = run_cli({"convert", glm_hf_, "-o", glm_bin_, "--type", "f32", "-q"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
    }

    // The head's logits for the first draft and a chained second one, at several points of a sequence, against the
    // float64 head fed the engine's own hidden states of the model.
    void forward_matches_float64() {
        auto m = Model::load(glm_bin_.toStdString());
        QVERIFY2(m, m ? "" : m.message().c_str());
        const Model& model = *m.value();
        QCOMPARE(model.mtp_layers().size(), size_t(1));
        auto pool = ThreadPool::create(1);
        QVERIFY(pool);
        const std::vector<int32_t> tokens = random_tokens(48, 7);
        double worst = 0.0, scale = 0.0;
        for (uint32_t P : {1u, 6u, 23u, 47u}) {
            Session s(model, *pool.value(), 128, mtp_options(16));
            QVERIFY(s.eval(std::span<const int32_t>(tokens.data(), P)));
            int32_t drafts[2];
            auto one = s.mtp_draft(tokens[P], std::span<int32_t>(drafts, 1));
            QVERIFY(one && one.value() == 1);
            const std::vector<float> first(s.mtp_logits().begin(), s.mtp_logits().end());
            auto two = s.mtp_draft(tokens[P], std::span<int32_t>(drafts, 2));
            QVERIFY(two && two.value() == 2);

            ReferenceHead ref{model, {}, {}};
            Vec x;
            for (uint32_t q = 0; q < P; ++q) {
                const std::span<const float> h = s.final_hidden(q);
                QCOMPARE(h.size(), size_t(kHidden));
                x = ref.row(q, q + 1 < P ? tokens[q + 1] : tokens[P], Vec(h.begin(), h.end()));
            }
            const Vec want1 = ref.logits(x);
            const Vec x2 = ref.row(P, drafts[0], x);  // chained: the row's output before the head's norm
            const Vec want2 = ref.logits(x2);
            for (size_t i = 0; i < kVocab; ++i) {
                worst = std::max(worst, std::fabs(first[i] - want1[i]));
                worst = std::max(worst, std::fabs(s.mtp_logits()[i] - want2[i]));
                scale = std::max({scale, std::fabs(want1[i]), std::fabs(want2[i])});
            }
            const auto argmax = [](const Vec& v) { return int32_t(std::max_element(v.begin(), v.end()) - v.begin()); };
            QCOMPARE(drafts[0], argmax(want1));
            QCOMPARE(drafts[1], argmax(want2));
        }
        qInfo("max |dlogit| of the head against float64: %.3g (logits up to %.3g)", worst, scale);
        QVERIFY(scale > 1.0);  // logits large enough for the bound to mean something
        QVERIFY2(worst < 1e-4, qPrintable(QString::number(worst)));
    }

    // Running the head changes nothing the model computes: its logits are bit for bit those of a session without it.
    void model_logits_unchanged() {
        auto m = Model::load(glm_bin_.toStdString());
        QVERIFY(m);
        auto pool = ThreadPool::create(2);
        QVERIFY(pool);
        const std::vector<int32_t> tokens = random_tokens(40, 3);
        Session with(*m.value(), *pool.value(), 128, mtp_options(16)), without(*m.value(), *pool.value(), 128, SessionOptions{});
        QVERIFY(with.mtp_enabled() && !without.mtp_enabled());
        for (size_t i = 0; i < tokens.size(); i += 9) {
            const size_t n = std::min<size_t>(9, tokens.size() - i);
            auto a = with.eval(std::span<const int32_t>(tokens.data() + i, n));
            auto b = without.eval(std::span<const int32_t>(tokens.data() + i, n));
            QVERIFY(a && b);
            QVERIFY(std::memcmp(a.value().data(), b.value().data(), kVocab * 4) == 0);
        }
        int32_t d[2];
        auto none = without.mtp_draft(1, d);
        QVERIFY(none && none.value() == 0);
    }

    // Drafts and the head's logits are the same bits on 1, 2 and 3 threads, whole, in chunks of 5 and token by token.
    void bit_identical_across_threads_and_chunks() {
        auto m = Model::load(glm_bin_.toStdString());
        QVERIFY(m);
        const std::vector<int32_t> tokens = random_tokens(37, 11);
        std::vector<int32_t> first_drafts;
        std::vector<float> first_logits;
        for (unsigned threads : {1u, 2u, 3u})
            for (uint32_t chunk : {64u, 5u, 1u}) {
                auto pool = ThreadPool::create(threads);
                QVERIFY(pool);
                Session s(*m.value(), *pool.value(), 128, mtp_options(chunk));
                QVERIFY(s.eval(std::span<const int32_t>(tokens.data(), tokens.size() - 1)));
                std::vector<int32_t> d(3);
                auto k = s.mtp_draft(tokens.back(), d);
                QVERIFY(k && k.value() == 3);
                const std::vector<float> l(s.mtp_logits().begin(), s.mtp_logits().end());
                if (first_drafts.empty()) {
                    first_drafts = d, first_logits = l;
                    continue;
                }
                QVERIFY2(d == first_drafts, qPrintable(QString("threads %1 chunk %2: drafts differ").arg(threads).arg(chunk)));
                QVERIFY2(std::memcmp(l.data(), first_logits.data(), l.size() * 4) == 0,
                         qPrintable(QString("threads %1 chunk %2: logits differ").arg(threads).arg(chunk)));
            }
    }

    // The speculative loop's steps through MtpDrafter: drafts checked in one eval, some rejected and cut back with
    // truncate, a token other than the one drafted after fed instead; after each, the next drafts equal those of a
    // fresh session fed the same history.
    void rewound_head_equals_fresh() {
        auto m = Model::load(glm_bin_.toStdString());
        QVERIFY(m);
        auto pool = ThreadPool::create(2);
        QVERIFY(pool);
        std::vector<int32_t> history = random_tokens(20, 5);
        Session s(*m.value(), *pool.value(), 128, mtp_options(8));
        QVERIFY(MtpDrafter::available(s));
        // Three drafts every step, whatever was kept: the pacing has its own test (test_speculation).
        const DraftPacing fixed{.max_drafts = 3, .first = 3, .max_rest = 0, .adapt = false};
        MtpDrafter drafter(fixed);
        QVERIFY(s.eval(std::span<const int32_t>(history.data(), history.size() - 1)));
        auto fresh_drafts = [&](const std::vector<int32_t>& h) {
            Session f(*m.value(), *pool.value(), 128, mtp_options(8));
            f.eval(std::span<const int32_t>(h.data(), h.size() - 1));
            std::vector<int32_t> d(3);
            MtpDrafter fd(fixed);
            d.resize(fd.propose(f, h, d));
            return d;
        };
        for (uint32_t step = 0; step < 6; ++step) {
            std::vector<int32_t> d(3);
            d.resize(drafter.propose(s, history, d));
            QCOMPARE(d.size(), size_t(3));
            QVERIFY2(d == fresh_drafts(history), qPrintable(QString("step %1: drafts differ from a fresh session's").arg(step)));
            // Verify: feed the last token and the drafts, keep `keep` of them (the rest rejected), the next token a
            // correction the drafts did not guess (step 5: the model's feed replaced before it is evaluated).
            std::vector<int32_t> fed{history.back()};
            fed.insert(fed.end(), d.begin(), d.end());
            const uint32_t keep = step % 4;
            const uint32_t before = s.position();
            QVERIFY(s.eval(fed));
            QVERIFY(s.truncate(before + 1 + keep));
            drafter.on_verified(3, keep);
            history.insert(history.end(), d.begin(), d.begin() + keep);
            history.push_back((d[std::min<uint32_t>(keep, 2)] + 1 + step) % kVocab);
        }
        QCOMPARE(drafter.proposed(), uint64_t(18));
        // A draft not followed by its token: the next eval feeds another one.
        std::vector<int32_t> d(2);
        QCOMPARE(drafter.propose(s, history, d), 2u);
        history.back() = (history.back() + 7) % kVocab;
        QVERIFY(s.eval(history.back()));
        history.push_back(3);
        std::vector<int32_t> got(3);
        got.resize(drafter.propose(s, history, got));
        QVERIFY(got == fresh_drafts(history));
        // A rewind followed by evals (a regenerate): the head's rows past the cut are computed again.
        const uint32_t cut = s.position() - 3;
        QVERIFY(s.truncate(cut));
        history.resize(cut);
        history.insert(history.end(), {11, 12, 13});
        QVERIFY(s.eval(std::span<const int32_t>(history.data() + cut, 2)));
        got.assign(3, 0);
        got.resize(drafter.propose(s, history, got));
        QVERIFY(got == fresh_drafts(history));
    }

    // HF -> .bin -> GGUF -> .bin: the head's tensors byte for byte, and the GGUF says nextn_predict_layers.
    void gguf_round_trip_keeps_the_head() {
        const QString gguf = dir_.filePath("glm.gguf"), back = dir_.filePath("glm-back.bin");
        CliResult r = run_cli({"export", glm_bin_, "-o", gguf});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        QVERIFY(read_all(gguf).contains("glm4moe.nextn_predict_layers"));
        QVERIFY(read_all(gguf).contains("blk.2.nextn.eh_proj.weight"));
        r = run_cli({"convert", gguf, "-o", back, "--type", "f32", "-q"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        auto a = ModelFile::open(glm_bin_.toStdString()), b = ModelFile::open(back.toStdString());
        QVERIFY(a && b);
        QCOMPARE(b.value()->hparams().mtp_layers, 1u);
        int head = 0;
        for (const TensorView& t : a.value()->tensors()) {
            const TensorView* u = b.value()->find_tensor(t.name);
            QVERIFY2(u && u->size == t.size && std::memcmp(u->data, t.data, t.size) == 0, t.name.c_str());
            head += t.name.rfind("layers.2.", 0) == 0 ? 1 : 0;
        }
        QVERIFY(head >= 10);
        r = run_cli({"info", back});
        QVERIFY(r.out.contains("\"layers\":[2]"));
    }

    // Qwen3-Next and Qwen3.5 (nested text_config) with --mtp-layers 1: both spellings and Qwen3-Next's config without
    // the count (read from the checkpoint's mtp.fc) give the same head; through GGUF and back byte for byte.
    void qwen_spellings_and_gguf() {
        for (const char* family : {"qwen3_next", "qwen3_5_moe"}) {
            const QString hf = dir_.filePath(QString(family) + "-hf");
            const QString cfg = reference(QString("hf/") + family + "/model/config.hub_style.json");  // Qwen3.5's nested
            QVERIFY(make_model(hf, {"--config", cfg, "--mtp-layers", "1"}));
            const QString bin = dir_.filePath(QString(family) + ".bin");
            CliResult r = run_cli({"convert", hf, "-o", bin, "--type", "f32", "-q"});
            QVERIFY2(r.exit_code == 0, r.err.constData());
            auto m = Model::load(bin.toStdString());
            QVERIFY2(m, m ? "" : m.message().c_str());
            QCOMPARE(m.value()->mtp_layers().size(), size_t(1));
            QVERIFY(m.value()->rules().mtp_chain_normed);
            QCOMPARE(m.value()->mtp_layers()[0].mixer, TokenMixer::Attention);  // the head's layer is full attention
            auto pool = ThreadPool::create(1);
            Session s(*m.value(), *pool.value(), 64, mtp_options(8));
            const std::vector<int32_t> t{1, 2, 3, 4, 5};
            QVERIFY(s.eval(t));
            std::vector<int32_t> d(2);
            auto k = s.mtp_draft(6, d);
            QVERIFY(k && k.value() == 2);
            // A hybrid rewinds by replaying from a state checkpoint: the head's drafts after it equal a fresh session's.
            std::vector<int32_t> h = random_tokens(40, 9);
            for (int32_t& v : h) v %= int32_t(m.value()->hparams().vocab_size);
            Session rewound(*m.value(), *pool.value(), 64, mtp_options(8)), fresh(*m.value(), *pool.value(), 64, mtp_options(8));
            QVERIFY(rewound.eval(std::span<const int32_t>(h.data(), 30)));
            QVERIFY(rewound.eval(std::span<const int32_t>(h.data() + 30, 9)));
            QVERIFY(rewound.truncate(25));
            QVERIFY(rewound.eval(std::span<const int32_t>(h.data() + 25, 5)));
            QVERIFY(fresh.eval(std::span<const int32_t>(h.data(), 30)));
            std::vector<int32_t> dr(3), df(3);
            QVERIFY(rewound.mtp_draft(h[30], dr).value() == 3 && fresh.mtp_draft(h[30], df).value() == 3);
            QVERIFY(dr == df);
            QVERIFY(std::memcmp(rewound.mtp_logits().data(), fresh.mtp_logits().data(), fresh.mtp_logits().size() * 4) == 0);
            const QString gguf = dir_.filePath(QString(family) + ".gguf"), back = dir_.filePath(QString(family) + "-back.bin");
            QCOMPARE(run_cli({"export", bin, "-o", gguf}).exit_code, 0);
            QCOMPARE(run_cli({"convert", gguf, "-o", back, "--type", "f32", "-q"}).exit_code, 0);
            auto a = ModelFile::open(bin.toStdString()), b = ModelFile::open(back.toStdString());
            QVERIFY(a && b);
            for (const TensorView& v : a.value()->tensors()) {
                const TensorView* u = b.value()->find_tensor(v.name);
                QVERIFY2(u && u->size == v.size && std::memcmp(u->data, v.data, v.size) == 0, v.name.c_str());
            }
            if (QString(family) == "qwen3_5_moe") {  // the flat spelling (model_type qwen3_5_moe_text) gives the same file
                const QString flat = dir_.filePath("qwen3_5_moe-flat");
                QVERIFY(make_model(flat, {"--config", reference("hf/qwen3_5_moe/model/config.json"), "--mtp-layers", "1"}));
                const QString flat_bin = dir_.filePath("qwen3_5_moe-flat.bin");
                QCOMPARE(run_cli({"convert", flat, "-o", flat_bin, "--type", "f32", "-q"}).exit_code, 0);
                QVERIFY(read_all(flat_bin) == read_all(bin));
                continue;
            }
            // Qwen3-Next's hub config has no count: the converter counts the head from the checkpoint.
            json c = json::parse(read_all(hf + "/config.json").toStdString());
            c.erase("mtp_num_hidden_layers");
            write_all(hf + "/config.json", QByteArray::fromStdString(c.dump()));
            const QString counted = dir_.filePath("qwen3_next-counted.bin");
            QCOMPARE(run_cli({"convert", hf, "-o", counted, "--type", "f32", "-q"}).exit_code, 0);
            QVERIFY(read_all(counted) == read_all(bin));
        }
    }

    // A head with a missing or misshaped tensor, or a hostile count, is a one-line error and no file.
    void bad_heads_are_refused() {
        struct Case {
            const char* what;
            std::function<void(Safetensors&, json&)> edit;
            const char* message;
        };
        // Renames a tensor in the header to a name of the same length: the checkpoint no longer has it.
        const auto hide = [](Safetensors& s, const std::string& name) {
            json t = s.header[name];
            s.header.erase(name);
            s.header[name.substr(0, name.size() - 7) + "X.weigh"] = t;
        };
        const Case cases[] = {
            {"missing eh_proj", [&](Safetensors& s, json&) { hide(s, "model.layers.2.eh_proj.weight"); },
             "model.layers.2.eh_proj.weight is missing"},
            {"misshaped eh_proj",
             [](Safetensors& s, json&) { s.header["model.layers.2.eh_proj.weight"]["shape"] = {128, 64}; },
             "model.layers.2.eh_proj.weight has shape [128, 64]"},
            {"missing enorm", [&](Safetensors& s, json&) { hide(s, "model.layers.2.enorm.weight"); },
             "model.layers.2.enorm.weight is missing"},
            {"hostile count", [](Safetensors&, json& c) { c["num_nextn_predict_layers"] = 4000000000u; }, "num_nextn_predict_layers"},
            {"negative count", [](Safetensors&, json& c) { c["num_nextn_predict_layers"] = -1; }, "num_nextn_predict_layers"},
        };
        for (const Case& c : cases) {
            const QString hf = dir_.filePath(QString("bad-") + c.what).replace(' ', '-');
            QVERIFY(make_glm(QString("bad-") + QString(c.what).replace(' ', '-')));
            Safetensors s = read_safetensors(hf + "/model.safetensors");
            json cfg = json::parse(read_all(hf + "/config.json").toStdString());
            c.edit(s, cfg);
            write_safetensors(hf + "/model.safetensors", s);
            write_all(hf + "/config.json", QByteArray::fromStdString(cfg.dump()));
            const QString out = dir_.filePath("bad.bin");
            const CliResult r = run_cli({"convert", hf, "-o", out, "-q"});
            QVERIFY2(r.exit_code != 0 && !r.crashed, c.what);
            QVERIFY2(r.err.contains(c.message) && r.err.count('\n') == 1, qPrintable(QString(c.what) + ": " + r.err));
            QVERIFY(!QFile::exists(out));
        }
        // A .bin whose header counts too many head layers, or whose head misses a tensor, is refused at load in one line;
        // a 2.2 file (no head: the field was reserved, zero) loads as it did.
        const QByteArray good = read_all(glm_bin_);
        {
            BinBytes b(good);
            FileHeader h = b.header();
            h.hparams.mtp_layers = 5;
            b.set_header(h);
            b.reseal();
            auto m = Model::load(write_all(dir_.filePath("five.bin"), b.bytes()).toStdString());
            QVERIFY(!m);
            QVERIFY2(m.message().find("MTP layers") != std::string::npos && m.message().find('\n') == std::string::npos, m.message().c_str());
        }
        {
            BinBytes b(good);
            const int i = b.tensor_index("layers.2.mtp.eh_proj");
            QVERIFY(i >= 0);
            TensorEntry t = b.tensor(uint32_t(i));
            t.name[19] = 'X';
            b.set_tensor(uint32_t(i), t);
            b.reseal();
            auto m = Model::load(write_all(dir_.filePath("no-eh.bin"), b.bytes()).toStdString());
            QVERIFY2(!m && m.message().find("layers.2.mtp.eh_proj") != std::string::npos, m ? "loaded" : m.message().c_str());
        }
        {
            const QString plain = dir_.filePath("plain.bin");
            QCOMPARE(run_cli({"convert", reference("hf/glm4_moe/model"), "-o", plain, "-q"}).exit_code, 0);
            BinBytes b(read_all(plain));
            FileHeader h = b.header();
            h.version_minor = 2;
            b.set_header(h);
            b.reseal();
            auto m = Model::load(write_all(dir_.filePath("v22.bin"), b.bytes()).toStdString());
            QVERIFY2(m, m ? "" : m.message().c_str());
            QVERIFY(m.value()->mtp_layers().empty());
        }
        // --mtp-layers on a family without a head.
        QVERIFY(!make_model(dir_.filePath("no-head"), {"--family", "mixtral", "--mtp-layers", "1"}));
    }
};

QTEST_GUILESS_MAIN(TestMtp)
#include "test_mtp.moc"
