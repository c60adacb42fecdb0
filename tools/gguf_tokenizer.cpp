#include "gguf_tokenizer.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <unordered_map>
#include <vector>

#include "gguf.h"

namespace colibri::tools {

using nlohmann::json;

namespace {

// llama.cpp's token types (llama_token_type / gguf.TokenType).
enum TokenType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

const char* const kMetaspace = "\xE2\x96\x81";  // ▁

// The pre-tokenizer regexes of the tokenizer.json files these names stand for.
const char* const kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// o200k (GPT-4o; gpt-oss's o200k_harmony): words split at case changes, contractions kept, digits in threes.
const char* const kGpt4oRegex =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"(\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// DeepSeek-V3: three Split steps, as its tokenizer.json spells them (the third with literal CR and LF characters).
const char* const kDeepSeek3Regexes[] = {
    R"(\p{N}{1,3})",
    "[\xE4\xB8\x80-\xE9\xBE\xA5\xE3\x81\x80-\xE3\x82\x9F\xE3\x82\xA0-\xE3\x83\xBF]+",  // [一-龥぀-ゟ゠-ヿ]+: CJK, kana
    ("[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|"
     "\\s*[\r\n]+|\\s+(?!\\S)|\\s+"),  // one element: the parentheses tell clang the concatenation is meant
};

struct GgufVocab {
    std::string model;
    std::vector<std::string> tokens;
    std::vector<float> scores;      // llama only
    std::vector<int32_t> types;     // kNormal when the file has none
    std::vector<std::string> merges;  // gpt2 only
    std::string pre;
    std::optional<int32_t> bos, eos, unk, pad;
    std::optional<bool> add_bos, add_eos;
    bool add_space_prefix = true;
    std::string chat_template;
};

// Typed reads of tokenizer.* keys; the first problem is kept and named.
class Keys {
public:
    explicit Keys(const json& md) : md_(md) {}
    Status status() const { return status_; }
    const json* find(const std::string& key) const {
        auto it = md_.find(key);
        return it == md_.end() || it->is_null() ? nullptr : &*it;
    }
    std::string string(const std::string& key, const std::string& fallback = {}) {
        const json* v = find(key);
        if (!v) return fallback;
        if (!v->is_string()) return fail(key + " must be a string"), fallback;
        return v->get<std::string>();
    }
    std::optional<bool> boolean(const std::string& key) {
        const json* v = find(key);
        if (!v) return std::nullopt;
        if (!v->is_boolean()) return fail(key + " must be true or false"), std::nullopt;
        return v->get<bool>();
    }
    std::optional<int32_t> token_id(const std::string& key, size_t n_tokens) {
        const json* v = find(key);
        if (!v) return std::nullopt;
        if (!v->is_number_integer() || v->get<int64_t>() < 0 || v->get<uint64_t>() >= n_tokens)
            return fail(key + " must be a token id below " + std::to_string(n_tokens)), std::nullopt;
        return v->get<int32_t>();
    }
    std::vector<std::string> strings(const std::string& key, bool required) {
        std::vector<std::string> out;
        const json* v = find(key);
        if (!v) {
            if (required) fail("missing " + key);
            return out;
        }
        auto list = gguf_strings(*v);
        if (!list) return fail(key + " must be a list of strings"), out;
        return std::move(*list);
    }
    template <typename T>
    std::vector<T> numbers(const std::string& key, size_t n, const char* what) {
        std::vector<T> out;
        const json* v = find(key);
        if (!v) return out;
        std::optional<std::vector<T>> list;
        if constexpr (std::is_integral_v<T>) {
            if (auto ints = gguf_integers(*v)) {
                list.emplace();
                for (int64_t x : *ints) {
                    if (x < std::numeric_limits<T>::min() || x > std::numeric_limits<T>::max()) return fail(key + " has an entry out of range"), out;
                    list->push_back(static_cast<T>(x));
                }
            }
        } else if (auto reals = gguf_reals(*v)) {
            list.emplace(reals->begin(), reals->end());
        }
        if (!list || list->size() != n) return fail(key + " must be a list of " + what + ", one per token"), out;
        return std::move(*list);
    }
    void fail(const std::string& why) {
        if (status_) status_ = error("GGUF metadata: " + why);
    }

private:
    const json& md_;
    Status status_;
};

Result<GgufVocab> read_vocab(const json& md) {
    Keys k(md);
    GgufVocab v;
    v.model = k.string("tokenizer.ggml.model");
    if (v.model != "llama" && v.model != "gpt2")
        return error("GGUF metadata: tokenizer.ggml.model '" + v.model + "' is not supported (llama, gpt2)");
    v.tokens = k.strings("tokenizer.ggml.tokens", true);
    if (k.status() && v.tokens.empty()) k.fail("tokenizer.ggml.tokens is empty");
    if (k.status() && v.tokens.size() > (size_t(1) << 24)) k.fail("tokenizer.ggml.tokens has more than 2^24 tokens");
    const size_t n = v.tokens.size();
    v.types = k.numbers<int32_t>("tokenizer.ggml.token_type", n, "integers");
    if (v.types.empty()) v.types.assign(n, kNormal);
    for (int32_t t : v.types)
        if (k.status() && (t < kNormal || t > kByte)) k.fail("tokenizer.ggml.token_type has an unknown type " + std::to_string(t));
    if (v.model == "llama") {
        if (!k.find("tokenizer.ggml.scores")) k.fail("missing tokenizer.ggml.scores (a llama vocabulary needs one score per token)");
        v.scores = k.numbers<float>("tokenizer.ggml.scores", n, "numbers");
        if (auto p = k.boolean("tokenizer.ggml.add_space_prefix")) v.add_space_prefix = *p;
    } else {
        v.merges = k.strings("tokenizer.ggml.merges", true);
        v.pre = k.string("tokenizer.ggml.pre", "default");
    }
    v.bos = k.token_id("tokenizer.ggml.bos_token_id", n);
    v.eos = k.token_id("tokenizer.ggml.eos_token_id", n);
    v.unk = k.token_id("tokenizer.ggml.unknown_token_id", n);
    v.pad = k.token_id("tokenizer.ggml.padding_token_id", n);
    v.add_bos = k.boolean("tokenizer.ggml.add_bos_token");
    v.add_eos = k.boolean("tokenizer.ggml.add_eos_token");
    v.chat_template = k.string("tokenizer.chat_template");
    if (const json* rw = k.find("tokenizer.ggml.remove_extra_whitespaces"); rw && rw->is_boolean() && rw->get<bool>())
        k.fail("tokenizer.ggml.remove_extra_whitespaces is not supported (no Hugging Face tokenizer does it)");
    if (!k.status()) return k.status();
    return v;
}

// Byte length of the first `chars` code points of s.
size_t utf8_prefix_bytes(const std::string& s, size_t chars) {
    size_t i = 0;
    for (size_t c = 0; c < chars && i < s.size(); ++c) {
        ++i;
        while (i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) ++i;
    }
    return i;
}

size_t utf8_chars(const std::string& s) {
    size_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
}

// transformers' generate_merges(vocab, vocab_scores): for each piece, every split into two pieces of the
// vocabulary is a merge with the piece's score; merges are ordered by score, then by the lengths (in
// characters) of the left and then the right part, all descending; equal keys keep the order of the piece
// ids and, within a piece, of the (left id, right id) pairs.
json merges_from_scores(const GgufVocab& v, const std::unordered_map<std::string, int32_t>& ids) {
    struct Merge {
        float score;
        uint32_t left_chars, right_chars;
        int32_t piece, left, right;
    };
    std::vector<Merge> merges;
    for (size_t id = 0; id < v.tokens.size(); ++id) {
        const std::string& piece = v.tokens[id];
        const size_t chars = utf8_chars(piece);
        for (size_t c = 1; c < chars; ++c) {
            const size_t at = utf8_prefix_bytes(piece, c);
            auto l = ids.find(piece.substr(0, at));
            if (l == ids.end()) continue;
            auto r = ids.find(piece.substr(at));
            if (r == ids.end()) continue;
            merges.push_back({v.scores[id], static_cast<uint32_t>(c), static_cast<uint32_t>(chars - c), static_cast<int32_t>(id),
                              l->second, r->second});
        }
    }
    std::stable_sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) {
        if (a.score != b.score) return a.score > b.score;
        if (a.left_chars != b.left_chars) return a.left_chars > b.left_chars;
        if (a.right_chars != b.right_chars) return a.right_chars > b.right_chars;
        if (a.piece != b.piece) return a.piece < b.piece;
        if (a.left != b.left) return a.left < b.left;
        return a.right < b.right;
    });
    json out = json::array();
    for (const Merge& m : merges) out.push_back(json::array({v.tokens[m.left], v.tokens[m.right]}));
    return out;
}

