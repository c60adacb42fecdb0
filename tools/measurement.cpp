#include "tools/measurement.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace colibri::tools {

namespace {

double quantile(const std::vector<double>& sorted, double q) {
    const double at = q * static_cast<double>(sorted.size() - 1);
    const size_t lo = static_cast<size_t>(at);
    const size_t hi = std::min(lo + 1, sorted.size() - 1);
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (at - static_cast<double>(lo));
}

Result<std::string> slurp(const char* path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return error(std::string(path) + ": cannot read");
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// Whitespace-separated unsigned numbers from `text`; stops at the first thing that is not one.
std::vector<uint64_t> numbers(std::string_view text) {
    std::vector<uint64_t> out;
    size_t i = 0;
    while (i < text.size()) {
        while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
        if (i >= text.size()) break;
        uint64_t v = 0;
        const auto [end, ec] = std::from_chars(text.data() + i, text.data() + text.size(), v);
        if (ec != std::errc() || (end != text.data() + text.size() && *end != ' ' && *end != '\t')) break;
        out.push_back(v);
        i = static_cast<size_t>(end - text.data());
    }
    return out;
}

}  // namespace

Spread Spread::of(std::vector<double> samples) {
    Spread s;
    s.samples = samples;
    if (samples.empty()) return s;
    std::sort(samples.begin(), samples.end());
    s.min = samples.front();
    s.max = samples.back();
    s.median = quantile(samples, 0.5);
    s.q1 = quantile(samples, 0.25);
    s.q3 = quantile(samples, 0.75);
    return s;
}

Result<CpuTimes> parse_proc_stat(std::string_view text) {
    CpuTimes t;
    bool aggregate = false;
    size_t begin = 0;
    while (begin < text.size()) {
        const size_t end = std::min(text.find('\n', begin), text.size());
        const std::string_view line = text.substr(begin, end - begin);
        begin = end + 1;
        if (line.substr(0, 4) == "cpu ") {
            // user nice system idle iowait irq softirq steal [guest guest_nice: already inside user and nice]
            const std::vector<uint64_t> v = numbers(line.substr(4));
            if (v.size() < 4) return error("/proc/stat: the cpu line has fewer than 4 fields");
            auto at = [&](size_t i) { return i < v.size() ? v[i] : 0; };
            t.busy = at(0) + at(1) + at(2) + at(5) + at(6) + at(7);
            t.total = t.busy + at(3) + at(4);
            aggregate = true;
        } else if (line.size() > 3 && line.substr(0, 3) == "cpu" && line[3] >= '0' && line[3] <= '9') {
            ++t.cpus;
        }
    }
    if (!aggregate) return error("/proc/stat: no cpu line");
    return t;
}

Result<LoadReading> read_machine_load() {
    auto stat = slurp("/proc/stat");
    if (!stat) return stat.status();
    auto cpu = parse_proc_stat(stat.value());
    if (!cpu) return cpu.status();
    auto self = slurp("/proc/self/stat");
    if (!self) return self.status();
    // Fields after the command's closing parenthesis (the name may hold spaces): utime and stime are the 12th
    // and 13th of them (fields 14 and 15 of proc(5)).
    const size_t paren = self->rfind(')');
    if (paren == std::string::npos) return error("/proc/self/stat: no command name");
    std::istringstream fields(self->substr(paren + 1));
    std::string field;
    uint64_t utime = 0, stime = 0;
    for (int i = 1; i <= 13 && fields >> field; ++i) {
        if (i == 12) utime = std::strtoull(field.c_str(), nullptr, 10);
        if (i == 13) stime = std::strtoull(field.c_str(), nullptr, 10);
    }
    return LoadReading{cpu.value(), utime + stime};
}

MachineLoad load_between(const LoadReading& a, const LoadReading& b) {
    MachineLoad load;
    load.cpus = std::max(b.cpu.cpus, 1u);
    if (b.cpu.total <= a.cpu.total || b.cpu.busy < a.cpu.busy) {
        load.not_measured = "the run was shorter than a clock tick of /proc/stat";
        return load;
    }
    // Ticks of all CPUs over the interval; its wall time in CPU-seconds is that over the CPU count.
    const double ticks = static_cast<double>(b.cpu.total - a.cpu.total);
    const double busy = static_cast<double>(b.cpu.busy - a.cpu.busy);
    const double own = b.own_ticks >= a.own_ticks ? static_cast<double>(b.own_ticks - a.own_ticks) : 0.0;
    load.measured = true;
    load.own_cpus = std::min(own, busy) / ticks * load.cpus;
    load.other_cpus = std::max(0.0, busy - own) / ticks * load.cpus;
    return load;
}

std::string MachineLoad::describe() const {
    if (!measured) return "machine load not measured: " + not_measured;
    char buf[160];
    std::snprintf(buf, sizeof buf, "other processes used %.1f of %u CPUs (this one %.1f)", other_cpus, cpus, own_cpus);
    return buf;
}

LoadWatch::LoadWatch(LoadReader reader) : reader_(std::move(reader)), start_(reader_()) {}

MachineLoad LoadWatch::stop() {
    MachineLoad load;
    if (!start_) {
        load.not_measured = start_.message();
        return load;
    }
    auto end = reader_();
    if (!end) {
        load.not_measured = end.message();
        return load;
    }
    return load_between(start_.value(), end.value());
}

std::string unreliable_reason(const MachineLoad& load, const std::vector<NamedSpread>& figures) {
    std::vector<std::string> reasons;
    char buf[200];
    if (load.busy()) reasons.push_back("the machine was busy: " + load.describe());
    for (const NamedSpread& f : figures)
        if (spread_is_large(f.spread)) {
            std::snprintf(buf, sizeof buf, "%s varied %.0f %% between repetitions", f.name.c_str(), 100.0 * f.spread.relative_range());
            reasons.emplace_back(buf);
        }
    std::string out;
    for (const std::string& r : reasons) out += (out.empty() ? "" : "; ") + r;
    return out;
}

}  // namespace colibri::tools
