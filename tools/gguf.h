// Read-only GGUF (v2/v3) files: metadata key/values and tensor infos, every offset checked against the file.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/file/mapped_file.h"
#include "engine/base/status.h"

namespace colibri::tools {

struct GgufTensor {
    std::string name;
    std::vector<uint64_t> ne;  // ggml order: ne[0] is the innermost (contiguous) dimension
    uint32_t type;             // ggml type id
    const uint8_t* data;
    uint64_t size;
};

class GgufFile {
public:
    static Result<std::unique_ptr<GgufFile>> open(const std::string& path);
    // Metadata as JSON values. An array is kept as its bytes from the file (a JSON binary value whose subtype is
    // the GGUF element type), not as one JSON value per element: a 67 MB array would take gigabytes. Read one
    // with gguf_strings / gguf_numbers. Arrays of arrays are refused, as llama.cpp refuses them.
    const nlohmann::json& metadata() const { return metadata_; }
    const std::map<std::string, GgufTensor>& tensors() const { return tensors_; }
    uint32_t version() const { return version_; }

private:
    GgufFile() = default;
    MappedFile map_;
    uint32_t version_ = 0;
    nlohmann::json metadata_;
    std::map<std::string, GgufTensor> tensors_;
};

// Name of a ggml type id ("f32", "q8_0", ...), or "type N".
std::string ggml_type_name(uint32_t type);

// The elements of a metadata array (as GgufFile keeps them, or a plain JSON array); nullopt when `v` is not an
// array of that kind. Integers for integral T; any number for floating-point T.
std::optional<std::vector<std::string>> gguf_strings(const nlohmann::json& v);
std::optional<std::vector<int64_t>> gguf_integers(const nlohmann::json& v);
std::optional<std::vector<double>> gguf_reals(const nlohmann::json& v);

}  // namespace colibri::tools
