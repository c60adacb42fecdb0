// The shared-memory mappings of this process (/proc/self/maps), for tests that check what a local-transport client
// can see and write: which mappings connecting added, and every byte they let it read.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace colibri::test {

struct SharedMapping {
    uintptr_t start = 0, end = 0;
    bool readable = false, writable = false;
    uint64_t inode = 0;
    std::string path;
    size_t size() const { return end - start; }
    bool operator==(const SharedMapping& o) const { return start == o.start && end == o.end && inode == o.inode; }
};

inline std::vector<SharedMapping> shared_mappings() {
    std::vector<SharedMapping> out;
    FILE* f = std::fopen("/proc/self/maps", "r");
    if (f == nullptr) return out;
    char line[4096];
    while (std::fgets(line, sizeof line, f)) {
        unsigned long long start = 0, end = 0, offset = 0, inode = 0;
        char perms[8] = {}, dev[32] = {};
        int consumed = 0;
        if (std::sscanf(line, "%llx-%llx %7s %llx %31s %llu %n", &start, &end, perms, &offset, dev, &inode, &consumed) < 6) continue;
        if (perms[3] != 's') continue;
        SharedMapping m;
        m.start = start;
        m.end = end;
        m.readable = perms[0] == 'r';
        m.writable = perms[1] == 'w';
        m.inode = inode;
        m.path = line + consumed;
        while (!m.path.empty() && (m.path.back() == '\n' || m.path.back() == ' ')) m.path.pop_back();
        out.push_back(m);
    }
    std::fclose(f);
    return out;
}

// The mappings in after that are not in before.
inline std::vector<SharedMapping> added_mappings(const std::vector<SharedMapping>& before, const std::vector<SharedMapping>& after) {
    std::vector<SharedMapping> out;
    for (const SharedMapping& m : after) {
        bool old = false;
        for (const SharedMapping& b : before) old = old || b == m;
        if (!old) out.push_back(m);
    }
    return out;
}

// Every byte the mapping lets this process read (empty when it is not readable).
inline std::string mapping_bytes(const SharedMapping& m) {
    if (!m.readable) return {};
    return std::string(reinterpret_cast<const char*>(m.start), m.size());
}

}  // namespace colibri::test
