#include "engine/text/tokenizer/byte_level.h"

#include <array>
#include <cstdint>

#include "engine/text/utf8.h"

namespace colibri::tokenizer_parts {

namespace {

struct ByteAlphabet {
    std::array<uint32_t, 256> byte_to_cp{};
    std::array<std::string, 256> byte_to_utf8;
    std::array<int16_t, 512> cp_to_byte{};
    ByteAlphabet() {
        cp_to_byte.fill(-1);
        std::array<bool, 256> direct{};
        for (int b = '!'; b <= '~'; ++b) direct[b] = true;
        for (int b = 0xA1; b <= 0xAC; ++b) direct[b] = true;
        for (int b = 0xAE; b <= 0xFF; ++b) direct[b] = true;
        uint32_t n = 0;
        for (int b = 0; b < 256; ++b) byte_to_cp[b] = direct[b] ? static_cast<uint32_t>(b) : 256 + n++;
        for (int b = 0; b < 256; ++b) {
            append_utf8(byte_to_utf8[b], byte_to_cp[b]);
            cp_to_byte[byte_to_cp[b]] = static_cast<int16_t>(b);
        }
    }
};
const ByteAlphabet& byte_alphabet() {
    static const ByteAlphabet a;
    return a;
}

}  // namespace

std::string byte_level_encode(std::string_view s) {
    const auto& a = byte_alphabet();
    std::string out;
    out.reserve(s.size() * 2);
    for (unsigned char c : s) out += a.byte_to_utf8[c];
    return out;
}

// Appends the bytes a byte-level token stands for; a token with a character outside the alphabet
// stands for its own UTF-8 (as the Rust ByteLevel decoder does).
void byte_level_decode_token(std::string_view t, std::string& out) {
    const auto& a = byte_alphabet();
    std::string bytes;
    bytes.reserve(t.size());
    for (size_t i = 0; i < t.size();) {
        size_t n;
        const uint32_t cp = utf8_decode_at(t, i, &n);
        if (cp >= a.cp_to_byte.size() || a.cp_to_byte[cp] < 0) {
            out.append(t);
            return;
        }
        bytes += static_cast<char>(a.cp_to_byte[cp]);
        i += n;
    }
    out += bytes;
}

}  // namespace colibri::tokenizer_parts
