// What `colibri info` and the --json reports say about a model: its hyper-parameters and what the family does
// (as the model decided it at load), its router, and its expert cache's configuration and counters.
#pragma once
#include <nlohmann/json.hpp>

namespace colibri {
class Model;
class ExpertCache;
}

namespace colibri::tools {

// `colibri info --json`: format version, sizes, hyper-parameters, the family's rules, bytes per weight type,
// tokenizer and chat template.
nlohmann::json model_info_json(const Model& model);
// The router's rules (engine/core/router.h): scoring, renormalisation, scaling, selection bias, top-k, groups.
nlohmann::json routing_json(const Model& model);
// --ram-budget's cache: policy, budget, slots and the counters since load.
nlohmann::json expert_cache_json(const ExpertCache& cache);

}  // namespace colibri::tools
