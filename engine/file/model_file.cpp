#include "engine/file/model_file.h"

#include <xxhash.h>

#include "engine/file/temp_output.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace colibri {

using namespace format;

namespace tensor_names {
std::string layer(uint32_t layer, std::string_view what) {
    return "layers." + std::to_string(layer) + "." + std::string(what);
}
std::string expert(uint32_t layer, uint32_t expert, std::string_view proj) {
    return "layers." + std::to_string(layer) + ".experts." + std::to_string(expert) + "." + std::string(proj);
}
}  // namespace tensor_names

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
    if (s) s = file->image_.attach_sections(file->sections_);
    if (s) s = file->verify_text_sections();
    if (!s) return error(path + ": " + s.message());
    return file;
}

namespace {

// [offset, offset + count * entry) lies inside [lo, hi), without overflow.
bool table_fits(uint64_t offset, uint64_t count, uint64_t entry, uint64_t lo, uint64_t hi) {
    if (offset < lo || offset > hi || offset % 8 != 0) return false;
    if (count > (hi - offset) / entry) return false;
    return true;
}

bool range_fits(uint64_t offset, uint64_t size, uint64_t limit) {
    return offset <= limit && size <= limit - offset;
}

}  // namespace

Status ModelFile::validate() {
    COLIBRI_TRY(read_tables());
    COLIBRI_TRY(validate_sections());
    COLIBRI_TRY(read_tensors());
    COLIBRI_TRY(validate_layers());
    return verify_metadata_checksum();
}

// The header (magic, version, size) and the tables it points to, which must lie inside the metadata.
Status ModelFile::read_tables() {
    std::memcpy(&header_, image_.data(), sizeof(FileHeader));
    if (std::memcmp(header_.magic, kMagic, sizeof(kMagic)) != 0) return error("not a colibri model file (wrong magic)");
    if (!version_readable(header_.version_major)) {
        return error("unsupported format version " + std::to_string(header_.version_major) + "." +
                     std::to_string(header_.version_minor) + " (this build reads " + std::to_string(kOldestReadableMajor) +
                     ".x to " + std::to_string(kVersionMajor) + ".x)");
    }
    if (header_.file_size != image_.size()) {
        return error((image_.size() < header_.file_size ? "truncated file: " : "file size mismatch: ") +
                     std::string("header says ") + std::to_string(header_.file_size) + " bytes, file has " +
                     std::to_string(image_.size()));
    }
    const uint64_t meta = header_.metadata_size;
    if (meta < sizeof(FileHeader) || meta > image_.size()) return error("metadata size " + std::to_string(meta) + " out of range");
    const uint64_t lo = sizeof(FileHeader);
    if (!table_fits(header_.section_table_offset, header_.section_count, sizeof(SectionEntry), lo, meta))
        return error("section table lies outside the metadata");
    if (!table_fits(header_.tensor_table_offset, header_.tensor_count, sizeof(TensorEntry), lo, meta))
        return error("tensor table lies outside the metadata");
    if (!table_fits(header_.layer_table_offset, header_.layer_count, sizeof(LayerEntry), lo, meta))
        return error("layer table lies outside the metadata");
    if (!table_fits(header_.expert_table_offset, header_.expert_count, sizeof(ExpertEntry), lo, meta))
        return error("expert table lies outside the metadata");
    if (header_.section_count == 0) return error("no sections");

    sections_.resize(header_.section_count);
    std::memcpy(sections_.data(), image_.data() + header_.section_table_offset, sections_.size() * sizeof(SectionEntry));
    layers_.resize(header_.layer_count);
    if (!layers_.empty()) std::memcpy(layers_.data(), image_.data() + header_.layer_table_offset, layers_.size() * sizeof(LayerEntry));
    experts_.resize(header_.expert_count);
    if (!experts_.empty())
        std::memcpy(experts_.data(), image_.data() + header_.expert_table_offset, experts_.size() * sizeof(ExpertEntry));
    return Status::ok();
}

// Sections: aligned, inside the file, after the metadata, not overlapping one another.
Status ModelFile::validate_sections() const {
    const uint64_t meta = header_.metadata_size;
    std::vector<std::pair<uint64_t, uint32_t>> order;
    for (uint32_t i = 0; i < sections_.size(); ++i) {
        const SectionEntry& s = sections_[i];
        // Unknown kinds (from a newer minor version) are bounds-checked like any other and otherwise ignored.
        const std::string label = section_label(i);
        if (s.offset % kSectionAlignment != 0)
            return error("section " + label + " is misaligned (offset " + std::to_string(s.offset) +
                         " is not a multiple of 4096)");
        if (!range_fits(s.offset, s.size, image_.size()))
            return error("section " + label + " runs past the end of the file (offset " + std::to_string(s.offset) +
                         ", size " + std::to_string(s.size) + ", file " + std::to_string(image_.size()) + ")");
        if (s.kind == static_cast<uint32_t>(SectionKind::Metadata)) {
            if (s.offset != 0 || s.size != meta) return error("metadata section does not match the header");
        } else if (s.offset < meta) {
            return error("section " + label + " overlaps the metadata");
        }
        order.emplace_back(s.offset, i);
    }
    std::sort(order.begin(), order.end());
    for (size_t k = 1; k < order.size(); ++k) {
        const SectionEntry& prev = sections_[order[k - 1].second];
        if (prev.offset + prev.size > order[k].first)
            return error("sections " + section_label(order[k - 1].second) + " and " + section_label(order[k].second) +
                         " overlap");
    }
    return Status::ok();
}

