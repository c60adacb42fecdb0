// The chat basics on the suites' random chat model, asserted on what is displayed: Markdown and code blocks rendered with
// every generated character still linked to its token, copy a message or a code block, export as Markdown,
// the input kept when a send fails, the live context gauge and tokens/s while streaming with a warning
// before the context runs out, the transcript keeping its place, New conversation clearing every figure in
// every view, the top-5 alternatives of a generated token on hover, and each reply's timing. Conversations are kept:
// autosaved, listed, reopened (also after a restart), renamed, deleted, exported, a damaged file refused in one
// line, the question before a reply in progress or unsaved work is lost; sampling presets and the model's own
// defaults (its generation_config.json); replies of a model that failed verification marked "unverified".
#include <QAbstractProxyModel>
#include <QApplication>
#include <QClipboard>
#include <QComboBox>
#include <QDockWidget>
#include <QLineEdit>
#include <QListView>
#include <QMessageBox>
#include <QCheckBox>
#include <QDoubleSpinBox>
#include <QSpinBox>
#include <QTableView>
#include <QHelpEvent>
#include <QLabel>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollBar>
#include <QStandardItemModel>
#include <QTableView>
#include <QTextBlock>
#include <QTextBrowser>
#include <QTextDocument>
#include <QToolButton>
#include <QToolTip>

#include "ui/markdown.h"
#include "ui/views/analysis_view.h"
#include "ui/views/banner.h"
#include "ui/views/chat_view.h"
#include "ui/views/conversation_list.h"
#include "ui/views/heatmap_view.h"
#include "ui/views/main_window.h"
#include "ui/views/profiler_view.h"
#include "ui/views/routing_view.h"
#include "ui/views/validator_view.h"
#include "ui_test_support.h"

using namespace colibri;
using namespace colibri::studio;
using namespace colibri::test;

namespace {

// The fragment holding document position `at`.
QTextFragment fragment_at(const QTextDocument& doc, int at) {
    for (QTextBlock b = doc.begin(); b.isValid(); b = b.next())
        for (auto it = b.begin(); !it.atEnd(); ++it)
            if (it.fragment().contains(at)) return it.fragment();
    return {};
}

QTextBlock block_starting(const QTextDocument& doc, const QString& text) {
    for (QTextBlock b = doc.begin(); b.isValid(); b = b.next())
        if (b.text().startsWith(text)) return b;
    return {};
}

}  // namespace

class TestChat : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    std::unique_ptr<MainWindow> window_;

    bool send(const QString& text, int max_tokens) { return send_and_wait(*window_, text, max_tokens); }

    // A window that keeps its conversations in `folder` (a Studio started on it), with the test model open
    // unless `model` is empty; every discard question is recorded in asked_ and answered with answer_.
    std::unique_ptr<MainWindow> keeping_window(const QString& folder, const QString& model = QStringLiteral(COLIBRI_UI_TEST_MODEL)) {
        MainWindowOptions options;
        options.persist_settings = false;
        options.conversations_dir = folder;
        auto w = std::make_unique<MainWindow>(options);
        w->set_discard_question([this](const QString& action) {
            asked_ << action;
            return answer_;
        });
        w->resize(1280, 720);
        w->show();
        if (!QTest::qWaitForWindowExposed(w.get())) return {};
        w->dock_of(w->conversation_list())->raise();  // its tab in front, as a user clicks it
        if (!model.isEmpty()) {
            QSignalSpy loaded(w.get(), &MainWindow::modelLoaded);
            w->open_model(model);
            if (!wait_for(loaded, 1)) return {};
        }
        return w;
    }
    QStringList asked_;
    DiscardAnswer answer_ = DiscardAnswer::Discard;

    static QString row_text(ConversationList* list, int row) { return list->model()->index(row).data().toString(); }
    static void click_row(ConversationList* list, const QString& id) {
        const QModelIndex source = list->model()->index(list->model()->row_of(id));
        auto* proxy = qobject_cast<QAbstractProxyModel*>(list->view()->model());
        const QRect r = list->view()->visualRect(proxy->mapFromSource(source));
        QTest::mouseClick(list->view()->viewport(), Qt::LeftButton, {}, r.center());
    }

