// The Studio's views driven offscreen in a real MainWindow, with assertions on what they display: the chat on
// the demo model (text, streaming, clickable tokens, stop, regenerate, save/load), the routing inspector
// against `colibri route`, the heatmap's counts, the validator on a damaged copy of a model (the damaged tensor and
// byte named), its layer graph (hybrid, MoE with a shared expert), legend, histogram ticks, comparison order and
// tokenizer line, and the convert dialog's default output and preview.
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <QAreaSeries>
#include <QChart>
#include <QChartView>
#include <QComboBox>
#include <QDockWidget>
#include <QHeaderView>
#include <QStandardPaths>
#include <QTableWidget>
#include <QValueAxis>
#include <QElapsedTimer>
#include <QLabel>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QTableView>
#include <QTextBlock>
#include <QTextBrowser>
#include <QTimer>

#include "ui/colors.h"
#include "ui/data/model_summary.h"
#include "ui/data/quantization_quality.h"
#include "ui/file_worker.h"
#include "ui/models/model_graph.h"
#include "ui/views/banner.h"
#include "ui/views/chat_view.h"
#include "ui/views/convert_dialog.h"
#include "ui/views/heatmap_view.h"
#include "ui/views/main_window.h"
#include "ui/views/routing_view.h"
#include "ui/views/validator_view.h"
#include "ui_test_support.h"

using namespace colibri;
using namespace colibri::studio;
using namespace colibri::test;

class TestViews : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    QString mixtral_, olmoe_;
    std::unique_ptr<MainWindow> window_;

    bool open(const QString& path) {
        QSignalSpy loaded(window_.get(), &MainWindow::modelLoaded);
        window_->open_model(path);
        return wait_for(loaded, 1);
    }

    bool send(const QString& text, int max_tokens) { return send_and_wait(*window_, text, max_tokens); }

    // The validator's dock torn off at a size (a maximised window's dock), so what it draws does not depend on the
    // test window's arrangement of docks.
    void show_validator_at(int width, int height) {
        QDockWidget* dock = window_->dock_of(window_->validator_view());
        dock->show();
        dock->setFloating(true);
        dock->resize(width, height);
        dock->raise();
        QTest::qWait(50);
    }

