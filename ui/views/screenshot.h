// `colibri-studio --screenshot DIR [--geometry WxH] [model]`: loads the model, has a short conversation (in
// token ids when the model has no tokenizer), verifies the file, then writes one PNG per view (and the whole
// window at the geometry asked for, and the convert dialog) into DIR. Works offscreen
// (QT_QPA_PLATFORM=offscreen) and in a real window; that is how CI and the README's pictures make them.
#pragma once
#include <QSize>
#include <QString>
#include <QStringList>

#include "engine/base/status.h"

namespace colibri::studio {

class MainWindow;

struct ScreenshotOptions {
    QString dir;
    QString model;
    QStringList tune_reports;  // imported into the kernels view first
    // Converted (f16, into a temporary directory) in the convert dialog's picture; empty shows the form alone.
    QString convert_source;
    // Runs the quick auto-tune (kernels/tuner.h, one shape) for the kernels view; its choice is not saved.
    bool tune = false;
    // Runs a small kernel comparison on the model (every variant this machine runs) for the kernels view.
    bool compare_kernels = false;
    QSize geometry{1280, 720};  // of the main window; the views are drawn at sizes that follow it
    // What the demo model was trained to answer, so the pictures show replies and routing that mean something.
    QStringList messages = {QStringLiteral("What is 23 plus 45?"), QStringLiteral("Spell garden backwards.")};
    int max_tokens = 48;
    int timeout_ms = 300000;   // per step
};

// The PNG files written, in view order.
Result<QStringList> take_screenshots(MainWindow& window, const ScreenshotOptions& options);

}  // namespace colibri::studio