json added_token(int32_t id, const std::string& content, bool special) {
    return {{"id", id}, {"content", content}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
            {"normalized", false}, {"special", special}};
}

json string_pattern(const char* s) { return {{"String", s}}; }

// TemplateProcessing that adds bos and/or eos around the sequence, as HF writes it for Llama-style tokenizers.
json template_processor(const GgufVocab& v, bool add_bos, bool add_eos) {
    json single = json::array(), pair = json::array(), specials = json::object();
    auto special = [&](int32_t id, int type_id) {
        const std::string& name = v.tokens[id];
        specials[name] = {{"id", name}, {"ids", json::array({id})}, {"tokens", json::array({name})}};
        return json{{"SpecialToken", {{"id", name}, {"type_id", type_id}}}};
    };
    auto sequence = [](const char* id, int type_id) { return json{{"Sequence", {{"id", id}, {"type_id", type_id}}}}; };
    if (add_bos) single.push_back(special(*v.bos, 0));
    single.push_back(sequence("A", 0));
    if (add_eos) single.push_back(special(*v.eos, 0));
    pair = single;
    if (add_bos) pair.push_back(special(*v.bos, 1));
    pair.push_back(sequence("B", 1));
    if (add_eos) pair.push_back(special(*v.eos, 1));
    return {{"type", "TemplateProcessing"}, {"single", single}, {"pair", pair}, {"special_tokens", specials}};
}

