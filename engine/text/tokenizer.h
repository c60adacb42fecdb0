// Tokenizers loaded from a Hugging Face tokenizer.json: byte-level BPE (GPT-2 / Qwen / OLMoE style) and
// SentencePiece-style BPE with byte fallback (Llama / Mistral style), with added and special tokens.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/base/status.h"

namespace colibri {

class Tokenizer {
public:
    enum class Kind { ByteLevelBpe, SentencePieceBpe };

    // Parse tokenizer.json text. tokenizer_config_json (may be empty) supplies bos/eos names and add_bos_token.
    static Result<Tokenizer> from_json(std::string_view tokenizer_json, std::string_view tokenizer_config_json = {});

    // Encode text. Special/added tokens in the text are matched as in HF (split_special_tokens = false).
    // add_special adds what the tokenizer's post-processor adds (e.g. BOS for Llama), as HF encode() does by default;
    // as in transformers, tokenizer_config.json's add_bos_token / add_eos_token, where present, decide instead.
    // Fails (never returns a shortened encoding) when the tokenizer's regexes need more work on this text than
    // its size allows, or its normalizer or post-processor would grow it without bound (a hostile tokenizer.json).
    Result<std::vector<int32_t>> encode(std::string_view text, bool add_special = true) const;
    // Decode ids to UTF-8 text (HF decode with skip_special_tokens = false unless asked).
    std::string decode(const std::vector<int32_t>& ids, bool skip_special = false) const;
    // The raw vocabulary piece for an id (as stored in tokenizer.json), empty if out of range.
    std::string piece(int32_t id) const;
    // Text of one token when streamed after previous tokens (bytes may be an incomplete UTF-8 sequence).
    std::string decode_token_bytes(int32_t id) const;

    Kind kind() const;
    int32_t vocab_size() const;     // largest id + 1, including added tokens
    int32_t bos_id() const;         // -1 when none
    int32_t eos_id() const;         // -1 when none
    int32_t token_id(std::string_view piece) const;  // -1 when unknown
    // Tokens after which a chat reply is over: eos, then those chat formats end a turn with (ChatML <|im_end|>,
    // <|endoftext|>, Llama 3 <|eot_id|>, gpt-oss harmony <|return|> and <|call|>, GLM's next-turn <|user|> and
    // <|observation|>), each once, those the vocabulary has. harmony's <|end|> is not one: a reply goes on after it.
    std::vector<int32_t> end_of_turn_ids() const;

    Tokenizer();
    ~Tokenizer();
    Tokenizer(Tokenizer&&) noexcept;
    Tokenizer& operator=(Tokenizer&&) noexcept;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace colibri
