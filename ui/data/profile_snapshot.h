// A profile kept to compare against: what the profiler measured over a span of a conversation, reduced to the
// figures two runs are compared on (per layer the mean µs per token in attention, router and experts; every
// token's step, for its spread; the machine's load), with where it came from (model, kernel, threads, when).
// Saved as JSON ("colibri-profile", version 1), so that today's run can be compared with last week's, another
// kernel's or another build's, as Hotspot compares two perf recordings. Plain values: the profiler makes and shows
// them.
#pragma once
#include <QJsonObject>
#include <QString>
#include <vector>

#include "engine/base/status.h"
#include "tools/measurement.h"

namespace colibri::studio {

struct ProfileLayer {
    int layer = 0;
    double attention_us = 0, router_us = 0, experts_us = 0;  // mean per token
    double total_us() const { return attention_us + router_us + experts_us; }
};

struct ProfileSnapshot {
    QString model;        // the model file's name
    QString kernel;       // the kernel variant its weights ran on ("AVX-512"), "" when unknown
    int threads = 0;
    QString when;         // ISO date and time it was kept
    QString tokens_kind;  // which tokens the figures are of ("generated tokens, counters off")
    tools::Spread step_ms;  // every such token's step
    std::vector<ProfileLayer> layers;
    tools::MachineLoad load;  // during the last reply of the span

    bool empty() const { return step_ms.samples.empty(); }
    // "demo.bin, AVX-512, 2 threads, 24 generated tokens, counters off, 2026-12-07 11:42"
    QString label() const;
    const ProfileLayer* layer(int number) const;  // nullptr: not in this profile
    QJsonObject to_json() const;
    static Result<ProfileSnapshot> from_json(const QJsonObject& o);
    // Through ui/file_output.h: the whole file or the old one.
    Status save(const QString& path) const;
    // "<path>: why" for a file that is missing, not a regular file, larger than kMaxProfileBytes, not JSON or
    // not a profile.
    static Result<ProfileSnapshot> read(const QString& path);
};

// Far beyond any profile (a layer is a few numbers, a token one): a bound on what is read.
inline constexpr qint64 kMaxProfileBytes = qint64(16) << 20;
// A profile of more layers or tokens than this is not one the Studio wrote.
inline constexpr int kMaxProfileLayers = 4096;
inline constexpr int kMaxProfileSteps = 1 << 20;

// How a run's step compares with a baseline's: the medians' ratio, and whether the change stands out of the
// noise, i.e. the two runs' interquartile ranges do not overlap (per-token steps vary with position and
// routing; a 3 % change inside both runs' middle halves is not a change).
struct StepChange {
    double base_ms = 0, now_ms = 0;
    double change = 0;          // now / base - 1
    bool beyond_noise = false;  // the IQRs are disjoint
};
StepChange step_change(const ProfileSnapshot& base, const ProfileSnapshot& now);
// One line for the profiler: "vs baseline: 6.25 → 5.10 ms per token (−18 %), beyond the noise (the IQRs 6.1–6.4
// and 5.0–5.2 ms do not overlap)", warnings when the models or tokens differ or either run's machine was busy,
// and the baseline's label last.
QString describe_step_change(const ProfileSnapshot& base, const ProfileSnapshot& now);
// "−18 %", "+3.2 %": a relative change for tables.
QString percent_change(double change);

}  // namespace colibri::studio
