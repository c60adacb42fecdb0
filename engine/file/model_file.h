// A .bin (or .bin.zst) model file mapped read-only. open() validates every offset, size and alignment against the file
// size before anything else touches the mapping, so a damaged or hostile file gives an error, not a crash.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/base/status.h"
#include "engine/file/file_rules.h"
#include "engine/file/format.h"
#include "engine/file/model_image.h"

namespace colibri {

struct TensorView {
    std::string name;
    WeightType type;
    uint32_t n_dims;
    uint64_t rows;      // dims[0]
    uint64_t cols;      // dims[1], 1 for 1-d tensors
    uint64_t offset;    // absolute in the file
    uint64_t size;
    uint32_t section;
    const void* data;   // into the mapping
};

class ModelFile {
public:
    ModelFile(const ModelFile&) = delete;
    ModelFile& operator=(const ModelFile&) = delete;

    // Maps and validates the structure (bounds, alignment, overlaps, metadata checksum). Small sections
    // (tokenizer, chat template) are checksummed here too; weight sections by verify_section().
    static Result<std::unique_ptr<ModelFile>> open(const std::string& path);

    const std::string& path() const { return path_; }
    const format::FileHeader& header() const { return tables_.header; }
    const format::HyperParams& hparams() const { return tables_.header.hparams; }
    format::Family family() const { return static_cast<format::Family>(tables_.header.family); }
    // The uncompressed image (for a .bin.zst the file on disk is smaller: stored_size()).
    uint64_t size() const { return image_.size(); }
    const uint8_t* data() const { return image_.data(); }
    bool compressed() const { return image_.compressed(); }
    uint64_t stored_size() const { return image_.stored_size(); }
    uint64_t stored_section_size(uint32_t index) const { return image_.stored_section_size(index); }
    const format::FrameEntry* stored_frame(uint32_t index) const { return image_.frame(index); }

    std::span<const format::SectionEntry> sections() const { return tables_.sections; }
    std::span<const format::LayerEntry> layers() const { return tables_.layers; }
    std::span<const format::ExpertEntry> experts() const { return tables_.experts; }
    const std::vector<TensorView>& tensors() const { return tensors_; }
    const TensorView* find_tensor(std::string_view name) const;
    // The tables as read, for the rules of engine/file/file_rules.h; tensor_index() maps each name to its entry (which
    // is also its place in tensors()).
    const format::FileTables& tables() const { return tables_; }
    const std::unordered_map<std::string, uint32_t>& tensor_index() const { return tensor_index_; }

    // Contents of the first section of that kind, empty when absent.
    std::string_view section_text(format::SectionKind kind) const;
    // Recomputes the xxh64 of a section and compares with the table (false also for a damaged zstd frame).
    bool verify_section(uint32_t index) const;
    // Makes a section readable before its tensors are touched: decompresses an expert of a .bin.zst on first
    // use (thread-safe); free for a .bin. Fails when the frame is damaged.
    Status ensure_section(uint32_t index) const;
    bool section_resident(uint32_t index) const { return image_.resident(index); }
    // Expert hot-swap: copies bytes into one section under page protection and updates its checksum in the
    // in-memory table. The caller keeps readers out while it runs.
    Status overwrite_section(uint32_t index, uint64_t offset, const void* src, uint64_t bytes);
    // Writes the image as it is now — swapped experts included — to a new .bin at path, with the section table's
    // checksums and metadata_xxh64 describing what is written (through TempOutput: nothing is left on failure).
    Status save(const std::string& path) const;
    // A readable name such as "#7 expert L1 E5" for messages.
    std::string section_label(uint32_t index) const;
    // What the shared rules (engine/file/file_rules.h) call section `index` in a loader error: "section #7 expert L1 E5".
    format::SectionNames section_names() const;

private:
    ModelFile() = default;
    Status validate();
    Status verify_text_sections() const;

    std::string path_;
    ModelImage image_;
    format::FileTables tables_;
    std::vector<TensorView> tensors_;
    std::unordered_map<std::string, uint32_t> tensor_index_;
};

}  // namespace colibri
