// Helpers shared by the Studio's QtTest suites: reference models converted with the CLI, a damaged copy of a
// model, the CLI's routing of the same tokens, and waiting for a worker without blocking the event loop.
#pragma once
#include <QApplication>
#include <QDeadlineTimer>
#include <QElapsedTimer>
#include <QTimer>
#include <functional>
#include <memory>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>
#include <vector>

#include "../test_support.h"
#include "ui/chat_controller.h"
#include "ui/views/chat_view.h"
#include "ui/views/main_window.h"

namespace colibri::test {

// The Studio shown at 1280×720, its settings not kept.
inline std::unique_ptr<studio::MainWindow> shown_window() {
    studio::MainWindowOptions options;
    options.persist_settings = false;
    auto w = std::make_unique<studio::MainWindow>(options);
    w->resize(1280, 720);
    w->show();
    return w;
}

// QSignalSpy records in the emitting thread, so a worker's signal can land before spy.wait() starts and be
// missed; this waits, processing events, until the spy holds n signals.
inline bool wait_for(QSignalSpy& spy, int n, int timeout_ms = 60000) {
    QDeadlineTimer deadline(timeout_ms);
    while (spy.count() < n && !deadline.hasExpired()) QTest::qWait(2);
    return spy.count() >= n;
}

// Polls for a modal widget until `handle` takes it (returns true); gives up after timeout_ms.
inline void answer_modal(std::function<bool(QWidget*)> handle, int timeout_ms = 20000) {
    auto* timer = new QTimer;
    QElapsedTimer clock;
    clock.start();
    QObject::connect(timer, &QTimer::timeout, [timer, clock, handle, timeout_ms] {
        QWidget* w = QApplication::activeModalWidget();
        if ((w != nullptr && handle(w)) || clock.elapsed() > timeout_ms) {
            timer->stop();
            timer->deleteLater();
        }
    });
    timer->start(20);
}

// Greedy chat settings with a fixed seed and a token limit: what every suite that chats asks for.
inline studio::ChatSettings greedy(int max_tokens) {
    studio::ChatSettings s;
    s.sampling.greedy = true;
    s.random_seed = false;
    s.max_tokens = max_tokens;
    return s;
}

// Sends text through the window's chat view as a user does (greedy, up to max_tokens) and waits for the reply;
// false when the generation failed or did not finish within two minutes.
inline bool send_and_wait(studio::MainWindow& w, const QString& text, const studio::ChatSettings& settings) {
    QSignalSpy finished(w.chat(), &studio::ChatController::finished);
    QSignalSpy failed(w.chat(), &studio::ChatController::failed);
    w.chat_view()->set_settings(settings);
    w.chat_view()->input()->setPlainText(text);
    QTest::mouseClick(w.chat_view()->send_button(), Qt::LeftButton);
    QDeadlineTimer deadline(120000);
    while (finished.count() == 0 && failed.count() == 0 && !deadline.hasExpired()) QTest::qWait(2);
    return finished.count() == 1;
}
inline bool send_and_wait(studio::MainWindow& w, const QString& text, int max_tokens) { return send_and_wait(w, text, greedy(max_tokens)); }

// `colibri convert` of a reference HF model (tests/CMakeLists.txt names the reference directory) into dir.
inline QString convert_reference(const QTemporaryDir& dir, const QString& family) {
    const QString out = dir.filePath(family + QStringLiteral(".bin"));
    if (QFile::exists(out)) return out;
    const CliResult r = run_cli({"convert", reference("hf/" + family + "/model"), "-o", out});
    return r.exit_code == 0 && !r.crashed ? out : QString();
}

// The 16 reference input ids of a family (BOS, then random ids).
inline std::vector<int32_t> reference_input_ids(const QString& family) {
    std::vector<int32_t> ids;
    for (const auto& v : read_json(reference("hf/" + family + "/ref/input_ids.json")).array()) ids.push_back(v.toInt());
    return ids;
}

inline QString join_ids(const std::vector<int32_t>& ids) {
    QStringList parts;
    for (int32_t id : ids) parts << QString::number(id);
    return parts.join(',');
}

// `colibri check --json` of a file.
inline QJsonObject check_json(const QString& path) {
    return QJsonDocument::fromJson(run_cli({"check", path, "--json"}).out).object();
}

// A copy of model at copy_path with one byte flipped in the middle of its first expert section. Returns that
// section's index in the section table, -1 on failure.
inline int damage_first_expert(const QString& model, const QString& copy_path) {
    QFile::remove(copy_path);
    if (!QFile::copy(model, copy_path)) return -1;
    QFile::setPermissions(copy_path, QFile::ReadOwner | QFile::WriteOwner);
    for (const auto& v : check_json(model)["sections"].toArray()) {
        const QJsonObject s = v.toObject();
        if (s["kind"].toString() != QLatin1String("expert")) continue;
        QFile f(copy_path);
        if (!f.open(QIODevice::ReadWrite)) return -1;
        const qint64 at = static_cast<qint64>(s["offset"].toDouble() + s["size"].toDouble() / 2);
        f.seek(at);
        char b = 0;
        f.getChar(&b);
        f.seek(at);
        f.putChar(static_cast<char>(b ^ 0x5A));
        return s["index"].toInt();
    }
    return -1;
}

// `colibri route --json` for ids: per MoE layer number, per position, the experts in descending weight.
struct CliRouting {
    std::map<int, std::vector<std::vector<int>>> experts;
    std::map<int, std::vector<std::vector<double>>> weights;
};

inline CliRouting cli_route(const QString& model, const std::vector<int32_t>& ids) {
    CliRouting r;
    const CliResult out = run_cli({"route", "-m", model, "--tokens", join_ids(ids), "--json"});
    for (const auto& lv : QJsonDocument::fromJson(out.out).object()["layers"].toArray()) {
        const QJsonObject l = lv.toObject();
        const int layer = l["layer"].toInt();
        for (const auto& pv : l["experts"].toArray()) {
            std::vector<int> e;
            for (const auto& x : pv.toArray()) e.push_back(x.toInt());
            r.experts[layer].push_back(e);
        }
        for (const auto& pv : l["weights"].toArray()) {
            std::vector<double> w;
            for (const auto& x : pv.toArray()) w.push_back(x.toDouble());
            r.weights[layer].push_back(w);
        }
    }
    return r;
}

}  // namespace colibri::test
