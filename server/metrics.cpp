#include "server/metrics.h"

#include <cstdio>

namespace colibri::server {

namespace {

// Label values escaped as the exposition format requires (backslash, quote, newline).
std::string label(const std::string& v) {
    std::string out;
    for (char c : v) {
        if (c == '\\' || c == '"') out += '\\';
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        out += c;
    }
    return out;
}

void family(std::string& out, const char* name, const char* type, const char* help) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void sample(std::string& out, const char* name, const std::string& labels, double value) {
    char v[64];
    std::snprintf(v, sizeof v, "%.17g", value);
    out += std::string(name) + (labels.empty() ? "" : "{" + labels + "}") + " " + v + "\n";
}

}  // namespace

std::string prometheus_text(const SchedulerStats& s, const RequestCounters& requests, const ConnectionStats& c, const std::string& model_id) {
    std::string out;
    const std::string model = "model=\"" + label(model_id) + "\"";
    family(out, "colibri_requests_total", "counter", "HTTP requests answered, by endpoint (any unknown path is \"other\") and status.");
    for (const auto& [key, n] : requests.snapshot())
        sample(out, "colibri_requests_total", "endpoint=\"" + label(key.first) + "\",status=\"" + std::to_string(key.second) + "\"", double(n));
    family(out, "colibri_generations_total", "counter", "Generations the engine ended, by outcome.");
    sample(out, "colibri_generations_total", model + ",outcome=\"completed\"", double(s.completed));
    sample(out, "colibri_generations_total", model + ",outcome=\"cancelled\"", double(s.cancelled));
    sample(out, "colibri_generations_total", model + ",outcome=\"failed\"", double(s.failed));
    family(out, "colibri_prompt_tokens_total", "counter", "Prompt tokens of admitted requests (cached ones included).");
    sample(out, "colibri_prompt_tokens_total", model, double(s.prompt_tokens));
    family(out, "colibri_prompt_tokens_cached_total", "counter", "Prompt tokens a slot's KV cache already held.");
    sample(out, "colibri_prompt_tokens_cached_total", model, double(s.cached_tokens));
    family(out, "colibri_generated_tokens_total", "counter", "Tokens generated.");
    sample(out, "colibri_generated_tokens_total", model, double(s.generated_tokens));
    family(out, "colibri_engine_steps_total", "counter", "Engine steps (one evaluation of every active slot).");
    sample(out, "colibri_engine_steps_total", model, double(s.steps));
    family(out, "colibri_forward_passes_total", "counter", "Forward passes: each evaluates every active slot's tokens of a step together.");
    sample(out, "colibri_forward_passes_total", model, double(s.forward_passes));
    family(out, "colibri_batched_tokens_total", "counter", "Tokens evaluated in forward passes (divided by the passes: the mean batch).");
    sample(out, "colibri_batched_tokens_total", model, double(s.batched_tokens));
    family(out, "colibri_speculative_drafted_total", "counter", "Draft tokens checked by speculative decoding (\"speculate\").");
    sample(out, "colibri_speculative_drafted_total", model, double(s.drafted));
    family(out, "colibri_speculative_accepted_total", "counter", "Draft tokens the sampler kept (divided by the drafted: the acceptance rate).");
    sample(out, "colibri_speculative_accepted_total", model, double(s.accepted));
    family(out, "colibri_queue_depth", "gauge", "Requests waiting for a slot.");
    sample(out, "colibri_queue_depth", model, s.queued);
    family(out, "colibri_active_slots", "gauge", "Slots generating now.");
    sample(out, "colibri_active_slots", model, s.active);
    family(out, "colibri_slots", "gauge", "Slots (sequences that decode together).");
    sample(out, "colibri_slots", model, s.slots);
    family(out, "colibri_ranks", "gauge", "Processes the routed experts are spread over (mpirun -np N; 1: this process alone).");
    sample(out, "colibri_ranks", model, s.ranks);
    family(out, "colibri_decode_tokens_per_second", "gauge", "Tokens generated per second over the last 10 seconds, all slots together.");
    sample(out, "colibri_decode_tokens_per_second", model, s.decode_tokens_per_second);
    family(out, "colibri_http_connections", "gauge", "HTTP connections open, by state: waiting (idle or a request arriving), queued, serving.");
    sample(out, "colibri_http_connections", "state=\"waiting\"", double(c.waiting));
    sample(out, "colibri_http_connections", "state=\"queued\"", double(c.queued));
    sample(out, "colibri_http_connections", "state=\"serving\"", double(c.serving));
    family(out, "colibri_http_connections_closed_total", "counter", "HTTP connections the server closed: at the connection cap, or at an idle or request deadline.");
    sample(out, "colibri_http_connections_closed_total", "reason=\"evicted\"", double(c.evicted));
    sample(out, "colibri_http_connections_closed_total", "reason=\"timeout\"", double(c.timed_out));
    family(out, "colibri_expert_activations_total", "counter", "Tokens routed to each expert of each MoE layer.");
    for (uint32_t l = 0; l < s.layers; ++l) {
        bool moe = false;
        for (uint32_t e = 0; e < s.experts && !moe; ++e) moe = s.expert_activations[size_t(l) * s.experts + e] > 0;
        if (!moe) continue;  // dense layers, or nothing routed yet
        for (uint32_t e = 0; e < s.experts; ++e)
            sample(out, "colibri_expert_activations_total",
                   model + ",layer=\"" + std::to_string(l) + "\",expert=\"" + std::to_string(e) + "\"",
                   double(s.expert_activations[size_t(l) * s.experts + e]));
    }
    return out;
}

}  // namespace colibri::server
