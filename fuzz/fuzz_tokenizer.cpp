// libFuzzer target: the tokenizer.json loader. The input is tokenizer.json, optionally followed by a NUL and
// tokenizer_config.json, optionally followed by another NUL and a text. Tokenizer::from_json must refuse it
// with one error line, or give a tokenizer that encodes the text and a few fixed strings (ASCII, Unicode,
// special-token markup, invalid UTF-8) into ids inside its vocabulary (post-processor ids aside), and
// decodes them again, whole and token by token.
#include <cstdint>
#include <string_view>

#include "engine/text/tokenizer.h"
#include "fuzz_support.h"

using namespace colibri;
using colibri::fuzz::fuzz_check;

namespace {

// The next NUL-terminated part of the input (the rest when there is no NUL).
std::string_view next_part(std::string_view& rest) {
    const size_t nul = rest.find('\0');
    const std::string_view part = rest.substr(0, nul);
    rest = nul == std::string_view::npos ? std::string_view() : rest.substr(nul + 1);
    return part;
}

void round_trip(const Tokenizer& tok, std::string_view text) {
    for (const bool add_special : {true, false}) {
        const auto encoded = tok.encode(text, add_special);
        if (!encoded) continue;  // a bound of the tokenizer was hit: an error, not a crash
        const std::vector<int32_t>& ids = encoded.value();
        // Ids from the text are vocabulary or added-token ids; a post-processor adds ids from its own table,
        // which tokenizer.json may set to anything (the model refuses those that it lacks).
        for (int32_t id : ids)
            if (id < 0 || (!add_special && id >= tok.vocab_size()))
                fuzz::fuzz_fail("encode made id " + std::to_string(id) + " outside the vocabulary of " + std::to_string(tok.vocab_size()));
        (void)tok.decode(ids);
        (void)tok.decode(ids, true);
        for (int32_t id : ids) (void)tok.decode_token_bytes(id);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view rest(reinterpret_cast<const char*>(data), size);
    const std::string_view json = next_part(rest), config = next_part(rest), text = rest;
    auto loaded = Tokenizer::from_json(json, config);
    if (!loaded) {
        fuzz::check_error_message(loaded.message());
        return 0;
    }
    const Tokenizer& tok = loaded.value();
    fuzz_check(tok.vocab_size() >= 0, "a negative vocabulary size");
    for (const int32_t id : {tok.bos_id(), tok.eos_id()}) fuzz_check(id >= -1 && id < tok.vocab_size(), "bos/eos outside the vocabulary");
    round_trip(tok, text);
    for (const std::string_view fixed : {std::string_view("Hello, world!  Two  spaces,\ttab\nnewline 1234567890"),
                                         std::string_view("ünïcödé 日本語 עברית 🙂👍🏽 e\xcc\x81"),
                                         std::string_view("<|im_start|>user\nhi<|im_end|><s>[INST] x [/INST]</s>"),
                                         std::string_view("\xff\xfe bad \xc3 utf-8 \xed\xa0\x80")})
        round_trip(tok, fixed);
    // Ids outside the vocabulary are dropped, not read.
    (void)tok.decode({-1, tok.vocab_size(), 0x7FFFFFFF});
    (void)tok.decode_token_bytes(tok.vocab_size());
    (void)tok.piece(-1);
    return 0;
}
