// Read-only access to Hugging Face safetensors checkpoints, single-file or sharded
// (model.safetensors.index.json). The header is checked against the file before any tensor is used.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/file/mapped_file.h"
#include "engine/base/status.h"
#include "kernels/types.h"

namespace colibri::tools {

enum class SourceDType { F32, F16, BF16 };

struct SourceTensor {
    std::string name;
    SourceDType dtype;
    // Set when data holds rows of this block type in the engine's layout, to be stored as they are (a GGUF
    // tensor carried over without requantisation); dtype is then meaningless.
    std::optional<WeightType> blocks;
    std::vector<uint64_t> shape;
    const uint8_t* data;  // into the mapping
    uint64_t size;        // bytes
    // Source row of each output row, when rows must be reordered on import (GGUF's rotary permutation); empty = identity.
    std::vector<uint32_t> row_order;
    // A strided view of another tensor's data (data and size are the whole source's): element (r, c) of this
    // [rows, cols] tensor is source element offset + (r / rows_per_block) · block_stride +
    // (r % rows_per_block) · row_stride + c · col_stride. One expert of a stacked 3-d tensor, a transpose,
    // every other column (gpt_oss's interleaved gate/up), each head's block of DeepSeek's kv_b.
    struct View {
        uint64_t offset = 0, rows_per_block = 0, block_stride = 0, row_stride = 0, col_stride = 0;
    };
    bool viewed = false;
    View view;
    // Source column of each output column (with row_order, not with a view); empty = identity.
    std::vector<uint32_t> col_order;
    // What each element becomes: Qwen3-Next's zero-centred norms x̂·(1 + w) are stored as 1 + w, its A_log as
    // A = −exp(A_log), both as transformers computes them in f32.
    enum class ValueMap : uint8_t { Same, PlusOne, NegExp };
    ValueMap value_map = ValueMap::Same;
    uint64_t elements() const;
};

class SafetensorsFile {
public:
    static Result<std::unique_ptr<SafetensorsFile>> open(const std::string& path);
    const std::map<std::string, SourceTensor>& tensors() const { return tensors_; }
    const std::string& path() const { return path_; }

private:
    SafetensorsFile() = default;
    std::string path_;
    MappedFile map_;
    std::map<std::string, SourceTensor> tensors_;
};

// All tensors of a model directory: model.safetensors, or the shards an index names.
class SafetensorsSet {
public:
    static Result<SafetensorsSet> open_dir(const std::string& dir);
    const SourceTensor* find(const std::string& name) const;
    size_t size() const { return index_.size(); }

private:
    std::vector<std::unique_ptr<SafetensorsFile>> files_;
    std::map<std::string, const SourceTensor*> index_;
};

// Drops the tensor's pages from this process's resident set once it has been converted: the mapping is
// file-backed and read-only, so this frees memory without losing data (a later read faults it back in).
void release_source_pages(const SourceTensor& t);

// Element i (row-major, after row_order or through the view) of a source tensor as f32.
float source_element(const SourceTensor& t, uint64_t i);
// Element i (row-major over t's shape) of a source tensor: its index in the data (through the view or the row and
// column orders).
uint64_t source_index(const SourceTensor& t, uint64_t i);

}  // namespace colibri::tools

namespace colibri::tools {

// A tensor to write: f32 values, stored as `dtype` (rounded to nearest even for f16/bf16).
struct OutputTensor {
    std::string name;
    std::vector<uint64_t> shape;
    std::vector<float> values;
    SourceDType dtype = SourceDType::F32;
};

// Writes a single-file safetensors checkpoint, e.g. for generated test and demo models.
Status write_safetensors(const std::string& path, const std::vector<OutputTensor>& tensors);

}  // namespace colibri::tools
