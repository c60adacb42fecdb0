// The structural rules of a .bin (docs/FORMAT.md), written once: the loader (ModelFile::open, Model::load) stops at
// the first problem they find, `colibri check` reports every one, and the converters write nothing they would refuse
// (BinWriter), so that no file loads that check calls invalid, or the other way round. Each rule bounds-checks what a
// damaged table points at before it looks there.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/file/format.h"
#include "engine/file/schema.h"

namespace colibri::format {

// A .bin's tables as read from its metadata; a table that did not fit the metadata is empty.
struct FileTables {
    FileHeader header{};
    uint64_t image_size = 0;  // bytes of the image (of a .bin.zst: the uncompressed .bin)
    std::vector<SectionEntry> sections;
    std::vector<TensorEntry> tensors;
    std::vector<LayerEntry> layers;
    std::vector<ExpertEntry> experts;
};

// [offset, offset + count * entry) lies inside [lo, hi), 8-byte aligned, without overflow: where a table may lie.
inline bool table_fits(uint64_t offset, uint64_t count, uint64_t entry, uint64_t lo, uint64_t hi) {
    return offset >= lo && offset <= hi && offset % 8 == 0 && count <= (hi - offset) / entry;
}

// [offset, offset + size) lies inside [0, limit), without overflow.
inline bool range_fits(uint64_t offset, uint64_t size, uint64_t limit) { return offset <= limit && size <= limit - offset; }

// How a problem names section `index`: "layer 2 expert 5 (gate up down)" in a check report, "#7 expert L2 E5" in a
// loader error.
using SectionNames = std::function<std::string(uint32_t index)>;
// Receives each problem, one line without a prefix for the file.
using ProblemSink = std::function<void(const std::string&)>;

// Keeps the first problem reported, for the callers that stop at one (the loader, the writer).
struct FirstProblem {
    std::string text;
    ProblemSink sink() {
        return [this](const std::string& p) {
            if (text.empty()) text = p;
        };
    }
};

// Section 0 is the metadata and no other section is; every section is aligned, lies inside the image after the
// metadata, overlaps no other and repeats no other's (kind, layer, expert); a text section holds at most
// kMaxTextSectionBytes.
void check_sections(const FileTables& t, const SectionNames& name, const ProblemSink& problem);

// Each tensor entry on its own: a name, a known type (q4_k only from format 2 on), one or two dims, the size its
// shape needs, 64-byte alignment, inside its section; then no name twice and no two tensors sharing bytes. Returns
// whether each entry passed; by_name receives the first entry of every well-formed name.
std::vector<bool> check_tensor_entries(const FileTables& t, const SectionNames& name, const ProblemSink& problem,
                                       std::unordered_map<std::string, uint32_t>* by_name);

// The layer table has n_layers entries pointing at their own layer's sections; the expert table's entries are the
// layers' experts in order, each naming its own expert section (kind, layer and expert) and matching its bounds.
void check_layer_and_expert_tables(const FileTables& t, const SectionNames& name, const ProblemSink& problem);

// Whether each layer is MoE, as the layer table says.
std::vector<bool> moe_layers(const FileTables& t);

// Every tensor the family binds with these hyper-parameters, or nothing when they are unusable (each reason to
// `problem`, as "hyper-parameters: ...") or would need more tensors than the file has (a damaged count must not make
// anyone allocate billions of entries).
std::vector<schema::TensorSpec> expected_tensors(const FileTables& t, const ProblemSink& problem);

// The tensors against what the family binds: each present, with the shape the hyper-parameters imply, f32 where a
// vector, in the section the schema puts it in; and no tensor the model would not use. tensor_ok[i] is cleared for an
// entry found wanting.
void check_tensor_set(const FileTables& t, const std::vector<schema::TensorSpec>& expected,
                      const std::unordered_map<std::string, uint32_t>& by_name, const SectionNames& name,
                      const ProblemSink& problem, std::vector<bool>* tensor_ok);

// A section as a person would name it, for messages ("layer 0 attention", "layer 1 expert 3"); projections (the
// names' last parts) are listed after expert-like sections when given.
std::string section_description(const SectionEntry& s, uint32_t index, const std::string& projections = {});

// Why a tokenizer of `tokens` ids cannot serve an embedding of `rows` rows, or empty.
std::string tokenizer_fit_problem(int64_t tokens, uint32_t rows);

}  // namespace colibri::format
