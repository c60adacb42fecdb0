// `colibri-studio --screenshot DIR [--geometry WxH] [model]` offscreen: one PNG per main view, each a real
// picture (not empty, not one flat colour), the window at the geometry asked for, on a model with a tokenizer
// and on one without; a one-line error for a model that is not there and for a malformed geometry.
#include <QImage>
#include <QProcess>
#include <QSet>

#include "ui_test_support.h"

using namespace colibri::test;

namespace {

// Distinct colours among every third pixel of every third row, counted up to 64.
int sampled_colours(const QImage& image) {
    QSet<QRgb> colours;
    for (int y = 0; y < image.height() && colours.size() < 64; y += 3)
        for (int x = 0; x < image.width() && colours.size() < 64; x += 3) colours.insert(image.pixel(x, y));
    return static_cast<int>(colours.size());
}

struct Run {
    int exit_code = -1;
    QByteArray out, err;
};

Run studio(const QStringList& args) {
    QProcess p;
    p.start(QStringLiteral(COLIBRI_STUDIO), args);
    Run r;
    if (!p.waitForFinished(240000)) {
        p.kill();
        p.waitForFinished();
        return r;
    }
    r.exit_code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    r.out = p.readAllStandardOutput();
    r.err = p.readAllStandardError();
    return r;
}

}  // namespace

class TestScreenshot : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

private slots:
    void every_view_is_drawn() {
        const QString report = write_all(dir_.filePath(QStringLiteral("tune.json")), R"({"colibri_version":"0.1.0",
            "cpu":{"model":"test CPU","features":["avx2"]},
            "results":[{"op":"matvec","type":"f16","rows":4096,"cols":4096,"variant":"scalar","ns_median":9e6,"gflops":3.7,"gbps":3.7,"chosen":false},
                       {"op":"matvec","type":"f16","rows":4096,"cols":4096,"variant":"avx2","ns_median":1.5e6,"gflops":22.4,"gbps":22.4,"chosen":true}]})");
        const QString shots = dir_.filePath(QStringLiteral("shots"));
        const Run r = studio({"--screenshot", shots, "--tune-report", report, "--screenshot-convert",
                              reference(QStringLiteral("hf/mixtral/model")), QStringLiteral(COLIBRI_UI_TEST_MODEL)});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        const QStringList views = {"main", "chat", "routing", "heatmap", "analyses", "cache", "profiler", "kernels", "validator", "convert"};
        QStringList written;
        for (const QString& v : views) written << QDir(shots).filePath(v + QStringLiteral(".png"));
        QCOMPARE(QString::fromUtf8(r.out).split('\n', Qt::SkipEmptyParts), written);
        for (const QString& path : written) {
            QVERIFY2(QFileInfo(path).size() > 0, qPrintable(path));
            const QImage image(path);
            QVERIFY2(!image.isNull(), qPrintable(path));
            QVERIFY2(image.width() >= 400 && image.height() >= 200, qPrintable(path));
            // A drawn view has text, tables and charts: many colours. A flat or blank grab has one or two.
            const int colours = sampled_colours(image);
            QVERIFY2(colours >= 64, qPrintable(QStringLiteral("%1: only %2 colours").arg(path).arg(colours)));
        }
    }

    // A Gated DeltaNet hybrid (the reference Qwen3-Next) adds the window with its recurrent states and the state view.
    void hybrid_adds_the_state_view() {
        const QString model = dir_.filePath(QStringLiteral("qwen3_next.bin"));
        QCOMPARE(run_cli({"convert", reference(QStringLiteral("hf/qwen3_next/model")), "-o", model, "-q"}).exit_code, 0);
        const QString shots = dir_.filePath(QStringLiteral("hybrid"));
        const Run r = studio({"--screenshot", shots, "--geometry", "1280x720", model});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        QStringList written;
        for (const char* v : {"main", "main-state", "chat", "routing", "heatmap", "state", "analyses", "cache", "profiler", "kernels", "validator", "convert"})
            written << QDir(shots).filePath(QString::fromLatin1(v) + QStringLiteral(".png"));
        QCOMPARE(QString::fromUtf8(r.out).split('\n', Qt::SkipEmptyParts), written);
        QCOMPARE(QImage(written[1]).size(), QSize(1280, 720));
        // The state view is drawn: the heat scale's many colours.
        QVERIFY2(sampled_colours(QImage(written[5])) >= 64, qPrintable(written[5]));
    }

    // The reference Mixtral has no tokenizer: the conversation is token ids. At 1920x1080 the window is that big.
    void any_model_at_any_geometry() {
        const QString model = dir_.filePath(QStringLiteral("mixtral.bin"));
        QCOMPARE(run_cli({"convert", reference(QStringLiteral("hf/mixtral/model")), "-o", model, "-q"}).exit_code, 0);
        const QString shots = dir_.filePath(QStringLiteral("shots-1080"));
        const Run r = studio({"--screenshot", shots, "--geometry", "1920x1080", model});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        const QImage main(QDir(shots).filePath(QStringLiteral("main.png")));
        QCOMPARE(main.size(), QSize(1920, 1080));
        for (const char* view : {"chat", "routing", "heatmap", "analyses", "profiler", "kernels", "validator"}) {
            const QImage image(QDir(shots).filePath(QString::fromLatin1(view) + QStringLiteral(".png")));
            QVERIFY2(!image.isNull() && image.width() == 1920, view);
        }
        const QString small = dir_.filePath(QStringLiteral("shots-720"));
        const Run demo = studio({"--screenshot", small, "--geometry", "1280x720", QStringLiteral(COLIBRI_UI_TEST_MODEL)});
        QVERIFY2(demo.exit_code == 0, demo.err.constData());
        QCOMPARE(QImage(QDir(small).filePath(QStringLiteral("main.png"))).size(), QSize(1280, 720));
        const Run bad = studio({"--screenshot", small, "--geometry", "wide", QStringLiteral(COLIBRI_UI_TEST_MODEL)});
        QCOMPARE(bad.exit_code, 2);
        const QStringList lines = QString::fromUtf8(bad.err).split('\n', Qt::SkipEmptyParts).filter(QStringLiteral("colibri-studio:"));
        QCOMPARE(lines.size(), 1);
        QVERIFY2(lines[0].startsWith(QStringLiteral("colibri-studio: --geometry wide:")), qPrintable(lines[0]));
    }

    void missing_model_is_a_one_line_error() {
        const Run r = studio({"--screenshot", dir_.filePath(QStringLiteral("none")), dir_.filePath(QStringLiteral("missing.bin"))});
        QCOMPARE(r.exit_code, 1);
        const QStringList lines = QString::fromUtf8(r.err).split('\n', Qt::SkipEmptyParts).filter(QStringLiteral("colibri-studio:"));
        QCOMPARE(lines.size(), 1);
        QVERIFY2(lines[0].contains(QStringLiteral("missing.bin")), qPrintable(lines[0]));
    }
};

QTEST_GUILESS_MAIN(TestScreenshot)
#include "test_ui_screenshot.moc"
