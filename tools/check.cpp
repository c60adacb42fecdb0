#include "check.h"

#include <nlohmann/json.hpp>

#include "engine/model.h"
#include "engine/model_file.h"

namespace colibri::tools {

using namespace format;

CheckReport check_model(const std::string& path, const std::function<void(uint64_t, uint64_t)>& progress) {
    CheckReport report;
    report.path = path;
    auto file = ModelFile::open(path);
    if (!file) {
        report.fatal = file.message();
        report.problems.push_back(file.message());
        return report;
    }
    const ModelFile& f = *file.value();
    uint64_t total = 0, done = 0;
    for (const SectionEntry& s : f.sections()) total += s.size;
    for (uint32_t i = 0; i < f.sections().size(); ++i) {
        const SectionEntry& s = f.sections()[i];
        SectionCheck c;
        c.index = i;
        c.kind = section_kind_name(static_cast<SectionKind>(s.kind));
        c.layer = s.layer == kNone ? -1 : static_cast<int64_t>(s.layer);
        c.expert = s.expert == kNone ? -1 : static_cast<int64_t>(s.expert);
        c.offset = s.offset;
        c.size = s.size;
        c.aligned = s.offset % kSectionAlignment == 0;
        c.checksum_ok = f.verify_section(i);
        if (!c.checksum_ok) report.problems.push_back("section " + f.section_label(i) + ": checksum mismatch");
        report.sections.push_back(c);
        done += s.size;
        if (progress) progress(done, total);
    }
    // Tensor shapes against the hyper-parameters, and the tokenizer, as the engine will bind them.
    file.value().reset();
    if (report.problems.empty()) {
        auto model = Model::load(path);
        if (!model) report.problems.push_back(model.message());
    }
    report.valid = report.problems.empty();
    return report;
}

std::string check_report_json(const CheckReport& r) {
    nlohmann::json j;
    j["path"] = r.path;
    j["valid"] = r.valid;
    if (!r.fatal.empty()) j["error"] = r.fatal;
    j["problems"] = r.problems;
    j["sections"] = nlohmann::json::array();
    for (const SectionCheck& s : r.sections) {
        nlohmann::json e{{"index", s.index}, {"kind", s.kind}, {"offset", s.offset}, {"size", s.size},
                         {"aligned", s.aligned}, {"checksum_ok", s.checksum_ok}};
        if (s.layer >= 0) e["layer"] = s.layer;
        if (s.expert >= 0) e["expert"] = s.expert;
        j["sections"].push_back(e);
    }
    return j.dump(1);
}

}  // namespace colibri::tools
