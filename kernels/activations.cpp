// The activation quantisation of the block types' integer path (kernels/canonical.h, 2a). Compiled once with
// the baseline flags and called by every variant, so all variants see the same quantised vector.
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/canonical.h"

namespace colibri::kernels::canonical {

void quantize_block(const float* x, int8_t* q, float* d, int32_t* sum) {
    float amax = 0.0f;
    for (size_t i = 0; i < kActBlock; ++i) {
        const float a = std::fabs(x[i]);
        if (a > amax) amax = a;  // false for NaN: NaN is skipped
    }
    *d = amax / 127.0f;
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    constexpr float kRound = 12582912.0f;  // 1.5 · 2^23: (v + kRound) − kRound rounds |v| ≤ 2^22 to nearest even
    int32_t s = 0;
    for (size_t i = 0; i < kActBlock; ++i) {
        float v = x[i] * inv;
        v = v > 127.0f ? 127.0f : v;
        v = v < -127.0f ? -127.0f : v;
        if (!(v == v)) v = 0.0f;  // NaN (x NaN, or Inf · 0)
        const float r = (v + kRound) - kRound;
        const int qi = static_cast<int>(r);  // r is an integer in [−127, 127]
        q[i] = static_cast<int8_t>(qi);
        s += qi;
    }
    *sum = s;
}

void quantize_blocks(const float* x, size_t blocks, int8_t* q, float* d, int32_t* sum, float* nsum) {
    for (size_t b = 0; b < blocks; ++b) {
        quantize_block(x + b * kActBlock, q + b * kActBlock, d + b, sum + b);
        nsum[b] = -float(sum[b]);
    }
}

void dequantize_activations(const float* x, size_t cols, float* xq, float* dx) {
    for (size_t b = 0; b + kActBlock <= cols; b += kActBlock) {
        int8_t q[kActBlock];
        float d;
        int32_t sum;
        quantize_block(x + b, q, &d, &sum);
        for (size_t i = 0; i < kActBlock; ++i) xq[b + i] = d * float(q[i]), dx[b + i] = d;
    }
}

namespace {

struct Buffer {
    std::vector<int8_t> q;
    std::vector<float> d, nsum;
    std::vector<int32_t> sum;
    // What q holds: the source values (bit for bit), their shape and the quantiser. The products of one hand-off
    // often share an input (q, k and v; an expert's gate and up), so a thread asked for the same values again
    // returns them without quantising; memcmp stops at the first difference when they are new.
    std::vector<float> source;
    size_t cols = 0, n = 0;
    QuantizeBlocksFn quantize = nullptr;
    uint64_t generation = 0;  // bumped when q changes (q4_k_activations' cache key)
};

thread_local Buffer t_buf;

}  // namespace

QuantizedActivations quantize_activations(const float* x, size_t cols, size_t n, QuantizeBlocksFn quantize) {
    Buffer& buf = t_buf;
    const size_t blocks = cols / kActBlock;
    const size_t stride = (blocks + kLanes - 1) / kLanes * kLanes;
    const size_t total = stride * n;
    if (buf.quantize == quantize && buf.cols == cols && buf.n == n &&
        std::memcmp(buf.source.data(), x, n * cols * sizeof(float)) == 0)
        return {buf.q.data(), buf.d.data(), buf.sum.data(), buf.nsum.data(), blocks, stride};
    if (buf.d.size() < total) {  // grows only; never shrinks
        buf.q.resize(total * kActBlock);
        buf.d.resize(total);
        buf.nsum.resize(total);
        buf.sum.resize(total);
    }
    for (size_t i = 0; i < n; ++i) {
        const float* xi = x + i * cols;
        int8_t* q = buf.q.data() + i * stride * kActBlock;
        float* d = buf.d.data() + i * stride;
        float* nsum = buf.nsum.data() + i * stride;
        int32_t* sum = buf.sum.data() + i * stride;
        quantize(xi, blocks, q, d, sum, nsum);
        const size_t pad = stride - blocks;
        std::memset(q + blocks * kActBlock, 0, pad * kActBlock);
        for (size_t b = blocks; b < stride; ++b) d[b] = 0.0f, nsum[b] = 0.0f, sum[b] = 0;
    }
    if (buf.source.size() < n * cols) buf.source.resize(n * cols);
    std::memcpy(buf.source.data(), x, n * cols * sizeof(float));
    buf.cols = cols, buf.n = n, buf.quantize = quantize;
    ++buf.generation;
    return {buf.q.data(), buf.d.data(), buf.sum.data(), buf.nsum.data(), blocks, stride};
}

bool permuted_copy_current(QuantizedKey& made_from, const QuantizedActivations& qa, size_t n) {
    // A buffer that is not this thread's (a caller's own) gets generation 0, which never counts as current.
    const QuantizedKey key{qa.q, qa.q == t_buf.q.data() ? t_buf.generation : 0, n};
    if (key.generation != 0 && key == made_from) return true;
    made_from = key;
    return false;
}

const int8_t* q4_k_activations(const QuantizedActivations& qa, size_t n) {
    thread_local std::vector<int8_t> buf;
    thread_local QuantizedKey made_from{};
    if (permuted_copy_current(made_from, qa, n)) return buf.data();
    const size_t units = n * qa.stride;  // a multiple of 16: whole super-blocks, padding included
    if (buf.size() < units * kActBlock) buf.resize(units * kActBlock);
    // In 4-byte groups: values 16h + 4p .. 16h + 4p + 3 of unit j (source bytes 32j + 16h + 4p) go to
    // q4_k_activation_offset(p, h) + 4j.
    for (size_t u = 0; u < units; u += 8) {
        const int8_t* src = qa.q + u * kActBlock;
        int8_t* dst = buf.data() + u * kActBlock;
        for (size_t p = 0; p < 4; ++p)
            for (size_t h = 0; h < 2; ++h)
                for (size_t j = 0; j < 8; ++j)
                    std::memcpy(dst + q4_k_activation_offset(p, h) + 4 * j, src + 32 * j + 16 * h + 4 * p, 4);
    }
    return buf.data();
}

}  // namespace colibri::kernels::canonical
