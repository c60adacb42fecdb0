// Utf8Stream holds back exactly the bytes of an unfinished character.
#include <QtTest>

#include "engine/text/utf8_stream.h"

using colibri::Utf8Stream;

class TestUtf8Stream : public QObject {
    Q_OBJECT
private slots:
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

QTEST_APPLESS_MAIN(TestUtf8Stream)
#include "test_utf8_stream.moc"
