// Reading tokenizer.json: the document as JSON values, except model.vocab and model.merges, which are streamed.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace colibri::tokenizer_parts {

// model.vocab and model.merges as the parser met them. A large vocabulary (gpt-oss: 200k pieces, 446k merges) is
// most of the file; building it as JSON values first (a std::map node per piece, a vector per merge) took longer
// than everything else the tokenizer loads, so those two are collected straight from the parser's events.
struct StreamedModel {
    struct VocabEntry {
        std::string piece;
        int64_t id;
        bool integer;  // the value was an integer (else it is reported as such)
    };
    struct MergeEntry {
        enum Form : uint8_t { Line, Pair, Bad };
        size_t a = 0, a_len = 0, b = 0, b_len = 0;  // in merge_text; for the "a b" form, a is the whole line
        Form form = Bad;
    };
    bool have_vocab = false, have_merges = false;
    std::vector<VocabEntry> vocab;
    std::vector<MergeEntry> merges;
    std::string merge_text;  // every merge's text, one after the other

    std::string_view text(size_t at, size_t len) const { return std::string_view(merge_text).substr(at, len); }
};

// Parses tokenizer.json into *root, with model.vocab and model.merges into *model instead. False (and *error) when
// the text is not valid JSON. The caller refuses deep nesting and NUL bytes first (json_text_problem).
bool read_tokenizer_json(std::string_view text, nlohmann::json* root, StreamedModel* model, std::string* error);

}  // namespace colibri::tokenizer_parts
