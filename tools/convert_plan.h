// Internal to the converters: a planned .bin (sections, tensors and the source tensor of each) and the
// writer loop shared by the HF and GGUF importers.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "convert.h"
#include "engine/file/bin_writer.h"
#include "engine/file/schema.h"
#include "safetensors.h"

namespace colibri::tools {

struct Plan {
    format::Family family;
    format::HyperParams hp{};
    std::vector<PlannedSection> sections;
    std::vector<std::string> sources;  // HF name of the source of each planned tensor, in write order
    std::vector<schema::TensorSpec> specs;  // the schema's entry of each planned tensor, in write order
};

// Plans a model from an HF config.json (and generation_config's eos ids). Errors name the config field.
Result<Plan> plan_model(const nlohmann::json& config, const std::vector<int32_t>& gen_eos, WeightType type);

// A source name "BASE#op[:expert]" of hf_source_name is a view of BASE: the shape BASE must have (what config.json
// implies), the view's own shape and how its elements map to BASE's (strided, rows or columns picked, values mapped).
// The converter reads views through it; colibri-make-model writes stacked checkpoints through it.
struct SourceViewGeometry {
    std::string base_name;
    std::vector<uint64_t> base_shape, shape;
    bool viewed = false;  // strided: view
    SourceTensor::View view;
    std::vector<uint32_t> row_order, col_order;
    SourceTensor::ValueMap value_map = SourceTensor::ValueMap::Same;
    // Makes t (a copy of the base) the view.
    void apply(SourceTensor& t) const;
};
// `shape`: the view's planned shape (the schema's), which value maps keep.
Result<SourceViewGeometry> source_view_geometry(const std::string& name, const format::HyperParams& hp,
                                                const std::vector<uint64_t>& shape);

// The same from the files' text (generation_config may be empty): the JSON is depth-checked before it is parsed.
// Errors begin with "config.json: " or "generation_config.json: ". What convert_hf and the fuzz_config target run.
Result<Plan> plan_from_config_text(std::string_view config_json, std::string_view generation_config_json, WeightType type);

// The preview's description of a plan (family, shape, parameter count, tokenizer); output sizes are the caller's.
void describe_plan(const Plan& plan, const ConvertSummary& summary, ConvertPreview* preview);
Result<ConvertPreview> preview_hf(const std::string& hf_dir);
Result<ConvertPreview> preview_gguf(const std::string& gguf_path);

// Checks every source tensor's shape, then streams them through the writer into out_path. `load`, when given,
// is called with each source name just before that tensor is encoded, so a source can produce the data then
// (the GGUF importer dequantises there); its error stops the conversion.
Result<ConvertSummary> write_plan(const Plan& plan, const std::function<const SourceTensor*(const std::string&)>& find,
                                  const std::string& source_label, const std::string& out_path,
                                  const ConvertOptions& options, ConvertSummary summary,
                                  const std::function<Status(const std::string&)>& load = {});

}  // namespace colibri::tools