// Tensors: known type and shape, size consistent with the shape, inside their section.
Status ModelFile::read_tensors() {
    tensors_.reserve(header_.tensor_count);
    for (uint32_t i = 0; i < header_.tensor_count; ++i) {
        TensorEntry t;
        std::memcpy(&t, image_.data() + header_.tensor_table_offset + uint64_t(i) * sizeof(TensorEntry), sizeof(t));
        const size_t name_len = strnlen(t.name, kTensorNameBytes);
        if (name_len == 0 || name_len == kTensorNameBytes) return error("tensor " + std::to_string(i) + " has a bad name");
        std::string name(t.name, name_len);
        if (!weight_type_is_known(t.weight_type))
            return error("tensor " + name + " has unknown weight type " + std::to_string(t.weight_type));
        if (q4_k_needs_reconversion(header_.version_major, t.weight_type))
            return error("tensor " + name + " is q4_k in format " + std::to_string(header_.version_major) +
                         ".x, whose q4_k code order this build no longer reads: convert the model again");
        if (t.n_dims != 1 && t.n_dims != 2) return error("tensor " + name + " has " + std::to_string(t.n_dims) + " dims");
        const uint64_t rows = t.dims[0];
        const uint64_t cols = t.n_dims == 2 ? t.dims[1] : 1;
        const auto type = static_cast<WeightType>(t.weight_type);
        uint64_t expected = 0;
        if (!tensor_bytes(type, rows, cols, &expected))
            return error("tensor " + name + " has a shape that type " + weight_type_name(type) + " cannot hold");
        if (expected != t.size)
            return error("tensor " + name + " size " + std::to_string(t.size) + " does not match its shape (" +
                         std::to_string(expected) + " bytes)");
        if (t.section >= sections_.size()) return error("tensor " + name + " refers to a missing section");
        const SectionEntry& s = sections_[t.section];
        if (t.offset % kTensorAlignment != 0) return error("tensor " + name + " is misaligned");
        if (t.offset < s.offset || !range_fits(t.offset - s.offset, t.size, s.size))
            return error("tensor " + name + " lies outside its section " + section_label(t.section));
        if (tensor_index_.count(name) != 0) return error("tensor " + name + " appears twice");
        tensor_index_.emplace(name, tensors_.size());
        tensors_.push_back(TensorView{std::move(name), type, t.n_dims, rows, cols, t.offset, t.size, t.section,
                                      image_.data() + t.offset});
    }
    // Two tensors sharing bytes (inside one section; sections do not overlap): a write to one, as an expert swap
    // makes, would change the other.
    {
        std::vector<const TensorView*> by_offset;
        for (const TensorView& t : tensors_)
            if (t.size > 0) by_offset.push_back(&t);
        std::sort(by_offset.begin(), by_offset.end(), [](const TensorView* a, const TensorView* b) { return a->offset < b->offset; });
        for (size_t k = 1; k < by_offset.size(); ++k)
            if (by_offset[k - 1]->offset + by_offset[k - 1]->size > by_offset[k]->offset)
                return error("tensors " + by_offset[k - 1]->name + " and " + by_offset[k]->name + " overlap");
    }
    return Status::ok();
}

