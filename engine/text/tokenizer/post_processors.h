// Post-processors (the tokenizers crate's processors): the special tokens an encoding gets around the text (a
// template such as "<s> $A", BERT's [CLS] and [SEP]).
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "engine/text/tokenizer/parse_support.h"

namespace colibri::tokenizer_parts {

struct PostProcessor {
    enum class Type { ByteLevel, Template, Bert, Sequence };
    Type type = Type::ByteLevel;
    std::vector<std::pair<bool, std::vector<int32_t>>> single;  // (is sequence A, special ids)
    std::vector<int32_t> cls, sep;
    std::vector<PostProcessor> children;

    // Special tokens around the text, not copies of it: a chain of templates repeating $A must not multiply it.
    void apply(std::vector<int32_t>& ids) const { apply(ids, 2 * ids.size() + 4096); }

    // Throws LimitError when the ids would grow past max_ids.
    void apply(std::vector<int32_t>& ids, size_t max_ids) const;
};

PostProcessor parse_post_processor(const json& j, int depth = 0);

}  // namespace colibri::tokenizer_parts
