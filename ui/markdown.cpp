#include "ui/markdown.h"

#include <QTextBlockFormat>
#include <QTextCursor>
#include <QTextDocument>
#include <algorithm>
#include <map>

namespace colibri::studio {

namespace {

struct Line {
    int begin, end;  // [begin, end) without the line break
};

std::vector<Line> split_lines(const QString& t) {
    std::vector<Line> lines;
    int begin = 0;
    for (int i = 0; i <= t.size(); ++i) {
        if (i == t.size() || t[i] == QLatin1Char('\n')) {
            int end = i;
            if (end > begin && t[end - 1] == QLatin1Char('\r')) --end;
            lines.push_back({begin, end});
            begin = i + 1;
        }
    }
    return lines;
}

// Columns of leading white space (a tab is 4) and the index of the first other character.
std::pair<int, int> indentation(const QString& t, Line l) {
    int cols = 0, i = l.begin;
    for (; i < l.end && (t[i] == QLatin1Char(' ') || t[i] == QLatin1Char('\t')); ++i) cols += t[i] == QLatin1Char('\t') ? 4 : 1;
    return {cols, i};
}

bool blank(const QString& t, Line l) { return indentation(t, l).second == l.end; }

// A run of at least 3 of c (`, ~) after at most 3 columns: a fence. Returns its length, 0 when not one.
int fence_length(const QString& t, Line l, QChar c, int* after) {
    const auto [cols, i] = indentation(t, l);
    if (cols > 3) return 0;
    int j = i;
    while (j < l.end && t[j] == c) ++j;
    if (after) *after = j;
    return j - i >= 3 ? j - i : 0;
}

bool horizontal_rule(const QString& t, Line l) {
    const auto [cols, i] = indentation(t, l);
    if (cols > 3 || i >= l.end) return false;
    const QChar c = t[i];
    if (c != QLatin1Char('-') && c != QLatin1Char('*') && c != QLatin1Char('_')) return false;
    int n = 0;
    for (int j = i; j < l.end; ++j) {
        if (t[j] == c) ++n;
        else if (t[j] != QLatin1Char(' ')) return false;
    }
    return n >= 3;
}

bool ascii_punctuation(QChar c) { return c.unicode() < 128 && c.isPunct(); }
bool ascii_punct_or_symbol(QChar c) { return c.unicode() < 128 && (c.isPunct() || c.isSymbol()); }

class Renderer {
public:
    Renderer(QTextCursor& c, const TaggedText& t, const MarkdownStyle& s, const MarkdownHooks& h) : c_(c), t_(t), style_(s), hooks_(h) {}

