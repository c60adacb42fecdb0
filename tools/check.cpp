#include "check.h"

#include <nlohmann/json.hpp>
#include <xxhash.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "check_shapes.h"
#include "check_source.h"
#include "check_tokenizer.h"
#include "engine/file/format.h"

namespace colibri::tools {

using namespace format;

const char* checksum_state_name(ChecksumState s) {
    switch (s) {
        case ChecksumState::Ok: return "ok";
        case ChecksumState::Mismatch: return "mismatch";
        case ChecksumState::DamagedFrame: return "damaged_frame";
        case ChecksumState::Unreadable: return "unreadable";
        case ChecksumState::NotChecked: return "not_checked";
    }
    return "not_checked";
}

namespace {

// Text sections are read whole for the tokenizer check; real ones are a few megabytes at most.
constexpr uint64_t kMaxTextSection = uint64_t(256) << 20;

bool is_text(uint32_t kind) {
    return kind == static_cast<uint32_t>(SectionKind::TokenizerJson) || kind == static_cast<uint32_t>(SectionKind::TokenizerConfig) ||
           kind == static_cast<uint32_t>(SectionKind::ChatTemplate);
}

std::string shape_text(const std::vector<uint64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

// [offset, offset + count * entry) lies inside [lo, hi), 8-byte aligned, without overflow.
bool table_fits(uint64_t offset, uint64_t count, uint64_t entry, uint64_t lo, uint64_t hi) {
    return offset >= lo && offset <= hi && offset % 8 == 0 && count <= (hi - offset) / entry;
}

bool range_fits(uint64_t offset, uint64_t size, uint64_t limit) { return offset <= limit && size <= limit - offset; }

// A section's name in problems: what it holds, as a person would say it.
std::string section_name(const SectionEntry& s, uint32_t index, const std::string& projections) {
    const std::string layer = s.layer == kNone ? "" : "layer " + std::to_string(s.layer) + " ";
    const std::string parts = projections.empty() ? "" : " (" + projections + ")";
    switch (static_cast<SectionKind>(s.kind)) {
        case SectionKind::Metadata: return "metadata";
        case SectionKind::TokenizerJson: return "tokenizer";
        case SectionKind::TokenizerConfig: return "tokenizer config";
        case SectionKind::ChatTemplate: return "chat template";
        case SectionKind::Embedding: return "embedding";
        case SectionKind::Attention: return layer + "attention";
        case SectionKind::Router: return layer + "router";
        case SectionKind::Expert:
            return layer + "expert " + (s.expert == kNone ? std::string("?") : std::to_string(s.expert)) + parts;
        case SectionKind::SharedExpert: return layer + "shared expert" + parts;
        case SectionKind::DenseMlp: return layer + "dense mlp" + parts;
        case SectionKind::Output: return "output";
    }
    return "section #" + std::to_string(index) + " (kind " + std::to_string(s.kind) + ")";
}

std::string hex64(uint64_t v) {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
    return buf;
}

class Checker {
public:
    Checker(const std::string& path, const CheckOptions& options) : options_(options) { report_.path = path; }

    CheckReport run() {
        auto src = CheckSource::open(report_.path, &report_.unreadable);
        if (!src) {
            fatal(src.message());
            return std::move(report_);
        }
        src_ = &src.value();
        report_.compressed = src_->compressed();
        report_.stored_size = src_->stored_size();
        report_.image_size = src_->image_size();
        for (const std::string& p : src_->problems()) problem(p);
        problems_before_attach_ = src_->problems().size();
        if (!read_header()) return std::move(report_);
        read_tables();
        name_sections();
        check_sections();
        check_tensors();
        check_layer_tables();
        check_expected_tensors();
        src_->attach(sections_, [this](uint32_t i) { return report_.sections[i].name; });
        for (size_t k = problems_before_attach_; k < src_->problems().size(); ++k) problem(src_->problems()[k]);
        hash_sections();
        check_text_sections();
        for (TensorCheck& t : report_.tensors)
            if (t.section < report_.sections.size()) t.checksum = report_.sections[t.section].checksum;
        report_.valid = report_.problems.empty() && !report_.cancelled;
        return std::move(report_);
    }

private:
    void fatal(const std::string& why) {
        report_.fatal = why.rfind(report_.path, 0) == 0 ? why : report_.path + ": " + why;
        report_.problems.push_back(report_.fatal);
        report_.valid = false;
    }
    void problem(std::string line) { report_.problems.push_back(std::move(line)); }
    const std::string& name(uint32_t section) const { return report_.sections[section].name; }

    // The header must be readable to locate anything; after that, every damage is a problem and the check goes on.
    bool read_header() {
        const auto prefix = src_->prefix();
        if (prefix.size() < sizeof(FileHeader)) {
            fatal("truncated file (" + std::to_string(prefix.size()) + " bytes, the header alone needs " +
                  std::to_string(sizeof(FileHeader)) + ")");
            return false;
        }
        std::memcpy(&h_, prefix.data(), sizeof h_);
        if (std::memcmp(h_.magic, kMagic, sizeof kMagic) != 0) {
            fatal("not a colibri model file (wrong magic)");
            return false;
        }
        report_.version_major = h_.version_major;
        report_.version_minor = h_.version_minor;
        if (!version_readable(h_.version_major)) {
            fatal("unsupported format version " + std::to_string(h_.version_major) + "." + std::to_string(h_.version_minor) +
                  " (this build reads " + std::to_string(kOldestReadableMajor) + ".x to " + std::to_string(kVersionMajor) + ".x)");
            return false;
        }
        if (const schema::FamilyInfo* fam = schema::find_family(h_.family)) report_.family = fam->name;
        const uint64_t image = src_->image_size();
        if (h_.file_size != image)
            problem((image < h_.file_size ? "metadata: truncated file: header says " : "metadata: file size mismatch: header says ") +
                    std::to_string(h_.file_size) + " bytes, the image has " + std::to_string(image));
        meta_ = h_.metadata_size;
        if (meta_ < sizeof(FileHeader) || meta_ > prefix.size()) {
            fatal("metadata size " + std::to_string(meta_) + " out of range (the file has " + std::to_string(prefix.size()) + " bytes)");
            return false;
        }
        if (!table_fits(h_.section_table_offset, h_.section_count, sizeof(SectionEntry), sizeof(FileHeader), meta_) ||
            h_.section_count == 0) {
            fatal("section table lies outside the metadata");
            return false;
        }
        // The metadata checksum: damage here is reported, and the tables are still read (bounds-checked).
        FileHeader zeroed = h_;
        zeroed.metadata_xxh64 = 0;
        const std::unique_ptr<XXH64_state_t, XXH_errorcode (*)(XXH64_state_t*)> st(XXH64_createState(), XXH64_freeState);
        if (!st) throw std::bad_alloc();
        XXH64_reset(st.get(), 0);
        XXH64_update(st.get(), &zeroed, sizeof zeroed);
        XXH64_update(st.get(), prefix.data() + sizeof(FileHeader), meta_ - sizeof(FileHeader));
        meta_sum_ = XXH64_digest(st.get());
        if (meta_sum_ != h_.metadata_xxh64) problem("metadata: xxh64 mismatch (header or tables damaged)");
        return true;
    }

    void read_tables() {
        const uint8_t* p = src_->prefix().data();
        sections_.resize(h_.section_count);
        std::memcpy(sections_.data(), p + h_.section_table_offset, sections_.size() * sizeof(SectionEntry));
        auto table = [&](const char* what, uint64_t offset, uint64_t count, uint64_t entry, auto& out) {
            if (count == 0) return;
            if (!table_fits(offset, count, entry, sizeof(FileHeader), meta_)) {
                problem(std::string("metadata: ") + what + " table lies outside the metadata");
                return;
            }
            out.resize(count);
            std::memcpy(out.data(), p + offset, count * entry);
        };
        table("tensor", h_.tensor_table_offset, h_.tensor_count, sizeof(TensorEntry), tensor_entries_);
        table("layer", h_.layer_table_offset, h_.layer_count, sizeof(LayerEntry), layers_);
        table("expert", h_.expert_table_offset, h_.expert_count, sizeof(ExpertEntry), experts_);
    }

    // Names first, so every later problem can use them; expert-like sections list the projections they hold.
    void name_sections() {
        std::vector<std::string> projections(sections_.size());
        for (const TensorEntry& t : tensor_entries_) {
            if (t.section >= sections_.size()) continue;
            const std::string n(t.name, strnlen(t.name, kTensorNameBytes));
            const size_t dot = n.rfind('.');
            std::string& list = projections[t.section];
            list += (list.empty() ? "" : " ") + (dot == std::string::npos ? n : n.substr(dot + 1));
        }
        std::map<std::tuple<uint32_t, uint32_t, uint32_t>, uint32_t> seen;
        for (uint32_t i = 0; i < sections_.size(); ++i) {
            const SectionEntry& s = sections_[i];
            const bool ffn_like = s.kind == static_cast<uint32_t>(SectionKind::Expert) ||
                                  s.kind == static_cast<uint32_t>(SectionKind::SharedExpert) ||
                                  s.kind == static_cast<uint32_t>(SectionKind::DenseMlp);
            SectionCheck c;
            c.index = i;
            c.kind = s.kind <= static_cast<uint32_t>(SectionKind::Output) ? section_kind_name(static_cast<SectionKind>(s.kind)) : "unknown";
            c.name = section_name(s, i, ffn_like ? projections[i] : std::string());
            c.layer = s.layer == kNone ? -1 : static_cast<int64_t>(s.layer);
            c.expert = s.expert == kNone ? -1 : static_cast<int64_t>(s.expert);
            c.offset = s.offset;
            c.size = s.size;
            c.stored_size = src_->stored_section_size(i, s);
            c.aligned = s.offset % kSectionAlignment == 0;
            c.in_bounds = range_fits(s.offset, s.size, src_->image_size());
            c.xxh64_expected = i == 0 ? h_.metadata_xxh64 : s.xxh64;
            // A file with two sections claiming the same thing: tell them apart by index.
            const auto key = std::make_tuple(s.kind, s.layer, s.expert);
            if (auto it = seen.find(key); it != seen.end()) {
                c.name += " (section #" + std::to_string(i) + ")";
                duplicates_.emplace_back(i, it->second);
            } else {
                seen.emplace(key, i);
            }
            report_.sections.push_back(std::move(c));
        }
    }

    // Bounds, alignment, the metadata section, overlaps, duplicates.
    void check_sections() {
        const uint64_t image = src_->image_size();
        for (uint32_t i = 0; i < sections_.size(); ++i) {
            const SectionEntry& s = sections_[i];
            const SectionCheck& c = report_.sections[i];
            if (!c.aligned) problem(c.name + ": misaligned (offset " + std::to_string(s.offset) + " is not a multiple of 4096)");
            if (!c.in_bounds)
                problem(c.name + ": runs past the end of the file (offset " + std::to_string(s.offset) + ", size " +
                        std::to_string(s.size) + ", image " + std::to_string(image) + " bytes)");
            if (s.kind == static_cast<uint32_t>(SectionKind::Metadata)) {
                if (i != 0) problem(c.name + ": a second metadata section (#" + std::to_string(i) + ")");
                else if (s.offset != 0 || s.size != meta_) problem("metadata: section 0 does not match the header's metadata size");
            } else if (i == 0) {
                problem(c.name + ": section 0 must be the metadata");
            } else if (s.offset < meta_) {
                problem(c.name + ": overlaps the metadata (offset " + std::to_string(s.offset) + ", metadata ends at " +
                        std::to_string(meta_) + ")");
            }
        }
        for (const auto& [dup, first] : duplicates_) problem(name(dup) + ": the same section as #" + std::to_string(first));
        // Overlaps: sweep by offset, against the section reaching furthest so far.
        std::vector<std::pair<uint64_t, uint32_t>> order;
        for (uint32_t i = 1; i < sections_.size(); ++i)
            if (report_.sections[i].in_bounds && sections_[i].size > 0) order.emplace_back(sections_[i].offset, i);
        std::sort(order.begin(), order.end());
        uint64_t reach = 0;
        uint32_t reacher = 0;
        for (const auto& [offset, i] : order) {
            if (reacher != 0 && offset < reach)
                problem(name(i) + ": overlaps " + name(reacher) + " (starts at " + std::to_string(offset) + ", the other ends at " +
                        std::to_string(reach) + ")");
            if (offset + sections_[i].size > reach) reach = offset + sections_[i].size, reacher = i;
        }
    }

    // Each entry on its own: name, type, shape, size, alignment, inside its section.
    void check_tensors() {
        for (uint32_t i = 0; i < tensor_entries_.size(); ++i) {
            const TensorEntry& t = tensor_entries_[i];
            TensorCheck c;
            const size_t len = strnlen(t.name, kTensorNameBytes);
            c.name = std::string(t.name, len);
            const std::string who = "tensor " + (len == 0 || len == kTensorNameBytes ? "#" + std::to_string(i) : c.name);
            c.section = t.section;
            c.offset = t.offset;
            c.size = t.size;
            c.aligned = t.offset % kTensorAlignment == 0;
            const bool known = weight_type_is_known(t.weight_type);
            c.type = known ? weight_type_name(static_cast<WeightType>(t.weight_type)) : "unknown";
            c.shape = t.n_dims == 1 ? std::vector<uint64_t>{t.dims[0]} : std::vector<uint64_t>{t.dims[0], t.dims[1]};
            bool ok = true;
            auto bad = [&](const std::string& why) {
                problem(who + ": " + why);
                ok = false;
            };
            if (len == 0 || len == kTensorNameBytes) bad("bad name (empty or not NUL-terminated)");
            if (!known) bad("unknown weight type " + std::to_string(t.weight_type));
            if (q4_k_needs_reconversion(h_.version_major, t.weight_type))
                bad("q4_k in format " + std::to_string(h_.version_major) + ".x (ggml's code order): convert the model again");
            if (t.n_dims != 1 && t.n_dims != 2) bad(std::to_string(t.n_dims) + " dims (1 or 2 allowed)");
            if (known && (t.n_dims == 1 || t.n_dims == 2)) {
                uint64_t expected = 0;
                const uint64_t rows = t.dims[0], cols = t.n_dims == 2 ? t.dims[1] : 1;
                if (!tensor_bytes(static_cast<WeightType>(t.weight_type), rows, cols, &expected))
                    bad("shape " + shape_text(c.shape) + " cannot be stored as " + c.type);
                else if (expected != t.size)
                    bad("size " + std::to_string(t.size) + " does not match its shape " + shape_text(c.shape) + " of " + c.type +
                        " (" + std::to_string(expected) + " bytes)");
            }
            if (!c.aligned) bad("misaligned (offset " + std::to_string(t.offset) + " is not a multiple of 64)");
            if (t.section >= sections_.size()) {
                bad("refers to section " + std::to_string(t.section) + ", the file has " + std::to_string(sections_.size()));
            } else {
                const SectionEntry& s = sections_[t.section];
                if (t.offset < s.offset || !range_fits(t.offset - s.offset, t.size, s.size))
                    bad("lies outside its section " + name(t.section));
            }
            if (len != 0 && len != kTensorNameBytes) {
                if (!by_name_.emplace(c.name, i).second) bad("appears twice");
            }
            c.shape_ok = ok;
            report_.tensors.push_back(std::move(c));
        }
        // Tensors that lie in their sections may still share bytes with one another.
        std::vector<uint32_t> placed;
        for (uint32_t i = 0; i < tensor_entries_.size(); ++i) {
            const TensorEntry& t = tensor_entries_[i];
            if (t.size > 0 && t.section < sections_.size() && t.offset >= sections_[t.section].offset &&
                range_fits(t.offset - sections_[t.section].offset, t.size, sections_[t.section].size))
                placed.push_back(i);
        }
        std::sort(placed.begin(), placed.end(), [&](uint32_t a, uint32_t b) { return tensor_entries_[a].offset < tensor_entries_[b].offset; });
        uint32_t reacher = 0;  // the placed tensor reaching furthest so far
        for (size_t k = 0; k < placed.size(); ++k) {
            const TensorEntry& t = tensor_entries_[placed[k]];
            if (k > 0) {
                const TensorEntry& r = tensor_entries_[reacher];
                if (r.offset + r.size > t.offset) {
                    problem("tensor " + report_.tensors[placed[k]].name + ": overlaps tensor " + report_.tensors[reacher].name +
                            " (starts at " + std::to_string(t.offset) + ", the other ends at " + std::to_string(r.offset + r.size) + ")");
                    report_.tensors[placed[k]].shape_ok = false;
                }
            }
            if (k == 0 || t.offset + t.size > tensor_entries_[reacher].offset + tensor_entries_[reacher].size) reacher = placed[k];
        }
    }

    // The layer and expert tables point at existing sections of the right kind, consistent with the header.
    void check_layer_tables() {
        const HyperParams& hp = h_.hparams;
        if (h_.layer_count != hp.n_layers)
            problem("metadata: the layer table has " + std::to_string(h_.layer_count) + " entries for n_layers " + std::to_string(hp.n_layers));
        auto section_is = [&](uint32_t i, SectionKind kind, uint32_t layer) {
            return i < sections_.size() && sections_[i].kind == static_cast<uint32_t>(kind) && sections_[i].layer == layer;
        };
        for (uint32_t l = 0; l < layers_.size(); ++l) {
            const LayerEntry& e = layers_[l];
            const std::string where = "layer " + std::to_string(l) + " table entry: ";
            if (!section_is(e.attention_section, SectionKind::Attention, l)) problem(where + "attention section is not layer " + std::to_string(l) + "'s attention");
            if (e.is_moe & ~(kLayerMoe | kLayerSliding)) problem(where + "unknown layer flags " + std::to_string(e.is_moe));
            if (!(e.is_moe & kLayerMoe)) {
                if (e.mlp_section != kNone && !section_is(e.mlp_section, SectionKind::DenseMlp, l)) problem(where + "mlp section is not its dense mlp");
                continue;
            }
            if (!section_is(e.router_section, SectionKind::Router, l)) {
                problem(where + "router section is not layer " + std::to_string(l) + "'s router");
            } else {
                const SectionEntry& r = sections_[e.router_section];
                if (e.router_offset < r.offset || e.router_offset - r.offset >= r.size) problem(where + "router offset outside its section");
            }
            if (e.mlp_section != kNone && !section_is(e.mlp_section, SectionKind::SharedExpert, l)) problem(where + "mlp section is not its shared expert");
            if (e.n_experts != hp.n_experts)
                problem(where + std::to_string(e.n_experts) + " experts, the header says " + std::to_string(hp.n_experts));
            if (e.first_expert > experts_.size() || e.n_experts > experts_.size() - e.first_expert) {
                problem(where + "expert table range out of bounds");
                continue;
            }
            for (uint32_t k = 0; k < e.n_experts; ++k) {
                const ExpertEntry& x = experts_[e.first_expert + k];
                if (x.layer != l || x.expert != k)
                    problem("expert table entry " + std::to_string(e.first_expert + k) + ": is L" + std::to_string(x.layer) + " E" +
                            std::to_string(x.expert) + ", layer " + std::to_string(l) + " expects E" + std::to_string(k));
            }
        }
        for (uint32_t i = 0; i < experts_.size(); ++i) {
            const ExpertEntry& e = experts_[i];
            const std::string where = "expert table entry " + std::to_string(i) + ": ";
            if (e.section >= sections_.size()) {
                problem(where + "refers to section " + std::to_string(e.section) + ", the file has " + std::to_string(sections_.size()));
                continue;
            }
            const SectionEntry& s = sections_[e.section];
            if (s.kind != static_cast<uint32_t>(SectionKind::Expert) || s.layer != e.layer || s.expert != e.expert)
                problem(where + "L" + std::to_string(e.layer) + " E" + std::to_string(e.expert) + " refers to " + name(e.section));
            if (e.offset != s.offset || e.size != s.size) problem(name(e.section) + ": does not match its expert table entry " + std::to_string(i));
            if (!weight_type_is_known(e.weight_type)) problem(where + "unknown weight type " + std::to_string(e.weight_type));
        }
    }

    // Every tensor the family needs, with the shape its hyper-parameters imply, in the section it belongs to;
    // and nothing the engine would not use.
    void check_expected_tensors() {
        std::vector<bool> is_moe(layers_.size());
        for (size_t l = 0; l < layers_.size(); ++l) is_moe[l] = (layers_[l].is_moe & kLayerMoe) != 0;
        const std::vector<schema::TensorSpec> expected =
            expected_tensors(h_.family, h_.hparams, is_moe, tensor_entries_.size(), &report_.problems);
        if (expected.empty()) return;  // the hyper-parameters' problems are reported
        std::vector<bool> used(tensor_entries_.size(), false);
        for (const schema::TensorSpec& x : expected) {
            const auto it = by_name_.find(x.name);
            if (it == by_name_.end()) {
                problem("tensor " + x.name + ": missing (a " + report_.family + " model with these hyper-parameters needs it)");
                continue;
            }
            used[it->second] = true;
            const TensorEntry& t = tensor_entries_[it->second];
            TensorCheck& c = report_.tensors[it->second];
            const std::vector<uint64_t> want = x.n_dims() == 1 ? std::vector<uint64_t>{x.rows} : std::vector<uint64_t>{x.rows, x.cols};
            if (t.n_dims != x.n_dims() || c.shape != want) {
                problem("tensor " + x.name + ": has shape " + shape_text(c.shape) + ", the hyper-parameters need " + shape_text(want));
                c.shape_ok = false;
            }
            if (x.kind == schema::Kind::Vector && t.weight_type != static_cast<uint32_t>(WeightType::F32)) {
                problem("tensor " + x.name + ": is " + c.type + ", must be f32");
                c.shape_ok = false;
            }
            if (t.section < sections_.size()) {
                const SectionEntry& s = sections_[t.section];
                if (s.kind != static_cast<uint32_t>(x.section) || s.layer != x.layer || s.expert != x.expert) {
                    SectionEntry belongs{static_cast<uint32_t>(x.section), x.layer, x.expert, 0, 0, 0, 0};
                    problem("tensor " + x.name + ": lies in " + name(t.section) + ", it belongs in " + section_name(belongs, 0, ""));
                    c.shape_ok = false;
                }
            }
        }
        for (uint32_t i = 0; i < tensor_entries_.size(); ++i) {  // in table order, so reports are reproducible
            const std::string& n = report_.tensors[i].name;
            const auto it = by_name_.find(n);
            if (used[i] || it == by_name_.end() || it->second != i) continue;  // bad names and repeats are reported
            problem("tensor " + n + ": not part of a " + report_.family + " model with these hyper-parameters");
            report_.tensors[i].shape_ok = false;
        }
    }

    bool keep_going(uint64_t done) {
        if (options_.cancel != nullptr && options_.cancel->load(std::memory_order_relaxed)) return false;
        if (options_.progress && !options_.progress(done, total_)) return false;
        return true;
    }

    // The long part: xxh64 of every section's contents, streamed, with progress and cancellation.
    void hash_sections() {
        report_.sections[0].xxh64_actual = meta_sum_;
        report_.sections[0].checksum = meta_sum_ == h_.metadata_xxh64 ? ChecksumState::Ok : ChecksumState::Mismatch;
        report_.sections[0].checksum_ok = report_.sections[0].checksum == ChecksumState::Ok;
        total_ = 0;
        for (uint32_t i = 1; i < sections_.size(); ++i)
            if (report_.sections[i].in_bounds) total_ += sections_[i].size;
        // Progress about 256 times over the file, at most every 8 MiB.
        const uint64_t step = std::clamp<uint64_t>(total_ / 256, uint64_t(64) << 10, uint64_t(8) << 20);
        uint64_t done = 0, reported = 0;
        if (!keep_going(0)) return cancel(1, 0);
        const std::unique_ptr<XXH64_state_t, XXH_errorcode (*)(XXH64_state_t*)> state(XXH64_createState(), XXH64_freeState);
        XXH64_state_t* st = state.get();
        if (st == nullptr) throw std::bad_alloc();
        for (uint32_t i = 1; i < sections_.size(); ++i) {
            SectionCheck& c = report_.sections[i];
            const SectionEntry& s = sections_[i];
            if (!c.in_bounds) {
                c.checksum = ChecksumState::Unreadable;  // reported by check_sections
                continue;
            }
            const bool keep_text = is_text(s.kind) && s.size <= kMaxTextSection && !texts_.count(s.kind);
            std::string text;
            XXH64_reset(st, 0);
            uint64_t section_done = 0;
            bool cancelled = false;
            std::string why;
            const auto r = src_->read(i, s, [&](const uint8_t* p, size_t k) {
                XXH64_update(st, p, k);
                if (keep_text) text.append(reinterpret_cast<const char*>(p), k);
                section_done += k;
                if (done + section_done - reported >= step) {
                    reported = done + section_done;
                    if (!keep_going(reported)) cancelled = true;
                }
                return !cancelled;
            }, &why);
            if (r == CheckSource::ReadResult::Cancelled) {
                report_.bytes_checked += section_done;
                return cancel(i, done + section_done);
            }
            done += s.size;  // a damaged frame still counts as checked, so progress reaches the total
            report_.bytes_checked += section_done;
            if (r == CheckSource::ReadResult::DamagedFrame) {
                c.checksum = ChecksumState::DamagedFrame;
                problem(c.name + ": damaged zstd frame (" + why + ")");
            } else if (r == CheckSource::ReadResult::OutOfBounds) {
                c.checksum = ChecksumState::Unreadable;
            } else {
                c.xxh64_actual = XXH64_digest(st);
                c.checksum = c.xxh64_actual == s.xxh64 ? ChecksumState::Ok : ChecksumState::Mismatch;
                if (c.checksum == ChecksumState::Mismatch) problem(c.name + ": xxh64 mismatch");
                if (keep_text) texts_.emplace(s.kind, std::move(text));
            }
            c.checksum_ok = c.checksum == ChecksumState::Ok;
        }
        // The last call says "done"; the work is finished, so its answer no longer cancels anything.
        if (options_.progress && reported != total_) options_.progress(total_, total_);
    }

    void cancel(uint32_t first_unchecked, uint64_t done) {
        for (uint32_t i = first_unchecked; i < sections_.size(); ++i) report_.sections[i].checksum = ChecksumState::NotChecked;
        report_.cancelled = true;
        problem("check cancelled after " + std::to_string(done) + " of " + std::to_string(total_) + " bytes");
    }

    // The tokenizer, its config and the chat template, as read while hashing (whatever their checksums said).
    void check_text_sections() {
        if (report_.cancelled) return;
        TokenizerCheckInput in;
        bool unreadable = false;
        for (uint32_t i = 1; i < sections_.size(); ++i) {
            if (!is_text(sections_[i].kind)) continue;
            const auto it = texts_.find(sections_[i].kind);
            if (it == texts_.end()) {
                if (report_.sections[i].in_bounds && sections_[i].size > kMaxTextSection)
                    problem(name(i) + ": " + std::to_string(sections_[i].size) + " bytes, too large to be text");
                unreadable = true;
                continue;
            }
            std::optional<std::string_view>& slot = sections_[i].kind == static_cast<uint32_t>(SectionKind::TokenizerJson) ? in.tokenizer_json
                                                  : sections_[i].kind == static_cast<uint32_t>(SectionKind::TokenizerConfig) ? in.tokenizer_config
                                                                                                                            : in.chat_template;
            if (!slot) slot = it->second;
        }
        if (unreadable) return;  // the damage is reported; a partial tokenizer would only add noise
        in.vocab_size = h_.hparams.vocab_size;
        in.bos_id = h_.hparams.bos_id;
        in.eos_id = h_.hparams.eos_id;
        check_tokenizer(in, &report_.problems);
    }

    CheckOptions options_;
    CheckReport report_;
    CheckSource* src_ = nullptr;
    FileHeader h_{};
    uint64_t meta_ = 0, meta_sum_ = 0, total_ = 0;
    size_t problems_before_attach_ = 0;
    std::vector<SectionEntry> sections_;
    std::vector<TensorEntry> tensor_entries_;
    std::vector<LayerEntry> layers_;
    std::vector<ExpertEntry> experts_;
    std::vector<std::pair<uint32_t, uint32_t>> duplicates_;  // (section, the earlier one it repeats)
    std::unordered_map<std::string, uint32_t> by_name_;
    std::map<uint32_t, std::string> texts_;  // first section of each text kind
};

}  // namespace

CheckReport check_model(const std::string& path, const CheckOptions& options) {
    try {
        return Checker(path, options).run();
    } catch (const std::bad_alloc&) {
        CheckReport r;
        r.path = path;
        r.fatal = path + ": out of memory while checking";
        r.problems.push_back(r.fatal);
        return r;
    }
}

CheckReport check_model(const std::string& path, const std::function<void(uint64_t, uint64_t)>& progress) {
    CheckOptions options;
    if (progress) options.progress = [&progress](uint64_t done, uint64_t total) {
        progress(done, total);
        return true;
    };
    return check_model(path, options);
}

std::string check_report_json(const CheckReport& r) {
    nlohmann::json j;
    j["path"] = r.path;
    j["valid"] = r.valid;
    j["cancelled"] = r.cancelled;
    if (!r.fatal.empty()) j["error"] = r.fatal;
    if (r.unreadable) j["unreadable"] = true;
    j["compressed"] = r.compressed;
    j["stored_size"] = r.stored_size;
    j["image_size"] = r.image_size;
    if (!r.family.empty()) j["family"] = r.family;
    if (r.version_major != 0) j["version"] = std::to_string(r.version_major) + "." + std::to_string(r.version_minor);
    j["bytes_checked"] = r.bytes_checked;
    j["problems"] = r.problems;
    j["sections"] = nlohmann::json::array();
    for (const SectionCheck& s : r.sections) {
        nlohmann::json e{{"index", s.index}, {"kind", s.kind}, {"name", s.name}, {"offset", s.offset}, {"size", s.size},
                         {"stored_size", s.stored_size}, {"aligned", s.aligned}, {"in_bounds", s.in_bounds},
                         {"checksum", checksum_state_name(s.checksum)}, {"checksum_ok", s.checksum_ok},
                         {"xxh64_expected", hex64(s.xxh64_expected)}};
        if (s.checksum == ChecksumState::Ok || s.checksum == ChecksumState::Mismatch) e["xxh64_actual"] = hex64(s.xxh64_actual);
        if (s.layer >= 0) e["layer"] = s.layer;
        if (s.expert >= 0) e["expert"] = s.expert;
        j["sections"].push_back(std::move(e));
    }
    j["tensors"] = nlohmann::json::array();
    for (const TensorCheck& t : r.tensors)
        j["tensors"].push_back({{"name", t.name}, {"shape", t.shape}, {"type", t.type}, {"section", t.section}, {"offset", t.offset},
                                {"size", t.size}, {"aligned", t.aligned}, {"shape_ok", t.shape_ok},
                                {"checksum", checksum_state_name(t.checksum)}});
    // Names and problems quote bytes of a damaged file: replace invalid UTF-8 rather than throw.
    return j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace colibri::tools