private slots:
    void initTestCase() {
        mixtral_ = convert_reference(dir_, QStringLiteral("mixtral"));
        olmoe_ = convert_reference(dir_, QStringLiteral("olmoe"));
        QVERIFY(!mixtral_.isEmpty() && !olmoe_.isEmpty());
        QVERIFY2(QFile::exists(QStringLiteral(COLIBRI_UI_TEST_MODEL)), "the build makes the suites' model (tests/ui/CMakeLists.txt)");
        MainWindowOptions options;
        options.persist_settings = false;
        window_ = std::make_unique<MainWindow>(options);
        window_->set_discard_question([](const QString&) { return DiscardAnswer::Discard; });  // each test opens a model again
        window_->resize(1400, 900);
        window_->show();
        QVERIFY(QTest::qWaitForWindowExposed(window_.get()));
    }

    void cleanupTestCase() { window_.reset(); }

    void chat_streams_text_with_clickable_tokens() {
        QVERIFY(open(QStringLiteral(COLIBRI_UI_TEST_MODEL)));
        QCOMPARE(window_->summary_model()->value(QStringLiteral("family")), QStringLiteral("qwen2_moe"));
        QSignalSpy appended(window_->conversation(), &Conversation::tokenAppended);
        QVERIFY(send(QStringLiteral("Hello! What do hummingbirds eat?"), 12));
        QVERIFY(appended.count() > 12);  // the prompt's positions and each streamed token
        ChatView* chat = window_->chat_view();
        QVERIFY(chat->input()->toPlainText().isEmpty());
        const QString shown = chat->transcript()->toPlainText();
        // Each message: its header (role, timing, a copy link), then its text.
        const QStringList lines = shown.split(QLatin1Char('\n'));
        QVERIFY2(lines.size() >= 4 && lines[0].startsWith(QStringLiteral("You")) && lines[1] == QStringLiteral("Hello! What do hummingbirds eat?") &&
                     lines[2].startsWith(QStringLiteral("Model")) && lines[2].contains(QStringLiteral("tokens/s")),
                 qPrintable(shown));
        // The reply shown is the reply the conversation holds, token by token.
        const auto& messages = window_->conversation()->messages();
        QCOMPARE(messages.size(), 2);
        const ConversationMessage& reply = messages.back();
        QCOMPARE(reply.role, QStringLiteral("assistant"));
        QVERIFY(reply.token_count > 0 && reply.token_count <= 12);
        QString streamed;
        for (int p = reply.first_token; p < reply.first_token + reply.token_count; ++p) {
            const ConversationToken* t = window_->conversation()->token(p);
            QVERIFY(t->trace.generated && t->evaluated);
            if (!t->end_of_turn) streamed += t->trace.text;
        }
        // (Rendered as Markdown, the paragraph loses the space a reply's first token may begin with.)
        QVERIFY2(shown.endsWith(streamed.trimmed()), qPrintable(shown + QStringLiteral(" | ") + streamed));
        QVERIFY(chat->speed_label()->text().contains(QStringLiteral("tokens/s")));
        QCOMPARE(chat->context_bar()->value(), window_->conversation()->size());

        // Clicking a generated token selects it for the routing inspector.
        const int target = reply.first_token + 1;
        const int at = chat->anchor_position(target);
        QVERIFY(at >= 0);
        QTextCursor cursor(chat->transcript()->document());
        cursor.setPosition(at + 1);
        const QPoint click = chat->transcript()->cursorRect(cursor).center() - QPoint(2, 0);
        QSignalSpy selected(window_->conversation(), &Conversation::selectionChanged);
        QTest::mouseClick(chat->transcript()->viewport(), Qt::LeftButton, {}, click);
        QVERIFY(wait_for(selected, 1, 5000));
        QCOMPARE(window_->conversation()->selected(), target);
        const QLabel* title = window_->routing_view()->findChild<QLabel*>(QStringLiteral("routing_title"));
        QVERIFY(title->text().contains(QStringLiteral("position %1").arg(target)));
        QCOMPARE(window_->routing_view()->table_model()->rowCount(), 4);
    }

    void regenerate_and_save_load() {
        QVERIFY(open(QStringLiteral(COLIBRI_UI_TEST_MODEL)));
        QVERIFY(send(QStringLiteral("Name a flower."), 6));
        const QString first = window_->conversation()->messages().back().content;
        const int tokens = window_->conversation()->size();
        // Greedy: regenerating gives the same reply, in place of the old one.
        QSignalSpy finished(window_->chat(), &ChatController::finished);
        QTest::mouseClick(window_->chat_view()->regenerate_button(), Qt::LeftButton);
        QVERIFY(wait_for(finished, 1, 120000));
        QCOMPARE(window_->conversation()->messages().size(), 2);
        QCOMPARE(window_->conversation()->messages().back().content, first);
        QCOMPARE(window_->conversation()->size(), tokens);

        const QString path = dir_.filePath(QStringLiteral("conversation.json"));
        QVERIFY(window_->save_conversation(path).is_ok());
        const std::vector<int32_t> ids = window_->conversation()->token_ids();
        window_->chat()->new_conversation();
        QCOMPARE(window_->conversation()->size(), 0);
        QVERIFY(window_->load_conversation(path).is_ok());
        QVERIFY(wait_for(finished, 2, 120000));  // the replay rebuilds every trace
        QCOMPARE(window_->conversation()->token_ids(), ids);
        QCOMPARE(window_->conversation()->evaluated_count(), static_cast<int>(ids.size()));
        QCOMPARE(window_->conversation()->messages().back().content, first);
        QVERIFY(!window_->load_conversation(dir_.filePath(QStringLiteral("missing.json"))).is_ok());
    }

    void stop_button_and_responsiveness() {
        QVERIFY(open(QStringLiteral(COLIBRI_UI_TEST_MODEL)));
        ChatView* chat = window_->chat_view();
        QSignalSpy finished(window_->chat(), &ChatController::finished);
        QSignalSpy generated(window_->worker(), &EngineWorker::tokenGenerated);
        QElapsedTimer clock;
        qint64 last = 0, max_gap = 0;
        QTimer timer;
        timer.setInterval(10);
        connect(&timer, &QTimer::timeout, this, [&] {
            max_gap = std::max(max_gap, clock.elapsed() - last);
            last = clock.elapsed();
        });
        chat->set_settings(greedy(2000));
        chat->input()->setPlainText(QStringLiteral("Tell me a long story."));
        clock.start();
        timer.start();
        QTest::mouseClick(chat->send_button(), Qt::LeftButton);
        QVERIFY(!chat->send_button()->isEnabled());
        QVERIFY(chat->stop_button()->isEnabled());
        // Let it stream about 200 tokens, with every view updating, then stop. Known limit, not hidden: the
        // chat redraws the streaming reply's Markdown whole on each tick, so at ~1000 tokens one redraw takes
        // ~2 s on this host (the generated test model streams ~1000 tokens/s); it needs incremental rendering.
        QVERIFY(wait_for(generated, 200, 60000));
        QTest::mouseClick(chat->stop_button(), Qt::LeftButton);
        QVERIFY(wait_for(finished, 1, 60000));
        timer.stop();
        const auto stats = finished.at(0).at(0).value<GenerationStats>();
        qInfo("%d tokens streamed into the views; longest gap between 10 ms ticks %lld ms", stats.generated, max_gap);
        QVERIFY(stats.stopped);
        QVERIFY(stats.generated < 2000);
        QVERIFY(chat->speed_label()->text().contains(QStringLiteral("stopped")));
        QVERIFY(chat->send_button()->isEnabled());
        QVERIFY2(max_gap < 500 * build_slowdown(), qPrintable(QStringLiteral("the UI thread stalled for %1 ms").arg(max_gap)));
    }

    void routing_table_equals_colibri_route() {
        for (const QString& model : {mixtral_, olmoe_}) {
            QVERIFY(open(model));
            // Models without a tokenizer are driven by token ids.
            const QString family = QFileInfo(model).completeBaseName();
            QVERIFY(send(join_ids(reference_input_ids(family)), 4));
            const Conversation* c = window_->conversation();
            QCOMPARE(c->size(), 16 + 4);
            const CliRouting cli = cli_route(model, c->token_ids());
            QCOMPARE(static_cast<int>(cli.experts.size()), 2);
            RoutingView* view = window_->routing_view();
            for (int p = 0; p < c->size(); ++p) {
                window_->conversation()->select(p);
                const RoutingTableModel* table = view->table_model();
                QCOMPARE(table->rowCount(), 2);
                QCOMPARE(table->position(), p);
                int row = 0;
                for (const auto& [layer, per_position] : cli.experts) {
                    QCOMPARE(table->index(row, 0).data(RoutingTableModel::LayerRole).toInt(), layer);
                    const std::vector<int>& want = per_position[static_cast<size_t>(p)];
                    for (size_t k = 0; k < want.size(); ++k) {
                        const QModelIndex cell = table->index(row, static_cast<int>(k) + 1);
                        QCOMPARE(cell.data(RoutingTableModel::ExpertRole).toInt(), want[k]);
                        QVERIFY(std::abs(cell.data(RoutingTableModel::WeightRole).toDouble() -
                                         cli.weights.at(layer)[static_cast<size_t>(p)][k]) < 1e-6);
                        QCOMPARE(cell.data().toString().left(2 + static_cast<int>(QString::number(want[k]).size())),
                                 QStringLiteral("E%1 ").arg(want[k]));
                    }
                    ++row;
                }
                // The chart shows the selected row's (layer 0's) full distribution, summing to one.
                const QList<qreal> bars = view->chart_values();
                QCOMPARE(bars.size(), 8);
                double sum = 0;
                for (qreal b : bars) sum += b;
                QVERIFY(std::abs(sum - 1.0) < 1e-4);
            }
            // The text is coloured by the first expert at the chosen layer.
            for (int layer : {0, 1}) {
                view->set_text_layer(layer);
                view->refresh();
                QCOMPARE(view->text_layer(), layer);
                for (int p = 0; p < c->size(); ++p)
                    QCOMPARE(view->text_background(p), expert_color(cli.experts.at(layer)[static_cast<size_t>(p)][0]));
            }
        }
    }

    void heatmap_counts_every_routing_decision() {
        QVERIFY(open(mixtral_));
        QVERIFY(send(join_ids(reference_input_ids(QStringLiteral("mixtral"))), 8));
        HeatmapView* heat = window_->heatmap_view();
        heat->refresh();
        const int tokens = window_->conversation()->size(), layers = 2, top_k = 2;
        auto sum = [](const HeatmapModel* m) {
            int s = 0;
            for (int r = 0; r < m->rowCount(); ++r)
                for (int e = 0; e < m->columnCount(); ++e) s += m->index(r, e).data().toInt();
            return s;
        };
        QCOMPARE(heat->heatmap_model()->rowCount(), layers);
        QCOMPARE(heat->heatmap_model()->columnCount(), 8);
        QCOMPARE(sum(heat->heatmap_model()), tokens * layers * top_k);
        QVERIFY(heat->summary_label()->text().startsWith(QStringLiteral("%1 tokens, 2 MoE layers").arg(tokens)));
        // Each cell equals the number of positions whose routing at that layer chose the expert.
        const CliRouting cli = cli_route(mixtral_, window_->conversation()->token_ids());
        for (int e = 0; e < 8; ++e) {
            int n = 0;
            for (const auto& chosen : cli.experts.at(1)) n += std::count(chosen.begin(), chosen.end(), e);
            QCOMPARE(heat->heatmap_model()->index(1, e).data().toInt(), n);
        }
        // A span: the generated tokens only.
        heat->set_span(TokenSpan{0, -1, true});
        QCOMPARE(sum(heat->heatmap_model()), 8 * layers * top_k);
        heat->set_span(TokenSpan{});
        // CSV and PNG exports hold the same numbers and picture.
        const QString csv = dir_.filePath(QStringLiteral("heatmap.csv")), png = dir_.filePath(QStringLiteral("heatmap.png"));
        QVERIFY(heat->export_csv(csv).is_ok());
        QVERIFY(heat->export_png(png).is_ok());
        const QStringList lines = QString::fromUtf8(read_all(csv)).split('\n', Qt::SkipEmptyParts);
        QCOMPARE(lines.size(), 1 + layers);
        QCOMPARE(lines[0], QStringLiteral("layer,E0,E1,E2,E3,E4,E5,E6,E7"));
        int csv_sum = 0;
        for (int r = 1; r < lines.size(); ++r)
            for (const QString& v : lines[r].split(',').mid(1)) csv_sum += v.toInt();
        QCOMPARE(csv_sum, tokens * layers * top_k);
        const QImage image(png);
        QCOMPARE(image.size(), heat->render_image().size());
        const int max = heat->heatmap_model()->usage().max_count();
        const double first = heat->heatmap_model()->index(0, 0).data().toInt();
        QCOMPARE(image.pixel(70 + 2, 30 + 2), heat_color(first / max).rgb());  // the first cell, in its heat colour

        // What is not a regular file is refused and stays as it was, for every file the Studio saves (QSaveFile
        // replaced a device node with a regular file and wrote through a link to one; QImage::save wrote into it).
        // A FIFO everywhere, a device node where this process may make one, and a link to either.
        QStringList targets{dir_.filePath(QStringLiteral("export.fifo"))};
        QVERIFY(mkfifo(QFile::encodeName(targets[0]).constData(), 0644) == 0);
        const QString node = dir_.filePath(QStringLiteral("export.node"));
        if (mknod(QFile::encodeName(node).constData(), S_IFCHR | 0666, makedev(1, 3)) == 0) targets << node;
        for (const QString& t : QStringList(targets)) {
            QVERIFY(QFile::link(t, t + QStringLiteral(".link")));
            targets << t + QStringLiteral(".link");
        }
        const auto unchanged = [](const QString& path) {
            struct stat st {};
            return stat(QFile::encodeName(path).constData(), &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode));
        };
        for (const QString& t : targets) {
            for (const Status& s : {heat->export_csv(t), heat->export_png(t), window_->save_conversation(t), window_->export_markdown(t)}) {
                QVERIFY2(!s.is_ok() && s.message().find("refusing to replace it") != std::string::npos, s.message().c_str());
                QVERIFY2(unchanged(t), qPrintable(t));
            }
        }
    }

    void convert_dialog_converts_cancels_and_validates() {
        ConvertDialog* dialog = window_->convert_dialog();
        dialog->show();
        // An incomplete form says what is missing and starts nothing.
        dialog->set_source(dir_.filePath(QStringLiteral("no-such-model")));
        QVERIFY(!dialog->start());
        QVERIFY(dialog->status_label()->text().startsWith(QStringLiteral("Choose")));

        // The default output: the user's models folder (made on demand), named from the source and the type, never
        // beside the source (a read-only folder here).
        QVERIFY(ConvertDialog::default_models_folder().startsWith(QStandardPaths::writableLocation(QStandardPaths::DocumentsLocation)));
        QVERIFY(ConvertDialog::default_models_folder().endsWith(QStringLiteral("/Colibri models")));
        const QString models = dir_.filePath(QStringLiteral("Colibri models"));
        QVERIFY(!QFileInfo::exists(models));
        dialog->set_models_folder(models);
        QSignalSpy previewed(dialog, &ConvertDialog::previewed);
        dialog->set_source(reference(QStringLiteral("hf/olmoe/model")));
        QCOMPARE(dialog->output(), models + QStringLiteral("/olmoe-f16.bin"));  // "model" says nothing: its parent names it
        dialog->set_type(QStringLiteral("q8_0"));
        QCOMPARE(dialog->output(), models + QStringLiteral("/olmoe-q8_0.bin"));
        dialog->set_zstd(true);
        const QString out = models + QStringLiteral("/olmoe-q8_0.bin.zst");
        QCOMPARE(dialog->output(), out);
        // The types come with what they are; the preview says what the source is and what each type would write.
        QVERIFY2(dialog->type_box()->currentText().startsWith(QStringLiteral("q8_0 — 8.5 bits")), qPrintable(dialog->type_box()->currentText()));
        QVERIFY(wait_for(previewed, 1));
        const SourcePreview& p = dialog->preview();
        QVERIFY2(p.error.isEmpty(), qPrintable(p.error));
        const FileLayout olmoe = read_layout(olmoe_);
        quint64 parameters = 0;
        for (const TensorInfo& t : olmoe.tensors) parameters += t.rows * t.cols;
        QCOMPARE(p.parameters, parameters);
        QCOMPARE(p.family, QStringLiteral("olmoe"));
        const QString summary = dialog->source_summary()->text();
        QVERIFY2(summary.startsWith(QStringLiteral("olmoe: 2 layers, 8 experts (top 2); ") + human_count(parameters) + QStringLiteral(" parameters")) &&
                     summary.contains(QStringLiteral("no tokenizer")), qPrintable(summary));
        QTableWidget* types = dialog->type_table();
        QCOMPARE(types->rowCount(), dialog->type_box()->count());
        QMap<QString, int> row_of;
        for (int r = 0; r < types->rowCount(); ++r) row_of[types->item(r, 0)->text()] = r;
        // The f32 estimate is the size the f32 conversion has (initTestCase wrote it with the CLI's default, f32).
        QCOMPARE(olmoe.tensors.front().type, QStringLiteral("f32"));
        QCOMPARE(types->item(row_of["f32"], 2)->text(), human_bytes(olmoe.image_size));
        QVERIFY2(types->item(row_of["q8_0"], 1)->text().startsWith(QStringLiteral("8.5 bits")), qPrintable(types->item(row_of["q8_0"], 1)->text()));
        // Measured quality, as docs/QUANTIZATION.md's tables give it (the trained model's first, then the random model's).
        const QString doc = QString::fromUtf8(read_all(QStringLiteral(COLIBRI_SOURCE_DIR "/docs/QUANTIZATION.md")));
        const TypeQuality q8 = quantization_quality(doc).value(QStringLiteral("q8_0"));
        QCOMPARE(q8.trained_top1, QStringLiteral("99.78 %"));
        QVERIFY2(types->item(row_of["q8_0"], 3)->text().startsWith(QStringLiteral("99.78 % same next token, KL 0.00075 (trained demo model); 122/256 top-1, KL 0.075")),
                 qPrintable(types->item(row_of["q8_0"], 3)->text()));
        QCOMPARE(types->item(row_of["q5_k"], 3)->text(), QStringLiteral("not measured"));
        QCOMPARE(types->currentRow(), row_of["q8_0"]);
        // A GGUF source: its f16 estimate is the size `colibri convert --type f16` writes.
        const QString gguf = QStringLiteral(COLIBRI_TEST_DATA_DIR "/gguf/olmoe-f32.gguf");
        const SourcePreview gp = source_preview(gguf);
        QVERIFY2(gp.error.isEmpty(), qPrintable(gp.error));
        QCOMPARE(gp.family, QStringLiteral("olmoe"));
        QCOMPARE(ConvertDialog::output_name(gguf, QStringLiteral("f16"), false), QStringLiteral("olmoe-f32-f16.bin"));
        const QString gguf_f16 = dir_.filePath(QStringLiteral("gguf-f16.bin"));
        QCOMPARE(run_cli({"convert", gguf, "-o", gguf_f16, "--type", "f16", "-q"}).exit_code, 0);
        bool sized = false;
        for (const auto& [type, bytes] : gp.output_bytes)
            if (type == QLatin1String("f16")) {
                QCOMPARE(bytes, static_cast<quint64>(QFileInfo(gguf_f16).size()));
                sized = true;
            }
        QVERIFY(sized);
        // A directory that is no model says why, in the summary.
        QSignalSpy previewed_bad(dialog, &ConvertDialog::previewed);
        dialog->set_source(dir_.path());
        QVERIFY(wait_for(previewed_bad, 1));
        QVERIFY2(dialog->source_summary()->text().startsWith(QStringLiteral("Cannot convert this source: ")) &&
                     dialog->source_summary()->text().contains(QStringLiteral("config.json")),
                 qPrintable(dialog->source_summary()->text()));
        dialog->set_source(reference(QStringLiteral("hf/olmoe/model")));
        QCOMPARE(dialog->output(), out);  // the suggestion follows the source again
        // Cancelled at once: nothing is written.
        QSignalSpy finished(dialog, &ConvertDialog::finished);
        QVERIFY(dialog->start());
        QVERIFY(dialog->running());
        dialog->cancel();
        QVERIFY(wait_for(finished, 1));
        QCOMPARE(finished.at(0).at(0).toBool(), false);
        QVERIFY(dialog->status_label()->text().startsWith(QStringLiteral("Cancelled")));
        QVERIFY(!QFile::exists(out));
        // Converted, then opened in the validator, which verifies it.
        QSignalSpy verified(window_->validator_view(), &ValidatorView::verifiedFile);
        QVERIFY(dialog->start());
        QVERIFY(wait_for(finished, 2, 120000));
        QCOMPARE(finished.at(1).at(0).toBool(), true);
        QCOMPARE(dialog->progress_bar()->value(), dialog->progress_bar()->maximum());
        QVERIFY2(dialog->status_label()->text().contains(QStringLiteral("olmoe")), qPrintable(dialog->status_label()->text()));
        QVERIFY(wait_for(verified, 1, 60000));
        QCOMPARE(verified.at(0).at(0).toString(), out);
        QCOMPARE(verified.at(0).at(1).toBool(), true);
        QVERIFY(window_->validator_view()->file_layout().compressed);
        QVERIFY(QFileInfo(models).isDir() && QFileInfo(models).isWritable());
        // The preview's q8_0 size is the written image's.
        QCOMPARE(types->item(row_of["q8_0"], 2)->text(), human_bytes(window_->validator_view()->file_layout().image_size));
        for (const auto& [type, bytes] : p.output_bytes)
            if (type == QLatin1String("q8_0")) QCOMPARE(bytes, window_->validator_view()->file_layout().image_size);
        QCOMPARE(check_json(out)["valid"].toBool(), true);
        dialog->hide();
    }

    void validator_shows_a_damaged_expert() {
        const QString damaged = dir_.filePath(QStringLiteral("damaged-expert.bin"));
        const int section = damage_first_expert(mixtral_, damaged);
        QVERIFY(section > 0);
        ValidatorView* v = window_->validator_view();
        // The engine maps experts lazily, so the file loads; the validator, verifying it on load, shows the damage.
        QSignalSpy verified(v, &ValidatorView::verifiedFile);
        QVERIFY(open(damaged));
        QVERIFY(wait_for(verified, 1));
        QCOMPARE(verified.at(0).at(0).toString(), damaged);
        QCOMPARE(verified.at(0).at(1).toBool(), false);
        const std::vector<SectionState>& states = v->states();
        for (size_t i = 0; i < states.size(); ++i)
            QCOMPARE(states[i], static_cast<int>(i) == section ? SectionState::Damaged : SectionState::Ok);
        QVERIFY(v->status_label()->text().startsWith(QStringLiteral("INVALID")));
        const QStringList problems = v->problems()->stringList();
        QCOMPARE(problems.size(), 1);
        QVERIFY2(problems[0].contains(QStringLiteral("expert 0")) && problems[0].contains(QStringLiteral("mismatch")), qPrintable(problems[0]));
        // The problem names the section's byte range (a checksum covers a section, not one tensor).
        const SectionInfo& si = v->file_layout().sections[static_cast<size_t>(section)];
        QVERIFY2(problems[0].contains(QStringLiteral("in bytes 0x%1..0x%2").arg(si.offset, 0, 16).arg(si.offset + si.size - 1, 0, 16)), qPrintable(problems[0]));
        // Every tensor of the section, and only those, is marked damaged in the table.
        int damaged_rows = 0;
        for (int r = 0; r < v->tensors()->rowCount(); ++r) {
            const bool in_section = v->tensors()->index(r, 0).data(TensorTableModel::SectionRole).toInt() == section;
            QCOMPARE(v->tensors()->index(r, TensorTableModel::Checksum).data().toString(),
                     in_section ? QStringLiteral("damaged") : QStringLiteral("checksum ok"));
            damaged_rows += in_section ? 1 : 0;
        }
        QCOMPARE(damaged_rows, 3);  // gate, up, down
        // The map draws the section in the damaged colour.
        window_->dock_of(v)->show();
        window_->dock_of(v)->raise();
        QTest::qWait(50);
        const QRect r = v->map()->section_rect(section);
        QVERIFY(!r.isEmpty());
        const QColor drawn = v->map()->grab().toImage().pixelColor(QPoint(r.right(), r.center().y()));
        const QColor red = section_state_color(SectionState::Damaged);
        QVERIFY2(drawn == red || drawn == red.darker(115), qPrintable(drawn.name()));

        // A file the engine refuses (its tables' checksum fails) opens in the validator, drawn with the damage.
        QByteArray bytes = read_all(mixtral_);
        bytes[300] = static_cast<char>(bytes[300] ^ 0xFF);
        const QString refused = write_all(dir_.filePath(QStringLiteral("damaged-tables.bin")), bytes);
        QSignalSpy failed(window_.get(), &MainWindow::modelLoadFailed);
        QSignalSpy verified_refused(v, &ValidatorView::verifiedFile);
        window_->open_model(refused);
        QVERIFY(wait_for(failed, 1));
        QVERIFY(failed.at(0).at(1).toString().contains(QStringLiteral("metadata checksum")));
        QVERIFY2(window_->banner()->text().startsWith(QStringLiteral("Could not load")), qPrintable(window_->banner()->text()));
        QVERIFY(window_->banner()->button(QStringLiteral("Show the damage")) != nullptr);
        // The model open before (the damaged-expert copy, which loads) stays open.
        QVERIFY(window_->chat_view()->send_button()->isEnabled());
        QVERIFY(window_->windowTitle().startsWith(QStringLiteral("damaged-expert.bin")));
        QVERIFY(wait_for(verified_refused, 1));
        QCOMPARE(verified_refused.at(0).at(0).toString(), refused);
        QCOMPARE(v->file_layout().path, refused);
        QVERIFY(v->file_layout().error.isEmpty());
        QCOMPARE(v->file_layout().sections.size(), read_layout(mixtral_).sections.size());
        QCOMPARE(v->states()[0], SectionState::Damaged);  // section 0: the metadata
        QVERIFY(v->status_label()->text().startsWith(QStringLiteral("INVALID")));
        // A file with nothing readable says why.
        const QString garbage = write_all(dir_.filePath(QStringLiteral("garbage.bin")), QByteArray(100, 'x'));
        window_->validate_file(garbage);
        QTRY_VERIFY_WITH_TIMEOUT(v->file_layout().path == garbage && !v->problems()->stringList().isEmpty(), 10000);
    }

    // A NaN written into one expert tensor: the problem names that tensor, the byte offset and the row and column.
    void damaged_tensor_and_offset_are_named() {
        const FileLayout layout = read_layout(mixtral_);
        const TensorInfo* up = nullptr;
        for (const TensorInfo& t : layout.tensors)
            if (t.name == QLatin1String("layers.1.experts.3.up")) up = &t;
        QVERIFY(up != nullptr);
        QCOMPARE(up->type, QStringLiteral("f32"));
        QByteArray bytes = read_all(mixtral_);
        const quint64 at = up->offset + (up->cols + 5) * 4;  // row 1, column 5
        for (int i = 0; i < 4; ++i) bytes[static_cast<qsizetype>(at) + i] = static_cast<char>(0xFF);
        const QString damaged = write_all(dir_.filePath(QStringLiteral("nan-expert.bin")), bytes);
        ValidatorView* v = window_->validator_view();
        QSignalSpy verified(v, &ValidatorView::verifiedFile);
        window_->validate_file(damaged);
        QVERIFY(wait_for(verified, 1));
        const QStringList problems = v->problems()->stringList();
        QCOMPARE(problems.size(), 1);
        QCOMPARE(problems[0], QStringLiteral("layer 1 expert 3 (gate up down): xxh64 mismatch in bytes 0x%1..0x%2; tensor layers.1.experts.3.up holds a NaN "
                                             "at byte 0x%3 (row 1, column 5)")
                                  .arg(layout.sections[static_cast<size_t>(up->section)].offset, 0, 16)
                                  .arg(layout.sections[static_cast<size_t>(up->section)].offset + layout.sections[static_cast<size_t>(up->section)].size - 1, 0, 16)
                                  .arg(at, 0, 16));
        // The CLI says the same.
        const CliResult cli = run_cli({"check", damaged});
        QCOMPARE(cli.exit_code, 1);
        QVERIFY2(QString::fromUtf8(cli.out).contains(problems[0]), cli.out.constData());
        // The graph (the first tab) frames the damaged layer's experts in the damaged colour and says so.
        show_validator_at(1280, 600);
        v->tabs()->setCurrentIndex(0);
        QTest::qWait(20);
        const auto& rows = v->graph()->graph();
        bool marked = false;
        v->graph()->repaint();
        for (const QString& t : v->graph()->drawn_text()) marked = marked || t.startsWith(QStringLiteral("8 experts — damaged"));
        QVERIFY2(marked, qPrintable(v->graph()->drawn_text().join(QStringLiteral(" | "))));
        QVERIFY(!rows.empty());
    }

    // The layer graph of a MoE with a shared expert (the suites' qwen2_moe) and of a Gated DeltaNet hybrid: blocks in
    // the order the data flows, tensors with shape and type; a click on a block selects its tensors in the table.
    void layer_graph_shows_blocks_and_selects_tensors() {
        const std::vector<GraphRow> moe = model_graph(read_layout(QStringLiteral(COLIBRI_UI_TEST_MODEL)));
        QCOMPARE(moe.size(), size_t(6));  // input, 4 layers, output
        QCOMPARE(moe.front().label, QStringLiteral("input"));
        QCOMPARE(moe.front().blocks.size(), size_t(2));
        QCOMPARE(moe.front().blocks[0].kind, GraphBlock::Kind::Tokenizer);
        QCOMPARE(moe.front().blocks[1].kind, GraphBlock::Kind::Embedding);
        QCOMPARE(moe.front().blocks[1].tensors, QStringList{QStringLiteral("embed 4096×128 f16")});
        for (int l = 0; l < 4; ++l) {
            const GraphRow& row = moe[static_cast<size_t>(l + 1)];
            QCOMPARE(row.label, QStringLiteral("layer %1").arg(l));
            QStringList titles;
            for (const GraphBlock& b : row.blocks) titles << b.title;
            QCOMPARE(titles, (QStringList{"attention", "router", "8 experts", "shared expert"}));
            QCOMPARE(row.blocks[2].sections.size(), size_t(8));
            QCOMPARE(row.blocks[2].tensors, (QStringList{"gate 256×128 f16 ×8", "up 256×128 f16 ×8", "down 128×256 f16 ×8"}));
            QVERIFY2(row.blocks[1].tensors.contains(QStringLiteral("router 8×128 f32")), qPrintable(row.blocks[1].tensors.join(", ")));
            QVERIFY2(row.blocks[0].tensors.contains(QStringLiteral("q 128×128 f16")), qPrintable(row.blocks[0].tensors.join(", ")));
        }
        QCOMPARE(moe.back().blocks.front().kind, GraphBlock::Kind::Output);

        // The hybrid: linear-attention layers where config.json's layer_types says so, softmax attention elsewhere.
        const QString hybrid = convert_reference(dir_, QStringLiteral("qwen3_next"));
        QVERIFY(!hybrid.isEmpty());
        const std::vector<GraphRow> h = model_graph(read_layout(hybrid));
        const QJsonArray types = read_json(reference("hf/qwen3_next/model/config.json")).object()["layer_types"].toArray();
        QVERIFY(!types.isEmpty());
        int linear = 0;
        for (int l = 0; l < types.size(); ++l) {
            const GraphRow& row = h[static_cast<size_t>(l + 1)];
            QCOMPARE(row.layer, l);
            const bool is_linear = types[l].toString() == QLatin1String("linear_attention");
            QCOMPARE(row.blocks.front().kind, is_linear ? GraphBlock::Kind::LinearAttention : GraphBlock::Kind::Attention);
            linear += is_linear ? 1 : 0;
        }
        QVERIFY(linear > 0 && linear < types.size());

        // Drawn in the validator: the blocks' titles and tensor lines, unelided at the dock's size; a click selects.
        ValidatorView* v = window_->validator_view();
        show_validator_at(1280, 600);
        QSignalSpy verified(v, &ValidatorView::verifiedFile);
        window_->validate_file(QStringLiteral(COLIBRI_UI_TEST_MODEL));
        QVERIFY(wait_for(verified, 1));
        v->tabs()->setCurrentIndex(0);
        QCOMPARE(v->tabs()->tabText(0), QStringLiteral("Layers"));
        QTest::qWait(50);
        ModelGraphView* g = v->graph();
        QVERIFY(g->isVisible() && g->width() > 200);
        g->repaint();
        const QStringList drawn = g->drawn_text();
        for (const QString& want : {QStringLiteral("attention"), QStringLiteral("router"), QStringLiteral("8 experts"), QStringLiteral("shared expert"),
                                    QStringLiteral("embedding"), QStringLiteral("norm + lm head"), QStringLiteral("gate 256×128 f16 ×8")})
            QVERIFY2(drawn.contains(want), qPrintable(want + QStringLiteral(" not in ") + drawn.join(QStringLiteral(" | "))));
        const QRect experts = g->block_rect(2, 2);  // layer 1's experts
        QVERIFY(!experts.isEmpty());
        QTest::mouseClick(g, Qt::LeftButton, {}, experts.center());
        QCOMPARE(g->selected(), std::make_pair(2, 2));
        QCOMPARE(v->tabs()->tabText(v->tabs()->currentIndex()), QStringLiteral("Tensors"));  // the selection shown
        const QModelIndexList selected = v->tensor_table()->selectionModel()->selectedRows();
        QCOMPARE(selected.size(), 24);  // 8 experts × gate, up, down
        for (const QModelIndex& i : selected)
            QVERIFY2(i.data().toString().startsWith(QStringLiteral("layers.1.experts.")), qPrintable(i.data().toString()));
        // The tokenizer line: this file has one.
        QCOMPARE(v->status_label()->text(), QStringLiteral("Valid: every section is aligned and matches its checksum; shapes and tokenizer load."));
    }

    // The map's legend is a row of its own under the map; the map's last row is not covered; a file converted
    // without a tokenizer is not said to have one; the histogram's tick labels fit at dock size.
    void validator_legend_tokenizer_line_and_histogram() {
        ValidatorView* v = window_->validator_view();
        window_->dock_of(v)->show();
        window_->dock_of(v)->raise();
        QSignalSpy verified(v, &ValidatorView::verifiedFile);
        window_->validate_file(mixtral_);  // the reference checkpoint has no tokenizer
        QVERIFY(wait_for(verified, 1));
        QCOMPARE(verified.at(0).at(1).toBool(), true);
        const QString status = v->status_label()->text();
        QVERIFY2(status.startsWith(QStringLiteral("Valid:")) && status.contains(QStringLiteral("No tokenizer")) &&
                     !status.contains(QStringLiteral("tokenizer load")), qPrintable(status));
        QTest::qWait(50);
        const QRect map = v->map()->geometry(), legend = v->legend()->geometry();
        QVERIFY(v->legend()->isVisible());
        QVERIFY2(!map.intersects(legend) && legend.top() >= map.bottom(), qPrintable(QStringLiteral("map %1,%2 %3x%4; legend top %5")
                                                                                        .arg(map.x()).arg(map.y()).arg(map.width()).arg(map.height()).arg(legend.top())));
        // Every section is drawn inside the map: the rectangle of the one that ends the file ends above its bottom edge.
        int last = 0;
        for (const SectionInfo& si : v->file_layout().sections)
            if (si.offset + si.size > v->file_layout().sections[static_cast<size_t>(last)].offset + v->file_layout().sections[static_cast<size_t>(last)].size)
                last = si.index;
        const QRect end = v->map()->section_rect(last);
        QVERIFY(!end.isEmpty());
        const int rows_drawn = v->map()->height() / 16;  // whole 16-px rows
        QVERIFY2(end.bottom() < rows_drawn * 16, qPrintable(QStringLiteral("%1 of %2 rows").arg(end.bottom()).arg(rows_drawn)));

        // The histogram at a narrow dock's width: as many ticks as fit, none elided.
        v->histogram_view()->setFixedWidth(220);
        QSignalSpy shown(v, &ValidatorView::histogramShown);
        v->select_sections({v->file_layout().tensors.front().section});
        QVERIFY(wait_for(shown, 1));
        QTest::qWait(100);  // the chart lays out, then the ticks are fitted
        const auto axes = v->histogram_chart()->axes(Qt::Horizontal);
        QCOMPARE(axes.size(), 1);
        auto* x = qobject_cast<QValueAxis*>(axes.front());
        const QStringList labels = v->histogram_tick_labels();
        QVERIFY(labels.size() >= 2);
        const double spacing = v->histogram_chart()->plotArea().width() / (labels.size() - 1);
        for (const QString& label : labels) {
            QVERIFY2(!label.contains(QChar(0x2026)), qPrintable(label));
            QVERIFY2(QFontMetrics(x->labelsFont()).horizontalAdvance(label) + 8 < spacing,  // a gap between neighbours
                     qPrintable(QStringLiteral("%1 in %2 px").arg(label).arg(spacing)));
        }
        v->histogram_view()->setMinimumWidth(0);
        v->histogram_view()->setMaximumWidth(QWIDGETSIZE_MAX);
    }

    // Compared with its q4_0 copy: what differs comes first, worst first, identical tensors (the f32 norms and routers) last.
    void comparison_lists_differing_tensors_first() {
        const QString q4 = dir_.filePath(QStringLiteral("mixtral-q4_0.bin"));
        QCOMPARE(run_cli({"convert", reference(QStringLiteral("hf/mixtral/model")), "-o", q4, "--type", "q4_0", "-q"}).exit_code, 0);
        ValidatorView* v = window_->validator_view();
        QSignalSpy verified(v, &ValidatorView::verifiedFile);
        window_->validate_file(mixtral_);
        QVERIFY(wait_for(verified, 1));
        QSignalSpy compared(v, &ValidatorView::compared);
        v->compare_with(q4);
        QVERIFY(wait_for(compared, 1));
        QCOMPARE(compared.at(0).at(0).toBool(), true);
        QAbstractItemModel* shown = v->comparison_table()->model();
        int identical_seen = 0, differs = 0;
        double previous = 1e300;
        for (int r = 0; r < shown->rowCount(); ++r) {
            const QString result = shown->index(r, 1).data().toString();
            if (result == QLatin1String("identical")) {
                ++identical_seen;
                continue;
            }
            QCOMPARE(result, QStringLiteral("differs"));
            QCOMPARE(identical_seen, 0);  // nothing differing after an identical row
            const double rel = shown->index(r, 6).data(Qt::EditRole).toDouble();
            QVERIFY2(rel <= previous, qPrintable(QStringLiteral("row %1: %2 after %3").arg(r).arg(rel).arg(previous)));
            previous = rel;
            ++differs;
        }
        QVERIFY(differs > 0 && identical_seen > 0);
        QCOMPARE(v->comparison_table()->horizontalHeader()->sortIndicatorSection(), -1);
    }
};

QTEST_MAIN(TestViews)
#include "test_ui_views.moc"
