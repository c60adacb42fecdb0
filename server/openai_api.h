// The OpenAI wire format: requests of /v1/chat/completions and /v1/completions checked and turned into a JobSpec
// (every problem an OpenAI-style error with its HTTP status, never an exception), and the responses built from
// a job's events: whole, or as server-sent-event chunks. No sockets here: the HTTP and local front ends share it.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "engine/core/model.h"
#include "engine/core/sampler.h"  // kGreedyBelowTemperature: a request below it is greedy
#include "engine/core/speculation.h"
#include "server/job.h"

namespace colibri::server {

struct ApiError {
    int status = 400;
    std::string type = "invalid_request_error";
    std::string message;
    std::string param;  // the offending field, empty for none
    std::string code;   // e.g. "model_not_found", "context_length_exceeded"; empty for none
};
nlohmann::json error_body(const ApiError& e);  // {"error": {"message", "type", "param", "code"}}

enum class Endpoint { Chat, Completions };

struct ApiLimits {
    uint32_t context = 4096;     // per slot: prompt + max_tokens must fit
    uint32_t max_tokens = 0;     // cap on max_tokens (0: the context)
    size_t max_messages = 4096;
    size_t max_stop = 4;         // stop strings, as OpenAI allows
    size_t max_stop_bytes = 256;
    int32_t max_top_logprobs = 20;
    size_t max_logit_bias = 1024;  // entries of logit_bias
    bool require_model = true;   // OpenAI's "model" is required; the local transport serves one model anyway
    SpeculateMode speculate = SpeculateMode::Off;  // a request's "speculate" when it names none (serve --speculate)
};

// Empty when the server can draft this way, else why not: the server steps its slots in one batched eval, which
// the multi-token-prediction head does not follow (Session::eval_batch turns it off), so "mtp" is refused.
std::string server_speculate_problem(SpeculateMode mode);

struct ApiRequest {
    Endpoint endpoint = Endpoint::Chat;
    JobSpec spec;
    bool stream = false;
    bool include_usage = false;  // stream_options.include_usage
    bool logprobs = false;
    int32_t top_logprobs = 0;
    bool trace = false;          // the "colibri": {"trace": true} extension
};

// The served model as requests name it.
struct ServedModel {
    const Model* model = nullptr;
    std::string id;        // what "model" must say (the file's stem); any of `aliases` is accepted too
    std::vector<std::string> aliases;
    int64_t created = 0;   // the file's modification time
    uint32_t context = 0;  // tokens per slot (for /v1/models' meta)
};

// Parses a request body. A request without a seed gets one from `seeds`, so that its sampling is reproducible
// from the seed reported back. Fields that would change the reply but are not implemented (tools,
// response_format other than text, best_of > 1, ...) are refused naming the field, never ignored.
std::variant<ApiRequest, ApiError> parse_request(Endpoint endpoint, std::string_view body, const ServedModel& served,
                                                 const ApiLimits& limits, std::mt19937_64& seeds);

nlohmann::json models_list(const ServedModel& served);

// Builds the responses of one request from its job's events.
class ResponseBuilder {
public:
    ResponseBuilder(const ApiRequest& request, const ServedModel& served, std::string id, int64_t created);

    // Streaming: the chunks to send (each one `data: <json>`), in order.
    std::vector<nlohmann::json> start_chunks();  // chat: the assistant role
    std::vector<nlohmann::json> event_chunks(const JobEvent& event);
    std::vector<nlohmann::json> end_chunks(const JobOutcome& outcome);  // finish_reason, then usage if asked

    // Not streaming: folds an event into the whole response.
    void add(const JobEvent& event);
    nlohmann::json whole(const JobOutcome& outcome) const;

    static nlohmann::json usage(const JobOutcome& outcome);
    static nlohmann::json timings(const JobOutcome& outcome);

private:
    nlohmann::json chunk(nlohmann::json choice) const;
    nlohmann::json logprob_entry(const TokenEvent& e);
    nlohmann::json trace_json(const std::vector<PositionTrace>& traces) const;
    std::string token_bytes(int32_t id) const;

    const ApiRequest& request_;
    const ServedModel& served_;
    std::string id_;
    int64_t created_;
    std::string text_;
    nlohmann::json logprobs_ = nlohmann::json::array();  // chat: content entries
    // completions' legacy logprobs
    nlohmann::json tokens_ = nlohmann::json::array(), token_logprobs_ = nlohmann::json::array(),
                   top_logprobs_ = nlohmann::json::array(), text_offset_ = nlohmann::json::array();
    nlohmann::json traces_ = nlohmann::json::array();
};

// Serialises JSON for the wire: invalid UTF-8 (a token's partial character) becomes U+FFFD.
std::string dump(const nlohmann::json& j);

}  // namespace colibri::server
