// Conversion of Hugging Face model directories (config.json + safetensors) into .bin files.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "engine/file/format.h"
#include "engine/base/status.h"

namespace colibri::tools {

struct ConvertOptions {
    WeightType type = WeightType::F32;  // storage type of the large matrices
    // Called after each tensor with bytes written so far and the total; return false to cancel.
    std::function<bool(uint64_t done, uint64_t total)> progress;
    // convert_model() only: write a .bin.zst (one zstd frame per section) at this zstd level.
    bool zstd = false;
    int zstd_level = 3;
};

struct ConvertSummary {
    format::Family family;
    uint64_t file_size = 0;
    uint32_t tensors = 0;
    bool has_tokenizer = false;
    bool has_chat_template = false;
    uint64_t stored_size = 0;  // bytes on disk: file_size for a .bin, the compressed size for a .bin.zst
};

// Converts an HF directory. On any failure (or cancellation) nothing is left at out_path.
Result<ConvertSummary> convert_hf(const std::string& hf_dir, const std::string& out_path, const ConvertOptions& options);

// Converts a GGUF file (llama.cpp). Architectures: llama with experts (Mixtral), qwen2moe, olmoe, qwen3moe,
// gpt-oss, deepseek2, glm4moe; f32, f16, bf16
// tensors (matrices stored as options.type) and Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, MXFP4 ones, whose blocks are carried
// over unchanged (no requantisation; norms, biases and routers are dequantised to f32, exactly); tokenizer.ggml.*
// becomes the .bin's tokenizer (gguf_tokenizer.h).
Result<ConvertSummary> convert_gguf(const std::string& gguf_path, const std::string& out_path, const ConvertOptions& options);

// What converting a source would write, without writing it: the family, shape and parameter count, the source's
// bytes on disk, and for each type the converter writes (WeightTypeInfo::quantisable, in table order) the .bin's
// size from the planned layout (BinWriter::planned_size): exact, tokenizer included. For a GGUF file, blocks the
// engine computes on are carried over as they are, so several types may give one size.
struct ConvertPreview {
    format::Family family{};
    uint64_t parameters = 0;       // values of every planned tensor
    uint64_t source_bytes = 0;     // the safetensors files, or the .gguf file
    uint32_t layers = 0, experts = 0, active_experts = 0, linear_layers = 0;
    bool shared_expert = false;
    bool has_tokenizer = false;
    std::vector<std::pair<WeightType, uint64_t>> output_bytes;
};
// A directory is an HF model, anything else a GGUF file; errors as convert_model's.
Result<ConvertPreview> preview_conversion(const std::string& source);

// What `colibri convert` and the Studio's dialog call: a directory is an HF model, anything else a GGUF file.
// With options.zstd the .bin is first written beside out_path under a temporary name, then compressed into
// out_path and removed, so peak disk use is one .bin plus its compressed copy; progress runs once over both
// phases (the conversion is the first half). Nothing is left at out_path on failure or cancellation.
Result<ConvertSummary> convert_model(const std::string& source, const std::string& out_path, const ConvertOptions& options);

}  // namespace colibri::tools
