// Where each tensor of a family's schema lives in a GGUF file as llama.cpp writes it: the architecture name and,
// per schema tensor (engine/file/schema.h), the GGUF tensor and the part of it. The GGUF importer (convert_gguf.cpp)
// and exporter (export_gguf.cpp) both read this, so a family's llama.cpp names are written once.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "engine/file/format.h"
#include "engine/file/schema.h"

namespace colibri::tools {

struct GgufPlace {
    std::string name;            // "blk.3.ffn_gate_exps.weight"
    int64_t expert = -1;         // >= 0: this expert's slice of a stack ([n_expert, rows, cols], or [n_expert, n])
    uint32_t permute_heads = 0;  // > 0: llama.cpp interleaves each of these heads' rotary halves in the rows (llama q/k)
    bool as_row = false;         // 1-d in the GGUF, a [1, n] matrix in the schema (qwen2moe's shared expert gate)
    bool flattened = false;      // 3-d [heads, rows, cols] in the GGUF, [heads·rows, cols] in the schema (MLA's k_b, v_b)
    // > 0: the GGUF tensor's rows alternate in blocks of row_block between `parts` schema tensors and this is part
    // `part` of them (llama.cpp keeps Qwen3-Next's query with its output gate per head, and b with a per key head).
    uint32_t row_block = 0, part = 0, parts = 1;
};

// llama.cpp's architecture name of a family ("llama" for Mixtral, "qwen2moe", "olmoe", "qwen3moe", "gpt-oss",
// "deepseek2" for deepseek_v3 and glm4_moe_lite, "glm4moe", "minimax-m2", "qwen3next", "qwen35moe"), or nullptr.
const char* gguf_architecture(format::Family family);
// The family of a llama.cpp architecture name, or none.
std::optional<format::Family> family_from_gguf_architecture(const std::string& arch);

// The GGUF place of a schema tensor of a model with these hyper-parameters; none when llama.cpp has no such tensor.
std::optional<GgufPlace> gguf_place(format::Family family, const format::HyperParams& hp, const schema::TensorSpec& spec);

}  // namespace colibri::tools
