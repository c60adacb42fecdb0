// colibri-studio: the Qt 6 desktop application. Entry point only; everything else is colibri_studio_core.
#include <QApplication>
#include <QCommandLineParser>
#include <QFileInfo>
#include <cstdio>

#include "ui/views/main_window.h"
#include "ui/views/screenshot.h"

#ifndef COLIBRI_DEMO_MODEL
#define COLIBRI_DEMO_MODEL ""
#endif

using namespace colibri::studio;

int main(int argc, char** argv) {
    QApplication app(argc, argv);
    QApplication::setOrganizationName(QStringLiteral("Colibri"));
    QApplication::setApplicationName(QStringLiteral("Colibri Studio"));
    QApplication::setApplicationVersion(QStringLiteral("0.1.0"));

    QCommandLineParser cli;
    cli.setApplicationDescription(QStringLiteral("Colibri Studio: chat, routing, heatmaps, profiling and model files"));
    cli.addHelpOption();
    cli.addVersionOption();
    cli.addPositionalArgument(QStringLiteral("model"), QStringLiteral("model to open (.bin or .bin.zst)"), QStringLiteral("[model]"));
    const QCommandLineOption screenshot(QStringLiteral("screenshot"), QStringLiteral("write a PNG of every view into DIR and exit"),
                                        QStringLiteral("DIR"));
    const QCommandLineOption tune_report(QStringLiteral("tune-report"), QStringLiteral("import a `colibri tune --json` report (repeatable)"),
                                         QStringLiteral("FILE"));
    const QCommandLineOption threads(QStringLiteral("threads"), QStringLiteral("engine threads (default: all cores)"), QStringLiteral("N"));
    const QCommandLineOption convert_source(QStringLiteral("screenshot-convert"),
                                            QStringLiteral("with --screenshot: convert SRC (HF directory or GGUF) in the convert dialog's picture"),
                                            QStringLiteral("SRC"));
    const QCommandLineOption tune(QStringLiteral("screenshot-tune"),
                                  QStringLiteral("with --screenshot: run the quick auto-tune for the kernels view's picture"));
    cli.addOptions({screenshot, tune_report, threads, convert_source, tune});
    cli.process(app);

    MainWindowOptions options;
    options.persist_settings = !cli.isSet(screenshot);
    options.load.threads = cli.value(threads).toUInt();
    const QStringList args = cli.positionalArguments();
    if (args.size() > 1) {
        std::fprintf(stderr, "colibri-studio: usage: colibri-studio [--screenshot DIR] [model]\n");
        return 2;
    }
    MainWindow window(options);

    if (cli.isSet(screenshot)) {
        ScreenshotOptions shot;
        shot.dir = cli.value(screenshot);
        shot.model = args.isEmpty() ? QStringLiteral(COLIBRI_DEMO_MODEL) : args.front();
        shot.tune_reports = cli.values(tune_report);
        shot.convert_source = cli.value(convert_source);
        shot.tune = cli.isSet(tune);
        if (!QFileInfo::exists(shot.model)) {
            std::fprintf(stderr, "colibri-studio: screenshot: %s: no such file\n", qPrintable(shot.model));
            return 1;
        }
        auto written = take_screenshots(window, shot);
        if (!written) {
            std::fprintf(stderr, "colibri-studio: screenshot: %s\n", written.message().c_str());
            return 1;
        }
        for (const QString& p : written.value()) std::printf("%s\n", qPrintable(p));
        return 0;
    }

    for (const QString& report : cli.values(tune_report)) window.import_tune_report(report);
    window.show();
    if (!args.isEmpty()) window.open_model(args.front());
    return app.exec();
}
