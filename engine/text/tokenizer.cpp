// Hugging Face tokenizer.json, re-implemented with the semantics of the Rust `tokenizers` crate:
// added tokens are split out of the raw text first (leftmost-longest, with lstrip/rstrip/single_word),
// each remaining piece is normalized, pre-tokenized into words and each word is BPE-merged; the
// post-processor adds special tokens; decoding runs the decoder chain over the pieces.
//
// Regexes in tokenizer.json are written for Oniguruma; they are compiled with PCRE2 (UTF + UCP, JIT)
// after translating the few constructs whose meaning differs (\s, \h). Unicode normalisation comes from
// utf8proc. Offsets are not tracked: only ids and text are produced.
//
// This file is the pipeline; each stage is a file pair in engine/text/tokenizer/: added_tokens, normalizers,
// pre_tokenizers, bpe (the model), post_processors, decoders, with regex and pattern (what the stages match with),
// byte_level, unicode (character classes), json_reader (tokenizer.json, vocab and merges streamed) and parse_support.
#include "engine/text/tokenizer.h"

#include <algorithm>
#include <initializer_list>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include <nlohmann/json.hpp>

#include "engine/base/json_depth.h"
#include "engine/text/tokenizer/added_tokens.h"
#include "engine/text/tokenizer/bpe.h"
#include "engine/text/tokenizer/decoders.h"
#include "engine/text/tokenizer/json_reader.h"
#include "engine/text/tokenizer/normalizers.h"
#include "engine/text/tokenizer/parse_support.h"
#include "engine/text/tokenizer/post_processors.h"
#include "engine/text/tokenizer/pre_tokenizers.h"
#include "engine/text/tokenizer/regex.h"
#include "engine/text/utf8.h"

namespace colibri {

using namespace tokenizer_parts;

namespace {

std::optional<std::string> token_name(const json& cfg, const char* key) {
    auto it = cfg.find(key);
    if (it == cfg.end()) return std::nullopt;
    if (it->is_string()) return it->get<std::string>();
    if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
    return std::nullopt;
}

}  // namespace

struct Tokenizer::Impl {
    Bpe bpe;
    std::vector<AddedToken> added;
    std::unordered_map<int32_t, int32_t> added_by_id;  // id -> index into `added`
    StrMap<int32_t> added_by_content;                  // content -> id
    Trie trie_raw, trie_normalized;
    std::optional<Normalizer> normalizer;
    std::optional<PreTokenizer> pre_tokenizer;
    std::optional<PostProcessor> post_processor;
    std::optional<Decoder> decoder;
    Kind kind = Kind::SentencePieceBpe;
    int32_t vocab_size = 0;
    int32_t bos = -1, eos = -1;
    bool clean_up_spaces = false;
    bool cfg_add_bos = false, cfg_add_eos = false;
    bool cfg_names_specials = false;  // tokenizer_config.json has add_bos_token or add_eos_token

    // Loading, in from_json's order; the stages' parsers throw LoadError.
    Status read_tokenizer(std::string_view tokenizer_json);
    // The "added_tokens" list: their ids and flags, and the tries that find them in raw and in normalized text.
    // Returns the largest id, of them and of the vocabulary (max_id).
    int32_t read_added_tokens(const json& list, size_t json_bytes, int32_t max_id);
    // tokenizer_config.json (may be empty): bos/eos and the flags that decide what encode(add_special) adds.
    Status read_config(std::string_view config_json);

    int32_t token_id(std::string_view piece) const {
        auto it = added_by_content.find(piece);
        if (it != added_by_content.end()) return it->second;
        return bpe.find(piece);
    }

    const std::string* piece(int32_t id) const {
        if (id < 0) return nullptr;
        if (auto it = added_by_id.find(id); it != added_by_id.end()) return &added[it->second].content;
        if (static_cast<size_t>(id) < bpe.has_id.size() && bpe.has_id[id]) return &bpe.vocab_r[id];
        return nullptr;
    }

    bool is_special(const std::string& content) const {
        auto it = added_by_content.find(content);
        if (it == added_by_content.end()) return false;
        auto a = added_by_id.find(it->second);
        return a != added_by_id.end() && added[a->second].special;
    }

