// colibri-studio: the Qt 6 desktop application. Entry point only; everything else is colibri_ui.
#include <QApplication>
#include <QCommandLineParser>
#include <QFileInfo>
#include <QRegularExpression>
#include <cstdio>
#include <optional>

#include "kernels/tuner.h"
#include "tools/byte_size.h"
#include "tools/tune_cache.h"
#include "ui/views/main_window.h"
#include "ui/views/screenshot.h"

#ifndef COLIBRI_DEMO_MODEL
#define COLIBRI_DEMO_MODEL ""
#endif

using namespace colibri;
using namespace colibri::studio;

namespace {

int fail(const QString& what) {
    std::fprintf(stderr, "colibri-studio: %s\n", qPrintable(what));
    return 1;
}

// "1280x720" → the size; empty when malformed.
QSize parse_geometry(const QString& text) {
    const QRegularExpressionMatch m = QRegularExpression(QStringLiteral("^(\\d{3,5})[xX](\\d{3,5})$")).match(text.trimmed());
    if (!m.hasMatch()) return {};
    return {m.captured(1).toInt(), m.captured(2).toInt()};
}

}  // namespace

int main(int argc, char** argv) {
    QApplication app(argc, argv);
    QApplication::setOrganizationName(QStringLiteral("Colibri"));
    QApplication::setApplicationName(QStringLiteral("Colibri Studio"));
    QApplication::setApplicationVersion(QStringLiteral("0.1.0"));
    QApplication::setDesktopFileName(QStringLiteral("colibri-studio"));

    QCommandLineParser cli;
    cli.setApplicationDescription(QStringLiteral("Colibri Studio: chat, routing, heatmaps, profiling, kernels and model files"));
    cli.addHelpOption();
    cli.addVersionOption();
    cli.addPositionalArgument(QStringLiteral("model"), QStringLiteral("model to open (.bin or .bin.zst; a .gguf file or Hugging Face directory is offered for conversion)"),
                              QStringLiteral("[model]"));
    const QCommandLineOption screenshot(QStringLiteral("screenshot"), QStringLiteral("write a PNG of every view into DIR and exit"),
                                        QStringLiteral("DIR"));
    const QCommandLineOption geometry(QStringLiteral("geometry"), QStringLiteral("window size, e.g. 1280x720 (with --screenshot: the pictures' size)"),
                                      QStringLiteral("WxH"));
    const QCommandLineOption tune_report(QStringLiteral("tune-report"), QStringLiteral("import a `colibri tune --json` report (repeatable)"),
                                         QStringLiteral("FILE"));
    const QCommandLineOption threads(QStringLiteral("threads"), QStringLiteral("engine threads (default: all cores)"), QStringLiteral("N"));
    const QCommandLineOption convert_source(QStringLiteral("screenshot-convert"),
                                            QStringLiteral("with --screenshot: convert SRC (HF directory or GGUF) in the convert dialog's picture"),
                                            QStringLiteral("SRC"));
    const QCommandLineOption tune(QStringLiteral("screenshot-tune"),
                                  QStringLiteral("with --screenshot: run the quick auto-tune for the kernels view's picture"));
    const QCommandLineOption compare(QStringLiteral("screenshot-compare"),
                                     QStringLiteral("with --screenshot: compare every kernel variant on the model for the kernels view's picture"));
    const QCommandLineOption ram_budget(QStringLiteral("ram-budget"),
                                        QStringLiteral("open the model with its routed experts in a cache within SIZE (e.g. 6G, 512M) or a share "
                                                       "of the model file (50%)"),
                                        QStringLiteral("SIZE"));
    const QCommandLineOption cache_policy(QStringLiteral("cache-policy"), QStringLiteral("with --ram-budget: lru (default), lfru or pinned"),
                                          QStringLiteral("POLICY"));
    const QCommandLineOption hot_trace(QStringLiteral("hot-trace"), QStringLiteral("pinned: learn the hot experts from this routing trace (route --json)"),
                                       QStringLiteral("FILE"));
    const QCommandLineOption cache_prefetch(QStringLiteral("cache-prefetch"),
                                            QStringLiteral("with --ram-budget: read the experts predicted for the next layer ahead of use"));
    cli.addOptions({screenshot, geometry, tune_report, threads, convert_source, tune, compare, ram_budget, cache_policy, hot_trace, cache_prefetch});
    cli.process(app);

    // COLIBRI_KERNEL, else the tune cache's choice for this CPU, as the CLI does.
    std::string kernel_error, kernel_warning;
    if (!tools::configure_kernels(&kernel_error, &kernel_warning)) return fail(QString::fromStdString(kernel_error));
    if (!kernel_warning.empty()) std::fprintf(stderr, "colibri-studio: warning: %s\n", kernel_warning.c_str());

    QSize size(1280, 720);
    if (cli.isSet(geometry)) {
        size = parse_geometry(cli.value(geometry));
        if (size.isEmpty()) {
            std::fprintf(stderr, "colibri-studio: --geometry %s: expected WIDTHxHEIGHT, e.g. 1280x720\n", qPrintable(cli.value(geometry)));
            return 2;
        }
    }
    MainWindowOptions options;
    options.persist_settings = !cli.isSet(screenshot);
    options.keep_on_screen = !cli.isSet(screenshot);
    options.load.threads = cli.value(threads).toUInt();
    if (cli.isSet(ram_budget)) {
        auto budget = tools::parse_ram_budget(cli.value(ram_budget).toStdString());
        if (!budget) return fail(QStringLiteral("--ram-budget: %1").arg(QString::fromStdString(budget.message())));
        options.load.ram_budget = budget.value();
        const std::optional<CachePolicy> policy = parse_cache_policy(cli.value(cache_policy).isEmpty() ? "lru" : cli.value(cache_policy).toStdString());
        if (!policy) return fail(QStringLiteral("--cache-policy: unknown policy '%1' (lru, lfru or pinned)").arg(cli.value(cache_policy)));
        options.load.cache_policy = *policy;
        options.load.hot_trace = cli.value(hot_trace);
        if (*policy == CachePolicy::Pinned && options.load.hot_trace.isEmpty())
            return fail(QStringLiteral("--cache-policy pinned needs --hot-trace (a routing trace from colibri route --json)"));
        options.load.cache_prefetch = cli.isSet(cache_prefetch);
    } else if (cli.isSet(cache_policy) || cli.isSet(hot_trace) || cli.isSet(cache_prefetch)) {
        return fail(QStringLiteral("--cache-policy, --hot-trace and --cache-prefetch need --ram-budget"));
    }
    options.demo_model = QStringLiteral(COLIBRI_DEMO_MODEL);
    const QStringList args = cli.positionalArguments();
    if (args.size() > 1) {
        std::fprintf(stderr, "colibri-studio: usage: colibri-studio [--screenshot DIR] [--geometry WxH] [model]\n");
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
        shot.compare_kernels = cli.isSet(compare);
        shot.geometry = size;
        if (!QFileInfo::exists(shot.model)) return fail(QStringLiteral("screenshot: %1: no such file").arg(shot.model));
        if (!is_model_file(shot.model))
            return fail(QStringLiteral("screenshot: %1: not a .bin or .bin.zst model (convert it first: colibri convert)").arg(shot.model));
        auto written = take_screenshots(window, shot);
        if (!written) return fail(QStringLiteral("screenshot: %1").arg(QString::fromStdString(written.message())));
        for (const QString& p : written.value()) std::printf("%s\n", qPrintable(p));
        return 0;
    }

    for (const QString& report : cli.values(tune_report)) window.import_tune_report(report);
    // Within the screen's available area, frame included, with the docks sized for it.
    if (cli.isSet(geometry)) window.set_window_size(size);
    window.show();
    if (!args.isEmpty()) window.open_model(args.front());
    else window.show_welcome();
    return app.exec();
}
