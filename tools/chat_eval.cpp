#include "chat_eval.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "engine/core/chat_prompt.h"
#include "engine/core/chat_service.h"
#include "engine/core/generate.h"
#include "engine/core/model.h"
#include "engine/core/sampler.h"
#include "engine/core/session.h"

namespace colibri::tools {

using nlohmann::json;

namespace {

constexpr size_t kMaxCases = 1'000'000;
constexpr size_t kMaxLine = 1 << 20;

Result<EvalCase> parse_case(const std::string& line, size_t number) {
    const std::string where = "line " + std::to_string(number) + ": ";
    const json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return error(where + "not a JSON object");
    EvalCase c;
    for (auto [field, out] : {std::pair{"skill", &c.skill}, std::pair{"prompt", &c.prompt}, std::pair{"expect_regex", &c.expect_regex}}) {
        auto it = j.find(field);
        if (it == j.end() || !it->is_string()) return error(where + "field '" + field + "' must be a string");
        *out = it->get<std::string>();
    }
    if (c.prompt.empty()) return error(where + "empty prompt");
    try {
        std::regex check(c.expect_regex, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
        return error(where + "expect_regex is not a valid regular expression (" + e.what() + ")");
    }
    return c;
}

}  // namespace

Result<std::vector<EvalCase>> read_eval_cases(const std::string& path) {
    std::ifstream in(path);
    if (!in) return error(path + ": cannot open");
    std::vector<EvalCase> cases;
    std::string line;
    size_t number = 0;
    while (std::getline(in, line)) {
        ++number;
        if (line.size() > kMaxLine) return error(path + ": line " + std::to_string(number) + " is longer than 1 MiB");
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        auto c = parse_case(line, number);
        if (!c) return error(path + ": " + c.message());
        if (cases.size() == kMaxCases) return error(path + ": more than a million cases");
        cases.push_back(std::move(c.value()));
    }
    if (in.bad()) return error(path + ": read failed");
    if (cases.empty()) return error(path + ": no cases");
    return cases;
}

Result<EvalReport> run_chat_eval(const Model& model, Session& session, std::vector<EvalCase> cases, int32_t max_tokens,
                                 const std::function<bool(size_t, size_t)>& progress) {
    const Tokenizer* tok = model.tokenizer();
    if (tok == nullptr) return error("the model has no tokenizer");
    if (model.chat_template().empty()) return error("the model has no chat template");
    if (max_tokens <= 0) return error("max_tokens must be positive");
    const std::vector<int32_t> stops = default_stop_ids(model);
    SamplerConfig greedy;
    greedy.greedy = true;
    Sampler sampler(greedy);
    ChatService chat(model, session);
    EvalReport report;
    report.cases = std::move(cases);
    report.replies.resize(report.cases.size());
    for (size_t i = 0; i < report.cases.size(); ++i) {
        const EvalCase& c = report.cases[i];
        auto encoded = chat_prompt_ids(model, {{"user", c.prompt}});
        if (!encoded) return error("case " + std::to_string(i + 1) + ": " + encoded.message());
        const std::vector<int32_t>& ids = encoded.value();
        if (ids.size() >= session.context()) return error("case " + std::to_string(i + 1) + ": the prompt does not fit the context");
        // Each case a conversation of its own, through the chat service every front end uses.
        TurnOptions turn;
        turn.reply.max_tokens = std::min<int32_t>(max_tokens, static_cast<int32_t>(session.context() - ids.size()));
        turn.reply.stop_ids = stops;
        chat.reset();
        auto out = chat.run(ids, sampler, turn);
        if (!out) return error("case " + std::to_string(i + 1) + ": " + out.message());
        EvalReply& r = report.replies[i];
        r.tokens = static_cast<int32_t>(out->tokens.size());
        r.stopped = out->finish == FinishReason::Stop;
        r.reply = out->reply;
        r.correct = std::regex_search(r.reply, std::regex(c.expect_regex, std::regex::ECMAScript));
        if (progress && !progress(i + 1, report.cases.size())) return error("cancelled");
    }
    SkillScore all{"all"};
    for (size_t i = 0; i < report.cases.size(); ++i) {
        auto it = std::find_if(report.skills.begin(), report.skills.end(),
                               [&](const SkillScore& s) { return s.skill == report.cases[i].skill; });
        if (it == report.skills.end()) it = report.skills.insert(report.skills.end(), SkillScore{report.cases[i].skill});
        for (SkillScore* s : {&*it, &all}) {
            ++s->cases;
            s->correct += report.replies[i].correct;
            s->stopped += report.replies[i].stopped;
        }
    }
    report.skills.push_back(all);
    return report;
}

json eval_json(const EvalReport& report) {
    json skills = json::array();
    for (const SkillScore& s : report.skills)
        skills.push_back({{"skill", s.skill}, {"cases", s.cases}, {"correct", s.correct}, {"accuracy", s.accuracy()},
                          {"stopped", s.stopped}});
    json replies = json::array();
    for (size_t i = 0; i < report.cases.size(); ++i) {
        const EvalCase& c = report.cases[i];
        const EvalReply& r = report.replies[i];
        replies.push_back({{"skill", c.skill}, {"prompt", c.prompt}, {"reply", r.reply}, {"correct", r.correct},
                           {"stopped", r.stopped}, {"tokens", r.tokens}});
    }
    return {{"skills", skills}, {"replies", replies}};
}

std::string eval_text(const EvalReport& report) {
    std::string out = "skill          cases  correct  accuracy  stopped by itself\n";
    char line[160];
    for (const SkillScore& s : report.skills) {
        std::snprintf(line, sizeof line, "%-13s %6zu  %7zu  %7.1f %%  %7.1f %%\n", s.skill.c_str(), s.cases, s.correct,
                      100.0 * s.accuracy(), s.cases ? 100.0 * double(s.stopped) / double(s.cases) : 0.0);
        out += line;
    }
    return out;
}

Result<SkillRequirement> parse_skill_requirement(const std::string& text) {
    const size_t eq = text.rfind('=');
    char* end = nullptr;
    const double v = eq == std::string::npos ? -1.0 : std::strtod(text.c_str() + eq + 1, &end);
    if (eq == std::string::npos || eq == 0 || end == text.c_str() + eq + 1 || *end != '\0' || !(v >= 0.0 && v <= 1.0))
        return error("--require '" + text + "' is not SKILL=FRACTION with a fraction in [0, 1]");
    return SkillRequirement{text.substr(0, eq), v};
}

std::vector<std::string> unmet_requirements(const EvalReport& report, const std::vector<SkillRequirement>& required,
                                            const std::string& source) {
    std::vector<std::string> unmet;
    for (const SkillRequirement& r : required) {
        const auto& skills = report.skills;
        auto it = std::find_if(skills.begin(), skills.end(), [&](const SkillScore& s) { return s.skill == r.skill; });
        if (it == skills.end()) {
            unmet.push_back("no cases of skill '" + r.skill + "' in " + source);
        } else if (it->accuracy() < r.fraction) {
            char msg[200];
            std::snprintf(msg, sizeof msg, "%s accuracy %.3f is below the required %.3f", r.skill.c_str(), it->accuracy(), r.fraction);
            unmet.push_back(msg);
        }
    }
    return unmet;
}

}  // namespace colibri::tools
