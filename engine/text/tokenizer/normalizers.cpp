#include "engine/text/tokenizer/normalizers.h"

#include <cstdlib>

#include <utf8proc.h>

#include "engine/text/tokenizer/byte_level.h"
#include "engine/text/tokenizer/unicode.h"
#include "engine/text/utf8.h"

namespace colibri::tokenizer_parts {

namespace {

std::string utf8proc_transform(const std::string& s, int options) {
    utf8proc_uint8_t* dst = nullptr;
    const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                            static_cast<utf8proc_ssize_t>(s.size()), &dst,
                                            static_cast<utf8proc_option_t>(options));
    if (n < 0 || !dst) {
        std::free(dst);
        return s;
    }
    std::string out(reinterpret_cast<const char*>(dst), static_cast<size_t>(n));
    std::free(dst);
    return out;
}

}  // namespace

void Normalizer::apply(std::string& s, size_t max_bytes) const {
    switch (type) {
        case Type::NFC:
            if (!is_ascii(s)) s = utf8proc_transform(s, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
            break;
        case Type::NFD:
            if (!is_ascii(s)) s = utf8proc_transform(s, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE);
            break;
        case Type::NFKC:
            if (!is_ascii(s)) s = utf8proc_transform(s, UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
            break;
        case Type::NFKD:
            if (!is_ascii(s)) s = utf8proc_transform(s, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
            break;
        case Type::Lowercase: {
            std::string out;
            out.reserve(s.size());
            for (size_t i = 0; i < s.size();) {
                size_t n;
                const uint32_t cp = utf8_decode_at(s, i, &n);
                if (cp == 0x130) out += "i\xCC\x87";  // the one unconditional multi-character lowercase
                else append_utf8(out, static_cast<uint32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))));
                i += n;
            }
            s.swap(out);
            break;
        }
        case Type::Strip: {
            size_t b = 0, e = s.size();
            if (left) {
                while (b < e) {
                    size_t n;
                    if (!is_white_space(utf8_decode_at(s, b, &n))) break;
                    b += n;
                }
            }
            if (right) {
                while (e > b) {
                    const size_t st = utf8_char_start(s, e - 1, b);
                    size_t n;
                    if (!is_white_space(utf8_decode_at(s, st, &n))) break;
                    e = st;
                }
            }
            s = s.substr(b, e - b);
            break;
        }
        case Type::StripAccents: {
            std::string out;
            out.reserve(s.size());
            for (size_t i = 0; i < s.size();) {
                size_t n;
                const uint32_t cp = utf8_decode_at(s, i, &n);
                if (!is_mark(cp)) out.append(s, i, n);
                i += n;
            }
            s.swap(out);
            break;
        }
        case Type::Replace: {
            std::vector<Seg> segs;
            pattern.find_matches(s, segs);
            std::string out;
            out.reserve(s.size());
            for (const auto& g : segs) {
                if (g.m) out += content;
                else out.append(s, g.b, g.e - g.b);
                if (out.size() > max_bytes) throw LimitError("the normalizer's Replace grows the text past its limit");
            }
            s.swap(out);
            break;
        }
        case Type::Prepend:
            if (!s.empty()) s.insert(0, content);
            break;
        case Type::ByteLevel:
            s = byte_level_encode(s);
            break;
        case Type::Sequence:
            for (const auto& c : children) c.apply(s, max_bytes);
            break;
    }
    if (s.size() > max_bytes) throw LimitError("the normalizer grows the text past its limit (64 times its size)");
}

Normalizer parse_normalizer(const json& j, int depth) {
    if (depth > kMaxComponentDepth) too_deep("normalizer");
    const std::string t = type_of(j, "normalizer");
    Normalizer n;
    using T = Normalizer::Type;
    if (t == "NFC") n.type = T::NFC;
    else if (t == "NFD") n.type = T::NFD;
    else if (t == "NFKC") n.type = T::NFKC;
    else if (t == "NFKD") n.type = T::NFKD;
    else if (t == "Lowercase") n.type = T::Lowercase;
    else if (t == "StripAccents") n.type = T::StripAccents;
    else if (t == "ByteLevel") n.type = T::ByteLevel;
    else if (t == "Strip") {
        n.type = T::Strip;
        n.left = get_bool(j, "strip_left", true);
        n.right = get_bool(j, "strip_right", true);
    } else if (t == "Replace") {
        n.type = T::Replace;
        if (!j.contains("pattern")) fail("Replace normalizer needs a pattern");
        n.pattern = parse_pattern(j["pattern"], "Replace normalizer");
        n.content = get_string(j, "content", "");
    } else if (t == "Prepend") {
        n.type = T::Prepend;
        n.content = get_string(j, "prepend", "");
    } else if (t == "Sequence") {
        n.type = T::Sequence;
        for (const auto& c : get_array(j, "normalizers", "Sequence normalizer")) n.children.push_back(parse_normalizer(c, depth + 1));
    } else {
        fail("unsupported normalizer type '" + t + "'");
    }
    return n;
}

}  // namespace colibri::tokenizer_parts