    std::vector<MarkdownCodeBlock> run() {
        const QString& text = t_.text;
        bool in_code = false;
        QChar fence_char;
        int fence_len = 0;
        MarkdownCodeBlock code;
        for (const Line& l : split_lines(text)) {
            if (in_code) {
                int after = 0;
                const int len = fence_length(text, l, fence_char, &after);
                if (len >= fence_len && blank(text, {after, l.end})) {
                    in_code = false;
                    blocks_.push_back(std::move(code));
                    code = {};
                    gap_ = true;
                    continue;
                }
                new_block(code_block_format());
                emit_range(l.begin, l.end, code_format());
                code.code += text.mid(l.begin, l.end - l.begin) + QLatin1Char('\n');
                continue;
            }
            int after = 0;
            for (QChar c : {QLatin1Char('`'), QLatin1Char('~')}) {
                if (const int len = fence_length(text, l, c, &after); len > 0 && !(c == QLatin1Char('`') && text.mid(after, l.end - after).contains(c))) {
                    in_code = true;
                    fence_char = c;
                    fence_len = len;
                    code.language = text.mid(after, l.end - after).trimmed().section(QLatin1Char(' '), 0, 0);
                    code_header(static_cast<int>(blocks_.size()), code.language);
                    break;
                }
            }
            if (in_code) continue;
            if (blank(text, l)) {
                gap_ = true;
                continue;
            }
            line(l);
        }
        if (in_code) blocks_.push_back(std::move(code));  // still streaming: the fence is not closed yet
        return std::move(blocks_);
    }

private:
    void line(Line l) {
        const QString& text = t_.text;
        if (horizontal_rule(text, l)) {
            QTextBlockFormat f = paragraph_format();
            f.setProperty(QTextFormat::BlockTrailingHorizontalRulerWidth, QTextLength(QTextLength::PercentageLength, 100));
            new_block(f);
            return;
        }
        const auto [cols, i] = indentation(text, l);
        // Heading: 1-6 #, then a space or the end.
        int hashes = 0;
        while (i + hashes < l.end && text[i + hashes] == QLatin1Char('#')) ++hashes;
        if (cols <= 3 && hashes >= 1 && hashes <= 6 && (i + hashes == l.end || text[i + hashes] == QLatin1Char(' '))) {
            QTextCharFormat f;
            f.setFontWeight(QFont::Bold);
            static const double scale[6] = {1.5, 1.3, 1.15, 1.05, 1.0, 1.0};
            const double size = c_.document()->defaultFont().pointSizeF();
            f.setFontPointSize((size > 0 ? size : 10.0) * scale[hashes - 1]);
            QTextBlockFormat b = paragraph_format();
            b.setTopMargin(6);
            new_block(b);
            inline_range(std::min(i + hashes + 1, l.end), l.end, f);
            return;
        }
        if (i < l.end && text[i] == QLatin1Char('>')) {
            QTextBlockFormat b = paragraph_format();
            b.setLeftMargin(14);
            new_block(b);
            QTextCharFormat f;
            f.setForeground(style_.quote_foreground);
            f.setFontItalic(true);
            const int from = i + 1 < l.end && text[i + 1] == QLatin1Char(' ') ? i + 2 : i + 1;
            inline_range(from, l.end, f);
            return;
        }
        const int depth = cols / 2;
        if (i + 1 < l.end && (text[i] == QLatin1Char('-') || text[i] == QLatin1Char('*') || text[i] == QLatin1Char('+')) &&
            text[i + 1] == QLatin1Char(' ')) {
            new_block(list_format(depth));
            emit_string(QStringLiteral("•  "), tag_at(i), QTextCharFormat());
            inline_range(i + 2, l.end, QTextCharFormat());
            return;
        }
        int digits = 0;
        while (i + digits < l.end && digits < 10 && text[i + digits].isDigit()) ++digits;
        if (digits >= 1 && digits <= 9 && i + digits + 1 < l.end &&
            (text[i + digits] == QLatin1Char('.') || text[i + digits] == QLatin1Char(')')) && text[i + digits + 1] == QLatin1Char(' ')) {
            new_block(list_format(depth));
            emit_range(i, i + digits + 2, QTextCharFormat());
            inline_range(i + digits + 2, l.end, QTextCharFormat());
            return;
        }
        if (i < l.end && text[i] == QLatin1Char('|')) {  // a table row: kept as written, in a fixed-width font
            new_block(paragraph_format());
            emit_range(i, l.end, code_format(false));
            return;
        }
        new_block(paragraph_format());
        inline_range(i, l.end, QTextCharFormat());
    }

