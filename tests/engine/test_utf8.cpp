// engine/text/utf8.h, the one UTF-8 decoder of the engine: well-formedness exactly as Unicode defines it (checked
// against a from-the-definition decoder over every 1- to 3-byte sequence and a sweep of 4-byte ones), U+FFFD per
// maximal invalid subpart, decoding and character starts, and Utf8Stream holding back exactly the bytes of an
// unfinished character.
#include <QtTest>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/text/utf8.h"

using colibri::Utf8Stream;

namespace {

// Well-formed UTF-8 by Unicode's definition (table 3-7): decode greedily, then refuse overlong forms, surrogates and
// code points past U+10FFFF.
bool well_formed(const std::string& s) {
    size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        size_t len = 0;
        char32_t cp = 0;
        if (c < 0x80) { ++i; continue; }
        if (c >= 0xC0 && c < 0xE0) { len = 2; cp = c & 0x1F; }
        else if (c >= 0xE0 && c < 0xF0) { len = 3; cp = c & 0x0F; }
        else if (c >= 0xF0 && c < 0xF8) { len = 4; cp = c & 0x07; }
        else return false;
        if (i + len > s.size()) return false;
        for (size_t k = 1; k < len; ++k) {
            const auto cc = static_cast<unsigned char>(s[i + k]);
            if ((cc & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (cc & 0x3F);
        }
        const char32_t min = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += len;
    }
    return true;
}

std::string bytes(std::initializer_list<int> b) {
    std::string s;
    for (int x : b) s += static_cast<char>(x);
    return s;
}

}  // namespace

class TestUtf8 : public QObject {
    Q_OBJECT
private slots:
    void validity_matches_the_definition() {
        std::string s;
        for (int a = 0; a < 256; ++a) {
            s.assign(1, static_cast<char>(a));
            QCOMPARE(colibri::is_valid_utf8(s), well_formed(s));
            for (int b = 0; b < 256; ++b) {
                s.assign({static_cast<char>(a), static_cast<char>(b)});
                QCOMPARE(colibri::is_valid_utf8(s), well_formed(s));
                if (a < 0xE0 || a > 0xF4) continue;  // a third byte matters only after a 3- or 4-byte lead
                for (int c = 0; c < 256; ++c) {
                    s.assign({static_cast<char>(a), static_cast<char>(b), static_cast<char>(c)});
                    if (colibri::is_valid_utf8(s) != well_formed(s)) QFAIL(("3 bytes " + std::to_string(a) + " " + std::to_string(b) + " " + std::to_string(c)).c_str());
                }
            }
        }
        // 4-byte sequences: every lead from F0 to F7 with second bytes across the boundaries (80/8F/90/BF/C0).
        for (int a = 0xF0; a <= 0xF7; ++a)
            for (int b : {0x7F, 0x80, 0x8F, 0x90, 0xBF, 0xC0})
                for (int c : {0x7F, 0x80, 0xBF, 0xC0})
                    for (int d : {0x7F, 0x80, 0xBF, 0xC0}) {
                        s = bytes({a, b, c, d});
                        QCOMPARE(colibri::is_valid_utf8(s), well_formed(s));
                    }
        QVERIFY(colibri::is_valid_utf8("a\xE4\xB8\xAD\xF0\x9F\x98\x80\xC3\xA9z"));
        QVERIFY(colibri::is_valid_utf8(""));
    }

    void lossy_replaces_maximal_subparts() {
        const std::string r = colibri::kUtf8Replacement;
        QCOMPARE(colibri::utf8_lossy("abc"), std::string("abc"));
        QCOMPARE(colibri::utf8_lossy("a\xE4\xB8z"), "a" + r + "z");        // a cut 3-byte sequence: one U+FFFD
        QCOMPARE(colibri::utf8_lossy("\xF0\x80\x80"), r + r + r);          // F0 80: not a prefix, each byte alone
        QCOMPARE(colibri::utf8_lossy("\xED\xA0\x80"), r + r + r);          // a surrogate
        QCOMPARE(colibri::utf8_lossy("\xC0\xAF"), r + r);                  // overlong
        QCOMPARE(colibri::utf8_lossy("\xF4\x8F\xBF\xBF\xF4\x90"), std::string("\xF4\x8F\xBF\xBF") + r + r);
        QCOMPARE(colibri::utf8_lossy("\xE2\x82"), r);
    }