// Layer and expert tables refer only to existing sections of the right kind.
Status ModelFile::validate_layers() const {
    if (header_.layer_count != header_.hparams.n_layers) return error("layer table does not match n_layers");
    for (uint32_t l = 0; l < layers_.size(); ++l) {
        const LayerEntry& e = layers_[l];
        const std::string where = "layer " + std::to_string(l);
        if (e.attention_section >= sections_.size()) return error(where + ": bad attention section");
        if (e.is_moe & ~(kLayerMoe | kLayerSliding)) return error(where + ": unknown layer flags " + std::to_string(e.is_moe));
        if (e.is_moe & kLayerMoe) {
            if (e.router_section >= sections_.size()) return error(where + ": bad router section");
            const SectionEntry& r = sections_[e.router_section];
            if (e.router_offset < r.offset || e.router_offset >= r.offset + r.size)
                return error(where + ": router offset outside its section");
            if (e.n_experts != header_.hparams.n_experts) return error(where + ": expert count mismatch");
            if (e.first_expert > experts_.size() || e.n_experts > experts_.size() - e.first_expert)
                return error(where + ": expert table range out of bounds");
        }
        if (e.mlp_section != kNone && e.mlp_section >= sections_.size()) return error(where + ": bad mlp section");
    }
    for (uint32_t i = 0; i < experts_.size(); ++i) {
        const ExpertEntry& e = experts_[i];
        if (e.section >= sections_.size()) return error("expert entry " + std::to_string(i) + ": bad section");
        const SectionEntry& s = sections_[e.section];
        if (e.offset != s.offset || e.size != s.size)
            return error("expert entry " + std::to_string(i) + " does not match its section");
    }
    return Status::ok();
}

// Checksum of the metadata itself, with the checksum field zeroed.
Status ModelFile::verify_metadata_checksum() const {
    const uint64_t meta = header_.metadata_size;
    XXH64_state_t* st = XXH64_createState();
    XXH64_reset(st, 0);
    FileHeader zeroed = header_;
    zeroed.metadata_xxh64 = 0;
    XXH64_update(st, &zeroed, sizeof(zeroed));
    XXH64_update(st, image_.data() + sizeof(FileHeader), meta - sizeof(FileHeader));
    const uint64_t sum = XXH64_digest(st);
    XXH64_freeState(st);
    if (sum != header_.metadata_xxh64) return error("metadata checksum mismatch (header or tables damaged)");
    return Status::ok();
}

Status ModelFile::verify_text_sections() const {
    for (uint32_t i = 0; i < sections_.size(); ++i) {
        const auto kind = static_cast<SectionKind>(sections_[i].kind);
        if (kind == SectionKind::TokenizerJson || kind == SectionKind::TokenizerConfig || kind == SectionKind::ChatTemplate) {
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
    for (const SectionEntry& s : sections_) {
        if (s.kind == static_cast<uint32_t>(kind)) return {reinterpret_cast<const char*>(image_.data() + s.offset), s.size};
    }
    return {};
}

bool ModelFile::verify_section(uint32_t index) const {
    if (index >= sections_.size()) return false;
    const SectionEntry& s = sections_[index];
    if (s.kind == static_cast<uint32_t>(SectionKind::Metadata)) return true;  // checked in validate()
    auto sum = image_.hash_section(index);
    return sum && sum.value() == s.xxh64;
}

Status ModelFile::ensure_section(uint32_t index) const {
    if (Status s = image_.ensure(index); !s) return error(path_ + ": " + section_label(index) + ": " + s.message());
    return Status::ok();
}

Status ModelFile::overwrite_section(uint32_t index, uint64_t offset, const void* src, uint64_t bytes) {
    if (index >= sections_.size()) return error("section " + std::to_string(index) + " does not exist");
    COLIBRI_TRY(image_.write_section(index, offset, src, bytes));
    auto sum = image_.hash_section(index);
    if (!sum) return sum.status();
    sections_[index].xxh64 = sum.value();  // the in-memory table describes what is mapped now
    return Status::ok();
}

std::string ModelFile::section_label(uint32_t index) const {
    if (index >= sections_.size()) return "#" + std::to_string(index);
    const SectionEntry& s = sections_[index];
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
    const uint64_t meta = header_.metadata_size;
    std::vector<uint8_t> metadata(image_.data(), image_.data() + meta);
    for (size_t i = 0; i < sections_.size(); ++i) {
        const uint64_t at = header_.section_table_offset + i * sizeof(SectionEntry) + offsetof(SectionEntry, xxh64);
        std::memcpy(metadata.data() + at, &sections_[i].xxh64, sizeof(uint64_t));
    }
    const uint64_t zero = 0;
    std::memcpy(metadata.data() + offsetof(FileHeader, metadata_xxh64), &zero, sizeof zero);
    const uint64_t sum = XXH64(metadata.data(), metadata.size(), 0);
    std::memcpy(metadata.data() + offsetof(FileHeader, metadata_xxh64), &sum, sizeof sum);

    TempOutput out;
    COLIBRI_TRY(out.create(path));
    COLIBRI_TRY(out.resize(image_.size()));  // the padding between sections reads as zeros
    COLIBRI_TRY(out.write_at(0, metadata.data(), metadata.size()));
    for (uint32_t i = 1; i < sections_.size(); ++i) {
        COLIBRI_TRY(ensure_section(i));
        COLIBRI_TRY(out.write_at(sections_[i].offset, image_.data() + sections_[i].offset, sections_[i].size));
    }
    return out.commit();
}

}  // namespace colibri
