// Read-only GGUF (v2/v3) files: metadata key/values and tensor infos, every offset checked against the file.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/mapped_file.h"
#include "engine/status.h"

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
    // Metadata as JSON values (arrays of numbers or strings become JSON arrays).
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

}  // namespace colibri::tools
