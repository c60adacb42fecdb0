// Held-out chat evaluation (`colibri eval`): each case is one user message and a regular expression its reply
// must match. Replies are greedy, through the model's own chat template, and end at an end-of-turn token or
// after max_tokens. Scores are per skill: accuracy, and how many replies stopped by themselves.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>
#include <vector>

#include "engine/base/status.h"

namespace colibri {
class Model;
class Session;
}

namespace colibri::tools {

struct EvalCase {
    std::string skill;
    std::string prompt;
    std::string expect_regex;  // ECMAScript, searched in the reply
};

struct EvalReply {
    std::string reply;
    int32_t tokens = 0;    // generated, the end-of-turn token included
    bool correct = false;
    bool stopped = false;  // ended by an end-of-turn token, not by max_tokens
};

struct SkillScore {
    std::string skill;
    size_t cases = 0, correct = 0, stopped = 0;
    double accuracy() const { return cases ? double(correct) / double(cases) : 0.0; }
};

struct EvalReport {
    std::vector<EvalCase> cases;
    std::vector<EvalReply> replies;  // one per case
    std::vector<SkillScore> skills;  // in order of first appearance, then "all"
};

// Reads a JSON-lines file of {"skill", "prompt", "expect_regex"} objects (other fields are ignored).
Result<std::vector<EvalCase>> read_eval_cases(const std::string& path);

// Runs every case in a fresh conversation on the session (of model) (which needs a tokenizer and a chat template).
// progress(done, total) may return false to cancel.
Result<EvalReport> run_chat_eval(const Model& model, Session& session, std::vector<EvalCase> cases, int32_t max_tokens,
                                 const std::function<bool(size_t, size_t)>& progress = {});

// eval --require SKILL=FRACTION: the pass mark of a skill ('all' for every case).
struct SkillRequirement {
    std::string skill;
    double fraction = 0.0;  // in [0, 1]
};
Result<SkillRequirement> parse_skill_requirement(const std::string& text);
// One line per requirement the report falls short of ("SKILL accuracy A is below the required F", or no cases of
// the skill in `source`); empty when every one is met.
std::vector<std::string> unmet_requirements(const EvalReport& report, const std::vector<SkillRequirement>& required,
                                            const std::string& source);

nlohmann::json eval_json(const EvalReport& report);
std::string eval_text(const EvalReport& report);

}  // namespace colibri::tools
