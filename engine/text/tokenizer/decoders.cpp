#include "engine/text/tokenizer/decoders.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "engine/text/tokenizer/byte_level.h"
#include "engine/text/utf8.h"

namespace colibri::tokenizer_parts {

std::string cleanup_spaces(std::string s) {
    static const std::pair<const char*, const char*> kRules[] = {
        {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
        {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
    for (const auto& [from, to] : kRules) {
        if (s.find(from) == std::string::npos) continue;
        const size_t fl = std::strlen(from);
        std::string out;  // rebuilt in one pass: replacing in place moves the tail once per match
        out.reserve(s.size());
        size_t pos = 0;
        for (size_t f; (f = s.find(from, pos)) != std::string::npos; pos = f + fl) {
            out.append(s, pos, f - pos);
            out += to;
        }
        out.append(s, pos, std::string::npos);
        s.swap(out);
    }
    return s;
}

void Decoder::chain(std::vector<std::string>& toks, bool stream) const {
    switch (type) {
        case Type::ByteLevel: decode_byte_level(toks, stream); break;
        case Type::Metaspace: decode_metaspace(toks, stream); break;
        case Type::Replace: decode_replace(toks); break;
        case Type::ByteFallback: decode_byte_fallback(toks, stream); break;
        case Type::Fuse: {
            std::string all;
            for (const auto& t : toks) all += t;
            toks.assign(1, all);
            break;
        }
        case Type::Strip:
            if (!stream) decode_strip(toks);
            break;
        case Type::BPE: decode_bpe_suffix(toks, stream); break;
        case Type::WordPiece: decode_word_piece(toks, stream); break;
        case Type::Sequence:
            for (const auto& c : children) c.chain(toks, stream);
            break;
    }
}

void Decoder::decode_byte_level(std::vector<std::string>& toks, bool stream) const {
    std::string bytes;
    for (const auto& t : toks) byte_level_decode_token(t, bytes);
    toks.assign(1, stream ? bytes : utf8_lossy(bytes));
}

void Decoder::decode_metaspace(std::vector<std::string>& toks, bool stream) const {
    for (size_t i = 0; i < toks.size(); ++i) {
        std::string out;
        const std::string& t = toks[i];
        for (size_t k = 0; k < t.size();) {
            size_t n;
            const uint32_t cp = utf8_decode_at(t, k, &n);
            if (cp == replacement_cp) {
                if (!(i == 0 && !stream && prepend != Prepend::Never)) out += ' ';
            } else {
                out.append(t, k, n);
            }
            k += n;
        }
        toks[i].swap(out);
    }
}

void Decoder::decode_replace(std::vector<std::string>& toks) const {
    std::vector<Seg> segs;
    for (auto& t : toks) {
        segs.clear();
        pattern.find_matches(t, segs);
        std::string out;
        for (const auto& g : segs) {
            if (g.m) out += content;
            else out.append(t, g.b, g.e - g.b);
        }
        t.swap(out);
    }
}

namespace {

// The byte a byte-fallback piece "<0xAB>" stands for, -1 for any other piece.
int fallback_byte(const std::string& t) {
    if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
    auto hex = [](char c) {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    };
    const int h = hex(t[3]), l = hex(t[4]);
    if (h >= 0 && l >= 0) return h * 16 + l;
    if (t[3] == '+' && l >= 0) return l;  // u8::from_str_radix accepts a sign
    return -1;
}

}  // namespace

void Decoder::decode_byte_fallback(std::vector<std::string>& toks, bool stream) const {
    std::vector<std::string> out;
    out.reserve(toks.size());
    std::string pending;
    auto flush = [&] {
        if (pending.empty()) return;
        if (stream || is_valid_utf8(pending)) out.push_back(pending);
        else
            for (size_t k = 0; k < pending.size(); ++k) out.emplace_back(kUtf8Replacement);
        pending.clear();
    };
    for (auto& t : toks) {
        const int byte = fallback_byte(t);
        if (byte >= 0) {
            pending += static_cast<char>(byte);
        } else {
            flush();
            out.push_back(std::move(t));
        }
    }
    flush();
    toks.swap(out);
}

void Decoder::decode_strip(std::vector<std::string>& toks) const {
    for (auto& t : toks) {
        std::vector<std::pair<size_t, size_t>> chars;  // (offset, length)
        for (size_t k = 0; k < t.size();) {
            size_t n;
            utf8_decode_at(t, k, &n);
            chars.emplace_back(k, n);
            k += n;
        }
        size_t start_cut = 0;
        for (size_t k = 0; k < start && k < chars.size(); ++k) {
            size_t n;
            if (utf8_decode_at(t, chars[k].first, &n) == strip_cp) start_cut = k + 1;
            else break;
        }
        size_t stop_cut = chars.size();
        for (size_t k = 0; k < stop && k < chars.size(); ++k) {
            const size_t idx = chars.size() - k - 1;
            size_t n;
            if (utf8_decode_at(t, chars[idx].first, &n) == strip_cp) stop_cut = idx;
            else break;
        }
        if (stop_cut <= start_cut) {
            t.clear();
        } else {
            const size_t b = start_cut < chars.size() ? chars[start_cut].first : t.size();
            const size_t e = stop_cut < chars.size() ? chars[stop_cut].first : t.size();
            t = t.substr(b, e - b);
        }
    }
}

void Decoder::decode_bpe_suffix(std::vector<std::string>& toks, bool stream) const {
    for (size_t i = 0; i < toks.size(); ++i) {
        std::string& t = toks[i];
        const std::string with = (i + 1 == toks.size() && !stream) ? "" : " ";
        if (suffix.empty()) continue;
        size_t pos = 0;
        while ((pos = t.find(suffix, pos)) != std::string::npos) {
            t.replace(pos, suffix.size(), with);
            pos += with.size();
        }
    }
}

void Decoder::decode_word_piece(std::vector<std::string>& toks, bool stream) const {
    for (size_t i = 0; i < toks.size(); ++i) {
        std::string& t = toks[i];
        if (i != 0 || stream) {
            if (!prefix.empty() && t.compare(0, prefix.size(), prefix) == 0) t.erase(0, prefix.size());
            else t.insert(0, " ");
        }
        if (cleanup) t = cleanup_spaces(t);
    }
}

Decoder parse_decoder(const json& j, int depth) {
    if (depth > kMaxComponentDepth) too_deep("decoder");
    const std::string t = type_of(j, "decoder");
    Decoder d;
    using T = Decoder::Type;
    if (t == "ByteLevel") {
        d.type = T::ByteLevel;
    } else if (t == "Metaspace") {
        d.type = T::Metaspace;
        d.replacement_cp = single_char(get_string(j, "replacement", "\xE2\x96\x81"), "Metaspace replacement");
        d.prepend = parse_prepend_scheme(j);
    } else if (t == "Replace") {
        d.type = T::Replace;
        if (!j.contains("pattern")) fail("Replace decoder needs a pattern");
        d.pattern = parse_pattern(j["pattern"], "Replace decoder");
        // Decoding has no error to give (it streams tokens as they come), so it runs no regex: real tokenizers
        // replace a String ("▁" by " ").
        if (d.pattern.is_regex) fail("unsupported: a Replace decoder with a Regex pattern (only String)");
        d.content = get_string(j, "content", "");
    } else if (t == "ByteFallback") {
        d.type = T::ByteFallback;
    } else if (t == "Fuse") {
        d.type = T::Fuse;
    } else if (t == "Strip") {
        d.type = T::Strip;
        d.strip_cp = single_char(get_string(j, "content", " "), "Strip content");
        const auto num = [&](const char* k) -> size_t {
            if (!j.contains(k) || j[k].is_null()) return 0;
            if (!j[k].is_number_unsigned() && !j[k].is_number_integer()) fail(std::string("Strip '") + k + "' must be a number");
            return static_cast<size_t>(std::max<int64_t>(0, j[k].get<int64_t>()));
        };
        d.start = num("start");
        d.stop = num("stop");
    } else if (t == "BPEDecoder") {
        d.type = T::BPE;
        d.suffix = get_string(j, "suffix", "</w>");
    } else if (t == "WordPiece") {
        d.type = T::WordPiece;
        d.prefix = get_string(j, "prefix", "##");
        d.cleanup = get_bool(j, "cleanup", true);
    } else if (t == "Sequence") {
        d.type = T::Sequence;
        for (const auto& c : get_array(j, "decoders", "Sequence decoder")) d.children.push_back(parse_decoder(c, depth + 1));
    } else {
        fail("unsupported decoder type '" + t + "'");
    }
    return d;
}

}  // namespace colibri::tokenizer_parts
