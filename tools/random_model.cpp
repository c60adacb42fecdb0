#include "tools/random_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>

#include "engine/file/bin_writer.h"
#include "engine/core/thread_pool.h"
#include "kernels/random_blocks.h"
#include "kernels/matvec.h"
#include "kernels/weight_types.h"
#include "tools/convert_plan.h"
#include "tools/quantize.h"

namespace colibri::tools {

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
                const float v = norm ? 1.0f : kernels::RandomStream(options.seed, (uint64_t(i) << 32) + r).gaussian() * options.init;
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
