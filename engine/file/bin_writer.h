// Streaming writer for .bin files. The caller declares every section and tensor up front (the layout is
// fixed before any data is written), then supplies tensor data one tensor at a time in declaration order,
// so peak memory stays near one tensor. Output goes to a temporary file renamed into place by finish();
// a writer destroyed before finish() removes it, so a failed conversion never leaves a file that looks valid.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/base/status.h"
#include "engine/file/format.h"

namespace colibri {

class TempOutput;

struct PlannedTensor {
    std::string name;
    WeightType type;
    uint32_t n_dims;
    uint64_t rows;
    uint64_t cols;  // 1 for 1-d tensors
};

struct PlannedSection {
    format::SectionKind kind;
    uint32_t layer = format::kNone;
    uint32_t expert = format::kNone;
    std::vector<PlannedTensor> tensors;  // empty for text sections
    std::string text;                    // contents of tokenizer / chat-template sections
    uint32_t layer_flags = 0;            // attention sections: LayerFlag bits beyond kLayerMoe (kLayerSliding)
};

class BinWriter {
public:
    ~BinWriter();
    BinWriter(const BinWriter&) = delete;
    BinWriter& operator=(const BinWriter&) = delete;

    static Result<std::unique_ptr<BinWriter>> create(const std::string& path, format::Family family,
                                                     const format::HyperParams& hparams,
                                                     std::vector<PlannedSection> sections);

    // The next tensor in declaration order, and how many bytes it must be.
    const PlannedTensor* next_tensor() const;
    uint64_t next_tensor_bytes() const;
    // Writes the next tensor's data; `bytes` must equal next_tensor_bytes().
    Status write_tensor(const void* data, uint64_t bytes);
    // Writes checksums and tables, flushes, and renames the temporary file onto the final path.
    Status finish();

    uint64_t planned_file_size() const { return file_size_; }
    // The size create() would give the file, without creating it (the converters' preview).
    static Result<uint64_t> planned_size(format::Family family, const format::HyperParams& hparams, std::vector<PlannedSection> sections);
    size_t tensor_count() const { return tensor_order_.size(); }

private:
    BinWriter() = default;
    Status layout();
    Status derive_tables();
    format::FileHeader header() const;
    Status advance_to_tensor();
    Status write_at(uint64_t offset, const void* data, uint64_t bytes);
    Status finish_current_section();

    std::string path_;
    std::unique_ptr<TempOutput> out_;
    bool finished_ = false;
    format::Family family_{};
    format::HyperParams hparams_{};
    std::vector<PlannedSection> plan_;
    std::vector<format::SectionEntry> sections_;  // index 0 = metadata
    std::vector<format::TensorEntry> tensors_;
    std::vector<format::LayerEntry> layers_;
    std::vector<format::ExpertEntry> experts_;
    std::vector<std::pair<uint32_t, uint32_t>> tensor_order_;  // (plan section, tensor within)
    uint64_t metadata_size_ = 0, file_size_ = 0;
    size_t next_ = 0;                       // index into tensor_order_
    int64_t open_section_ = -1;             // section being checksummed
    uint64_t section_cursor_ = 0;           // bytes of the open section hashed so far
    struct HashState;
    std::unique_ptr<HashState> hash_;
};

}  // namespace colibri
