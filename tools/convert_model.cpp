// Source dispatch and the optional zstd pass of a conversion (tools/convert.h).
#include <filesystem>
#include <optional>

#include "tools/convert.h"
#include "engine/file/schema.h"
#include "tools/convert_plan.h"
#include "tools/model_output.h"

namespace colibri::tools {
namespace {

// Both phases report in parts per million of the whole job, so a progress bar moves once from 0 to 100%.
constexpr uint64_t kPhaseUnits = 1'000'000;

uint64_t scaled(uint64_t done, uint64_t total) {
    if (total == 0) return kPhaseUnits;
    return static_cast<uint64_t>(static_cast<double>(done) / static_cast<double>(total) * kPhaseUnits);
}

}  // namespace

Result<ConvertSummary> convert_model(const std::string& source, const std::string& out_path, const ConvertOptions& options) {
    std::error_code ec;
    if (!std::filesystem::exists(source, ec)) return error(source + ": no such file or directory");
    if (options.zstd && (options.zstd_level < 1 || options.zstd_level > 22))
        return error("zstd level " + std::to_string(options.zstd_level) + " is outside 1..22");
    const bool from_hf = std::filesystem::is_directory(source, ec);
    const uint64_t phases = options.zstd ? 2 : 1;

    ConvertOptions first = options;
    if (options.progress) {
        first.progress = [&](uint64_t done, uint64_t total) { return options.progress(scaled(done, total), phases * kPhaseUnits); };
    }
    ZstOptions zst;
    zst.level = options.zstd_level;
    if (options.progress) {
        zst.progress = [&](uint64_t done, uint64_t total) {
            return options.progress(kPhaseUnits + scaled(done, total), phases * kPhaseUnits);
        };
    }
    std::optional<ConvertSummary> summary;
    Status written = write_model_output(out_path, options.zstd, zst, [&](const std::string& bin_path) -> Status {
        auto r = from_hf ? convert_hf(source, bin_path, first) : convert_gguf(source, bin_path, first);
        if (!r) return r.status();
        summary = r.value();
        return Status::ok();
    });
    if (!written) return written;
    summary->stored_size = std::filesystem::file_size(out_path, ec);
    if (ec) return error(out_path + ": " + ec.message());
    return *summary;
}

void describe_plan(const Plan& plan, const ConvertSummary& summary, ConvertPreview* preview) {
    preview->family = plan.family;
    preview->layers = plan.hp.n_layers;
    preview->experts = plan.hp.n_experts;
    preview->active_experts = plan.hp.n_experts_active;
    preview->shared_expert = (plan.hp.flags & format::kSharedExpert) != 0;
    preview->has_tokenizer = summary.has_tokenizer;
    preview->parameters = 0;
    for (const PlannedSection& s : plan.sections)
        for (const PlannedTensor& t : s.tensors) preview->parameters += t.rows * t.cols;
    preview->linear_layers = 0;
    for (uint32_t l = 0; l < plan.hp.n_layers; ++l) preview->linear_layers += schema::is_linear_layer(plan.hp, l) ? 1 : 0;
}

Result<ConvertPreview> preview_conversion(const std::string& source) {
    std::error_code ec;
    if (!std::filesystem::exists(source, ec)) return error(source + ": no such file or directory");
    return std::filesystem::is_directory(source, ec) ? preview_hf(source) : preview_gguf(source);
}

}  // namespace colibri::tools
