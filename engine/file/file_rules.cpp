#include "engine/file/file_rules.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>

namespace colibri::format {

namespace {

std::string shape_text(const std::vector<uint64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

std::vector<uint64_t> shape_of(const TensorEntry& t) {
    return t.n_dims == 1 ? std::vector<uint64_t>{t.dims[0]} : std::vector<uint64_t>{t.dims[0], t.dims[1]};
}

std::string name_of(const TensorEntry& t) { return std::string(t.name, strnlen(t.name, kTensorNameBytes)); }

std::string family_text(const FileHeader& h) {
    const schema::FamilyInfo* f = schema::find_family(h.family);
    return f ? f->name : "unknown";
}

}  // namespace

std::string section_description(const SectionEntry& s, uint32_t index, const std::string& projections) {
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
        case SectionKind::GenerationConfig: return "generation config";
    }
    return "section #" + std::to_string(index) + " (kind " + std::to_string(s.kind) + ")";
}

void check_sections(const FileTables& t, const SectionNames& name, const ProblemSink& problem) {
    const uint64_t meta = t.header.metadata_size;
    std::map<std::tuple<uint32_t, uint32_t, uint32_t>, uint32_t> seen;
    std::vector<bool> in_bounds(t.sections.size());
    for (uint32_t i = 0; i < t.sections.size(); ++i) {
        const SectionEntry& s = t.sections[i];
        in_bounds[i] = range_fits(s.offset, s.size, t.image_size);
        if (s.offset % kSectionAlignment != 0) problem(name(i) + ": misaligned (offset " + std::to_string(s.offset) + " is not a multiple of 4096)");
        if (!in_bounds[i])
            problem(name(i) + ": runs past the end of the file (offset " + std::to_string(s.offset) + ", size " + std::to_string(s.size) +
                    ", image " + std::to_string(t.image_size) + " bytes)");
        if (s.kind == static_cast<uint32_t>(SectionKind::Metadata)) {
            if (i != 0) problem(name(i) + ": a second metadata section (#" + std::to_string(i) + ")");
            else if (s.offset != 0 || s.size != meta) problem("metadata: section 0 does not match the header's metadata size");
        } else if (i == 0) {
            problem(name(i) + ": section 0 must be the metadata");
        } else if (s.offset < meta) {
            problem(name(i) + ": overlaps the metadata (offset " + std::to_string(s.offset) + ", metadata ends at " + std::to_string(meta) + ")");
        }
        if (is_text_section(s.kind) && s.size > kMaxTextSectionBytes)
            problem(name(i) + ": " + std::to_string(s.size) + " bytes, more than the " + std::to_string(kMaxTextSectionBytes >> 20) +
                    " MiB a text section may hold");
        // A file with two sections claiming the same thing: which one would a reader use?
        const auto [at, fresh] = seen.emplace(std::make_tuple(s.kind, s.layer, s.expert), i);
        if (!fresh) problem(name(i) + ": the same section as #" + std::to_string(at->second));
    }
    // Overlaps: sweep by offset, against the section reaching furthest so far.
    std::vector<std::pair<uint64_t, uint32_t>> order;
    for (uint32_t i = 1; i < t.sections.size(); ++i)
        if (in_bounds[i] && t.sections[i].size > 0) order.emplace_back(t.sections[i].offset, i);
    std::sort(order.begin(), order.end());
    uint64_t reach = 0;
    uint32_t reacher = 0;
    for (const auto& [offset, i] : order) {
        if (reacher != 0 && offset < reach)
            problem(name(i) + ": overlaps " + name(reacher) + " (starts at " + std::to_string(offset) + ", the other ends at " +
                    std::to_string(reach) + ")");
        if (offset + t.sections[i].size > reach) reach = offset + t.sections[i].size, reacher = i;
    }
}

std::vector<bool> check_tensor_entries(const FileTables& ft, const SectionNames& name, const ProblemSink& problem,
                                       std::unordered_map<std::string, uint32_t>* by_name) {
    std::vector<bool> ok(ft.tensors.size(), true);
    for (uint32_t i = 0; i < ft.tensors.size(); ++i) {
        const TensorEntry& t = ft.tensors[i];
        const size_t len = strnlen(t.name, kTensorNameBytes);
        const bool named = len != 0 && len != kTensorNameBytes;
        const std::string who = "tensor " + (named ? std::string(t.name, len) : "#" + std::to_string(i));
        auto bad = [&](const std::string& why) {
            problem(who + ": " + why);
            ok[i] = false;
        };
        if (!named) bad("bad name (empty or not NUL-terminated)");
        const bool known = weight_type_is_known(t.weight_type);
        const std::string type = known ? weight_type_name(static_cast<WeightType>(t.weight_type)) : "unknown";
        if (!known) bad("unknown weight type " + std::to_string(t.weight_type));
        if (q4_k_needs_reconversion(ft.header.version_major, t.weight_type))
            bad("q4_k in format " + std::to_string(ft.header.version_major) + ".x (ggml's code order): convert the model again");
        if (t.n_dims != 1 && t.n_dims != 2) bad(std::to_string(t.n_dims) + " dims (1 or 2 allowed)");
        if (known && (t.n_dims == 1 || t.n_dims == 2)) {
            uint64_t expected = 0;
            const uint64_t rows = t.dims[0], cols = t.n_dims == 2 ? t.dims[1] : 1;
            if (!tensor_bytes(static_cast<WeightType>(t.weight_type), rows, cols, &expected))
                bad("shape " + shape_text(shape_of(t)) + " cannot be stored as " + type);
            else if (expected != t.size)
                bad("size " + std::to_string(t.size) + " does not match its shape " + shape_text(shape_of(t)) + " of " + type + " (" +
                    std::to_string(expected) + " bytes)");
        }
        if (t.offset % kTensorAlignment != 0) bad("misaligned (offset " + std::to_string(t.offset) + " is not a multiple of 64)");
        if (t.section >= ft.sections.size()) {
            bad("refers to section " + std::to_string(t.section) + ", the file has " + std::to_string(ft.sections.size()));
        } else {
            const SectionEntry& s = ft.sections[t.section];
            if (t.offset < s.offset || !range_fits(t.offset - s.offset, t.size, s.size)) bad("lies outside its section " + name(t.section));
        }
        if (named && !by_name->emplace(std::string(t.name, len), i).second) bad("appears twice");
    }
    // Tensors that lie in their sections may still share bytes with one another: a write to one, as an expert
    // swap makes, would change the other.
    std::vector<uint32_t> placed;
    for (uint32_t i = 0; i < ft.tensors.size(); ++i) {
        const TensorEntry& t = ft.tensors[i];
        if (t.size > 0 && t.section < ft.sections.size() && t.offset >= ft.sections[t.section].offset &&
            range_fits(t.offset - ft.sections[t.section].offset, t.size, ft.sections[t.section].size))
            placed.push_back(i);
    }
    std::sort(placed.begin(), placed.end(), [&](uint32_t a, uint32_t b) { return ft.tensors[a].offset < ft.tensors[b].offset; });
    uint32_t reacher = 0;  // the placed tensor reaching furthest so far
    for (size_t k = 0; k < placed.size(); ++k) {
        const TensorEntry& t = ft.tensors[placed[k]];
        if (k > 0) {
            const TensorEntry& r = ft.tensors[reacher];
            if (r.offset + r.size > t.offset) {
                problem("tensor " + name_of(t) + ": overlaps tensor " + name_of(r) + " (starts at " + std::to_string(t.offset) +
                        ", the other ends at " + std::to_string(r.offset + r.size) + ")");
                ok[placed[k]] = false;
            }
        }
        if (k == 0 || t.offset + t.size > ft.tensors[reacher].offset + ft.tensors[reacher].size) reacher = placed[k];
    }
    return ok;
}

void check_layer_and_expert_tables(const FileTables& t, const SectionNames& name, const ProblemSink& problem) {
    const HyperParams& hp = t.header.hparams;
    if (t.header.layer_count != uint64_t(hp.n_layers) + hp.mtp_layers)
        problem("metadata: the layer table has " + std::to_string(t.header.layer_count) + " entries for n_layers " + std::to_string(hp.n_layers) +
                (hp.mtp_layers ? " and " + std::to_string(hp.mtp_layers) + " MTP layers" : ""));
    auto section_is = [&](uint32_t i, SectionKind kind, uint32_t layer) {
        return i < t.sections.size() && t.sections[i].kind == static_cast<uint32_t>(kind) && t.sections[i].layer == layer;
    };
    for (uint32_t l = 0; l < t.layers.size(); ++l) {
        const LayerEntry& e = t.layers[l];
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
            const SectionEntry& r = t.sections[e.router_section];
            if (e.router_offset < r.offset || e.router_offset - r.offset >= r.size) problem(where + "router offset outside its section");
        }
        if (e.mlp_section != kNone && !section_is(e.mlp_section, SectionKind::SharedExpert, l)) problem(where + "mlp section is not its shared expert");
        if (e.n_experts != hp.n_experts)
            problem(where + std::to_string(e.n_experts) + " experts, the header says " + std::to_string(hp.n_experts));
        if (e.first_expert > t.experts.size() || e.n_experts > t.experts.size() - e.first_expert) {
            problem(where + "expert table range out of bounds");
            continue;
        }
        for (uint32_t k = 0; k < e.n_experts; ++k) {
            const ExpertEntry& x = t.experts[e.first_expert + k];
            if (x.layer != l || x.expert != k)
                problem("expert table entry " + std::to_string(e.first_expert + k) + ": is L" + std::to_string(x.layer) + " E" +
                        std::to_string(x.expert) + ", layer " + std::to_string(l) + " expects E" + std::to_string(k));
        }
    }
    for (uint32_t i = 0; i < t.experts.size(); ++i) {
        const ExpertEntry& e = t.experts[i];
        const std::string where = "expert table entry " + std::to_string(i) + ": ";
        if (e.section >= t.sections.size()) {
            problem(where + "refers to section " + std::to_string(e.section) + ", the file has " + std::to_string(t.sections.size()));
            continue;
        }
        // The expert cache and the .bin.zst loader read an expert through this entry: naming another expert's
        // section would serve that expert's weights under this one's name.
        const SectionEntry& s = t.sections[e.section];
        if (s.kind != static_cast<uint32_t>(SectionKind::Expert) || s.layer != e.layer || s.expert != e.expert)
            problem(where + "L" + std::to_string(e.layer) + " E" + std::to_string(e.expert) + " refers to " + name(e.section));
        if (e.offset != s.offset || e.size != s.size) problem(name(e.section) + ": does not match its expert table entry " + std::to_string(i));
        if (!weight_type_is_known(e.weight_type)) problem(where + "unknown weight type " + std::to_string(e.weight_type));
    }
}

