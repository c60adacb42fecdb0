#include "engine/file/model_file.h"

#include <xxhash.h>

#include "engine/file/temp_output.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace colibri {

using namespace format;

Result<std::unique_ptr<ModelFile>> ModelFile::open(const std::string& path) {
    auto image = ModelImage::open(path);
    if (!image) return image.message().rfind(path, 0) == 0 ? image.status() : error(path + ": " + image.message());
    if (image->size() < sizeof(FileHeader))
        return error(path + ": truncated file (" + std::to_string(image->size()) + " bytes, the header alone needs " +
                     std::to_string(sizeof(FileHeader)) + ")");
    std::unique_ptr<ModelFile> file(new ModelFile());
    file->path_ = path;
    file->image_ = std::move(image.value());
    Status s = file->validate();
    if (s) s = file->image_.attach_sections(file->tables_.sections);
    if (s) s = file->verify_text_sections();
    if (!s) return error(path + ": " + s.message());
    return file;
}

Status ModelFile::validate() {
    FileHeader& header = tables_.header;
    std::memcpy(&header, image_.data(), sizeof(FileHeader));
    if (std::memcmp(header.magic, kMagic, sizeof(kMagic)) != 0) return error("not a colibri model file (wrong magic)");
    if (!version_readable(header.version_major)) {
        return error("unsupported format version " + std::to_string(header.version_major) + "." +
                     std::to_string(header.version_minor) + " (this build reads " + std::to_string(kOldestReadableMajor) +
                     ".x to " + std::to_string(kVersionMajor) + ".x)");
    }
    if (header.file_size != image_.size()) {
        return error((image_.size() < header.file_size ? "truncated file: " : "file size mismatch: ") +
                     std::string("header says ") + std::to_string(header.file_size) + " bytes, file has " +
                     std::to_string(image_.size()));
    }
    const uint64_t meta = header.metadata_size;
    if (meta < sizeof(FileHeader) || meta > image_.size()) return error("metadata size " + std::to_string(meta) + " out of range");
    const uint64_t lo = sizeof(FileHeader);
    if (!table_fits(header.section_table_offset, header.section_count, sizeof(SectionEntry), lo, meta))
        return error("section table lies outside the metadata");
    if (!table_fits(header.tensor_table_offset, header.tensor_count, sizeof(TensorEntry), lo, meta))
        return error("tensor table lies outside the metadata");
    if (!table_fits(header.layer_table_offset, header.layer_count, sizeof(LayerEntry), lo, meta))
        return error("layer table lies outside the metadata");
    if (!table_fits(header.expert_table_offset, header.expert_count, sizeof(ExpertEntry), lo, meta))
        return error("expert table lies outside the metadata");
    if (header.section_count == 0) return error("no sections");

    tables_.image_size = image_.size();
    auto read_table = [&](auto& out, uint64_t offset, uint64_t count) {
        out.resize(count);
        if (count != 0) std::memcpy(out.data(), image_.data() + offset, count * sizeof(out[0]));
    };
    read_table(tables_.sections, header.section_table_offset, header.section_count);
    read_table(tables_.tensors, header.tensor_table_offset, header.tensor_count);
    read_table(tables_.layers, header.layer_table_offset, header.layer_count);
    read_table(tables_.experts, header.expert_table_offset, header.expert_count);

    // The rules `colibri check` applies (engine/file/file_rules.h); the first problem is the error.
    const SectionNames names = section_names();
    FirstProblem first;
    check_sections(tables_, names, first.sink());
    if (!first.text.empty()) return error(first.text);
    check_tensor_entries(tables_, names, first.sink(), &tensor_index_);
    if (!first.text.empty()) return error(first.text);
    check_layer_and_expert_tables(tables_, names, first.sink());
    if (!first.text.empty()) return error(first.text);
    tensors_.reserve(tables_.tensors.size());
    for (const TensorEntry& t : tables_.tensors) {
        const uint64_t cols = t.n_dims == 2 ? t.dims[1] : 1;
        tensors_.push_back(TensorView{std::string(t.name, strnlen(t.name, kTensorNameBytes)), static_cast<WeightType>(t.weight_type),
                                      t.n_dims, t.dims[0], cols, t.offset, t.size, t.section, image_.data() + t.offset});
    }

    // Checksum of the metadata itself, with the checksum field zeroed.
    XXH64_state_t* st = XXH64_createState();
    XXH64_reset(st, 0);
    FileHeader zeroed = header;
    zeroed.metadata_xxh64 = 0;
    XXH64_update(st, &zeroed, sizeof(zeroed));
    XXH64_update(st, image_.data() + sizeof(FileHeader), meta - sizeof(FileHeader));
    const uint64_t sum = XXH64_digest(st);
    XXH64_freeState(st);
    if (sum != header.metadata_xxh64) return error("metadata checksum mismatch (header or tables damaged)");
    return Status::ok();
}

