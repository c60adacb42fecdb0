#include "tools/random_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>

#include "engine/base/splitmix64.h"
#include "engine/file/bin_writer.h"
#include "engine/core/thread_pool.h"
#include "kernels/half.h"
#include "kernels/matvec.h"
#include "kernels/weight_types.h"
#include "tools/convert_plan.h"
#include "tools/quantize.h"

namespace colibri::tools {
namespace {

using namespace blocks;

// A splitmix64 stream (engine/base/splitmix64.h) per (seed, stream): the same numbers everywhere.
class Stream {
public:
    Stream(uint64_t seed, uint64_t stream) : rng_(seed * kSplitMix64Increment ^ (stream + 0x632BE59BD9B4E019ull)) { next(); }
    uint64_t next() { return rng_.next(); }
    uint32_t below(uint32_t n) { return uint32_t((next() >> 32) * n >> 32); }
    float uniform() { return float(next() >> 40) * 0x1.0p-24f; }  // [0, 1)
    float gaussian() { return rng_.gaussian(); }
    void bytes(uint8_t* p, size_t n) {
        for (size_t i = 0; i < n; i += 8) {
            const uint64_t v = next();
            std::memcpy(p + i, &v, std::min<size_t>(8, n - i));
        }
    }

private:
    SplitMix64 rng_;
};

void put_f16(uint8_t* p, float v) {
    const uint16_t h = kernels::f32_to_f16(v);
    std::memcpy(p, &h, 2);
}

// Standard deviations of uniformly random codes: int8 in [−127, 127] 73.6; 4-bit (0..15) 4.61; 5-bit 9.23;
// q6_K's q − 32 18.5; e2m1 over all 16 codes (the rms of ±0, 0.5, ..., 6) 2.93.
constexpr float kSdInt8 = 73.6f, kSd4 = 4.61f, kSd5 = 9.23f, kSd6 = 18.5f, kRmsE2m1 = 2.93f;

// q4_K/q5_K scales: sc_j in [32, 63] and mn_j = sc_j with dmin = d·mean code, so each sub-block is centred.
void k_scales(uint8_t* blk, float sd, float code_sd, float code_mean, Stream& r) {
    uint8_t sc[8];
    for (uint8_t& v : sc) v = uint8_t(32 + r.below(32));
    const float d = sd / (code_sd * 47.5f);
    put_f16(blk, d);
    put_f16(blk + 2, d * code_mean);
    uint8_t* s = blk + 4;
    for (size_t j = 0; j < 4; ++j) {
        s[j] = uint8_t(sc[j] | ((sc[j + 4] >> 4) << 6));
        s[j + 4] = uint8_t(sc[j] | ((sc[j + 4] >> 4) << 6));  // mins equal to the scales
        s[j + 8] = uint8_t((sc[j + 4] & 0x0F) | ((sc[j + 4] & 0x0F) << 4));
    }
}

}  // namespace

void random_row(WeightType type, size_t cols, float sd, uint64_t seed, uint64_t stream, uint8_t* out) {
    Stream r(seed, stream);
    const WeightTypeInfo& info = weight_type_info(type);
    const size_t blocks = cols / info.block_values, bytes = info.block_bytes;
    switch (type) {
        case WeightType::F32:
            for (size_t c = 0; c < cols; ++c) {
                const float v = r.gaussian() * sd;
                std::memcpy(out + 4 * c, &v, 4);
            }
            return;
        case WeightType::F16:
        case WeightType::BF16:
            for (size_t c = 0; c < cols; ++c) {
                const float v = r.gaussian() * sd;
                const uint16_t h = type == WeightType::F16 ? kernels::f32_to_f16(v) : kernels::f32_to_bf16(v);
                std::memcpy(out + 2 * c, &h, 2);
            }
            return;
        case WeightType::Q8_0:
            for (size_t b = 0; b < blocks; ++b) {
                uint8_t* blk = out + b * bytes;
                put_f16(blk, sd / kSdInt8);
                for (size_t i = 0; i < 32; ++i) blk[2 + i] = uint8_t(int8_t(int(r.below(255)) - 127));
            }
            return;
        case WeightType::Q4_0:
            for (size_t b = 0; b < blocks; ++b) {
                // q − 8 has mean −0.5: a random sign of d per block centres the values.
                put_f16(out + b * bytes, (r.next() & 1 ? -sd : sd) / kSd4);
                r.bytes(out + b * bytes + 2, 16);
            }
            return;
        case WeightType::Q4_K:
        case WeightType::Q5_K:
            for (size_t b = 0; b < blocks; ++b) {
                uint8_t* blk = out + b * bytes;
                if (type == WeightType::Q4_K) k_scales(blk, sd, kSd4, 7.5f, r);
                else k_scales(blk, sd, kSd5, 15.5f, r);
                r.bytes(blk + 16, bytes - 16);  // codes (and q5_K's fifth bits)
            }
            return;
        case WeightType::Q6_K:
            for (size_t b = 0; b < blocks; ++b) {
                uint8_t* blk = out + b * bytes;
                r.bytes(blk, kQ6_KScales);  // codes
                for (size_t g = 0; g < 16; ++g) blk[kQ6_KScales + g] = uint8_t(int8_t(int(r.below(255)) - 127));
                put_f16(blk + kQ6_KScale, sd / (kSd6 * kSdInt8));
            }
            return;
        case WeightType::MXFP4: {
            const int e = std::clamp(127 + int(std::lround(std::log2(sd / kRmsE2m1))), 0, 254);
            for (size_t b = 0; b < blocks; ++b) {
                out[b * bytes] = uint8_t(e);
                r.bytes(out + b * bytes + 1, 16);
            }
            return;
        }
    }
}

Result<ConvertSummary> write_random_model(const nlohmann::json& config, const std::string& out_path,
                                          const RandomModelOptions& options) {
    auto planned = plan_model(config, {}, options.matrix_type);
    if (!planned) return planned.status();
    Plan plan = std::move(planned.value());
    size_t at = 0;
    for (PlannedSection& s : plan.sections)
        for (PlannedTensor& t : s.tensors) {
            const schema::TensorSpec& spec = plan.specs[at++];
            const bool expert = spec.role == schema::Role::ExpertGate || spec.role == schema::Role::ExpertUp ||
                                spec.role == schema::Role::ExpertDown;
            if (expert && options.expert_type) t.type = storage_type(*options.expert_type, t.cols);
        }
    auto writer = BinWriter::create(out_path, plan.family, plan.hp, plan.sections);
    if (!writer) return writer.status();
    const uint64_t total = writer.value()->planned_file_size();
    auto started = ThreadPool::create(0);
    if (!started) return started.status();
    ThreadPool& pool = *started.value();
    std::vector<uint8_t> buffer;
    uint64_t done = 0;
    for (size_t i = 0; i < plan.specs.size(); ++i) {
        const PlannedTensor* t = writer.value()->next_tensor();
        const schema::TensorSpec& spec = plan.specs[i];
        buffer.resize(writer.value()->next_tensor_bytes());
        if (spec.kind == schema::Kind::Vector) {
            // Norm weights (every name with "norm") 1; biases and sinks small.
            const bool norm = spec.name.find("norm") != std::string::npos;
            for (uint64_t r = 0; r < t->rows; ++r) {
                const float v = norm ? 1.0f : Stream(options.seed, (uint64_t(i) << 32) + r).gaussian() * options.init;
                std::memcpy(buffer.data() + 4 * r, &v, 4);
            }
        } else {
            const float sd = spec.role == schema::Role::Embed && options.embedding_init ? *options.embedding_init
                             : spec.kind == schema::Kind::ExactMatrix                        ? options.init * 10
                                                                                             : options.init;
            const uint64_t row_bytes = kernels::row_bytes(t->type, t->cols);
            pool.parallel_for(t->rows, 16, [&](size_t b, size_t e) {
                for (size_t r = b; r < e; ++r)
                    random_row(t->type, t->cols, sd, options.seed, (uint64_t(i) << 32) + r, buffer.data() + r * row_bytes);
            });
        }
        COLIBRI_TRY(writer.value()->write_tensor(buffer.data(), buffer.size()));
        done += buffer.size();
        if (options.progress && !options.progress(done, total)) return error("cancelled");
    }
    COLIBRI_TRY(writer.value()->finish());
    ConvertSummary summary;
    summary.family = plan.family;
    summary.file_size = total;
    summary.tensors = static_cast<uint32_t>(plan.specs.size());
    return summary;
}

}  // namespace colibri::tools
