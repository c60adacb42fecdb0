// The token mixers of the forward pass: softmax attention (GQA, with what AttentionRules says a family adds: q, k
// and v biases, a q/k norm, clipping, partial rotary, sliding windows, sinks) and DeepSeek's multi-head latent
// attention. Each reads rows of h_ and writes rows of proj_, in its session's own cache at its own positions.
// Every product is a kernel call whose bits do not depend on which pool part makes it (kernels/canonical.h).
#include <algorithm>
#include <cmath>

#include "engine/core/elementwise.h"
#include "engine/core/matmul_jobs.h"
#include "engine/core/rope.h"
#include "engine/core/session.h"
#include "engine/core/session_internal.h"
#include "kernels/matvec.h"

namespace colibri {

using namespace format;
using namespace session_internal;

// One softmax-attention layer's shapes and cache, worked out once per layer and chunk.
struct AttentionShape {
    const LayerWeights& w;
    const AttentionRules& rules;
    float eps;                          // of the q/k norms
    uint32_t hd, n_heads, n_kv, group;  // head_dim; query heads, KV heads, query heads per KV head
    uint32_t rot_half;                  // pairs RoPE rotates per head
    uint32_t slots, window;             // positions the layer's cache holds (a ring: slot p % slots); 0 or its window
    size_t q_dim, kv_dim, key_block;    // floats per token's q, per token's k (v), per (KV head, block of positions)
    float* kc;                          // [kv head][block][dim][position in block]
    float* vc;                          // [kv head][slot][dim]
    float scale;                        // of the scores, before softmax
    size_t ls;                          // floats per score row: whole key blocks
};

// DeepSeek's latent attention layer: one cache "head" whose key is [kv latent, rope key] and whose value the latent.
struct LatentShape {
    uint32_t n_heads, qk, rot, nope;   // query heads; q/k head dim = nope + rot (the rotated part)
    uint32_t lora, key_dim, vd;         // kv latent; cache key dim (lora + rot); value head dim
    size_t q_dim, key_block;
    uint32_t held, window;
    float* kc;
    float* vc;
};

namespace {

constexpr float kLowRankEps = 1e-6f;  // MLA's q_a_layernorm and kv_a_layernorm use RMSNorm's default eps

// Hints the cache to fetch [p, p + bytes) (at most 256 KB: a prefetch too large would only evict itself) into
// L2; returns at once.
void prefetch_for_read(const void* p, size_t bytes) {
    const auto* c = static_cast<const char*>(p);
    for (size_t o = 0; o < std::min<size_t>(bytes, 256 << 10); o += 64) __builtin_prefetch(c + o, 0, 2);
}

void rope(RopeStyle style, float* v, const float* c, const float* s, uint32_t half) {
    if (style == RopeStyle::Pairs) rope_pairs(v, c, s, half);
    else rope_halves(v, c, s, half);
}

// The rows of one token's q (qa..qb) and k, v (ka..kb) that KV heads [kv0, kv1) and their query heads own.
struct HeadRange {
    uint32_t kv0, kv1;
    size_t qa, qb, ka, kb;
};

HeadRange head_range(const AttentionShape& a, uint32_t kv0, uint32_t kv1) {
    return {kv0, kv1, size_t(kv0) * a.group * a.hd, size_t(kv1) * a.group * a.hd, size_t(kv0) * a.hd, size_t(kv1) * a.hd};
}

// qwen2_moe's biases on the q, k and v projections.
void add_qkv_bias(const AttentionShape& a, const HeadRange& r, float* q, float* k, float* v) {
    add_bias(q, a.w.q_bias, r.qa, r.qb);
    add_bias(k, a.w.k_bias, r.ka, r.kb);
    add_bias(v, a.w.v_bias, r.ka, r.kb);
}

// The family's q/k norm (AttentionRules::qk_norm), before RoPE: olmoe's over the whole projection (only with
// all heads in one range), qwen3_moe's and glm4_moe's over each head.
void normalise_qk(const AttentionShape& a, const HeadRange& r, float* q, float* k) {
    const uint32_t hd = a.hd;
    if (a.rules.qk_norm == QkNorm::WholeProjection) {
        rmsnorm(q, f32(a.w.q_norm), a.eps, a.q_dim, q);
        rmsnorm(k, f32(a.w.k_norm), a.eps, a.kv_dim, k);
    } else if (a.rules.qk_norm == QkNorm::PerHead) {
        for (uint32_t h = r.kv0 * a.group; h < r.kv1 * a.group; ++h) rmsnorm(q + size_t(h) * hd, f32(a.w.q_norm), a.eps, hd, q + size_t(h) * hd);
        for (uint32_t h = r.kv0; h < r.kv1; ++h) rmsnorm(k + size_t(h) * hd, f32(a.w.k_norm), a.eps, hd, k + size_t(h) * hd);
    }
}

// olmoe's clip_qkv: q, k and v clamped to ±clip_qkv.
void clip_qkv(const AttentionShape& a, const HeadRange& r, float* q, float* k, float* v) {
    if (!(a.rules.clip_qkv > 0.0f)) return;
    const float c = a.rules.clip_qkv;
    for (size_t i = r.qa; i < r.qb; ++i) q[i] = std::clamp(q[i], -c, c);
    for (size_t i = r.ka; i < r.kb; ++i) k[i] = std::clamp(k[i], -c, c);
    for (size_t i = r.ka; i < r.kb; ++i) v[i] = std::clamp(v[i], -c, c);
}

// RoPE (the family's pairing) on each head's first rotary_dim dims (all of them but for partial rotary).
void rotate_qk(const AttentionShape& a, const HeadRange& r, const float* rc, const float* rs, float* q, float* k) {
    for (uint32_t h = r.kv0 * a.group; h < r.kv1 * a.group; ++h) rope(a.rules.rope_style, q + size_t(h) * a.hd, rc, rs, a.rot_half);
    for (uint32_t h = r.kv0; h < r.kv1; ++h) rope(a.rules.rope_style, k + size_t(h) * a.hd, rc, rs, a.rot_half);
}

// Keys transposed in blocks of kKeyBlock positions ([kv head][block][dim][position in block]), values as rows
// ([kv head][position][dim]): both products of a head are then weighted_rows (attend), and a block's keys are
// one contiguous 16 KB (head_dim 64) that the scores read as a whole.
void store_kv(const AttentionShape& a, const HeadRange& r, size_t slot, const float* k, const float* v) {
    constexpr uint32_t kKeyBlock = Session::kKeyBlock;
    const uint32_t hd = a.hd;
    for (uint32_t h = r.kv0; h < r.kv1; ++h) {
        float* block = a.kc + (size_t(h) * a.slots / kKeyBlock + slot / kKeyBlock) * a.key_block + slot % kKeyBlock;
        for (uint32_t i = 0; i < hd; ++i) block[size_t(i) * kKeyBlock] = k[size_t(h) * hd + i];
        std::copy_n(v + size_t(h) * hd, hd, a.vc + (size_t(h) * a.slots + slot) * hd);
    }
}

// Scores of `heads` query heads (q, rows of key_dim floats) against positions [lo, n_pos) of a layer's
// transposed key cache, softmax (with the heads' sinks), into score rows of `ls` floats.
void attention_scores(const float* kc, uint32_t key_dim, uint32_t ring, uint32_t lo, uint32_t n_pos, const float* q,
                      uint32_t heads, const float* sinks, float scale, float* sc, size_t ls) {
    // Position p's key is column p % kKeyBlock of block p / kKeyBlock (of slot p % ring in a ring). Score rows
    // start at position lo. Each score is one fma chain over the key's dims (weighted_rows), so how the
    // positions are cut into calls does not change a bit.
    constexpr uint32_t kKeyBlock = Session::kKeyBlock;
    const size_t key_block = size_t(key_dim) * kKeyBlock;
    for (uint32_t p = lo; p < n_pos;) {
        const uint32_t slot = p % ring, col = slot % kKeyBlock;
        const uint32_t count = std::min(n_pos - p, kKeyBlock - col);
        kernels::weighted_rows(kc + size_t(slot / kKeyBlock) * key_block + col, kKeyBlock, key_dim, count, q, key_dim, heads,
                               sc + (p - lo), ls);
        p += count;
    }
    for (uint32_t j = 0; j < heads; ++j) {
        if (sinks) attention_softmax_sink(sc + size_t(j) * ls, n_pos - lo, scale, sinks[j]);
        else attention_softmax(sc + size_t(j) * ls, n_pos - lo, scale);
    }
}

// Query heads of one token that share a KV head, and what they attend with.
struct QueryGroup {
    uint32_t n_pos, heads;  // positions [0, n_pos) are causal for the token; how many query heads
    size_t first;           // the first query head's index
    const float* q;         // the heads' queries, contiguous
    const float* kh;        // the KV head's keys and values in the cache
    const float* vh;
    float* sc;              // score rows
    float* out;             // the heads' outputs, contiguous
};

// gpt_oss: a sliding layer over the last `window` positions of its ring, or the heads' sinks joining the softmax.
// `gathered` holds the window's values in position order (a ring may wrap): one fma chain per output element.
void attend_window_or_sinks(const AttentionShape& a, const QueryGroup& g, float* gathered) {
    const uint32_t lo = a.window != 0 && g.n_pos > a.window ? g.n_pos - a.window : 0;
    attention_scores(g.kh, a.hd, a.slots, lo, g.n_pos, g.q, g.heads, a.w.sinks ? f32(a.w.sinks) + g.first : nullptr, a.scale,
                     g.sc, a.ls);
    const float* rows = g.vh;
    if (a.window != 0) {
        for (uint32_t p = lo; p < g.n_pos; ++p) std::copy_n(g.vh + size_t(p % a.slots) * a.hd, a.hd, gathered + size_t(p - lo) * a.hd);
        rows = gathered;
    }
    kernels::weighted_rows(rows, a.hd, g.n_pos - lo, a.hd, g.sc, a.ls, g.heads, g.out, a.hd);
}

// Every position up to the token's own.
void attend_all_positions(const AttentionShape& a, const QueryGroup& g) {
    // Per block of positions: rows of kKeyBlock floats side by side instead of rows a context apart (with
    // rows 16 KB apart every dimension's row fell into the same cache sets, and the 64 rows were 64 streams;
    // attention took 17-23 µs per layer at 200 positions).
    // The last block's columns are rounded up to whole vectors of 16: the kernels' ragged tail is a scalar
    // fma chain per element (2 µs per KV head at 8 leftover columns), and the extra scores, from key slots
    // not yet written, are never read (softmax and values stop at n_pos).
    constexpr uint32_t kKeyBlock = Session::kKeyBlock;
    for (uint32_t p0 = 0; p0 < g.n_pos; p0 += kKeyBlock) {
        const uint32_t cols = std::min<uint32_t>(kKeyBlock, (g.n_pos - p0 + 15) / 16 * 16);
        kernels::weighted_rows(g.kh + size_t(p0 / kKeyBlock) * a.key_block, kKeyBlock, a.hd, cols, g.q, a.hd, g.heads, g.sc + p0, a.ls);
    }
    for (uint32_t j = 0; j < g.heads; ++j) attention_softmax(g.sc + size_t(j) * a.ls, g.n_pos, a.scale);
    kernels::weighted_rows(g.vh, a.hd, g.n_pos, a.hd, g.sc, a.ls, g.heads, g.out, a.hd);
}

}  // namespace

void Session::attention(uint32_t layer, const LayerWeights& w, uint32_t n) {
    const HyperParams& hp = model_.hparams();
    const AttentionRules& rules = model_.rules().attention;
    const LayerCache& cache = caches_[layer];
    const uint32_t hd = hp.head_dim;
    const AttentionShape a{.w = w,
                           .rules = rules,
                           .eps = hp.rms_eps,
                           .hd = hd,
                           .n_heads = hp.n_heads,
                           .n_kv = hp.n_kv_heads,
                           .group = hp.n_heads / hp.n_kv_heads,
                           .rot_half = rules.rotary_dim / 2,
                           .slots = cache.held,
                           .window = cache.window,
                           .q_dim = size_t(hp.n_heads) * hd,
                           .kv_dim = size_t(hp.n_kv_heads) * hd,
                           .key_block = size_t(hd) * kKeyBlock,
                           .kc = k_cache_.data() + cache.k_offset,
                           .vc = v_cache_.data() + cache.v_offset,
                           .scale = 1.0f / std::sqrt(static_cast<float>(hd)) * model_.rope().softmax_scale,
                           .ls = max_slots_};
    const size_t parts = pool_.size();
    // olmoe's q/k norm needs whole projections: it cannot run per part of the KV heads.
    if (parts > 1 && a.n_kv % parts == 0 && rules.qk_norm != QkNorm::WholeProjection) {
        attention_by_kv_heads(a, n);
    } else {
        const MatmulJob qkv[3] = {{w.q, h_.data(), n, q_.data()}, {w.k, h_.data(), n, k_.data()}, {w.v, h_.data(), n, v_.data()}};
        run_matmuls(pool_, qkv);
        prepare_qkv(a, n, 0, a.n_kv);
        attend_chunk(a, n);
    }
    if (rules.output_gate) gate_attention_output(w, n);
    output_projection(w, n);
}

void Session::gate_attention_output(const LayerWeights& w, uint32_t n) {
    const size_t count = size_t(n) * model_.hparams().n_heads * model_.hparams().head_dim;
    matmul(*w.q_gate, h_.data(), n, attn_gate_.data());
    for (size_t i = 0; i < count; ++i) att_[i] *= 1.0f / (1.0f + std::exp(-attn_gate_[i]));
}

void Session::attention_by_kv_heads(const AttentionShape& a, uint32_t n) {
    // Each part owns n_kv / parts KV heads, computes their q, k and v rows (equal work for every part), prepares
    // them and attends over them. A row is the same kernel call whoever computes it, so the bits are those of
    // the split in attend_chunk.
    const size_t parts = pool_.size();
    pool_.parallel_for(parts, 1, [&](size_t part_begin, size_t part_end) {
        for (size_t part = part_begin; part < part_end; ++part) {
            const uint32_t kv0 = static_cast<uint32_t>(a.n_kv * part / parts);
            const uint32_t kv1 = static_cast<uint32_t>(a.n_kv * (part + 1) / parts);
            product_rows(*a.w.q, h_.data(), n, q_.data(), size_t(kv0) * a.group * a.hd, size_t(kv1) * a.group * a.hd);
            product_rows(*a.w.k, h_.data(), n, k_.data(), size_t(kv0) * a.hd, size_t(kv1) * a.hd);
            product_rows(*a.w.v, h_.data(), n, v_.data(), size_t(kv0) * a.hd, size_t(kv1) * a.hd);
            prepare_qkv(a, n, kv0, kv1);
            for (uint32_t t = 0; t < n; ++t)
                for (uint32_t kvh = kv0; kvh < kv1; ++kvh) attend(a, part, t, kvh, 0, a.group);
        }
    });
}

void Session::prepare_qkv(const AttentionShape& a, uint32_t n, uint32_t kv0, uint32_t kv1) {
    // The projections' rows of KV heads [kv0, kv1) and of their query heads, made ready for attention, then the
    // keys and values stored in the cache.
    const HeadRange r = head_range(a, kv0, kv1);
    for (uint32_t t = 0; t < n; ++t) {
        float* q = q_.data() + t * a.q_dim;
        float* k = k_.data() + t * a.kv_dim;
        float* v = v_.data() + t * a.kv_dim;
        add_qkv_bias(a, r, q, k, v);
        normalise_qk(a, r, q, k);
        clip_qkv(a, r, q, k, v);
        rotate_qk(a, r, rope_cos_.data() + size_t(t) * a.rot_half, rope_sin_.data() + size_t(t) * a.rot_half, q, k);
        store_kv(a, r, (position_ + t) % a.slots, k, v);
    }
}

void Session::attend_chunk(const AttentionShape& a, uint32_t n) {
    // The (token, KV head) pairs split into one fixed range per pool part, each with its own score rows,
    // when the work (about 2·hd multiply-adds per query head and position) pays for the hand-off. With
    // fewer pairs than parts (a single token's attention over one KV head, as in multi-query attention, or
    // over fewer KV heads than threads) each pair's query heads split into slices too, which read the same
    // keys and values: a score or output element is the same fma chain whichever slice computes it.
    const size_t parts = pool_.size();
    const size_t pairs = size_t(n) * a.n_kv;
    const size_t work = size_t(n) * a.n_heads * (size_t(position_) + (n + 1) / 2) * a.hd * 2;
    const size_t split = std::clamp<size_t>(work / 65536, 1, parts);
    const size_t slices = std::min<size_t>(a.group, (split + pairs - 1) / pairs);
    const size_t items = pairs * slices;
    pool_.parallel_for(split, 1, [&](size_t part_begin, size_t part_end) {
        for (size_t part = part_begin; part < part_end; ++part)
            for (size_t item = items * part / split; item < items * (part + 1) / split; ++item) {
                const size_t pair = item / slices, slice = item % slices;
                attend(a, part, static_cast<uint32_t>(pair / a.n_kv), static_cast<uint32_t>(pair % a.n_kv),
                       static_cast<uint32_t>(a.group * slice / slices), static_cast<uint32_t>(a.group * (slice + 1) / slices));
            }
    });
}

void Session::attend(const AttentionShape& a, size_t part, uint32_t t, uint32_t kvh, uint32_t j0, uint32_t j1) {
    // Causal attention of token t's query heads that share KV head kvh, over the positions up to the token's
    // own (the last `window` of them in a sliding layer): the keys and values are read once for the group.
    // Both products are weighted_rows (kernels/canonical.h, 3: one fma chain per element, the same bits for
    // every variant, thread count and chunking):
    //   scores[j][p] = Σ_d q_j[d] · K^T[d][p],   out_j[d] = Σ_p softmax(scores_j · scale)[p] · V[p][d].
    const size_t first = size_t(kvh) * a.group + j0;
    const QueryGroup g{.n_pos = position_ + t + 1,
                       .heads = j1 - j0,
                       .first = first,
                       .q = q_.data() + t * a.q_dim + first * a.hd,
                       .kh = a.kc + size_t(kvh) * a.slots * a.hd,
                       .vh = a.vc + size_t(kvh) * a.slots * a.hd,
                       .sc = scores_.data() + part * a.group * a.ls,
                       .out = att_.data() + t * a.q_dim + first * a.hd};
    if (a.window != 0 || a.w.sinks != nullptr) attend_window_or_sinks(a, g, values_.data() + part * size_t(a.slots) * a.hd);
    else attend_all_positions(a, g);
}

void Session::output_projection(const LayerWeights& w, uint32_t n) {
    // The router's weights come right after this projection, on this thread alone and before anything else
    // of the MoE block: ask for them now, so they arrive in L2 while the projection streams (a cold 32 KB
    // router took about 1 µs of the serial gap before the experts).
    if (w.router) prefetch_for_read(w.router->data, w.router->size);
    matmul(*w.o, att_.data(), n, proj_.data());
    const size_t H = model_.hparams().hidden_size;
    if (w.o_bias)  // gpt_oss
        for (uint32_t t = 0; t < n; ++t) add_bias(proj_.data() + size_t(t) * H, w.o_bias, 0, H);
}

void Session::latent_attention(uint32_t layer, const LayerWeights& w, uint32_t n) {
    const HyperParams& hp = model_.hparams();
    const AttentionRules& rules = model_.rules().attention;
    const LayerCache& cache = caches_[layer];
    const uint32_t qk = hp.head_dim, rot = rules.rotary_dim, lora = rules.kv_lora_rank;
    const LatentShape m{.n_heads = hp.n_heads,
                        .qk = qk,
                        .rot = rot,
                        .nope = qk - rot,
                        .lora = lora,
                        .key_dim = lora + rot,
                        .vd = rules.v_head_dim,
                        .q_dim = size_t(hp.n_heads) * qk,
                        .key_block = size_t(lora + rot) * kKeyBlock,
                        .held = cache.held,
                        .window = cache.window,
                        .kc = k_cache_.data() + cache.k_offset,
                        .vc = v_cache_.data() + cache.v_offset};
    project_latent(w, n);
    prepare_latent(m, w, n);
    attend_latent(m, w, n);
    output_projection(w, n);
}

void Session::project_latent(const LayerWeights& w, uint32_t n) {
    // The query (through its low-rank path when there is one) and the compressed kv of every token.
    if (w.q_a) {
        matmul(*w.q_a, h_.data(), n, q_low_.data());
        const uint32_t r = model_.rules().attention.q_lora_rank;
        for (uint32_t t = 0; t < n; ++t) rmsnorm(q_low_.data() + t * r, f32(w.q_a_norm), kLowRankEps, r, q_low_.data() + t * r);
        const MatmulJob jobs[2] = {{w.q, q_low_.data(), n, q_.data()}, {w.kv_a, h_.data(), n, k_.data()}};
        run_matmuls(pool_, jobs);
    } else {
        const MatmulJob jobs[2] = {{w.q, h_.data(), n, q_.data()}, {w.kv_a, h_.data(), n, k_.data()}};
        run_matmuls(pool_, jobs);
    }
}

void Session::prepare_latent(const LatentShape& m, const LayerWeights& w, uint32_t n) {
    // The kv latent normed, the rope parts of the key and of every query head rotated; the latent and rope key
    // stored as the position's key (transposed in blocks, as attention's), the latent as its value.
    const RopeStyle style = model_.rules().attention.rope_style;
    const uint32_t rot_half = m.rot / 2;
    for (uint32_t t = 0; t < n; ++t) {
        float* kv = k_.data() + size_t(t) * m.key_dim;  // [latent (lora), rope key (rot)]
        rmsnorm(kv, f32(w.kv_a_norm), kLowRankEps, m.lora, kv);
        const float* rc = rope_cos_.data() + size_t(t) * rot_half;
        const float* rs = rope_sin_.data() + size_t(t) * rot_half;
        rope(style, kv + m.lora, rc, rs, rot_half);
        for (uint32_t h = 0; h < m.n_heads; ++h) rope(style, q_.data() + t * m.q_dim + size_t(h) * m.qk + m.nope, rc, rs, rot_half);
        const size_t slot = (position_ + t) % m.held;
        float* block = m.kc + (slot / kKeyBlock) * m.key_block + slot % kKeyBlock;
        for (uint32_t i = 0; i < m.key_dim; ++i) block[size_t(i) * kKeyBlock] = kv[i];
        std::copy_n(kv, m.lora, m.vc + slot * m.lora);
    }
}

void Session::attend_latent(const LatentShape& m, const LayerWeights& w, uint32_t n) {
    // Per head (split among the pool's parts): the absorbed query [k_b_h^T q_nope, q_rope], scores against the
    // latents and rope keys, the weighted sum of latents, then v_b_h out of the latent space. Every element is
    // one kernel call's fma chain whichever part computes it.
    const float scale = 1.0f / std::sqrt(static_cast<float>(m.qk)) * model_.rope().softmax_scale;
    const size_t ls = max_slots_;
    const uint32_t lora = m.lora, n_heads = m.n_heads;
    const size_t parts = std::min<size_t>(pool_.size(), n_heads);
    pool_.parallel_for(parts, 1, [&](size_t part_begin, size_t part_end) {
        for (size_t part = part_begin; part < part_end; ++part) {
            const uint32_t h0 = static_cast<uint32_t>(n_heads * part / parts), h1 = static_cast<uint32_t>(n_heads * (part + 1) / parts);
            float* sc = scores_.data() + part * ls;
            for (uint32_t t = 0; t < n; ++t) {
                const uint32_t n_pos = position_ + t + 1;
                const uint32_t lo = m.window != 0 && n_pos > m.window ? n_pos - m.window : 0;
                for (uint32_t h = h0; h < h1; ++h) {
                    const float* qh = q_.data() + t * m.q_dim + size_t(h) * m.qk;
                    float* aq = latent_q_.data() + (size_t(t) * n_heads + h) * m.key_dim;
                    float* lat = latent_out_.data() + (size_t(t) * n_heads + h) * lora;
                    product_rows(*w.k_b, qh, 1, aq - size_t(h) * lora, size_t(h) * lora, size_t(h + 1) * lora);
                    std::copy_n(qh + m.nope, m.rot, aq + lora);
                    attention_scores(m.kc, m.key_dim, m.held, lo, n_pos, aq, 1, nullptr, scale, sc, ls);
                    kernels::weighted_rows(m.vc + size_t(lo) * lora, lora, n_pos - lo, lora, sc, ls, 1, lat, lora);
                    product_rows(*w.v_b, lat, 1, att_.data() + size_t(t) * n_heads * m.vd, size_t(h) * m.vd, size_t(h + 1) * m.vd);
                }
            }
        }
    });
}

}  // namespace colibri
