// What a timing is worth: its repetitions (median, min, max, IQR, relative spread) and how busy the machine was
// while it ran (other processes' CPU time from /proc/stat, minus this process's own). `colibri bench` and the
// Studio's kernel comparison and profiler flag a figure as unreliable by the same rules.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/base/status.h"

namespace colibri::tools {

struct Spread {
    double median = 0, min = 0, max = 0;
    double q1 = 0, q3 = 0;        // quartiles (linear interpolation between the sorted samples)
    std::vector<double> samples;  // in measurement order
    static Spread of(std::vector<double> samples);
    // (max - min) / median: 0.3 means the fastest and slowest repetitions lie 30 % of the median apart.
    double relative_range() const { return median > 0 ? (max - min) / median : 0.0; }
};
// Repetitions further apart than this (relative_range) make a figure unreliable: on a quiet machine tokens/s
// repeat within a few per cent.
inline constexpr double kLargeSpread = 0.2;
inline bool spread_is_large(const Spread& s) { return s.samples.size() > 1 && s.relative_range() > kLargeSpread; }

// /proc/stat's first line ("cpu  user nice system idle iowait irq softirq steal ..."): clock ticks of all CPUs
// busy (user, nice, system, irq, softirq, steal: a hypervisor's other guests count as load) and in all, and the
// CPUs (its "cpuN" lines).
struct CpuTimes {
    uint64_t busy = 0, total = 0;
    unsigned cpus = 0;
};
Result<CpuTimes> parse_proc_stat(std::string_view text);

// The machine at one moment: /proc/stat and this process's CPU time (all its threads), both in clock ticks.
struct LoadReading {
    CpuTimes cpu;
    uint64_t own_ticks = 0;
};
using LoadReader = std::function<Result<LoadReading>()>;
// /proc/stat and /proc/self/stat.
Result<LoadReading> read_machine_load();

// The load between two readings: CPUs in use on average, by this process and by everything else.
struct MachineLoad {
    bool measured = false;
    std::string not_measured;  // why not (no /proc/stat, a run shorter than a clock tick)
    unsigned cpus = 0;
    double own_cpus = 0, other_cpus = 0;
    // Other processes used at least half a CPU, or a tenth of the machine: they took time or memory bandwidth
    // from the measurement.
    double busy_threshold() const { return cpus > 10 ? 0.1 * cpus : 0.5; }
    bool busy() const { return measured && other_cpus >= busy_threshold(); }
    // "other processes used 1.7 of 2 CPUs" / "not measured: ...".
    std::string describe() const;
};
MachineLoad load_between(const LoadReading& before, const LoadReading& after);

// Watches the machine from construction to stop(); the reader is injectable (tests feed synthetic /proc/stat).
class LoadWatch {
public:
    explicit LoadWatch(LoadReader reader = read_machine_load);
    MachineLoad stop();

private:
    LoadReader reader_;
    Result<LoadReading> start_;
};

// Why a set of repeated figures should not be trusted, or "" when nothing says so: the machine was busy, or
// the named figures' repetitions lie too far apart ("decode tok/s of AVX2 varied 41 %").
struct NamedSpread {
    std::string name;
    Spread spread;
};
std::string unreliable_reason(const MachineLoad& load, const std::vector<NamedSpread>& figures);

}  // namespace colibri::tools