    void decodes_and_finds_character_starts() {
        const std::string s = "a\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80";  // a é 中 😀
        size_t n = 0;
        QCOMPARE(colibri::utf8_decode_at(s, 0, &n), char32_t('a'));
        QCOMPARE(n, size_t(1));
        QCOMPARE(colibri::utf8_decode_at(s, 1, &n), char32_t(0xE9));
        QCOMPARE(n, size_t(2));
        QCOMPARE(colibri::utf8_decode_at(s, 3, &n), char32_t(0x4E2D));
        QCOMPARE(n, size_t(3));
        QCOMPARE(colibri::utf8_decode_at(s, 6, &n), char32_t(0x1F600));
        QCOMPARE(n, size_t(4));
        // A byte that cannot lead, and a sequence cut off by the end, read as themselves, one byte long.
        QCOMPARE(colibri::utf8_decode_at(s, 2, &n), char32_t(0xA9));
        QCOMPARE(n, size_t(1));
        QCOMPARE(colibri::utf8_decode_at(std::string_view(s).substr(0, 8), 6, &n), char32_t(0xF0));
        QCOMPARE(n, size_t(1));
        QCOMPARE(colibri::utf8_char_start(s, 9), size_t(6));
        QCOMPARE(colibri::utf8_char_start(s, 5), size_t(3));
        QCOMPARE(colibri::utf8_char_start(s, 5, 4), size_t(4));  // never below the floor
        QCOMPARE(colibri::utf8_char_start(s, 0), size_t(0));
        std::string out;
        for (char32_t cp : {char32_t('a'), char32_t(0xE9), char32_t(0x4E2D), char32_t(0x1F600)}) colibri::append_utf8(out, cp);
        QCOMPARE(out, s);
        QVERIFY(colibri::is_ascii("plain text"));
        QVERIFY(!colibri::is_ascii(s));
    }

    void splits_are_held_back() {
        const std::string text = "a\xE4\xB8\xAD\xF0\x9F\x98\x80\xC3\xA9z";  // a 中 😀 é z
        // Every way of cutting the text in two gives the same output, and never a partial character first.
        for (size_t cut = 0; cut <= text.size(); ++cut) {
            Utf8Stream s;
            const std::string first = s.push(text.substr(0, cut));
            std::string rest = s.push(text.substr(cut));
            rest += s.flush();
            QCOMPARE(first + rest, text);
            // What is shown first is everything up to the last character boundary within the cut.
            size_t boundary = 0;
            for (size_t b : {size_t(1), size_t(4), size_t(8), size_t(10), size_t(11)})
                if (b <= cut) boundary = b;
            QCOMPARE(first.size(), boundary);
        }
        Utf8Stream s;
        QCOMPARE(s.push("\xF0\x9F"), std::string());
        QCOMPARE(s.push("\x98"), std::string());
        QCOMPARE(s.push("\x80!"), std::string("\xF0\x9F\x98\x80!"));
    }

    void invalid_bytes_pass_through() {
        Utf8Stream s;
        QCOMPARE(s.push("\x80\x80x"), std::string("\x80\x80x"));  // stray continuation bytes are not held
        QCOMPARE(s.push("\xE4\xB8"), std::string());
        QCOMPARE(s.flush(), std::string("\xE4\xB8"));  // an unfinished tail is shown at the end
    }
};

QTEST_APPLESS_MAIN(TestUtf8)
#include "test_utf8.moc"