    // Emphasis, code spans, links and escapes within [from, to) of one line.
    void inline_range(int from, int to, const QTextCharFormat& base) {
        const QString& text = t_.text;
        const int n = to - from;
        if (n <= 0) return;
        // Backtick runs, and for each the next run of the same length (its closer).
        std::vector<int> run_len(static_cast<size_t>(n), 0), closer(static_cast<size_t>(n), -1);
        {
            std::map<int, int> next_of_len;
            std::vector<std::pair<int, int>> runs;
            for (int i = from; i < to;) {
                if (text[i] != QLatin1Char('`')) {
                    ++i;
                    continue;
                }
                int j = i;
                while (j < to && text[j] == QLatin1Char('`')) ++j;
                runs.push_back({i, j - i});
                i = j;
            }
            for (auto it = runs.rbegin(); it != runs.rend(); ++it) {
                run_len[static_cast<size_t>(it->first - from)] = it->second;
                const auto found = next_of_len.find(it->second);
                closer[static_cast<size_t>(it->first - from)] = found == next_of_len.end() ? -1 : found->second;
                next_of_len[it->second] = it->first;
            }
        }
        // Emphasis delimiter runs (* or _, length 1-3): which can close, and whether one that can lies ahead.
        struct Delim {
            int len = 0;
            bool open = false, close = false, closer_ahead = false;
        };
        std::vector<Delim> delim(static_cast<size_t>(n));
        {
            bool seen[2][4] = {};  // [char][len]: a closing run of that kind lies further right
            for (int i = to - 1; i >= from;) {
                const QChar c = text[i];
                if (c != QLatin1Char('*') && c != QLatin1Char('_')) {
                    --i;
                    continue;
                }
                int j = i;
                while (j > from && text[j - 1] == c) --j;
                const int len = i - j + 1;
                const QChar before = j > from ? text[j - 1] : QLatin1Char(' ');
                const QChar after = i + 1 < to ? text[i + 1] : QLatin1Char(' ');
                Delim d;
                d.len = len;
                const bool left = !after.isSpace() && !(ascii_punctuation(after) && !before.isSpace() && !ascii_punctuation(before));
                const bool right = !before.isSpace() && !(ascii_punctuation(before) && !after.isSpace() && !ascii_punctuation(after));
                d.open = left && (c == QLatin1Char('*') || !before.isLetterOrNumber());
                d.close = right && (c == QLatin1Char('*') || !after.isLetterOrNumber());
                const int k = c == QLatin1Char('*') ? 0 : 1;
                if (len <= 3) {
                    d.closer_ahead = seen[k][len];
                    if (d.close) seen[k][len] = true;
                }
                delim[static_cast<size_t>(j - from)] = d;
                i = j - 1;
            }
        }
        // For links: the next ']' and ')' from each position.
        std::vector<int> next_bracket(static_cast<size_t>(n + 1), -1), next_paren(static_cast<size_t>(n + 1), -1);
        for (int i = to - 1; i >= from; --i) {
            const size_t k = static_cast<size_t>(i - from);
            next_bracket[k] = text[i] == QLatin1Char(']') ? i : next_bracket[k + 1];
            next_paren[k] = text[i] == QLatin1Char(')') ? i : next_paren[k + 1];
        }

        bool bold = false, italic = false;
        QChar bold_char, italic_char;
        auto current = [&] {
            QTextCharFormat f = base;
            if (bold) f.setFontWeight(QFont::Bold);
            if (italic) f.setFontItalic(true);
            return f;
        };
        int literal = from;  // start of pending literal text
        auto flush = [&](int upto) {
            if (upto > literal) emit_range(literal, upto, current());
            literal = upto;
        };
        for (int i = from; i < to;) {
            const QChar c = text[i];
            const size_t k = static_cast<size_t>(i - from);
            if (c == QLatin1Char('\\') && i + 1 < to && ascii_punct_or_symbol(text[i + 1])) {
                flush(i);
                literal = i + 1;  // the escaped character is literal text
                i += 2;
                continue;
            }
            if (c == QLatin1Char('`') && run_len[k] > 0) {
                const int len = run_len[k];
                const int close = closer[k];
                if (close < 0) {  // no closer on the line: the backticks are text
                    i += len;
                    continue;
                }
                flush(i);
                QTextCharFormat f = code_format();
                if (bold) f.setFontWeight(QFont::Bold);
                emit_range(i + len, close, f);
                i = close + len;
                literal = i;
                continue;
            }
            if ((c == QLatin1Char('*') || c == QLatin1Char('_')) && delim[k].len > 0) {
                const Delim& d = delim[k];
                bool used = false;
                if (d.len <= 3) {
                    const bool wants_bold = d.len >= 2, wants_italic = d.len != 2;
                    const bool closes = d.close && (!wants_bold || (bold && bold_char == c)) && (!wants_italic || (italic && italic_char == c));
                    const bool opens = !closes && d.open && d.closer_ahead && (!wants_bold || !bold) && (!wants_italic || !italic);
                    if (closes || opens) {
                        flush(i);
                        if (wants_bold) bold = opens, bold_char = c;
                        if (wants_italic) italic = opens, italic_char = c;
                        used = true;
                    }
                }
                i += d.len;
                if (used) literal = i;
                continue;
            }
            if (c == QLatin1Char('[')) {
                const int close = next_bracket[k + 1 < static_cast<size_t>(n) ? k + 1 : static_cast<size_t>(n)];
                if (close > i && close + 1 < to && text[close + 1] == QLatin1Char('(')) {
                    const size_t pk = static_cast<size_t>(close + 2 - from);
                    const int paren = pk <= static_cast<size_t>(n) ? next_paren[pk] : -1;
                    if (paren > close) {
                        flush(i);
                        QTextCharFormat f = current();
                        f.setFontUnderline(true);
                        f.setForeground(style_.link_foreground);
                        f.setToolTip(text.mid(close + 2, paren - close - 2));
                        emit_range(i + 1, close, f);
                        i = paren + 1;
                        literal = i;
                        continue;
                    }
                }
            }
            ++i;
        }
        flush(to);
    }

