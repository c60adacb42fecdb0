// Validation of .bin files: the report `colibri check` prints and the Studio's validator shows.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace colibri::tools {

struct SectionCheck {
    uint32_t index = 0;
    std::string kind;
    int64_t layer = -1;   // -1 when not per layer
    int64_t expert = -1;
    uint64_t offset = 0;
    uint64_t size = 0;
    bool aligned = false;
    bool checksum_ok = false;
};

struct CheckReport {
    bool valid = false;
    std::string path;
    std::string fatal;                   // set when the file could not be opened or mapped at all
    std::vector<SectionCheck> sections;
    std::vector<std::string> problems;   // one line each, naming the damaged section or tensor
};

// progress(done_bytes, total_bytes) is called as sections are hashed.
CheckReport check_model(const std::string& path, const std::function<void(uint64_t, uint64_t)>& progress = nullptr);

std::string check_report_json(const CheckReport& report);

}  // namespace colibri::tools