private slots:
    void initTestCase() {
        MainWindowOptions options;
        options.persist_settings = false;
        window_ = std::make_unique<MainWindow>(options);
        window_->set_discard_question([](const QString&) { return DiscardAnswer::Discard; });  // each test opens a model again
        window_->resize(1280, 720);
        window_->show();
        QVERIFY(QTest::qWaitForWindowExposed(window_.get()));
        QSignalSpy loaded(window_.get(), &MainWindow::modelLoaded);
        window_->open_model(QStringLiteral(COLIBRI_UI_TEST_MODEL));
        QVERIFY(wait_for(loaded, 1));
    }

    void cleanupTestCase() { window_.reset(); }

    // The empty transcript says what to do next: open a model, then, once one is open, write to it.
    void empty_transcript_says_what_to_do() {
        MainWindowOptions options;
        options.persist_settings = false;
        MainWindow empty(options);
        QVERIFY(empty.chat_view()->transcript()->placeholderText().startsWith(QStringLiteral("Open a model")));
        QVERIFY(window_->chat_view()->transcript()->document()->isEmpty());
        QCOMPARE(window_->chat_view()->transcript()->placeholderText(), QStringLiteral("Write a message below; Ctrl+Return sends it."));
    }

    // The renderer alone: formats, code blocks and the tag of every character.
    void markdown_keeps_each_characters_token() {
        TaggedText t;
        const QStringList pieces = {"# Title\n", "Some **bold** and `code`.\n", "```python\n", "x = 1\n", "```\n", "- item\n", "1. first\n",
                                    "> quoted\n", "---\n", "a [link](http://example.org) here"};
        for (int i = 0; i < pieces.size(); ++i) t.append(pieces[i], i);
        QTextDocument doc;
        QTextCursor c(&doc);
        MarkdownStyle style;
        style.code_background = QColor(240, 240, 240);
        style.code_font = QFont(QStringLiteral("monospace"));
        MarkdownHooks hooks;
        hooks.tag_format = [](int tag, QTextCharFormat& f) {
            f.setAnchor(true);
            f.setAnchorHref(QStringLiteral("tok:%1").arg(tag));
        };
        hooks.copy_href = [](int block) { return QStringLiteral("copycode:0:%1").arg(block); };
        const auto blocks = render_markdown(c, t, style, hooks);
        QCOMPARE(blocks.size(), size_t(1));
        QCOMPARE(blocks[0].language, QStringLiteral("python"));
        QCOMPARE(blocks[0].code, QStringLiteral("x = 1\n"));
        // The heading: its text without the #, bold and larger.
        const QTextBlock title = doc.begin();
        QCOMPARE(title.text(), QStringLiteral("Title"));
        QCOMPARE(title.begin().fragment().charFormat().fontWeight(), int(QFont::Bold));
        QCOMPARE(title.begin().fragment().charFormat().anchorHref(), QStringLiteral("tok:0"));
        // Emphasis and a code span, with the markers gone and the tags kept.
        const QTextBlock line = block_starting(doc, QStringLiteral("Some "));
        QCOMPARE(line.text(), QStringLiteral("Some bold and code."));
        const QTextFragment bold = fragment_at(doc, line.position() + 5);
        QCOMPARE(bold.text(), QStringLiteral("bold"));
        QCOMPARE(bold.charFormat().fontWeight(), int(QFont::Bold));
        QCOMPARE(bold.charFormat().anchorHref(), QStringLiteral("tok:1"));
        const QTextFragment code = fragment_at(doc, line.position() + 14);
        QCOMPARE(code.text(), QStringLiteral("code"));
        QVERIFY(code.charFormat().fontFixedPitch());
        QCOMPARE(code.charFormat().background().color(), QColor(240, 240, 240));
        // The fenced block: a header with the language and a copy link, then the code on its background.
        const QTextBlock header = block_starting(doc, QStringLiteral("python"));
        QVERIFY(header.isValid());
        QVERIFY(header.text().contains(QStringLiteral("Copy code")));
        const QTextBlock body = block_starting(doc, QStringLiteral("x = 1"));
        QVERIFY(body.isValid());
        QCOMPARE(body.blockFormat().background().color(), QColor(240, 240, 240));
        QVERIFY(body.begin().fragment().charFormat().fontFixedPitch());
        QCOMPARE(body.begin().fragment().charFormat().anchorHref(), QStringLiteral("tok:3"));
        QVERIFY(block_starting(doc, QStringLiteral("•  item")).isValid());
        QVERIFY(block_starting(doc, QStringLiteral("1. first")).isValid());
        QVERIFY(block_starting(doc, QStringLiteral("quoted")).isValid());
        const QTextBlock link = block_starting(doc, QStringLiteral("a link here"));
        QVERIFY(link.isValid());
        QCOMPARE(fragment_at(doc, link.position() + 2).charFormat().toolTip(), QStringLiteral("http://example.org"));
        // What is not Markdown stays as typed: unmatched markers, a flood of them, an unclosed fence.
        for (const QString& text : {QStringLiteral("2 * 3 = 6 and a_b_c and `open"), QString(20000, QLatin1Char('*')),
                                    QStringLiteral("a") + QString(5000, QLatin1Char('`')) + QStringLiteral("x"), QStringLiteral("**not closed")}) {
            QTextDocument d;
            QTextCursor dc(&d);
            TaggedText plain;
            plain.append(text, -1);
            render_markdown(dc, plain, style, {});
            QString want = text;
            if (text.size() == 20000) want.clear();  // a rule of stars, drawn as a line
            QCOMPARE(d.toPlainText(), want);
        }
        QTextDocument d;
        QTextCursor dc(&d);
        TaggedText fence;
        fence.append(QStringLiteral("```\nstill streaming"), 7);
        QCOMPARE(render_markdown(dc, fence, style, {}).size(), size_t(1));  // the open fence is a block already
    }

    void reply_shows_tokens_timing_and_alternatives() {
        QVERIFY(send(QStringLiteral("Hello! What do hummingbirds eat?"), 16));
        ChatView* chat = window_->chat_view();
        chat->flush();
        const auto& messages = window_->conversation()->messages();
        QCOMPARE(messages.size(), 2);
        const ConversationMessage& reply = messages.back();
        // Its timing, in the message's header.
        QVERIFY(reply.timing.valid());
        QCOMPARE(reply.timing.generated, reply.token_count);
        QVERIFY(reply.timing.decode_seconds > 0);
        const QString shown = chat->transcript()->toPlainText();
        QVERIFY2(shown.contains(timing_text(reply.timing)), qPrintable(shown));
        QVERIFY(timing_text(reply.timing).contains(QStringLiteral("tokens/s")));
        // Each generated token: the model's top 5 where it was sampled, greedy took the first.
        int hovered = -1;
        for (int p = reply.first_token; p < reply.first_token + reply.token_count; ++p) {
            const ConversationToken* t = window_->conversation()->token(p);
            QCOMPARE(t->trace.alternatives.size(), size_t(5));
            QCOMPARE(t->trace.alternatives.front().token, t->trace.token);
            QCOMPARE(t->trace.alternatives.front().probability, t->trace.probability);
            float sum = 0;
            for (size_t i = 0; i < 5; ++i) {
                sum += t->trace.alternatives[i].probability;
                if (i > 0) QVERIFY(t->trace.alternatives[i].probability <= t->trace.alternatives[i - 1].probability);
            }
            QVERIFY(sum <= 1.0001f && sum > 0);
            if (hovered < 0 && !t->end_of_turn && !t->trace.text.trimmed().isEmpty()) hovered = p;
        }
        QVERIFY(hovered >= 0);
        const QString tip = chat->token_tooltip(hovered);
        QVERIFY2(tip.contains(QStringLiteral("top 5")) && tip.contains(QStringLiteral("▸")) && tip.count(QStringLiteral(" %")) >= 6, qPrintable(tip));
        // Hovered in the transcript, the tooltip shows.
        const int at = chat->anchor_position(hovered);
        QVERIFY(at >= 0);
        QTextCursor cursor(chat->transcript()->document());
        cursor.setPosition(at + 1);
        const QPoint pos = chat->transcript()->cursorRect(cursor).center() - QPoint(2, 0);
        QHelpEvent help(QEvent::ToolTip, pos, chat->transcript()->viewport()->mapToGlobal(pos));
        QApplication::sendEvent(chat->transcript()->viewport(), &help);
        QTRY_VERIFY_WITH_TIMEOUT(QToolTip::isVisible(), 2000);
        QVERIFY2(QToolTip::text().contains(QStringLiteral("model probability")), qPrintable(QToolTip::text()));
        QToolTip::hideText();
    }

    void copy_and_export() {
        ChatView* chat = window_->chat_view();
        const auto& messages = window_->conversation()->messages();
        QVERIFY(messages.size() >= 2);
        chat->open_link(QUrl(QStringLiteral("copy:0")));
        QCOMPARE(QApplication::clipboard()->text(), messages[0].content);
        chat->open_link(QUrl(QStringLiteral("copy:1")));
        QCOMPARE(QApplication::clipboard()->text(), messages[1].content);
        // Every message has its copy link in the transcript.
        QCOMPARE(chat->transcript()->toPlainText().count(QStringLiteral("Copy")), static_cast<int>(messages.size()));
        const QString md = dir_.filePath(QStringLiteral("conversation.md"));
        QVERIFY(window_->export_markdown(md).is_ok());
        const QString text = QString::fromUtf8(read_all(md));
        QVERIFY2(text.startsWith(QStringLiteral("# Conversation\n\n## You\n\nHello! What do hummingbirds eat?\n\n## Model\n\n*")), qPrintable(text));
        QVERIFY(text.contains(timing_text(messages[1].timing)));
        QVERIFY(text.contains(messages[1].content.trimmed()));
        QVERIFY(!window_->export_markdown(dir_.filePath(QStringLiteral("no/such/dir/x.md"))).is_ok());
    }

    // A reply whose content is Markdown (a loaded conversation): rendered, and its code block copied.
    void markdown_in_the_transcript() {
        const QByteArray json = R"({"format":"colibri-studio-conversation","version":1,"system":"",
            "messages":[{"role":"user","content":"Show me C++"},
                        {"role":"assistant","content":"## Answer\nUse **this**:\n```cpp\nint x = 1;\n```\nDone."}],
            "tokens":[]})";
        const QString path = write_all(dir_.filePath(QStringLiteral("md.json")), json);
        QVERIFY(window_->load_conversation(path).is_ok());
        ChatView* chat = window_->chat_view();
        const QTextDocument* doc = chat->transcript()->document();
        const QTextBlock code = block_starting(*doc, QStringLiteral("int x = 1;"));
        QVERIFY(code.isValid());
        QVERIFY(code.blockFormat().hasProperty(QTextFormat::BackgroundBrush));
        QVERIFY(code.begin().fragment().charFormat().fontFixedPitch());
        QVERIFY(!chat->transcript()->toPlainText().contains(QStringLiteral("```")));
        QVERIFY(!chat->transcript()->toPlainText().contains(QStringLiteral("**")));
        chat->open_link(QUrl(QStringLiteral("copycode:1:0")));
        QCOMPARE(QApplication::clipboard()->text(), QStringLiteral("int x = 1;\n"));
        window_->chat()->new_conversation();
    }

    void failed_send_keeps_the_input() {
        ChatView* chat = window_->chat_view();
        // A reply longer than the whole context cannot run: the worker refuses, the message comes back.
        QSignalSpy failed(window_->chat(), &ChatController::failed);
        chat->set_settings(greedy(1 << 20));
        chat->input()->setPlainText(QStringLiteral("This will not fit."));
        QTest::mouseClick(chat->send_button(), Qt::LeftButton);
        QVERIFY(wait_for(failed, 1, 30000));
        QCOMPARE(chat->input()->toPlainText(), QStringLiteral("This will not fit."));
        QVERIFY2(chat->error_label()->text().contains(QStringLiteral("exceed the context")), qPrintable(chat->error_label()->text()));
        QVERIFY(window_->conversation()->messages().isEmpty());
        chat->input()->clear();
    }

    void live_gauge_speed_and_overflow_warning() {
        ChatView* chat = window_->chat_view();
        window_->chat()->new_conversation();
        const int context = window_->chat()->model().context;
        QVERIFY(context > 100);
        // A reply allowed nearly the whole context: once what is left is less than a reply may take, a warning.
        chat->set_settings(greedy(context - 40));
        chat->input()->setPlainText(QStringLiteral("Count to a thousand."));
        QSignalSpy generated(window_->worker(), &EngineWorker::tokenGenerated);
        QSignalSpy finished(window_->chat(), &ChatController::finished);
        QTest::mouseClick(chat->send_button(), Qt::LeftButton);
        QVERIFY(wait_for(generated, 30, 120000));
        QTest::qWait(100);
        const int used = chat->context_bar()->value();
        QVERIFY2(chat->speed_label()->text().startsWith(QStringLiteral("generating")), qPrintable(chat->speed_label()->text()));
        QVERIFY2(chat->speed_label()->text().contains(QStringLiteral("tokens/s")), qPrintable(chat->speed_label()->text()));
        QVERIFY(used > 8 && used <= window_->conversation()->size() + 1);
        QCOMPARE(chat->context_bar()->maximum(), context);
        QVERIFY2(chat->context_warning()->text().contains(QStringLiteral("tokens of context left")), qPrintable(chat->context_warning()->text()));
        // It moves while the reply streams: with the next tokens, however busy the machine.
        QTRY_VERIFY_WITH_TIMEOUT(chat->context_bar()->value() > used, 60000);
        chat->stop_button()->click();
        QVERIFY(wait_for(finished, 1, 60000));
        chat->set_settings(greedy(16));
        QVERIFY(chat->context_warning()->text().isEmpty());  // a short reply fits again
    }

    // Clicking a token, a rebuild after a reply, or a reply streaming in: the transcript stays where it was read.
    void transcript_keeps_its_place() {
        window_->chat()->new_conversation();
        for (int i = 0; i < 3; ++i) QVERIFY(send(QStringLiteral("Tell me more, part %1.").arg(i), 60));
        ChatView* chat = window_->chat_view();
        QScrollBar* bar = chat->transcript()->verticalScrollBar();
        QVERIFY2(bar->maximum() > 0, "the transcript should scroll");
        bar->setValue(bar->maximum() / 2);
        const int middle = bar->value();
        const auto& m = window_->conversation()->messages();
        window_->conversation()->select(m[1].first_token + 1);
        QCOMPARE(bar->value(), middle);
        window_->conversation()->select(m[3].first_token + 2);
        QCOMPARE(bar->value(), middle);
        // A new reply streams in and finishes while the reader is at the top.
        bar->setValue(0);
        QVERIFY(send(QStringLiteral("And the end?"), 40));
        chat->flush();
        QCOMPARE(bar->value(), 0);
        // At the bottom, the view follows the reply.
        bar->setValue(bar->maximum());
        QVERIFY(send(QStringLiteral("One more."), 40));
        chat->flush();
        QCOMPARE(bar->value(), bar->maximum());
    }

    // Autosave, the list, reopening a conversation (in this window and in a new one on the same folder).
    void conversations_are_kept_and_reopen() {
        const QString folder = dir_.filePath(QStringLiteral("kept"));
        auto w = keeping_window(folder);
        QVERIFY(w && w->autosaves());
        ConversationList* list = w->conversation_list();
        QVERIFY(list != nullptr);
        QVERIFY(w->dock_of(list) != nullptr);
        QCOMPARE(w->dock_of(list)->windowTitle(), QStringLiteral("Conversations"));
        QCOMPARE(list->model()->rowCount(), 0);
        QVERIFY(send_and_wait(*w, QStringLiteral("What do hummingbirds eat?\nAnd why?"), 8));
        QVERIFY(send_and_wait(*w, QStringLiteral("How fast do they fly?"), 8));
        const QString first = w->current_conversation_id();
        QVERIFY(!first.isEmpty());
        QVERIFY(QFile::exists(w->conversation_store()->path(first)));
        QVERIFY(!w->has_unsaved_conversation());  // saved after every change: nothing to ask about
        QCOMPARE(list->model()->rowCount(), 1);
        // The row: the first line of the first message as the title, then when, which model, how many messages.
        QVERIFY2(row_text(list, 0).startsWith(QStringLiteral("What do hummingbirds eat?\ntoday ")), qPrintable(row_text(list, 0)));
        QVERIFY2(row_text(list, 0).endsWith(QStringLiteral("ui-test.bin · 4 messages")), qPrintable(row_text(list, 0)));
        QVERIFY(list->model()->index(0).data(Qt::FontRole).value<QFont>().bold());  // the one shown
        const QVector<ConversationMessage> kept = w->conversation()->messages();
        const std::vector<int32_t> kept_tokens = w->conversation()->token_ids();

        // New (the list's button): nothing is asked (it is kept), the chat is empty, the next message is another one.
        asked_.clear();
        QTest::mouseClick(list->new_button(), Qt::LeftButton);
        QVERIFY(asked_.isEmpty());
        QVERIFY(w->conversation()->messages().isEmpty());
        QVERIFY(w->chat_view()->transcript()->toPlainText().isEmpty());
        QVERIFY(w->current_conversation_id().isEmpty());
        QVERIFY(send_and_wait(*w, QStringLiteral("Tell me a joke"), 6));
        const QString second = w->current_conversation_id();
        QVERIFY(second != first);
        QCOMPARE(list->model()->rowCount(), 2);
        QVERIFY(row_text(list, 0).startsWith(QStringLiteral("Tell me a joke\n")));  // newest first

        // Clicking the first row reopens it: its turns shown again and replayed through the model (the views fill).
        QSignalSpy replayed(w->chat(), &ChatController::finished);
        click_row(list, first);
        QCOMPARE(w->current_conversation_id(), first);
        QVERIFY(wait_for(replayed, 1, 60000));
        QCOMPARE(w->conversation()->messages().size(), kept.size());
        for (qsizetype i = 0; i < kept.size(); ++i) {
            QCOMPARE(w->conversation()->messages()[i].role, kept[i].role);
            QCOMPARE(w->conversation()->messages()[i].content, kept[i].content);
        }
        QCOMPARE(w->conversation()->token_ids(), kept_tokens);
        QCOMPARE(w->conversation()->evaluated_count(), w->conversation()->size());
        const QString shown = w->chat_view()->transcript()->toPlainText();
        for (const ConversationMessage& m : kept) QVERIFY2(shown.contains(m.content.trimmed().section(QLatin1Char('\n'), 0, 0)), qPrintable(shown));
        QVERIFY(shown.contains(timing_text(kept[1].timing)));
        QVERIFY(!w->has_unsaved_conversation());

        // The Studio started again on the same folder: both listed; the first reopens without a model too.
        w.reset();
        auto again = keeping_window(folder, {});
        QVERIFY(again);
        QCOMPARE(again->conversation_list()->model()->rowCount(), 2);
        QVERIFY(again->open_conversation(first).is_ok());
        QCOMPARE(again->conversation()->messages().size(), kept.size());
        QCOMPARE(again->conversation()->messages()[2].content, kept[2].content);
        QVERIFY(again->chat_view()->transcript()->toPlainText().contains(QStringLiteral("How fast do they fly?")));
    }

    void rename_delete_and_export() {
        const QString folder = dir_.filePath(QStringLiteral("kept2"));
        auto w = keeping_window(folder);
        QVERIFY(w);
        ConversationList* list = w->conversation_list();
        QVERIFY(send_and_wait(*w, QStringLiteral("What do hummingbirds eat?"), 8));
        const QString first = w->current_conversation_id();
        w->chat_view()->new_action()->trigger();
        QVERIFY(send_and_wait(*w, QStringLiteral("Tell me a joke"), 6));
        const QString second = w->current_conversation_id();
        QCOMPARE(list->model()->rowCount(), 2);

        // Rename: the row shows the new title, and it stays when the conversation is saved again.
        QVERIFY(list->rename(second, QStringLiteral("  Jokes  ")).is_ok());
        QVERIFY(row_text(list, list->model()->row_of(second)).startsWith(QStringLiteral("Jokes\n")));
        QVERIFY(send_and_wait(*w, QStringLiteral("Another one"), 6));
        QVERIFY(row_text(list, 0).startsWith(QStringLiteral("Jokes\n")));
        QCOMPARE(QJsonDocument::fromJson(read_all(w->conversation_store()->path(second))).object()["title"].toString(), QStringLiteral("Jokes"));
        list->select(second);
        QVERIFY(list->rename_button()->isEnabled() && list->delete_button()->isEnabled() && list->export_button()->isEnabled());

        // Export: JSON that Chat ▸ Load conversation reads back, and Markdown under the conversation's title.
        const QString json = dir_.filePath(QStringLiteral("jokes.json")), md = dir_.filePath(QStringLiteral("jokes.md"));
        QVERIFY(list->export_to(second, json, ExportFormat::Json).is_ok());
        QVERIFY(list->export_to(second, md, ExportFormat::Markdown).is_ok());
        const QString text = QString::fromUtf8(read_all(md));
        QVERIFY2(text.startsWith(QStringLiteral("# Jokes\n\n## You\n\nTell me a joke\n\n## Model\n\n*")), qPrintable(text));
        QVERIFY(text.contains(QStringLiteral("## You\n\nAnother one\n\n")));
        QVERIFY(!list->export_to(second, dir_.filePath(QStringLiteral("no/such/dir/x.md")), ExportFormat::Markdown).is_ok());
        const QVector<ConversationMessage> shown = w->conversation()->messages();
        w->chat_view()->new_action()->trigger();
        QVERIFY(w->load_conversation(json).is_ok());
        QCOMPARE(w->conversation()->messages().size(), shown.size());
        QCOMPARE(w->conversation()->messages().back().content, shown.back().content);
        QSignalSpy replayed(w->chat(), &ChatController::finished);
        QVERIFY(wait_for(replayed, 1, 60000));

        // Delete (after its question): the row and the file go; Cancel keeps both.
        QStringList asked;
        bool yes = false;
        list->set_delete_question([&](const QString& title) {
            asked << title;
            return yes;
        });
        list->select(first);
        QTest::mouseClick(list->delete_button(), Qt::LeftButton);
        QCOMPARE(asked, QStringList{QStringLiteral("What do hummingbirds eat?")});
        QVERIFY(QFile::exists(w->conversation_store()->path(first)));
        yes = true;
        QTest::mouseClick(list->delete_button(), Qt::LeftButton);
        QVERIFY(!QFile::exists(w->conversation_store()->path(first)));
        QCOMPARE(list->model()->row_of(first), -1);
        QCOMPARE(list->message_label()->text(), QStringLiteral("Deleted “What do hummingbirds eat?”"));
        // Deleting the conversation shown clears the chat.
        QVERIFY(w->open_conversation(second).is_ok());
        QVERIFY(wait_for(replayed, 2, 60000));
        QVERIFY(list->remove(second).is_ok());
        QVERIFY(w->conversation()->messages().isEmpty());
        QVERIFY(w->current_conversation_id().isEmpty());
    }

    // Damaged or hostile files in the folder: listed with a one-line reason; opening one changes nothing shown.
    void a_damaged_conversation_file_is_one_line() {
        const QString folder = dir_.filePath(QStringLiteral("kept3"));
        auto w = keeping_window(folder);
        QVERIFY(w);
        QVERIFY(send_and_wait(*w, QStringLiteral("Hello"), 4));
        const QString good = w->current_conversation_id();
        const std::pair<QString, QByteArray> bad[] = {
            {QStringLiteral("20990101-000000-0001"), R"({"format": "colibri-studio-conversation", "version": 1, "messages": [)"},
            {QStringLiteral("20990101-000000-0002"), "[1, 2, 3]"},
            {QStringLiteral("20990101-000000-0003"),
             R"({"format":"colibri-studio-conversation","version":1,"messages":[{"role":"assistant","content":"x","first_token":2147483647,"token_count":5}],"tokens":[]})"},
            {QStringLiteral("20990101-000000-0004"), QByteArray(1 << 16, '[')},
            {QStringLiteral("20990101-000000-0005"), R"({"format":"something else"})"}};
        for (const auto& [id, bytes] : bad) write_all(w->conversation_store()->path(id), bytes);
        ConversationList* list = w->conversation_list();
        list->refresh(good);
        QCOMPARE(list->model()->rowCount(), 6);
        const QString before = w->chat_view()->transcript()->toPlainText();
        for (const auto& [id, bytes] : bad) {
            const int row = list->model()->row_of(id);
            QVERIFY(row >= 0);
            const QString text = row_text(list, row);
            QVERIFY2(text.startsWith(QStringLiteral("⚠ ") + id + QStringLiteral(".json\ncannot be opened: ") + id + QStringLiteral(".json: ")),
                     qPrintable(text));
            QVERIFY2(text.count(QLatin1Char('\n')) == 1, qPrintable(text));
            list->select(id);
            QVERIFY(!list->rename_button()->isEnabled() && !list->export_button()->isEnabled() && list->delete_button()->isEnabled());
            click_row(list, id);
            const QString message = list->message_label()->text();
            QVERIFY2(message.startsWith(id + QStringLiteral(".json: ")) && !message.contains(QLatin1Char('\n')), qPrintable(message));
            QVERIFY(list->message_label()->isVisible());  // shown under the list
            QCOMPARE(w->current_conversation_id(), good);
            QCOMPARE(w->chat_view()->transcript()->toPlainText(), before);
        }
        QVERIFY(row_text(list, list->model()->row_of(bad[0].first)).contains(QStringLiteral("not JSON")));
        QVERIFY(row_text(list, list->model()->row_of(bad[1].first)).contains(QStringLiteral("not a JSON object")));
        QVERIFY(row_text(list, list->model()->row_of(bad[2].first)).contains(QStringLiteral("token range")));
        QVERIFY(row_text(list, list->model()->row_of(bad[4].first)).contains(QStringLiteral("not a Colibri Studio conversation")));
        // A damaged file can be deleted.
        QVERIFY(list->remove(bad[0].first).is_ok());
        QCOMPARE(list->model()->rowCount(), 5);
    }

    // With autosave, only a reply in progress is asked about; where saving fails, the conversation is.
    void the_discard_question() {
        const QString folder = dir_.filePath(QStringLiteral("kept4"));
        auto w = keeping_window(folder);
        QVERIFY(w);
        ChatView* chat = w->chat_view();
        QSignalSpy generated(w->worker(), &EngineWorker::tokenGenerated);
        chat->set_settings(greedy(2000));
        chat->input()->setPlainText(QStringLiteral("A long one."));
        QTest::mouseClick(chat->send_button(), Qt::LeftButton);
        QVERIFY(wait_for(generated, 3, 60000));
        // The spy counts in the worker's thread; the reply reaches the conversation through the UI thread's queue.
        QTRY_COMPARE(w->conversation()->messages().size(), 2);
        QVERIFY(w->chat()->generating());
        QVERIFY(w->has_unsaved_conversation());
        asked_.clear();
        answer_ = DiscardAnswer::Cancel;
        QTest::mouseClick(chat->new_button(), Qt::LeftButton);           // New conversation
        w->open_model(QStringLiteral(COLIBRI_UI_TEST_MODEL));             // opening a model
        QVERIFY(!w->close());                                             // quitting
        QCOMPARE(asked_, (QStringList{QStringLiteral("Starting a new conversation"), QStringLiteral("Opening ui-test.bin"), QStringLiteral("Quitting")}));
        QVERIFY(w->chat()->generating());  // Cancel: the reply goes on
        QCOMPARE(w->conversation()->messages().size(), 2);
        // Stop the reply: New goes on, and what the reply wrote is kept in the list.
        answer_ = DiscardAnswer::Discard;
        const QString id = w->current_conversation_id();
        QTest::mouseClick(chat->new_button(), Qt::LeftButton);
        QCOMPARE(asked_.size(), 4);
        QVERIFY(w->conversation()->messages().isEmpty());
        QTRY_VERIFY_WITH_TIMEOUT(!w->chat()->generating(), 30000);
        const QJsonObject saved = QJsonDocument::fromJson(read_all(w->conversation_store()->path(id))).object();
        QCOMPARE(saved["messages"].toArray().size(), 2);
        QVERIFY(saved["tokens"].toArray().size() > 0);
        // The message box itself: "Stop the reply" or Cancel.
        chat->set_settings(greedy(2000));
        chat->input()->setPlainText(QStringLiteral("Another long one."));
        QTest::mouseClick(chat->send_button(), Qt::LeftButton);
        w->set_discard_question({});
        QString box_text;
        answer_modal([&](QWidget* widget) {
            auto* box = qobject_cast<QMessageBox*>(widget);
            if (box == nullptr || box->objectName() != QLatin1String("discard_question")) return false;
            box_text = box->text() + QLatin1Char('|') + box->button(QMessageBox::Discard)->text();
            box->button(QMessageBox::Cancel)->click();
            return true;
        });
        QVERIFY(!w->close());
        QCOMPARE(box_text, QStringLiteral("Quitting stops the reply that is being generated.|Stop the reply"));
        w->chat()->stop();
        QTRY_VERIFY_WITH_TIMEOUT(!w->chat()->generating(), 30000);
        QVERIFY(!w->has_unsaved_conversation());

        // A folder that cannot be written: the conversation is not kept, says so, and leaving it asks.
        const QString blocked = write_all(dir_.filePath(QStringLiteral("a-file")), "not a folder");
        auto b = keeping_window(blocked + QStringLiteral("/conversations"));
        QVERIFY(b);
        asked_.clear();
        QVERIFY(send_and_wait(*b, QStringLiteral("Hello"), 4));
        QVERIFY(b->has_unsaved_conversation());
        QVERIFY2(b->conversation_list()->message_label()->text().startsWith(QStringLiteral("Not saved: ")), qPrintable(b->conversation_list()->message_label()->text()));
        answer_ = DiscardAnswer::Cancel;
        b->chat_view()->new_action()->trigger();
        QCOMPARE(asked_, QStringList{QStringLiteral("Starting a new conversation")});
        QCOMPARE(b->conversation()->messages().size(), 2);
        answer_ = DiscardAnswer::Discard;
    }

    // Sampling: the presets, and the model's own defaults from its generation_config.json shown and applied.
    void sampling_presets_and_the_models_defaults() {
        auto w = keeping_window(dir_.filePath(QStringLiteral("kept5")), QStringLiteral(COLIBRI_BUILD_DIR "/demo/demo.bin"));
        QVERIFY(w);
        ChatView* chat = w->chat_view();
        QComboBox* preset = chat->preset_box();
        QCOMPARE(preset->currentText(), QStringLiteral("Model default"));
        // The demo model's generation_config.json says do_sample false: greedy, shown in the panel and the Model dock.
        QCOMPARE(chat->model_default_label()->text(), QStringLiteral("Model default: greedy"));
        QVERIFY(chat->settings().sampling.greedy);
        QVERIFY(chat->settings_panel()->findChild<QCheckBox*>()->isChecked());
        bool listed = false;
        for (int r = 0; r < w->summary_model()->rowCount(); ++r)
            if (w->summary_model()->index(r, 0).data().toString() == QLatin1String("sampling"))
                listed = w->summary_model()->index(r, 1).data().toString() == QLatin1String("greedy (its generation_config.json)");
        QVERIFY(listed);
        // Same message twice: the same reply (greedy), whatever the seed.
        QVERIFY(send_and_wait(*w, QStringLiteral("What is 23 plus 45?"), 160));
        const QString reply = w->conversation()->messages().back().content;
        QVERIFY2(reply.endsWith(QStringLiteral("So 23 plus 45 is 68.")), qPrintable(reply));
        // Presets set the values; editing one by hand is Custom.
        auto choose = [&](const QString& name) {
            preset->setCurrentIndex(preset->findText(name));
            emit preset->activated(preset->currentIndex());
        };
        choose(QStringLiteral("Creative"));
        QVERIFY(!chat->settings().sampling.greedy);
        QCOMPARE(chat->settings().sampling.temperature, 1.0f);
        QCOMPARE(chat->settings().sampling.top_k, 0);
        choose(QStringLiteral("Balanced"));
        QCOMPARE(chat->settings().sampling.temperature, SamplerConfig{}.temperature);
        QCOMPARE(chat->settings().sampling.top_k, SamplerConfig{}.top_k);
        chat->settings_panel()->findChildren<QDoubleSpinBox*>().front()->setValue(0.3);
        QCOMPARE(preset->currentText(), QStringLiteral("Custom"));
        QCOMPARE(chat->settings().sampling.temperature, 0.3f);
        choose(QStringLiteral("Greedy"));
        QVERIFY(chat->settings().sampling.greedy);
        // Model default follows the model: one without sampling defaults gets Colibri's.
        choose(QStringLiteral("Model default"));
        QSignalSpy loaded(w.get(), &MainWindow::modelLoaded);
        w->open_model(QStringLiteral(COLIBRI_UI_TEST_MODEL));
        QVERIFY(wait_for(loaded, 1));
        QCOMPARE(chat->model_default_label()->text(), QStringLiteral("Model default: none given (Colibri's: temperature 0.8)"));
        QVERIFY(!chat->settings().sampling.greedy);
        QCOMPARE(chat->settings().sampling.temperature, SamplerConfig{}.temperature);
    }

    // After "Chat anyway" on a model that failed verification, every reply it writes is marked, in the
    // transcript, in the saved conversation and in the Markdown export; replies of a verified model are not.
    void replies_after_chat_anyway_are_marked_unverified() {
        auto w = keeping_window(dir_.filePath(QStringLiteral("kept6")));
        QVERIFY(w);
        QVERIFY(send_and_wait(*w, QStringLiteral("Hello"), 4));
        QVERIFY(!w->conversation()->messages().back().unverified);
        QVERIFY(!w->chat_view()->transcript()->toPlainText().contains(QStringLiteral("unverified")));
        const QString damaged = dir_.filePath(QStringLiteral("damaged.bin"));
        QVERIFY(damage_first_expert(QStringLiteral(COLIBRI_UI_TEST_MODEL), damaged) > 0);
        QSignalSpy verified(w->validator_view(), &ValidatorView::verifiedFile);
        QSignalSpy loaded(w.get(), &MainWindow::modelLoaded);
        w->open_model(damaged);
        QVERIFY(wait_for(loaded, 1));
        // The damaged file's verdict: the first model's verification may still report after the spy was made (it
        // did under ASan), and the banner is only for the file that is loaded.
        const auto damaged_verified = [&] {
            for (const QList<QVariant>& args : verified)
                if (args.value(0).toString() == damaged) return true;
            return false;
        };
        QTRY_VERIFY_WITH_TIMEOUT(damaged_verified(), 60000);
        QPushButton* anyway = w->banner()->button(QStringLiteral("Chat anyway"));
        QVERIFY2(anyway != nullptr, qPrintable(w->banner()->text()));
        QTest::mouseClick(anyway, Qt::LeftButton);
        QVERIFY(send_and_wait(*w, QStringLiteral("Are you all right?"), 4));
        QVERIFY(send_and_wait(*w, QStringLiteral("Really?"), 4));
        const auto& m = w->conversation()->messages();
        QCOMPARE(m.size(), 4);
        QVERIFY(m[1].unverified && m[3].unverified);
        w->chat_view()->flush();
        const QString shown = w->chat_view()->transcript()->toPlainText();
        QCOMPARE(shown.count(QStringLiteral("⚠ unverified")), 2);
        const QTextBlock header = block_starting(*w->chat_view()->transcript()->document(), QStringLiteral("Model"));
        QVERIFY2(header.text().contains(QStringLiteral("⚠ unverified")), qPrintable(header.text()));
        const QString md = dir_.filePath(QStringLiteral("unverified.md"));
        QVERIFY(w->export_markdown(md).is_ok());
        QCOMPARE(QString::fromUtf8(read_all(md)).count(QStringLiteral("**⚠ unverified: the model failed verification**")), 2);
        // Kept with the conversation: reopened, the marks are still there.
        const QString id = w->current_conversation_id();
        w->chat_view()->new_action()->trigger();
        QVERIFY(w->open_conversation(id).is_ok());
        QVERIFY(w->conversation()->messages()[1].unverified);
        QCOMPARE(w->chat_view()->transcript()->toPlainText().count(QStringLiteral("⚠ unverified")), 2);
    }

    void new_conversation_clears_every_figure() {
        window_->chat()->new_conversation();
        QVERIFY(send(QStringLiteral("Hello again."), 12));
        window_->conversation()->select(window_->conversation()->size() - 2);
        ChatView* chat = window_->chat_view();
        window_->routing_view()->refresh();
        window_->heatmap_view()->refresh();
        window_->profiler_view()->refresh();
        window_->analysis_view()->refresh();
        QVERIFY(!chat->speed_label()->text().isEmpty());
        QVERIFY(chat->context_bar()->value() > 0);
        QVERIFY(window_->routing_view()->table_model()->rowCount() > 0);
        QVERIFY(window_->heatmap_view()->heatmap_model()->rowCount() > 0);
        QVERIFY(window_->profiler_view()->layer_model()->rowCount() > 0);
        QVERIFY(window_->profiler_view()->token_model()->rowCount() > 0);
        QVERIFY(window_->analysis_view()->coactivation_model()->rowCount() > 0);
        QVERIFY(!window_->routing_view()->text()->toPlainText().isEmpty());
        QTest::mouseClick(chat->new_button(), Qt::LeftButton);
        QVERIFY(chat->speed_label()->text().isEmpty());
        QCOMPARE(chat->context_bar()->value(), 0);
        QVERIFY(chat->context_warning()->text().isEmpty());
        QVERIFY(chat->error_label()->text().isEmpty());
        QVERIFY(chat->transcript()->toPlainText().isEmpty());
        QCOMPARE(window_->routing_view()->table_model()->rowCount(), 0);
        QTRY_COMPARE_WITH_TIMEOUT(window_->routing_view()->text()->toPlainText(), QString(), 3000);
        QTRY_COMPARE_WITH_TIMEOUT(window_->heatmap_view()->heatmap_model()->rowCount(), 0, 3000);
        QTRY_COMPARE_WITH_TIMEOUT(window_->profiler_view()->layer_model()->rowCount(), 0, 3000);
        QCOMPARE(window_->profiler_view()->token_model()->rowCount(), 0);
        QVERIFY(window_->profiler_view()->summary_label()->text().startsWith(QStringLiteral("No tokens profiled yet")));
        QTRY_COMPARE_WITH_TIMEOUT(window_->analysis_view()->coactivation_model()->rowCount(), 0, 3000);
        QCOMPARE(window_->analysis_view()->repetition_model()->rowCount(), 0);
        // New conversation in the middle of a reply: nothing of that reply comes back afterwards.
        QSignalSpy generated(window_->worker(), &EngineWorker::tokenGenerated);
        chat->set_settings(greedy(500));
        chat->input()->setPlainText(QStringLiteral("A long one."));
        QTest::mouseClick(chat->send_button(), Qt::LeftButton);
        QVERIFY(wait_for(generated, 3, 60000));
        QTest::mouseClick(chat->new_button(), Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(!window_->chat()->generating(), 30000);
        QTest::qWait(200);
        QCOMPARE(window_->conversation()->size(), 0);
        QVERIFY(window_->conversation()->messages().isEmpty());
        QVERIFY(chat->transcript()->toPlainText().isEmpty());
        QVERIFY(chat->speed_label()->text().isEmpty());
    }

    // Speculative decoding (Chat settings): the same reply, and every generated token with the same routing and
    // alternatives as plain decoding (the engine's check rows are its rows bit for bit; the observer holds a
    // check's later rows until the sampler takes their tokens and drops the rejected ones); the reply's figures
    // say how many drafts were accepted.
    void speculation_keeps_reply_routing_and_alternatives() {
        struct Token {
            int32_t id;
            std::vector<std::vector<int32_t>> experts;
            std::vector<std::vector<float>> weights;
            std::vector<int32_t> alternatives;
            float probability;
        };
        const auto reply_tokens = [this](SpeculateMode mode) {
            window_->chat()->new_conversation();
            ChatSettings s = greedy(48);
            s.speculate = mode;
            std::vector<Token> out;
            if (!send_and_wait(*window_, QStringLiteral("Hello! What do hummingbirds eat? Hummingbirds eat nectar."), s)) return out;
            const ConversationMessage& reply = window_->conversation()->messages().back();
            for (int p = reply.first_token; p < reply.first_token + reply.token_count; ++p) {
                const ConversationToken* t = window_->conversation()->token(p);
                Token k{t->trace.token, {}, {}, {}, t->trace.probability};
                if (!t->evaluated) k.id = -1;  // no trace: fails below
                for (const LayerRouting& r : t->trace.routing) k.experts.push_back(r.experts), k.weights.push_back(r.weights);
                for (const auto& a : t->trace.alternatives) k.alternatives.push_back(a.token);
                out.push_back(std::move(k));
            }
            return out;
        };
        const std::vector<Token> plain = reply_tokens(SpeculateMode::Off);
        QVERIFY(plain.size() > 8);
        QVERIFY(!window_->chat_view()->speed_label()->text().contains(QStringLiteral("drafts")));
        const std::vector<Token> lookup = reply_tokens(SpeculateMode::Lookup);
        const GenerationStats& stats = window_->chat()->last_stats();
        qInfo("%d tokens; lookup: %llu checks, %llu drafted, %llu accepted", int(lookup.size()), (unsigned long long)stats.checks,
              (unsigned long long)stats.drafted, (unsigned long long)stats.accepted);
        QVERIFY2(stats.accepted > 0 && stats.drafted > stats.accepted, "the reply should have had right and wrong drafts");
        QCOMPARE(lookup.size(), plain.size());
        for (size_t i = 0; i < plain.size(); ++i) {
            QVERIFY2(lookup[i].id >= 0, qPrintable(QStringLiteral("token %1 has no trace").arg(i)));
            QCOMPARE(lookup[i].id, plain[i].id);
            QCOMPARE(lookup[i].experts, plain[i].experts);
            QCOMPARE(lookup[i].weights, plain[i].weights);
            QCOMPARE(lookup[i].alternatives, plain[i].alternatives);
            QCOMPARE(lookup[i].probability, plain[i].probability);
        }
        const QString figures = window_->chat_view()->speed_label()->text();
        QVERIFY2(figures.contains(QStringLiteral("lookup: %1 of %2 drafts accepted").arg(stats.accepted).arg(stats.drafted)), qPrintable(figures));
        // The MTP head is offered only to a model that has one (this one has none).
        auto* combo = window_->findChild<QComboBox*>(QStringLiteral("speculate"));
        QVERIFY(combo != nullptr);
        auto* items = qobject_cast<QStandardItemModel*>(combo->model());
        QVERIFY(!items->item(combo->findData(int(SpeculateMode::Mtp)))->isEnabled());
        QVERIFY(items->item(combo->findData(int(SpeculateMode::Lookup)))->isEnabled());
    }
};

QTEST_MAIN(TestChat)
#include "test_ui_chat.moc"