    void code_header(int index, const QString& language) {
        QTextBlockFormat b = paragraph_format();
        b.setTopMargin(gap_ || !first_ ? 4 : 0);
        new_block(b);
        QTextCharFormat f;
        f.setForeground(style_.muted_foreground);
        f.setFontPointSize(std::max(6.0, c_.document()->defaultFont().pointSizeF() * 0.85));
        c_.insertText(language.isEmpty() ? QObject::tr("code") : language, f);
        const QString href = hooks_.copy_href ? hooks_.copy_href(index) : QString();
        if (!href.isEmpty()) {
            c_.insertText(QStringLiteral("   "), f);
            QTextCharFormat link = f;
            link.setAnchor(true);
            link.setAnchorHref(href);
            link.setForeground(style_.link_foreground);
            link.setFontUnderline(true);
            link.setToolTip(QObject::tr("Copy this code block"));
            c_.insertText(QObject::tr("Copy code"), link);
        }
    }

    QTextBlockFormat paragraph_format() const { return QTextBlockFormat(); }
    QTextBlockFormat list_format(int depth) const {
        QTextBlockFormat f;
        f.setLeftMargin(12 + 16 * std::min(depth, 8));
        f.setTextIndent(-10);
        return f;
    }
    QTextBlockFormat code_block_format() const {
        QTextBlockFormat f;
        f.setBackground(style_.code_background);
        f.setLeftMargin(8);
        f.setRightMargin(8);
        f.setNonBreakableLines(false);
        return f;
    }
    QTextCharFormat code_format(bool background = true) const {
        QTextCharFormat f;
        f.setFont(style_.code_font, QTextCharFormat::FontPropertiesSpecifiedOnly);
        f.setFontFamilies(style_.code_font.families().isEmpty() ? QStringList{style_.code_font.family()} : style_.code_font.families());
        f.setFontFixedPitch(true);
        if (background) f.setBackground(style_.code_background);
        return f;
    }

    void new_block(QTextBlockFormat f) {
        if (gap_ && !first_ && f.topMargin() < 6) f.setTopMargin(6);
        gap_ = false;
        if (first_) {
            c_.setBlockFormat(f);
            first_ = false;
        } else {
            c_.insertBlock(f, QTextCharFormat());
        }
    }

    int tag_at(int i) const { return i >= 0 && static_cast<size_t>(i) < t_.tags.size() ? t_.tags[static_cast<size_t>(i)] : -1; }

    void emit_string(const QString& s, int tag, const QTextCharFormat& base) {
        QTextCharFormat f = base;
        if (tag >= 0 && hooks_.tag_format) hooks_.tag_format(tag, f);
        c_.insertText(s, f);
    }

    // Characters [from, to) as they are, in runs of one tag.
    void emit_range(int from, int to, const QTextCharFormat& base) {
        const QString& text = t_.text;
        for (int i = from; i < to;) {
            const int tag = tag_at(i);
            int j = i + 1;
            while (j < to && tag_at(j) == tag) ++j;
            emit_string(text.mid(i, j - i), tag, base);
            i = j;
        }
    }

    QTextCursor& c_;
    const TaggedText& t_;
    const MarkdownStyle& style_;
    const MarkdownHooks& hooks_;
    std::vector<MarkdownCodeBlock> blocks_;
    bool first_ = true;
    bool gap_ = false;  // a blank line came before the next block
};

}  // namespace

std::vector<MarkdownCodeBlock> render_markdown(QTextCursor& cursor, const TaggedText& text, const MarkdownStyle& style,
                                               const MarkdownHooks& hooks) {
    TaggedText safe = text;
    if (safe.tags.size() != static_cast<size_t>(safe.text.size())) safe.tags.assign(static_cast<size_t>(safe.text.size()), -1);
    Renderer r(cursor, safe, style, hooks);
    return r.run();
}

std::vector<MarkdownCodeBlock> markdown_code_blocks(const QString& text) {
    QTextDocument doc;
    QTextCursor c(&doc);
    TaggedText t;
    t.append(text, -1);
    return render_markdown(c, t, MarkdownStyle{}, MarkdownHooks{});
}

}  // namespace colibri::studio
