// Helpers shared by the QtTest suites: run the colibri CLI, read reference files.
#pragma once
#include <QByteArray>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QString>
#include <QStringList>
#include <random>
#include <vector>

namespace colibri::test {

// n values of a normal distribution of standard deviation sd, the same for a seed (std::mt19937).
inline std::vector<float> gaussian(size_t n, float sd, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> g(0.0f, sd);
    std::vector<float> v(n);
    for (float& x : v) x = g(rng);
    return v;
}

// The sanitized tree looks for memory errors, which do not depend on the numbers: suites whose work is long
// repetitions of one path (held-out evaluations, sweeps over weight types) run a sample of it there, and the release
// tree runs the whole.
#ifdef COLIBRI_SANITIZED
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

// How much slower this build runs than a release build: the few time bounds in the suites (how long the UI
// thread may stall, how soon runaway templates are stopped) are scaled by it. AddressSanitizer slows them about
// fourfold: 851 ms against a 500 ms stall bound in test_ui_views, 136 s against 120 s in test_chat_template.
inline int build_slowdown() {
#ifdef COLIBRI_SANITIZED
    return 4;
#else
    return 1;
#endif
}

struct CliResult {
    int exit_code = -1;
    bool crashed = false;  // killed by a signal or timed out
    QByteArray out, err;
};

// A child that a sanitizer stopped, or that the machine stopped (no space, no memory), fails a test that may only
// compare its exit code: its own words go to the test's output, which ctest shows for a failing suite. Refusals the
// suites provoke on purpose say none of these and stay quiet.
inline void report_unexpected_failure(const QByteArray& err, bool crashed) {
    static const char* const kMarks[] = {"Sanitizer", "runtime error:", "No space left", "out of memory", "Cannot allocate memory"};
    bool marked = crashed;
    for (const char* m : kMarks) marked = marked || err.contains(m);
    if (marked) qWarning("child process %s; its stderr (first 6000 bytes):\n%s", crashed ? "crashed or timed out" : "failed",
                         err.left(6000).constData());
}

// timeout_ms: a release build's bound, scaled for a sanitized one (test_demo_model's held-out evaluation passed 300 s).
inline CliResult run_cli(const QStringList& args, const QByteArray& input = {}, int timeout_ms = 300000 * build_slowdown()) {
    QProcess p;
    p.start(QStringLiteral(COLIBRI_CLI), args);
    CliResult r;
    if (!p.waitForStarted()) {
        r.crashed = true;
        return r;
    }
    if (!input.isEmpty()) p.write(input);
    p.closeWriteChannel();
    if (!p.waitForFinished(timeout_ms)) {
        p.kill();
        p.waitForFinished();
        r.crashed = true;
    }
    r.crashed = r.crashed || p.exitStatus() != QProcess::NormalExit;
    r.exit_code = p.exitCode();
    r.out = p.readAllStandardOutput();
    r.err = p.readAllStandardError();
    report_unexpected_failure(r.err, r.crashed);
    return r;
}

// Runs colibri-make-model (a deterministic random HF model) into out; true on success.
inline bool make_model(const QString& out, const QStringList& extra) {
    QProcess p;
    p.start(QStringLiteral(COLIBRI_BUILD_DIR "/bin/colibri-make-model"), QStringList{"-o", out} + extra);
    const bool ok = p.waitForFinished(120000 * build_slowdown()) && p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0;
    if (!ok) qWarning("colibri-make-model failed: %s", p.readAllStandardError().left(6000).constData());
    return ok;
}

inline QString reference(const QString& rel) { return QStringLiteral(COLIBRI_REFERENCE_DIR "/") + rel; }

inline QByteArray read_all(const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return {};
    return f.readAll();
}

// Writes bytes to path (replacing it) and returns the path.
inline QString write_all(const QString& path, const QByteArray& bytes) {
    QFile f(path);
    if (f.open(QIODevice::WriteOnly | QIODevice::Truncate)) f.write(bytes);
    return path;
}

inline QJsonDocument read_json(const QString& path) { return QJsonDocument::fromJson(read_all(path)); }

inline std::vector<float> read_f32(const QString& path) {
    const QByteArray b = read_all(path);
    std::vector<float> v(static_cast<size_t>(b.size()) / sizeof(float));
    std::memcpy(v.data(), b.constData(), v.size() * sizeof(float));
    return v;
}

inline QString ids_arg(const QJsonArray& ids) {
    QStringList parts;
    for (const auto& v : ids) parts << QString::number(v.toInt());
    return parts.join(',');
}

}  // namespace colibri::test
