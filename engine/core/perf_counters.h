// perf_event counters for the profiler: software events (page faults, major faults, task clock, context
// switches) from the kernel, and hardware events (cache, LLC and L1D misses) named through libpfm4 where the
// CPU and the kernel expose them. What cannot be opened is reported in words and the rest keeps counting, so a
// VM without a PMU still gets the software events.
//
// Counting covers the thread that opens the counters and every thread it starts afterwards (perf "inherit"):
// open them before the ThreadPool whose work they should see, on the thread that will run the Session.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/base/status.h"
#include "engine/core/trace.h"

namespace colibri {

struct CounterEvent {
    std::string name;      // what the profiler shows: "page faults", "LLC misses"
    std::string pfm_name;  // the libpfm4 event string of a hardware event; empty for software events
    uint32_t type = 0;     // perf_event_attr.type
    uint64_t config = 0;   // perf_event_attr.config
    bool hardware = false;
};

// page faults, major faults, task clock (ns), context switches.
std::vector<CounterEvent> software_events();

// The hardware events the profiler offers, as {name, libpfm4 event string}: cycles, instructions, cache
// misses, LLC misses, L1D misses. The strings use libpfm4's generic "perf" PMU, so they name the same
// events on Intel, AMD and ARM; whether the CPU counts them is up to the kernel.
std::vector<std::pair<std::string, std::string>> offered_hardware_events();

// Encodes a libpfm4 event string (pfm_get_os_event_encoding, user level) into a perf_event type/config.
// Fails with libpfm4's reason, or when the build has no libpfm4.
Result<CounterEvent> encode_hardware_event(const std::string& name, const std::string& pfm_name);

class PerfCounters final : public CounterSource {
public:
    ~PerfCounters() override;
    PerfCounters(const PerfCounters&) = delete;
    PerfCounters& operator=(const PerfCounters&) = delete;

    // Opens the software events as one group and the hardware events as another, skipping (and naming)
    // any event the kernel refuses. Never fails: with nothing open, size() is 0 and the statuses say why.
    static std::unique_ptr<PerfCounters> open(const std::vector<CounterEvent>& software,
                                              const std::vector<CounterEvent>& hardware);
    // software_events() and every offered hardware event that libpfm4 can encode.
    static std::unique_ptr<PerfCounters> open_default();

    // The counters that are open, in the order of every value this class returns.
    const std::vector<CounterEvent>& events() const { return events_; }
    size_t size() const { return events_.size(); }
    bool hardware_available() const { return hardware_open_ > 0; }
    // Empty when every requested event of the kind counts; otherwise one line saying which do not and why.
    const std::string& hardware_status() const { return hardware_status_; }
    const std::string& software_status() const { return software_status_; }

    // Current cumulative values since open(). Hardware values are scaled when the kernel multiplexed them.
    void read(std::span<uint64_t> out);

    void start(unsigned slot) override;
    std::span<const uint64_t> stop(unsigned slot) override;

private:
    struct Group {
        int leader = -1;
        std::vector<int> fds;
        size_t first_value = 0;  // index of its first event in events_
        bool scaled = false;     // read with time enabled/running, for multiplexed hardware counters
    };
    PerfCounters() = default;
    // Opens events into a new group; appends the ones that open to events_, returns why the others did not.
    std::string open_group(const std::vector<CounterEvent>& events, bool hardware);
    void read_group(const Group& g, uint64_t* out);

    std::vector<CounterEvent> events_;
    std::vector<Group> groups_;
    size_t hardware_open_ = 0;
    std::string hardware_status_, software_status_;
    std::vector<uint64_t> buffer_;                    // one group read
    std::array<std::vector<uint64_t>, 2> started_;    // per slot
    std::vector<uint64_t> now_, delta_;
};

}  // namespace colibri