std::vector<bool> moe_layers(const FileTables& t) {
    std::vector<bool> moe(t.layers.size());
    for (size_t l = 0; l < t.layers.size(); ++l) moe[l] = (t.layers[l].is_moe & kLayerMoe) != 0;
    return moe;
}

std::vector<schema::TensorSpec> expected_tensors(const FileTables& t, const ProblemSink& problem) {
    const HyperParams& hp = t.header.hparams;
    const std::vector<bool> moe = moe_layers(t);
    const std::vector<std::string> bad = schema::hyperparam_problems(t.header.family, hp, moe);
    for (const std::string& p : bad) problem("hyper-parameters: " + p);
    if (!bad.empty()) return {};
    // Count first; the list is then at most about twice the fewest tensors the file holds.
    const uint64_t needed = schema::minimum_tensor_count(hp, moe);
    if (needed > t.tensors.size()) {
        problem("hyper-parameters: " + std::to_string(hp.n_layers) + " layers of " + std::to_string(hp.n_experts) + " experts need at least " +
                std::to_string(needed) + " tensors, the file has " + std::to_string(t.tensors.size()));
        return {};
    }
    return schema::tensors(static_cast<Family>(t.header.family), hp, moe);
}

void check_tensor_set(const FileTables& t, const std::vector<schema::TensorSpec>& expected,
                      const std::unordered_map<std::string, uint32_t>& by_name, const SectionNames& name,
                      const ProblemSink& problem, std::vector<bool>* tensor_ok) {
    const std::string family = family_text(t.header);
    std::vector<bool> used(t.tensors.size(), false);
    for (const schema::TensorSpec& x : expected) {
        const auto it = by_name.find(x.name);
        if (it == by_name.end()) {
            problem("tensor " + x.name + ": missing (a " + family + " model with these hyper-parameters needs it)");
            continue;
        }
        used[it->second] = true;
        const TensorEntry& e = t.tensors[it->second];
        const std::vector<uint64_t> want = x.n_dims() == 1 ? std::vector<uint64_t>{x.rows} : std::vector<uint64_t>{x.rows, x.cols};
        if (e.n_dims != x.n_dims() || shape_of(e) != want) {
            problem("tensor " + x.name + ": has shape " + shape_text(shape_of(e)) + ", the hyper-parameters need " + shape_text(want));
            (*tensor_ok)[it->second] = false;
        }
        const bool known = weight_type_is_known(e.weight_type);
        if (x.kind == schema::Kind::Vector && e.weight_type != static_cast<uint32_t>(WeightType::F32)) {
            problem("tensor " + x.name + ": is " + (known ? weight_type_name(static_cast<WeightType>(e.weight_type)) : "unknown") + ", must be f32");
            (*tensor_ok)[it->second] = false;
        } else if (x.kind != schema::Kind::Vector && known && !weight_type_info(static_cast<WeightType>(e.weight_type)).matrix) {
            problem("tensor " + x.name + ": is " + weight_type_name(static_cast<WeightType>(e.weight_type)) + ", not a matrix type");
            (*tensor_ok)[it->second] = false;
        }
        // The loader makes a section readable before its tensors are used (a .bin.zst decompresses it) and the expert
        // cache reads an expert by its section: a tensor elsewhere would be read from the wrong bytes.
        if (e.section < t.sections.size()) {
            const SectionEntry& s = t.sections[e.section];
            if (s.kind != static_cast<uint32_t>(x.section) || s.layer != x.layer || s.expert != x.expert) {
                const SectionEntry belongs{static_cast<uint32_t>(x.section), x.layer, x.expert, 0, 0, 0, 0};
                problem("tensor " + x.name + ": lies in " + name(e.section) + ", it belongs in " + section_description(belongs, 0));
                (*tensor_ok)[it->second] = false;
            }
        }
    }
    for (uint32_t i = 0; i < t.tensors.size(); ++i) {  // in table order, so reports are reproducible
        const std::string n = name_of(t.tensors[i]);
        const auto it = by_name.find(n);
        if (used[i] || it == by_name.end() || it->second != i) continue;  // bad names and repeats are reported
        problem("tensor " + n + ": not part of a " + family + " model with these hyper-parameters");
        (*tensor_ok)[i] = false;
    }
}

std::string tokenizer_fit_problem(int64_t tokens, uint32_t rows) {
    if (tokens <= 0) return "empty vocabulary";
    if (static_cast<uint64_t>(tokens) > rows)
        return std::to_string(tokens) + " tokens, but the embedding has " + std::to_string(rows) + " rows";
    return {};
}

}  // namespace colibri::format
