// Tokens per second: the one rate every front end reports (`colibri chat`, the server's timings, `colibri bench`,
// the Studio's chat and kernel comparison).
//
// A rate counts the forward passes the timed stretch holds. For decode that is one pass per generated token
// evaluated: a reply's first token is sampled from the prompt's logits, so its time belongs to the prompt, and a
// reply of N tokens timed from its first token to its last decodes N - 1 (N when the caller also evaluates the
// last one, as the Studio does for its trace; bench decodes `decode_tokens` single steps from BOS).
#pragma once
#include <cstdint>

namespace colibri {

struct TokenRate {
    uint64_t tokens = 0;  // forward passes of single tokens (decode) or prompt tokens evaluated (prompt)
    double seconds = 0.0;
    double per_second() const { return seconds > 0.0 ? static_cast<double>(tokens) / seconds : 0.0; }
    // A reply of `generated` tokens timed from its first token to its last, its last not evaluated.
    static TokenRate of_reply(uint64_t generated, double seconds) { return {generated > 0 ? generated - 1 : 0, seconds}; }
};

}  // namespace colibri