Status ModelFile::verify_text_sections() const {
    for (uint32_t i = 0; i < tables_.sections.size(); ++i) {
        const auto kind = static_cast<SectionKind>(tables_.sections[i].kind);
        if (is_text_section(static_cast<uint32_t>(kind))) {
            if (!verify_section(i)) return error("section " + section_label(i) + " checksum mismatch");
        }
    }
    return Status::ok();
}

const TensorView* ModelFile::find_tensor(std::string_view name) const {
    auto it = tensor_index_.find(std::string(name));
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::string_view ModelFile::section_text(SectionKind kind) const {
    for (const SectionEntry& s : tables_.sections) {
        if (s.kind == static_cast<uint32_t>(kind)) return {reinterpret_cast<const char*>(image_.data() + s.offset), s.size};
    }
    return {};
}

bool ModelFile::verify_section(uint32_t index) const {
    if (index >= tables_.sections.size()) return false;
    const SectionEntry& s = tables_.sections[index];
    if (s.kind == static_cast<uint32_t>(SectionKind::Metadata)) return true;  // checked in validate()
    auto sum = image_.hash_section(index);
    return sum && sum.value() == s.xxh64;
}

Status ModelFile::ensure_section(uint32_t index) const {
    if (Status s = image_.ensure(index); !s) return error(path_ + ": " + section_label(index) + ": " + s.message());
    return Status::ok();
}

Status ModelFile::overwrite_section(uint32_t index, uint64_t offset, const void* src, uint64_t bytes) {
    if (index >= tables_.sections.size()) return error("section " + std::to_string(index) + " does not exist");
    COLIBRI_TRY(image_.write_section(index, offset, src, bytes));
    auto sum = image_.hash_section(index);
    if (!sum) return sum.status();
    tables_.sections[index].xxh64 = sum.value();  // the in-memory table describes what is mapped now
    return Status::ok();
}

SectionNames ModelFile::section_names() const {
    return [this](uint32_t index) { return "section " + section_label(index); };
}

std::string ModelFile::section_label(uint32_t index) const {
    if (index >= tables_.sections.size()) return "#" + std::to_string(index);
    const SectionEntry& s = tables_.sections[index];
    std::string label = "#" + std::to_string(index) + " ";
    label += s.kind <= static_cast<uint32_t>(SectionKind::Output) ? section_kind_name(static_cast<SectionKind>(s.kind)) : "unknown";
    if (s.layer != kNone) label += " L" + std::to_string(s.layer);
    if (s.expert != kNone) label += " E" + std::to_string(s.expert);
    return label;
}

Status ModelFile::save(const std::string& path) const {
    using format::FileHeader;
    using format::SectionEntry;
    // The metadata as mapped, with the checksums of the in-memory section table (overwrite_section keeps them
    // current) and the metadata checksum recomputed over the result.
    const uint64_t meta = tables_.header.metadata_size;
    std::vector<uint8_t> metadata(image_.data(), image_.data() + meta);
    for (size_t i = 0; i < tables_.sections.size(); ++i) {
        const uint64_t at = tables_.header.section_table_offset + i * sizeof(SectionEntry) + offsetof(SectionEntry, xxh64);
        std::memcpy(metadata.data() + at, &tables_.sections[i].xxh64, sizeof(uint64_t));
    }
    const uint64_t zero = 0;
    std::memcpy(metadata.data() + offsetof(FileHeader, metadata_xxh64), &zero, sizeof zero);
    const uint64_t sum = XXH64(metadata.data(), metadata.size(), 0);
    std::memcpy(metadata.data() + offsetof(FileHeader, metadata_xxh64), &sum, sizeof sum);

    TempOutput out;
    COLIBRI_TRY(out.create(path));
    COLIBRI_TRY(out.resize(image_.size()));  // the padding between sections reads as zeros
    COLIBRI_TRY(out.write_at(0, metadata.data(), metadata.size()));
    for (uint32_t i = 1; i < tables_.sections.size(); ++i) {
        COLIBRI_TRY(ensure_section(i));
        COLIBRI_TRY(out.write_at(tables_.sections[i].offset, image_.data() + tables_.sections[i].offset, tables_.sections[i].size));
    }
    return out.commit();
}

}  // namespace colibri
