// Added tokens (the tokenizers crate's AddedVocabulary): special and added tokens are split out of the text first,
// leftmost-longest, with their lstrip / rstrip / single_word rules; what lies between them is tokenized.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace colibri::tokenizer_parts {

struct AddedToken {
    std::string content;
    int32_t id = -1;
    bool single_word = false, lstrip = false, rstrip = false, normalized = true, special = false;
};

// Byte trie for leftmost-longest matching of added tokens.
class Trie {
public:
    Trie() { nodes_.emplace_back(); }
    bool empty() const { return nodes_.size() == 1; }
    void add(std::string_view s, int32_t value) {
        if (s.empty()) return;
        int32_t n = 0;
        for (unsigned char c : s) {
            int32_t next = child(n, c);
            if (next < 0) {
                next = static_cast<int32_t>(nodes_.size());
                nodes_.emplace_back();
                nodes_[n].kids.emplace_back(c, next);
            }
            n = next;
        }
        nodes_[n].value = value;
        first_[static_cast<unsigned char>(s[0])] = true;
    }
    // Longest match starting at s[i]: its length, and *value; 0 when none.
    size_t longest_at(std::string_view s, size_t i, int32_t* value) const {
        if (!first_[static_cast<unsigned char>(s[i])]) return 0;
        int32_t n = 0;
        size_t best = 0;
        for (size_t j = i; j < s.size(); ++j) {
            n = child(n, static_cast<unsigned char>(s[j]));
            if (n < 0) break;
            if (nodes_[n].value >= 0) {
                best = j + 1 - i;
                *value = nodes_[n].value;
            }
        }
        return best;
    }

private:
    struct Node {
        std::vector<std::pair<unsigned char, int32_t>> kids;
        int32_t value = -1;
    };
    int32_t child(int32_t n, unsigned char c) const {
        for (const auto& [k, v] : nodes_[n].kids)
            if (k == c) return v;
        return -1;
    }
    std::vector<Node> nodes_;
    std::array<bool, 256> first_{};
};

struct Piece {
    size_t b, e;
    int32_t token;  // index into the added tokens, -1 for text
};

// AddedVocabulary::find_matches: s cut into added tokens (Piece::token) and the text between them.
void find_added(std::string_view s, const Trie& trie, const std::vector<AddedToken>& toks, std::vector<Piece>& out);

}  // namespace colibri::tokenizer_parts