Result<json> build_tokenizer_json(const GgufVocab& v) {
    const bool llama = v.model == "llama";
    json added = json::array(), vocab = json::object();
    std::unordered_map<std::string, int32_t> ids;  // piece -> first id with it
    ids.reserve(v.tokens.size());
    for (size_t i = 0; i < v.tokens.size(); ++i) {
        const int32_t id = static_cast<int32_t>(i);
        const int32_t type = v.types[i];
        if (type == kControl || type == kUnknown || type == kUserDefined) added.push_back(added_token(id, v.tokens[i], type != kUserDefined));
        // A byte-level vocabulary keeps its added tokens out of the model's vocab (as HF's files do) and has no
        // piece for llama.cpp's [PAD] fillers; a SentencePiece one lists every piece, as LlamaConverter does.
        const bool in_vocab = llama || (type != kControl && type != kUserDefined && type != kUnused);
        if (in_vocab && ids.emplace(v.tokens[i], id).second) vocab[v.tokens[i]] = id;
    }

    json tj = {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}, {"added_tokens", added}};
    json model = {{"type", "BPE"}, {"dropout", nullptr}, {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr},
                  {"ignore_merges", false}, {"vocab", vocab}};
    const bool add_bos = v.add_bos.value_or(llama) && v.bos.has_value();
    const bool add_eos = v.add_eos.value_or(false) && v.eos.has_value();
    if (llama) {
        json normalizers = json::array();
        if (v.add_space_prefix) normalizers.push_back({{"type", "Prepend"}, {"prepend", kMetaspace}});
        normalizers.push_back({{"type", "Replace"}, {"pattern", string_pattern(" ")}, {"content", kMetaspace}});
        tj["normalizer"] = {{"type", "Sequence"}, {"normalizers", normalizers}};
        tj["pre_tokenizer"] = nullptr;
        tj["post_processor"] = template_processor(v, add_bos, add_eos);
        json decoders = json::array({{{"type", "Replace"}, {"pattern", string_pattern(kMetaspace)}, {"content", " "}},
                                     {{"type", "ByteFallback"}}, {{"type", "Fuse"}}});
        if (v.add_space_prefix) decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
        tj["decoder"] = {{"type", "Sequence"}, {"decoders", decoders}};
        model["unk_token"] = v.unk ? json(v.tokens[*v.unk]) : json(nullptr);
        model["fuse_unk"] = true;
        model["byte_fallback"] = true;
        model["merges"] = merges_from_scores(v, ids);
    } else {
        auto byte_level = [](bool trim_offsets, bool use_regex) {
            return json{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", trim_offsets}, {"use_regex", use_regex}};
        };
        auto split = [](const char* regex) {
            return json{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}};
        };
        if (v.pre == "qwen2") {  // Qwen2, Qwen2.5 and Qwen3 (llama.cpp's converter names them all qwen2)
            tj["normalizer"] = {{"type", "NFC"}};
            tj["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", json::array({split(kQwen2Regex), byte_level(false, false)})}};
        } else if (v.pre == "llama-bpe") {
            tj["normalizer"] = nullptr;
            tj["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", json::array({split(kLlama3Regex), byte_level(true, false)})}};
            model["ignore_merges"] = true;  // as Llama 3's tokenizer.json (and llama.cpp's llama-bpe) has it
        } else if (v.pre == "gpt-4o") {  // gpt-oss
            tj["normalizer"] = nullptr;
            tj["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", json::array({split(kGpt4oRegex), byte_level(true, false)})}};
            model["ignore_merges"] = true;  // as gpt-oss's tokenizer.json has it
        } else if (v.pre == "deepseek-v3") {
            tj["normalizer"] = {{"type", "Sequence"}, {"normalizers", json::array()}};
            json steps = json::array();
            for (const char* re : kDeepSeek3Regexes) steps.push_back(split(re));
            steps.push_back(byte_level(true, false));
            tj["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", std::move(steps)}};
        } else if (v.pre == "gpt-2" || v.pre == "olmo" || v.pre == "default") {
            tj["normalizer"] = nullptr;
            tj["pre_tokenizer"] = byte_level(true, true);
        } else {
            return error("GGUF metadata: tokenizer.ggml.pre '" + v.pre +
                         "' is not supported (qwen2, llama-bpe, gpt-4o, deepseek-v3, gpt-2, olmo, default)");
        }
        tj["post_processor"] = add_bos || add_eos ? template_processor(v, add_bos, add_eos) : byte_level(true, false);
        tj["decoder"] = byte_level(true, true);
        model["unk_token"] = nullptr;
        model["fuse_unk"] = false;
        model["byte_fallback"] = false;
        json merges = json::array();
        for (size_t i = 0; i < v.merges.size(); ++i) {
            const std::string& m = v.merges[i];
            const size_t sp = m.find(' ');
            if (sp == std::string::npos || sp == 0 || sp + 1 == m.size() || m.find(' ', sp + 1) != std::string::npos)
                return error("GGUF metadata: tokenizer.ggml.merges entry " + std::to_string(i) + " ('" + m +
                             "') is not two tokens separated by one space");
            merges.push_back(json::array({m.substr(0, sp), m.substr(sp + 1)}));
        }
        model["merges"] = std::move(merges);
    }
    tj["model"] = std::move(model);
    return tj;
}

