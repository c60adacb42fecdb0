#include "engine/file/bin_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "engine/file/file_rules.h"
#include "engine/file/model_file.h"
#include "engine/file/schema.h"
#include "engine/file/temp_output.h"

namespace colibri {

using namespace format;

struct BinWriter::HashState {
    XXH64_state_t* state = XXH64_createState();
    ~HashState() { XXH64_freeState(state); }
};

BinWriter::~BinWriter() = default;

Result<std::unique_ptr<BinWriter>> BinWriter::create(const std::string& path, Family family, const HyperParams& hparams,
                                                     std::vector<PlannedSection> sections) {
    std::unique_ptr<BinWriter> w(new BinWriter());
    w->path_ = path;
    w->family_ = family;
    w->hparams_ = hparams;
    w->plan_ = std::move(sections);
    w->hash_ = std::make_unique<HashState>();
    if (Status s = w->layout(); !s) return s;

    w->out_ = std::make_unique<TempOutput>();
    COLIBRI_TRY(w->out_->create(path));
    return w;
}

Result<uint64_t> BinWriter::planned_size(Family family, const HyperParams& hparams, std::vector<PlannedSection> sections) {
    BinWriter w;
    w.family_ = family;
    w.hparams_ = hparams;
    w.plan_ = std::move(sections);
    if (Status s = w.layout(); !s) return s;
    return w.file_size_;
}

Status BinWriter::layout() {
    if (hparams_.n_layers == 0) return error("model has no layers");
    // The loader's own check (Model::bind), so that no converter writes a file that would not load; a layer is
    // MoE when it has a router section, as finish() records it.
    // (MTP layers follow the decoder layers; their count is bounded before it sizes anything.)
    std::vector<bool> layer_is_moe(hparams_.n_layers + std::min(hparams_.mtp_layers, schema::kMaxMtpLayers + 1), false);
    for (const PlannedSection& s : plan_)
        if (s.kind == SectionKind::Router && s.layer < layer_is_moe.size()) layer_is_moe[s.layer] = true;
    if (const auto problems = schema::hyperparam_problems(static_cast<uint32_t>(family_), hparams_, layer_is_moe); !problems.empty())
        return error("refusing to write a model the loader would refuse: " + problems.front());
    // Metadata: header, then the tables, each 8-byte aligned.
    const uint32_t section_count = static_cast<uint32_t>(plan_.size() + 1);
    uint32_t tensor_count = 0, expert_count = 0;
    for (const PlannedSection& s : plan_) {
        tensor_count += static_cast<uint32_t>(s.tensors.size());
        if (s.kind == SectionKind::Expert) ++expert_count;
    }
    // Same 8-byte aligned placement that finish() uses when it fills the tables in.
    uint64_t cursor = sizeof(FileHeader);
    for (uint64_t bytes : {uint64_t(section_count) * sizeof(SectionEntry), uint64_t(tensor_count) * sizeof(TensorEntry),
                           (uint64_t(hparams_.n_layers) + hparams_.mtp_layers) * sizeof(LayerEntry), uint64_t(expert_count) * sizeof(ExpertEntry)})
        cursor = align_up(cursor, 8) + bytes;
    metadata_size_ = cursor;

    sections_.assign(section_count, SectionEntry{});
    sections_[0] = SectionEntry{static_cast<uint32_t>(SectionKind::Metadata), kNone, kNone, 0, 0, metadata_size_, 0};
    uint64_t end = metadata_size_;
    for (uint32_t i = 0; i < plan_.size(); ++i) {
        PlannedSection& p = plan_[i];
        SectionEntry& s = sections_[i + 1];
        s = SectionEntry{static_cast<uint32_t>(p.kind), p.layer, p.expert, 0, align_up(end, kSectionAlignment), 0, 0};
        uint64_t at = s.offset;
        if (p.tensors.empty()) {
            at += p.text.size();
        } else if (!p.text.empty()) {
            return error("section mixes text and tensors");
        }
        for (uint32_t k = 0; k < p.tensors.size(); ++k) {
            const PlannedTensor& t = p.tensors[k];
            if (t.name.empty() || t.name.size() >= kTensorNameBytes) return error("tensor name too long: " + t.name);
            uint64_t bytes = 0;
            if (!tensor_bytes(t.type, t.rows, t.cols, &bytes))
                return error("tensor " + t.name + ": shape not storable as " + weight_type_name(t.type));
            TensorEntry e{};
            std::memcpy(e.name, t.name.data(), t.name.size());
            e.section = i + 1;
            e.weight_type = static_cast<uint32_t>(t.type);
            e.n_dims = t.n_dims;
            e.dims[0] = t.rows;
            e.dims[1] = t.n_dims == 2 ? t.cols : 0;
            e.offset = align_up(at, kTensorAlignment);
            e.size = bytes;
            at = e.offset + bytes;
            tensors_.push_back(e);
            tensor_order_.emplace_back(i, k);
        }
        s.size = at - s.offset;
        end = at;
    }
    file_size_ = align_up(end, kSectionAlignment);
    COLIBRI_TRY(derive_tables());

    // The loader's structural rules (engine/file/file_rules.h) on the tables as they will be written, before a byte is:
    // what the loader or `colibri check` would refuse is not written at all.
    FileTables planned{header(), file_size_, sections_, tensors_, layers_, experts_};
    FirstProblem first;
    const SectionNames names = [this](uint32_t i) { return section_description(sections_[i], i); };
    check_sections(planned, names, first.sink());
    std::unordered_map<std::string, uint32_t> by_name;
    check_tensor_entries(planned, names, first.sink(), &by_name);
    check_layer_and_expert_tables(planned, names, first.sink());
    if (!first.text.empty()) return error("refusing to write a model the loader would refuse: " + first.text);
    return Status::ok();
}

// Layer and expert tables, derived from the sections.
Status BinWriter::derive_tables() {
    layers_.assign(hparams_.n_layers + hparams_.mtp_layers, LayerEntry{0, 0, 0, kNone, kNone, kNone, 0});
    experts_.clear();
    for (uint32_t i = 1; i < sections_.size(); ++i) {
        const SectionEntry& s = sections_[i];
        if (s.layer == kNone) continue;
        if (s.layer >= layers_.size()) return error("section for layer " + std::to_string(s.layer) + " beyond n_layers and the MTP layers");
        LayerEntry& l = layers_[s.layer];
        switch (static_cast<SectionKind>(s.kind)) {
            case SectionKind::Attention:
                l.attention_section = i;
                l.is_moe |= plan_[i - 1].layer_flags & ~kLayerMoe;
                break;
            case SectionKind::Router: {
                l.router_section = i;
                l.is_moe |= kLayerMoe;
                const std::string router = tensor_names::layer(s.layer, "router");
                for (const TensorEntry& t : tensors_)
                    if (t.section == i && router == t.name) l.router_offset = t.offset;
                break;
            }
            case SectionKind::SharedExpert:
            case SectionKind::DenseMlp: l.mlp_section = i; break;
            case SectionKind::Expert: {
                if (l.n_experts == 0) l.first_expert = static_cast<uint32_t>(experts_.size());
                ++l.n_experts;
                uint32_t type = 0;
                for (const TensorEntry& t : tensors_)  // the projections' type (gpt_oss's biases are f32)
                    if (t.section == i && t.n_dims == 2) type = t.weight_type;
                experts_.push_back(ExpertEntry{s.layer, s.expert, i, type, s.offset, s.size});
                break;
            }
            default: break;
        }
    }
    return Status::ok();
}

FileHeader BinWriter::header() const {
    FileHeader h{};
    std::memcpy(h.magic, kMagic, sizeof(kMagic));
    h.version_major = kVersionMajor;
    h.version_minor = kVersionMinor;
    h.family = static_cast<uint32_t>(family_);
    h.file_size = file_size_;
    h.metadata_size = metadata_size_;
    h.hparams = hparams_;
    h.section_count = static_cast<uint32_t>(sections_.size());
    h.tensor_count = static_cast<uint32_t>(tensors_.size());
    h.layer_count = static_cast<uint32_t>(layers_.size());
    h.expert_count = static_cast<uint32_t>(experts_.size());
    return h;
}

const PlannedTensor* BinWriter::next_tensor() const {
    if (next_ >= tensor_order_.size()) return nullptr;
    const auto [s, k] = tensor_order_[next_];
    return &plan_[s].tensors[k];
}

uint64_t BinWriter::next_tensor_bytes() const { return next_ < tensors_.size() ? tensors_[next_].size : 0; }

Status BinWriter::write_at(uint64_t offset, const void* data, uint64_t bytes) {
    return out_->write_at(offset, data, bytes);
}

// Hashes the zero padding up to `until` inside the open section.
static void hash_zeros(XXH64_state_t* st, uint64_t count) {
    static const uint8_t zeros[256] = {};
    while (count > 0) {
        const uint64_t n = count < sizeof(zeros) ? count : sizeof(zeros);
        XXH64_update(st, zeros, n);
        count -= n;
    }
}

Status BinWriter::finish_current_section() {
    if (open_section_ < 0) return Status::ok();
    SectionEntry& s = sections_[open_section_];
    hash_zeros(hash_->state, s.size - section_cursor_);
    s.xxh64 = XXH64_digest(hash_->state);
    open_section_ = -1;
    return Status::ok();
}

// Writes text sections that come before the next tensor and opens the tensor's section for hashing.
Status BinWriter::advance_to_tensor() {
    const uint32_t target = next_ < tensor_order_.size() ? tensors_[next_].section : static_cast<uint32_t>(sections_.size());
    if (open_section_ >= 0 && static_cast<uint32_t>(open_section_) == target) return Status::ok();
    COLIBRI_TRY(finish_current_section());
    const uint32_t first = next_ == 0 ? 1 : tensors_[next_ - 1].section + 1;
    for (uint32_t i = first; i < target && i < sections_.size(); ++i) {
        const PlannedSection& p = plan_[i - 1];
        if (!p.tensors.empty()) return error("internal: tensors of section " + std::to_string(i) + " were skipped");
        COLIBRI_TRY(write_at(sections_[i].offset, p.text.data(), p.text.size()));
        sections_[i].xxh64 = XXH64(p.text.data(), p.text.size(), 0);
    }
    if (target < sections_.size()) {
        XXH64_reset(hash_->state, 0);
        open_section_ = target;
        section_cursor_ = 0;
    }
    return Status::ok();
}

Status BinWriter::write_tensor(const void* data, uint64_t bytes) {
    if (finished_ || !out_) return error("writer is closed");
    if (next_ >= tensors_.size()) return error("more tensors written than declared");
    const TensorEntry& t = tensors_[next_];
    if (bytes != t.size)
        return error("tensor " + std::string(t.name) + ": got " + std::to_string(bytes) + " bytes, expected " +
                     std::to_string(t.size));
    COLIBRI_TRY(advance_to_tensor());
    const SectionEntry& s = sections_[t.section];
    hash_zeros(hash_->state, (t.offset - s.offset) - section_cursor_);
    XXH64_update(hash_->state, data, bytes);
    section_cursor_ = t.offset - s.offset + bytes;
    COLIBRI_TRY(write_at(t.offset, data, bytes));
    ++next_;
    return Status::ok();
}

Status BinWriter::finish() {
    if (finished_ || !out_) return error("writer is closed");
    if (next_ != tensors_.size())
        return error("conversion incomplete: " + std::to_string(tensors_.size() - next_) + " tensors not written");
    COLIBRI_TRY(advance_to_tensor());  // writes trailing text sections
    COLIBRI_TRY(finish_current_section());

    // The checksums are known now; the tables were laid out (and checked) before anything was written.
    FileHeader h = header();
    std::vector<uint8_t> meta(metadata_size_, 0);
    uint64_t cursor = sizeof(FileHeader);
    auto put = [&](const void* src, uint64_t bytes) {
        const uint64_t at = align_up(cursor, 8);
        if (bytes) std::memcpy(meta.data() + at, src, bytes);
        cursor = at + bytes;
        return at;
    };
    h.section_table_offset = put(sections_.data(), sections_.size() * sizeof(SectionEntry));
    h.tensor_table_offset = put(tensors_.data(), tensors_.size() * sizeof(TensorEntry));
    h.layer_table_offset = put(layers_.data(), layers_.size() * sizeof(LayerEntry));
    h.expert_table_offset = put(experts_.data(), experts_.size() * sizeof(ExpertEntry));
    if (cursor != metadata_size_) return error("internal: metadata layout changed");
    std::memcpy(meta.data(), &h, sizeof(h));
    h.metadata_xxh64 = XXH64(meta.data(), meta.size(), 0);
    std::memcpy(meta.data(), &h, sizeof(h));

    COLIBRI_TRY(write_at(0, meta.data(), meta.size()));
    COLIBRI_TRY(out_->resize(file_size_));
    COLIBRI_TRY(out_->commit());
    finished_ = true;
    return Status::ok();
}

}  // namespace colibri
