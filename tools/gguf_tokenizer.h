// A GGUF file's tokenizer (llama.cpp's tokenizer.ggml.* keys and tokenizer.chat_template) turned back into the
// Hugging Face files it stands for, so that the .bin stores it exactly as the HF path stores a directory's
// tokenizer.json / tokenizer_config.json and engine/text/tokenizer.cpp reads it unchanged.
//
//   model "llama"  SentencePiece BPE, as transformers' LlamaConverter builds it: the pieces and their scores,
//                  merges derived from the scores (generate_merges: every split of a piece into two pieces,
//                  best score first), byte_fallback, Prepend("▁") + Replace(" " → "▁") normalizer (no Prepend
//                  when tokenizer.ggml.add_space_prefix is false), the Replace/ByteFallback/Fuse/Strip decoder.
//   model "gpt2"   byte-level BPE: tokens and merges as stored; tokenizer.ggml.pre names the pre-tokenizer
//                  (qwen2 for Qwen2/Qwen3, llama-bpe, gpt-4o for gpt-oss, deepseek-v3, or the GPT-2 one for
//                  gpt-2 / olmo / default), which is rebuilt as the normalizer, Split regexes, ByteLevel steps and
//                  ignore_merges of that family's tokenizer.json.
// CONTROL and UNKNOWN tokens become special added tokens, USER_DEFINED ones non-special added tokens;
// bos/eos/unk/pad ids and add_bos_token/add_eos_token go to tokenizer_config.json and the post-processor.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "engine/base/status.h"

namespace colibri::tools {

struct HfTokenizerFiles {
    std::string tokenizer_json;
    std::string tokenizer_config_json;
    std::string chat_template;  // empty when the file has none
};

// Whether the metadata describes a tokenizer at all (tokenizer.ggml.model present and not "none").
bool gguf_has_tokenizer(const nlohmann::json& metadata);

// Builds the HF files. Errors are one line naming the key, e.g. "GGUF metadata: tokenizer.ggml.scores must
// be a list of numbers, one per token".
Result<HfTokenizerFiles> hf_tokenizer_from_gguf(const nlohmann::json& metadata);

}  // namespace colibri::tools