    void encode_text(std::string_view text, std::vector<int32_t>& ids) const {
        std::vector<Piece> raw, norm;
        find_added(text, trie_raw, added, raw);
        std::vector<Word> words;
        for (const auto& p : raw) {
            if (p.token >= 0) {
                ids.push_back(added[p.token].id);
                continue;
            }
            if (p.e <= p.b) continue;
            std::string s(text.substr(p.b, p.e - p.b));
            if (normalizer) normalizer->apply(s);
            if (s.empty()) continue;
            norm.clear();
            find_added(s, trie_normalized, added, norm);
            for (const auto& q : norm) {
                if (q.token >= 0) {
                    ids.push_back(added[q.token].id);
                    continue;
                }
                if (q.e <= q.b) continue;
                words.clear();
                words.push_back({s.substr(q.b, q.e - q.b), p.b == 0 && q.b == 0});
                if (pre_tokenizer) pre_tokenizer->apply(words);
                for (const auto& w : words) bpe.tokenize(w.s, ids);
            }
        }
    }
};

Status Tokenizer::Impl::read_tokenizer(std::string_view tokenizer_json) {
    if (tokenizer_json.find_first_not_of(" \t\r\n") == std::string_view::npos) return error("tokenizer.json is empty");
    if (const std::string why = json_text_problem(tokenizer_json); !why.empty()) return error("tokenizer.json " + why);
    StreamedModel streamed;
    json root;
    std::string parse_error;
    if (!read_tokenizer_json(tokenizer_json, &root, &streamed, &parse_error))
        return error(std::string("tokenizer.json is not valid JSON: ") + parse_error);
    if (!root.is_object()) return error("tokenizer.json: the top level is not an object");
    auto mit = root.find("model");
    if (mit == root.end() || !mit->is_object()) return error("tokenizer.json has no 'model' object");
    parse_bpe(*mit, streamed, bpe);

    auto optional_part = [&](const char* key) -> const json* {
        auto it = root.find(key);
        if (it == root.end() || it->is_null()) return nullptr;
        return &*it;
    };
    if (const json* n = optional_part("normalizer")) normalizer = parse_normalizer(*n);
    if (const json* p = optional_part("pre_tokenizer")) pre_tokenizer = parse_pre_tokenizer(*p);
    if (const json* p = optional_part("post_processor")) post_processor = parse_post_processor(*p);
    if (const json* d = optional_part("decoder")) decoder = parse_decoder(*d);

    int32_t max_id = static_cast<int32_t>(bpe.vocab_r.size()) - 1;
    if (const json* at = optional_part("added_tokens")) max_id = read_added_tokens(*at, tokenizer_json.size(), max_id);
    vocab_size = max_id + 1;

    const bool byte_level = (pre_tokenizer && pre_tokenizer->contains(PreTokenizer::Type::ByteLevel)) ||
                            (decoder && decoder->contains(Decoder::Type::ByteLevel));
    kind = byte_level ? Kind::ByteLevelBpe : Kind::SentencePieceBpe;
    return Status::ok();
}

int32_t Tokenizer::Impl::read_added_tokens(const json& list, size_t json_bytes, int32_t max_id) {
    if (!list.is_array()) fail("'added_tokens' must be an array");
    RegexBudget budget(json_bytes);  // normalising the added tokens runs the normalizer's regexes
    for (const auto& e : list) {
        if (!e.is_object()) fail("an added token is not an object");
        AddedToken t;
        if (!e.contains("id")) fail("an added token has no id");
        t.id = json_id(e["id"], "added token");
        t.content = get_string(e, "content", "");
        if (t.content.empty()) continue;
        t.single_word = get_bool(e, "single_word", false);
        t.lstrip = get_bool(e, "lstrip", false);
        t.rstrip = get_bool(e, "rstrip", false);
        t.special = get_bool(e, "special", false);
        t.normalized = get_bool(e, "normalized", !t.special);
        if (auto old = added_by_id.find(t.id); old != added_by_id.end()) {
            added[old->second] = t;
        } else {
            added_by_id[t.id] = static_cast<int32_t>(added.size());
            added.push_back(t);
        }
        max_id = std::max(max_id, t.id);
    }
    if (max_id >= 0 && static_cast<size_t>(max_id) > bpe.vocab_r.size() + 4 * added.size() + (1u << 20))
        fail("added token ids are far from the vocabulary (largest id " + std::to_string(max_id) + " for " +
             std::to_string(bpe.vocab_r.size()) + " pieces)");
    for (size_t i = 0; i < added.size(); ++i) {
        const AddedToken& t = added[i];
        added_by_content[t.content] = t.id;
        if (t.normalized) {
            std::string n = t.content;
            if (normalizer) normalizer->apply(n);
            trie_normalized.add(n, static_cast<int32_t>(i));
        } else {
            trie_raw.add(t.content, static_cast<int32_t>(i));
        }
    }
    return max_id;
}

Status Tokenizer::Impl::read_config(std::string_view config_json) {
    json cfg = json::object();
    if (config_json.find_first_not_of(" \t\r\n") != std::string_view::npos) {
        if (const std::string why = json_text_problem(config_json); !why.empty()) return error("tokenizer_config.json " + why);
        try {
            cfg = json::parse(config_json.begin(), config_json.end());
        } catch (const json::parse_error& e) {
            return error(std::string("tokenizer_config.json is not valid JSON: ") + e.what());
        }
        if (!cfg.is_object()) return error("tokenizer_config.json: the top level is not an object");
    }
    // bos/eos: the config's bos_token/eos_token (an explicit null means none); without one, a
    // well-known name among the added tokens (a plain vocabulary piece such as Qwen's "<s>" is no BOS).
    auto resolve = [&](const char* key, std::initializer_list<const char*> known) {
        if (auto it = cfg.find(key); it != cfg.end() && it->is_null()) return int32_t{-1};
        if (auto name = token_name(cfg, key)) {
            const int32_t id = token_id(*name);
            if (id >= 0) return id;
        }
        for (const char* k : known)
            if (auto it = added_by_content.find(std::string_view(k)); it != added_by_content.end()) return it->second;
        return int32_t{-1};
    };
    bos = resolve("bos_token", {"<s>", "<|begin_of_text|>", "<bos>"});
    eos = resolve("eos_token", {"</s>", "<|endoftext|>", "<|end_of_text|>", "<eos>"});
    auto cfg_bool = [&](const char* key) {
        auto it = cfg.find(key);
        return it != cfg.end() && it->is_boolean() && it->get<bool>();
    };
    clean_up_spaces = cfg_bool("clean_up_tokenization_spaces");
    cfg_add_bos = cfg_bool("add_bos_token");
    cfg_add_eos = cfg_bool("add_eos_token");
    cfg_names_specials = cfg.contains("add_bos_token") || cfg.contains("add_eos_token");
    return Status::ok();
}

Tokenizer::Tokenizer() : impl_(std::make_unique<Impl>()) {}
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

Result<Tokenizer> Tokenizer::from_json(std::string_view tokenizer_json, std::string_view tokenizer_config_json) {
    Tokenizer tok;
    Impl& im = *tok.impl_;
    std::string stage = "tokenizer.json";
    try {
        COLIBRI_TRY(im.read_tokenizer(tokenizer_json));
        stage = "tokenizer_config.json";
        COLIBRI_TRY(im.read_config(tokenizer_config_json));
    } catch (const LoadError& e) {
        return error(stage + ": " + e.what());
    } catch (const std::exception& e) {
        return error(stage + ": " + e.what());
    }
    return tok;
}

Result<std::vector<int32_t>> Tokenizer::encode(std::string_view text, bool add_special) const {
    std::vector<int32_t> ids;
    if (!impl_) return ids;
    const Impl& im = *impl_;
    try {
        RegexBudget budget(text.size());
        if (is_valid_utf8(text)) {
            im.encode_text(text, ids);
        } else {
            const std::string clean = utf8_lossy(text);
            im.encode_text(clean, ids);
        }
        if (add_special) {
            if (im.post_processor && !im.cfg_names_specials) {
                im.post_processor->apply(ids);
            } else {
                // As transformers: a config that names add_bos_token / add_eos_token (DeepSeek-V3's does, over a
                // ByteLevel post-processor) or a file without a post-processor gets "[bos] $A [eos]" from the flags.
                if (im.cfg_add_bos && im.bos >= 0) ids.insert(ids.begin(), im.bos);
                if (im.cfg_add_eos && im.eos >= 0) ids.push_back(im.eos);
            }
        }
    } catch (const LimitError& e) {
        return error(std::string("tokenizer: ") + e.what());
    }
    return ids;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
    if (!impl_) return {};
    const Impl& im = *impl_;
    std::vector<std::string> toks;
    toks.reserve(ids.size());
    for (int32_t id : ids) {
        const std::string* p = im.piece(id);
        if (!p) continue;  // unknown ids are dropped, as HF does
        if (skip_special && im.is_special(*p)) continue;
        toks.push_back(*p);
    }
    std::string out;
    if (im.decoder) {
        im.decoder->chain(toks, false);
        for (const auto& t : toks) out += t;
    } else {
        for (size_t i = 0; i < toks.size(); ++i) {
            if (i) out += ' ';
            out += toks[i];
        }
    }
    if (im.clean_up_spaces) out = cleanup_spaces(std::move(out));
    return out;
}

std::string Tokenizer::piece(int32_t id) const {
    if (!impl_) return {};
    const std::string* p = impl_->piece(id);
    return p ? *p : std::string();
}

std::string Tokenizer::decode_token_bytes(int32_t id) const {
    if (!impl_) return {};
    const std::string* p = impl_->piece(id);
    if (!p) return {};
    if (!impl_->decoder) return *p;
    std::vector<std::string> toks{*p};
    impl_->decoder->chain(toks, true);
    std::string out;
    for (const auto& t : toks) out += t;
    return out;
}

Tokenizer::Kind Tokenizer::kind() const { return impl_ ? impl_->kind : Kind::SentencePieceBpe; }
int32_t Tokenizer::vocab_size() const { return impl_ ? impl_->vocab_size : 0; }
int32_t Tokenizer::bos_id() const { return impl_ ? impl_->bos : -1; }
int32_t Tokenizer::eos_id() const { return impl_ ? impl_->eos : -1; }
int32_t Tokenizer::token_id(std::string_view piece) const { return impl_ ? impl_->token_id(piece) : -1; }

std::vector<int32_t> Tokenizer::end_of_turn_ids() const {
    std::vector<int32_t> ids;
    auto add = [&ids](int32_t id) {
        if (id >= 0 && std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
    };
    add(eos_id());
    for (const char* piece : {"<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|return|>", "<|call|>", "<|user|>", "<|observation|>"})
        add(token_id(piece));
    return ids;
}

}  // namespace colibri
