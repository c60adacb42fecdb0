#include "engine/core/perf_counters.h"

#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>

#ifdef COLIBRI_HAVE_PFM
#include <perfmon/pfmlib_perf_event.h>
#endif

namespace colibri {

namespace {

int perf_event_open(perf_event_attr* attr, int group_fd) {
    // pid 0, cpu -1: this thread (and, with inherit, the threads it creates) on any CPU.
    return static_cast<int>(syscall(SYS_perf_event_open, attr, 0, -1, group_fd, 0));
}

int paranoid_level() {
    std::ifstream f("/proc/sys/kernel/perf_event_paranoid");
    int level = 2;
    f >> level;
    return level;
}

std::string open_failure(int err) {
    switch (err) {
    case ENOENT:
        return "not counted here (the CPU or VM exposes no such PMU event)";
    case EOPNOTSUPP:
        return "not supported by this kernel or PMU";
    case EACCES:
    case EPERM:
        return "not permitted (kernel.perf_event_paranoid = " + std::to_string(paranoid_level()) + ")";
    case ENOSYS:
        return "perf_event_open is not available in this kernel";
    default:
        return std::strerror(err);
    }
}

// "cache misses (reason), LLC misses (reason)" or, when every event failed alike, just the reason.
std::string describe_failures(const std::vector<std::pair<std::string, std::string>>& failures, size_t requested) {
    if (failures.empty()) return {};
    bool same = true;
    for (const auto& f : failures) same &= f.second == failures.front().second;
    if (same && failures.size() == requested) return "unavailable: " + failures.front().second;
    std::string out;
    for (const auto& [name, why] : failures) out += (out.empty() ? "" : ", ") + name + " (" + why + ")";
    return "not counting " + out;
}

#ifdef COLIBRI_HAVE_PFM
// libpfm4 keeps global tables: initialise once per process, from whichever thread asks first.
int pfm_ready() {
    static std::once_flag once;
    static int status = PFM_SUCCESS;
    std::call_once(once, [] { status = pfm_initialize(); });
    return status;
}
#endif

}  // namespace

std::vector<CounterEvent> software_events() {
    auto sw = [](const char* name, uint64_t config) { return CounterEvent{name, "", PERF_TYPE_SOFTWARE, config, false}; };
    return {sw("page faults", PERF_COUNT_SW_PAGE_FAULTS), sw("major faults", PERF_COUNT_SW_PAGE_FAULTS_MAJ),
            sw("task clock ns", PERF_COUNT_SW_TASK_CLOCK), sw("context switches", PERF_COUNT_SW_CONTEXT_SWITCHES)};
}

std::vector<std::pair<std::string, std::string>> offered_hardware_events() {
    return {{"cycles", "PERF_COUNT_HW_CPU_CYCLES"},
            {"instructions", "PERF_COUNT_HW_INSTRUCTIONS"},
            {"cache misses", "PERF_COUNT_HW_CACHE_MISSES"},
            {"LLC misses", "PERF_COUNT_HW_CACHE_LL:READ:MISS"},
            {"L1D misses", "PERF_COUNT_HW_CACHE_L1D:READ:MISS"}};
}

Result<CounterEvent> encode_hardware_event(const std::string& name, const std::string& pfm_name) {
#ifdef COLIBRI_HAVE_PFM
    if (int s = pfm_ready(); s != PFM_SUCCESS) return error(std::string("libpfm4: ") + pfm_strerror(s));
    perf_event_attr attr{};
    pfm_perf_encode_arg_t arg{};
    arg.attr = &attr;
    arg.size = sizeof(arg);
    // PFM_PLM3: user level only, which unprivileged processes may count under perf_event_paranoid 2.
    const int s = pfm_get_os_event_encoding(pfm_name.c_str(), PFM_PLM3, PFM_OS_PERF_EVENT, &arg);
    if (s != PFM_SUCCESS) return error(pfm_name + ": " + pfm_strerror(s));
    return CounterEvent{name, pfm_name, attr.type, attr.config, true};
#else
    (void)name;
    return error(pfm_name + ": this build has no libpfm4");
#endif
}

std::unique_ptr<PerfCounters> PerfCounters::open(const std::vector<CounterEvent>& software,
                                                 const std::vector<CounterEvent>& hardware) {
    std::unique_ptr<PerfCounters> c(new PerfCounters());
    c->software_status_ = c->open_group(software, false);
    c->hardware_status_ = c->open_group(hardware, true);
    size_t widest = 0;
    for (const Group& g : c->groups_) widest = std::max(widest, g.fds.size());
    c->buffer_.resize(3 + widest);
    for (auto& s : c->started_) s.assign(c->events_.size(), 0);
    c->now_.assign(c->events_.size(), 0);
    c->delta_.assign(c->events_.size(), 0);
    return c;
}

std::unique_ptr<PerfCounters> PerfCounters::open_default() {
    std::vector<CounterEvent> hardware;
    std::vector<std::pair<std::string, std::string>> unencodable;
    const auto offered = offered_hardware_events();
    for (const auto& [name, pfm_name] : offered) {
        auto e = encode_hardware_event(name, pfm_name);
        if (e) hardware.push_back(std::move(e.value()));
        else unencodable.emplace_back(name, e.message());
    }
    auto c = open(software_events(), hardware);
    if (!unencodable.empty()) {
        const std::string why = describe_failures(unencodable, offered.size());
        c->hardware_status_ = c->hardware_status_.empty() ? why : c->hardware_status_ + "; " + why;
    }
    return c;
}

std::string PerfCounters::open_group(const std::vector<CounterEvent>& events, bool hardware) {
    Group g;
    g.first_value = events_.size();
    g.scaled = hardware;
    std::vector<std::pair<std::string, std::string>> failures;
    for (const CounterEvent& e : events) {
        perf_event_attr attr{};
        attr.size = sizeof(attr);
        attr.type = e.type;
        attr.config = e.config;
        attr.inherit = 1;  // count the worker threads the caller starts after this
        attr.exclude_kernel = 1;
        attr.exclude_hv = 1;
        attr.read_format = PERF_FORMAT_GROUP | (hardware ? PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING : 0);
        const int fd = perf_event_open(&attr, g.leader);
        if (fd < 0) {
            failures.emplace_back(e.name, open_failure(errno));
            continue;
        }
        if (g.leader < 0) g.leader = fd;
        g.fds.push_back(fd);
        events_.push_back(e);
    }
    if (!g.fds.empty()) {
        if (hardware) hardware_open_ += g.fds.size();
        groups_.push_back(std::move(g));
    }
    return describe_failures(failures, events.size());
}

PerfCounters::~PerfCounters() {
    for (const Group& g : groups_)
        for (auto it = g.fds.rbegin(); it != g.fds.rend(); ++it) ::close(*it);  // members before the leader
}

void PerfCounters::read_group(const Group& g, uint64_t* out) {
    // PERF_FORMAT_GROUP: nr, [time_enabled, time_running], values[nr]; the kernel sums inherited children.
    const size_t header = g.scaled ? 3 : 1;
    const size_t bytes = (header + g.fds.size()) * sizeof(uint64_t);
    if (::read(g.leader, buffer_.data(), bytes) != static_cast<ssize_t>(bytes)) {
        std::fill(out, out + g.fds.size(), 0);
        return;
    }
    const uint64_t enabled = g.scaled ? buffer_[1] : 0, running = g.scaled ? buffer_[2] : 0;
    for (size_t i = 0; i < g.fds.size(); ++i) {
        const uint64_t v = buffer_[header + i];
        // Multiplexed: extrapolate to the whole enabled time, as perf stat does.
        out[i] = g.scaled && running > 0 && running < enabled
                     ? static_cast<uint64_t>(static_cast<double>(v) * static_cast<double>(enabled) / static_cast<double>(running))
                     : v;
    }
}

void PerfCounters::read(std::span<uint64_t> out) {
    for (const Group& g : groups_)
        if (g.first_value + g.fds.size() <= out.size()) read_group(g, out.data() + g.first_value);
}

void PerfCounters::start(unsigned slot) { read(started_[slot & 1]); }

std::span<const uint64_t> PerfCounters::stop(unsigned slot) {
    read(now_);
    const std::vector<uint64_t>& begin = started_[slot & 1];
    for (size_t i = 0; i < now_.size(); ++i) delta_[i] = now_[i] >= begin[i] ? now_[i] - begin[i] : 0;
    return delta_;
}

}  // namespace colibri
