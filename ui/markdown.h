// The chat's Markdown: headings, emphasis, inline code, fenced code blocks, lists, quotes, rules and links,
// rendered into a QTextDocument through a cursor while keeping, for every character, the tag of where it came
// from (a generated token's position), so that a rendered reply still links each character to its token.
//
// A subset of CommonMark that a chat model's replies use; each source line is its own paragraph (replies are
// written with line breaks meant as such). The parse is linear in the text: every search for a closing
// delimiter is answered from tables built in one pass per line, so no input can make it quadratic.
#pragma once
#include <QColor>
#include <QFont>
#include <QString>
#include <QTextCharFormat>
#include <functional>
#include <vector>

class QTextCursor;

namespace colibri::studio {

struct TaggedText {
    QString text;
    std::vector<int> tags;  // one per UTF-16 unit of text; -1: no tag
    void append(const QString& s, int tag) {
        text += s;
        tags.insert(tags.end(), static_cast<size_t>(s.size()), tag);
    }
};

struct MarkdownStyle {
    QFont code_font;
    QColor code_background;
    QColor quote_foreground;
    QColor link_foreground;
    QColor muted_foreground;  // code block headers
};

struct MarkdownCodeBlock {
    QString language;
    QString code;  // without the fences
};

struct MarkdownHooks {
    // Adds what a tag means to a character's format (an anchor, a highlight); called for tags >= 0.
    std::function<void(int tag, QTextCharFormat& format)> tag_format;
    // The href of a code block's copy link (its index among the blocks of this text); empty: no link.
    std::function<QString(int block)> copy_href;
};

// Inserts the rendering at the cursor, starting with the cursor's current block (which should be empty), and
// returns the fenced code blocks in order.
std::vector<MarkdownCodeBlock> render_markdown(QTextCursor& cursor, const TaggedText& text, const MarkdownStyle& style,
                                               const MarkdownHooks& hooks);

// Fenced code blocks alone, as render_markdown finds them (for "copy code" without rendering).
std::vector<MarkdownCodeBlock> markdown_code_blocks(const QString& text);

}  // namespace colibri::studio