json build_tokenizer_config(const GgufVocab& v) {
    const bool llama = v.model == "llama";
    auto name = [&](const std::optional<int32_t>& id) { return id ? json(v.tokens[*id]) : json(nullptr); };
    json cfg = {{"add_bos_token", v.add_bos.value_or(llama) && v.bos.has_value()},
                {"add_eos_token", v.add_eos.value_or(false) && v.eos.has_value()},
                {"bos_token", name(v.bos)},
                {"eos_token", name(v.eos)},
                {"unk_token", name(v.unk)},
                {"pad_token", name(v.pad)},
                {"clean_up_tokenization_spaces", false}};
    if (!v.chat_template.empty()) cfg["chat_template"] = v.chat_template;
    return cfg;
}

}  // namespace

bool gguf_has_tokenizer(const json& metadata) {
    auto it = metadata.find("tokenizer.ggml.model");
    return it != metadata.end() && !(it->is_string() && it->get<std::string>() == "none");
}

Result<HfTokenizerFiles> hf_tokenizer_from_gguf(const json& metadata) {
    auto vocab = read_vocab(metadata);
    if (!vocab) return vocab.status();
    auto tj = build_tokenizer_json(vocab.value());
    if (!tj) return tj.status();
    HfTokenizerFiles files;
    try {
        files.tokenizer_json = tj.value().dump();
        files.tokenizer_config_json = build_tokenizer_config(vocab.value()).dump(2);
    } catch (const json::exception&) {  // dump() refuses strings that are not UTF-8
        return error("GGUF metadata: the tokenizer has a token or template that is not valid UTF-8");
    }
    files.chat_template = vocab->chat_template;
    return files;
}

}  // namespace colibri::tools
