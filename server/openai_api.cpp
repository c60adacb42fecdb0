#include "server/openai_api.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "engine/core/chat_service.h"
#include "engine/base/json_depth.h"

namespace colibri::server {

using nlohmann::json;

namespace {

ApiError bad(std::string message, std::string param = {}, std::string code = {}) {
    return ApiError{400, "invalid_request_error", std::move(message), std::move(param), std::move(code)};
}

const char* type_name(const json& v) {
    switch (v.type()) {
        case json::value_t::null: return "null";
        case json::value_t::boolean: return "a boolean";
        case json::value_t::string: return "a string";
        case json::value_t::array: return "an array";
        case json::value_t::object: return "an object";
        case json::value_t::number_float: return "a number";
        default: return "an integer";
    }
}

// The optional fields of a request, read with their types checked; the first problem is kept.
class Fields {
public:
    explicit Fields(const json& body) : body_(body) {}
    std::optional<ApiError> error;

    const json* get(const char* name) const {
        auto it = body_.find(name);
        return it == body_.end() || it->is_null() ? nullptr : &*it;
    }
    template <typename T>
    void number(const char* name, T& out, double lo, double hi) {
        const json* v = get(name);
        if (v == nullptr || error) return;
        const bool integral = std::is_integral_v<T>;
        if (!v->is_number() || (integral && !v->is_number_integer())) {
            error = bad(std::string("'") + name + "' must be " + (integral ? "an integer" : "a number") + ", not " + type_name(*v), name);
            return;
        }
        const double d = v->get<double>();
        if (!(d >= lo && d <= hi)) {
            error = bad(std::string("'") + name + "' must be between " + format(lo) + " and " + format(hi) + ", not " + v->dump(), name);
            return;
        }
        out = integral ? static_cast<T>(v->get<int64_t>()) : static_cast<T>(d);
    }
    void boolean(const char* name, bool& out) {
        const json* v = get(name);
        if (v == nullptr || error) return;
        if (!v->is_boolean()) {
            error = bad(std::string("'") + name + "' must be a boolean, not " + type_name(*v), name);
            return;
        }
        out = v->get<bool>();
    }

private:
    static std::string format(double d) {
        if (d == std::floor(d) && std::fabs(d) < 1e15) return std::to_string(static_cast<int64_t>(d));
        std::string s = std::to_string(d);
        while (!s.empty() && s.back() == '0') s.pop_back();
        return s;
    }
    const json& body_;
};

// A message's content: a string, or an array of {"type": "text", "text": ...} parts.
std::optional<std::string> content_text(const json& content, std::string& why) {
    if (content.is_string()) return content.get<std::string>();
    if (content.is_null()) return std::string();
    if (!content.is_array()) {
        why = std::string("must be a string or an array of text parts, not ") + type_name(content);
        return std::nullopt;
    }
    std::string text;
    for (const json& part : content) {
        if (!part.is_object() || part.value("type", json()) != "text" || !part.contains("text") || !part["text"].is_string()) {
            why = "has a part that is not {\"type\": \"text\", \"text\": \"...\"} (only text is supported)";
            return std::nullopt;
        }
        text += part["text"].get<std::string>();
    }
    return text;
}

// logit_bias: {"<token id>": bias in [-100, 100], ...}, added to the logits before sampling, as OpenAI does.
std::optional<ApiError> logit_bias(const Fields& f, uint32_t vocab, size_t max_entries, std::vector<std::pair<int32_t, float>>& out) {
    const json* lb = f.get("logit_bias");
    if (lb == nullptr) return std::nullopt;
    if (!lb->is_object()) return bad(std::string("'logit_bias' must be an object mapping token ids to numbers, not ") + type_name(*lb), "logit_bias");
    if (lb->size() > max_entries) return bad("'logit_bias' has " + std::to_string(lb->size()) + " entries; at most " + std::to_string(max_entries), "logit_bias");
    for (const auto& [key, value] : lb->items()) {
        int64_t id = key.empty() || key.size() > 10 ? -1 : 0;
        for (char c : key) id = id >= 0 && c >= '0' && c <= '9' ? id * 10 + (c - '0') : -1;
        if (id < 0 || id >= int64_t(vocab))
            return bad("'logit_bias' key '" + key.substr(0, 32) + "' is not a token id in [0, " + std::to_string(vocab) + ")", "logit_bias");
        if (!value.is_number() || !(value.get<double>() >= -100.0 && value.get<double>() <= 100.0))
            return bad("'logit_bias' values must be numbers between -100 and 100, not " + value.dump().substr(0, 32) + " (token " + key + ")",
                       "logit_bias");
        out.emplace_back(static_cast<int32_t>(id), value.get<float>());
    }
    return std::nullopt;
}

// Fields that would change what the reply is, which this server does not implement: a 400 naming the field
// rather than a reply that silently ignores it. (Fields that do not change the reply, such as "user", are
// ignored, as unknown fields are.)
std::optional<ApiError> unsupported_field(const Fields& f) {
    auto refuse = [](const char* field, const std::string& what) { return bad("'" + std::string(field) + "' " + what, field); };
    auto is_string = [](const json* v, std::initializer_list<const char*> allowed) {
        return v->is_string() && std::find(allowed.begin(), allowed.end(), v->get<std::string>()) != allowed.end();
    };
    auto carries = [](const json& o, const char* name) {  // present, and neither null nor empty
        auto it = o.find(name);
        return it != o.end() && !it->is_null() && !(it->is_array() && it->empty());
    };
    if (const json* v = f.get("tools"); v && !(v->is_array() && v->empty())) return refuse("tools", "is not supported: this server does not call tools");
    if (const json* v = f.get("functions"); v && !(v->is_array() && v->empty())) return refuse("functions", "is not supported: this server does not call functions");
    if (const json* v = f.get("tool_choice"); v && !is_string(v, {"none", "auto"})) return refuse("tool_choice", "is not supported: this server does not call tools");
    if (const json* v = f.get("function_call"); v && !is_string(v, {"none", "auto"})) return refuse("function_call", "is not supported: this server does not call functions");
    if (const json* v = f.get("response_format")) {
        const json* type = v->is_object() && v->contains("type") ? &(*v)["type"] : nullptr;
        if (type == nullptr || !type->is_string()) return refuse("response_format", "must be an object with a string 'type'");
        if (*type != "text") return refuse("response_format", "of type '" + type->get<std::string>().substr(0, 32) + "' is not supported (only 'text')");
    }
    if (const json* v = f.get("best_of")) {
        if (!v->is_number_integer()) return refuse("best_of", std::string("must be an integer, not ") + type_name(*v));
        if (v->get<int64_t>() != 1) return refuse("best_of", "other than 1 is not supported");
    }
    if (const json* v = f.get("modalities"); v && !(v->is_array() && std::all_of(v->begin(), v->end(), [](const json& m) { return m == "text"; })))
        return refuse("modalities", "other than [\"text\"] are not supported");
    if (f.get("audio")) return refuse("audio", "output is not supported");
    if (const json* msgs = f.get("messages"); msgs && msgs->is_array())
        for (size_t i = 0; i < msgs->size(); ++i)
            if (const json& m = (*msgs)[i]; m.is_object() && (carries(m, "tool_calls") || carries(m, "function_call")))
                return bad("messages[" + std::to_string(i) + "] carries tool calls, which this server does not support",
                           "messages[" + std::to_string(i) + "]");
    return std::nullopt;
}

}  // namespace

json error_body(const ApiError& e) {
    return {{"error",
             {{"message", e.message}, {"type", e.type}, {"param", e.param.empty() ? json() : json(e.param)},
              {"code", e.code.empty() ? json() : json(e.code)}}}};
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string server_speculate_problem(SpeculateMode mode) {
    if (mode != SpeculateMode::Mtp) return {};
    return "speculate mtp: not served yet: the server's batched steps do not run the multi-token-prediction head (use lookup)";
}

std::variant<ApiRequest, ApiError> parse_request(Endpoint endpoint, std::string_view body, const ServedModel& served,
                                                 const ApiLimits& limits, std::mt19937_64& seeds) {
    // nlohmann's parser takes a NUL byte for the end of the input: refuse it rather than read a truncated body.
    if (const size_t nul = body.find('\0'); nul != std::string_view::npos)
        return bad("the request body is not valid JSON: a NUL byte at offset " + std::to_string(nul));
    if (json_too_deep(body)) return bad("the request nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    const json j = json::parse(body, nullptr, false);
    if (j.is_discarded()) return bad("the request body is not valid JSON");
    if (!j.is_object()) return bad(std::string("the request body must be a JSON object, not ") + type_name(j));
    const Model& model = *served.model;
    const Tokenizer* tok = model.tokenizer();
    ApiRequest r;
    r.endpoint = endpoint;

    // model: required by OpenAI; the served model's id (or an alias).
    auto m = j.find("model");
    if (m == j.end() && limits.require_model) return bad("you must provide a model parameter", "model");
    if (m != j.end() && !m->is_string()) return bad(std::string("'model' must be a string, not ") + type_name(*m), "model");
    const std::string name = m == j.end() ? served.id : m->get<std::string>();
    if (name != served.id && std::find(served.aliases.begin(), served.aliases.end(), name) == served.aliases.end())
        return ApiError{404, "invalid_request_error", "the model '" + name + "' does not exist; this server serves '" + served.id + "'",
                        "model", "model_not_found"};

    // The prompt's tokens.
    if (endpoint == Endpoint::Chat) {
        auto msgs = j.find("messages");
        if (msgs == j.end()) return bad("'messages' is required", "messages");
        if (!msgs->is_array()) return bad(std::string("'messages' must be an array, not ") + type_name(*msgs), "messages");
        if (msgs->empty()) return bad("'messages' must not be empty", "messages");
        if (msgs->size() > limits.max_messages)
            return bad("'messages' has " + std::to_string(msgs->size()) + " entries; at most " + std::to_string(limits.max_messages), "messages");
        std::vector<ChatMessage> conversation;
        for (size_t i = 0; i < msgs->size(); ++i) {
            const json& msg = (*msgs)[i];
            const std::string where = "messages[" + std::to_string(i) + "]";
            if (!msg.is_object()) return bad(where + " must be an object, not " + type_name(msg), where);
            auto role = msg.find("role");
            if (role == msg.end() || !role->is_string()) return bad(where + ".role must be a string", where + ".role");
            std::string role_name = role->get<std::string>();
            if (role_name == "developer") role_name = "system";  // OpenAI's newer name for the system role
            if (role_name != "system" && role_name != "user" && role_name != "assistant")
                return bad(where + ".role '" + role_name + "' is not one of system, developer, user, assistant", where + ".role");
            auto content = msg.find("content");
            if (content == msg.end()) return bad(where + ".content is required", where + ".content");
            std::string why;
            auto text = content_text(*content, why);
            if (!text) return bad(where + ".content " + why, where + ".content");
            conversation.push_back({role_name, std::move(*text)});
        }
        auto ids = chat_prompt_ids(model, conversation);
        if (!ids) return bad(ids.message(), "messages");
        r.spec.prompt = std::move(ids.value());
    } else {
        auto p = j.find("prompt");
        if (p == j.end()) return bad("'prompt' is required", "prompt");
        // A string, an array of one string, or an array of token ids.
        const json* prompt = &*p;
        if (prompt->is_array() && prompt->size() == 1 && (*prompt)[0].is_string()) prompt = &(*prompt)[0];
        if (prompt->is_string()) {
            if (tok == nullptr) return bad("the model has no tokenizer; give the prompt as an array of token ids", "prompt");
            auto ids = tok->encode(prompt->get<std::string>(), true);
            if (!ids) return bad(ids.message(), "prompt");
            r.spec.prompt = std::move(ids.value());
        } else if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_number_integer()) {
            for (const json& id : *prompt) {
                if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= int64_t(model.hparams().vocab_size))
                    return bad("'prompt' token ids must be integers in [0, " + std::to_string(model.hparams().vocab_size) + ")", "prompt");
                r.spec.prompt.push_back(static_cast<int32_t>(id.get<int64_t>()));
            }
        } else if (prompt->is_array() && prompt->size() > 1) {
            return bad("only one prompt per request is supported", "prompt");
        } else {
            return bad(std::string("'prompt' must be a string or an array of token ids, not ") + type_name(*prompt), "prompt");
        }
        if (r.spec.prompt.empty()) return bad("'prompt' encodes to no tokens", "prompt");
        Fields f(j);
        bool echo = false;
        f.boolean("echo", echo);
        if (f.error) return *f.error;
        if (echo) return bad("'echo' is not supported", "echo");
        if (f.get("suffix")) return bad("'suffix' is not supported", "suffix");
    }

    Fields f(j);
    // Sampling: OpenAI's defaults (temperature 1, top_p 1), with llama.cpp's top_k, min_p and repeat_penalty off
    // unless given; temperature 0 is greedy.
    SamplerConfig& s = r.spec.sampling;
    s.temperature = 1.0f;
    s.top_p = 1.0f;
    s.top_k = 0;
    s.min_p = 0.0f;
    s.repetition_penalty = 1.0f;
    f.number("temperature", s.temperature, 0.0, 2.0);
    f.number("top_p", s.top_p, 0.0, 1.0);
    f.number("top_k", s.top_k, 0.0, 1e9);
    f.number("min_p", s.min_p, 0.0, 1.0);
    f.number("repeat_penalty", s.repetition_penalty, 0.0, 10.0);
    f.number("repeat_last_n", s.repetition_window, 0.0, 1e6);
    float frequency_penalty = 0.0f, presence_penalty = 0.0f;
    f.number("frequency_penalty", frequency_penalty, -2.0, 2.0);
    f.number("presence_penalty", presence_penalty, -2.0, 2.0);
    int64_t n = 1;
    f.number("n", n, 1.0, 128.0);
    int64_t seed = -1;
    const bool has_seed = f.get("seed") != nullptr;
    f.number("seed", seed, -9.2e18, 9.2e18);
    f.boolean("stream", r.stream);
    if (f.error) return *f.error;
    if (frequency_penalty != 0.0f || presence_penalty != 0.0f)
        return bad("frequency_penalty and presence_penalty are not supported (use repeat_penalty)",
                   frequency_penalty != 0.0f ? "frequency_penalty" : "presence_penalty");
    if (n != 1) return bad("only n = 1 is supported", "n");
    if (s.repetition_penalty <= 0.0f) return bad("'repeat_penalty' must be positive", "repeat_penalty");
    s.greedy = s.temperature < kGreedyBelowTemperature;
    s.seed = has_seed ? static_cast<uint64_t>(seed) : seeds();

    // max_tokens (or max_completion_tokens): prompt + max_tokens must fit a slot's context.
    const uint32_t room = limits.context > r.spec.prompt.size() ? limits.context - static_cast<uint32_t>(r.spec.prompt.size()) : 0;
    if (room == 0)
        return bad("the prompt is " + std::to_string(r.spec.prompt.size()) + " tokens; this model's context is " +
                       std::to_string(limits.context) + " tokens",
                   endpoint == Endpoint::Chat ? "messages" : "prompt", "context_length_exceeded");
    const uint32_t cap = limits.max_tokens > 0 ? std::min(limits.max_tokens, room) : room;
    int64_t max_tokens = -1;
    const char* max_name = f.get("max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    f.number(max_name, max_tokens, 1.0, 9.2e18);
    if (f.error) return *f.error;
    if (max_tokens < 0) {
        max_tokens = cap;
    } else if (max_tokens > room) {
        return bad(std::string("'") + max_name + "' is " + std::to_string(max_tokens) + " but the prompt is " +
                       std::to_string(r.spec.prompt.size()) + " tokens and this model's context is " + std::to_string(limits.context) +
                       " tokens: at most " + std::to_string(room) + " can be generated",
                   max_name, "context_length_exceeded");
    } else if (max_tokens > cap) {
        return bad(std::string("'") + max_name + "' is " + std::to_string(max_tokens) + "; this server allows at most " + std::to_string(cap),
                   max_name);
    }
    r.spec.reply.max_tokens = static_cast<int32_t>(max_tokens);

    // stop: a string or up to four strings.
    if (const json* stop = f.get("stop")) {
        std::vector<std::string> stops;
        if (stop->is_string()) stops.push_back(stop->get<std::string>());
        else if (stop->is_array()) {
            for (const json& x : *stop) {
                if (!x.is_string()) return bad("'stop' must be a string or an array of strings", "stop");
                stops.push_back(x.get<std::string>());
            }
        } else {
            return bad(std::string("'stop' must be a string or an array of strings, not ") + type_name(*stop), "stop");
        }
        if (stops.size() > limits.max_stop) return bad("'stop' takes at most " + std::to_string(limits.max_stop) + " strings", "stop");
        for (const std::string& x : stops)
            if (x.size() > limits.max_stop_bytes)
                return bad("a 'stop' string is longer than " + std::to_string(limits.max_stop_bytes) + " bytes", "stop");
        r.spec.reply.stop_strings = std::move(stops);
    }
    // "speculate": "lookup" | "mtp" | "off" (the one spelling of --speculate); the reply is the same either way.
    r.spec.speculate = limits.speculate;
    if (const json* sp = f.get("speculate")) {
        if (!sp->is_string()) return bad(std::string("'speculate' must be one of \"lookup\", \"mtp\", \"off\", not ") + type_name(*sp), "speculate");
        auto mode = parse_speculate_mode(sp->get<std::string>());
        if (!mode) return bad("'speculate' must be one of \"lookup\", \"mtp\", \"off\", not \"" + sp->get<std::string>().substr(0, 32) + "\"", "speculate");
        if (auto drafter = make_drafter(mode.value(), model); !drafter) return bad(drafter.message(), "speculate");
        if (const std::string p = server_speculate_problem(mode.value()); !p.empty()) return bad(p, "speculate");
        r.spec.speculate = mode.value();
    }
    bool ignore_eos = false;
    f.boolean("ignore_eos", ignore_eos);  // llama.cpp's extension: generate max_tokens whatever the model says
    if (f.error) return *f.error;
    if (!ignore_eos) r.spec.reply.stop_ids = default_stop_ids(model);

    // logprobs: chat takes logprobs (bool) and top_logprobs (0..20); completions take logprobs (0..5).
    if (endpoint == Endpoint::Chat) {
        f.boolean("logprobs", r.logprobs);
        f.number("top_logprobs", r.top_logprobs, 0.0, double(limits.max_top_logprobs));
        if (f.error) return *f.error;
        if (f.get("top_logprobs") && !r.logprobs) return bad("'top_logprobs' needs 'logprobs': true", "top_logprobs");
    } else if (const json* lp = f.get("logprobs")) {
        if (!lp->is_number_integer() || lp->get<int64_t>() < 0 || lp->get<int64_t>() > 5)
            return bad("'logprobs' must be an integer between 0 and 5", "logprobs");
        r.logprobs = true;
        r.top_logprobs = static_cast<int32_t>(lp->get<int64_t>());
    }
    r.spec.reply.top_logprobs = r.logprobs ? r.top_logprobs : -1;

    // stream_options: {"include_usage": bool}, only with stream.
    if (const json* so = f.get("stream_options")) {
        if (!so->is_object()) return bad("'stream_options' must be an object", "stream_options");
        if (!r.stream) return bad("'stream_options' is only allowed when 'stream' is true", "stream_options");
        Fields o(*so);
        o.boolean("include_usage", r.include_usage);
        if (o.error) return bad("'stream_options.include_usage' must be a boolean", "stream_options.include_usage");
    }
    // The Colibri extension (docs/SERVER.md): {"colibri": {"trace": true}} streams each position's routing and timings.
    if (const json* ext = f.get("colibri")) {
        if (!ext->is_object()) return bad("'colibri' must be an object", "colibri");
        Fields o(*ext);
        o.boolean("trace", r.trace);
        if (o.error) return bad("'colibri.trace' must be a boolean", "colibri.trace");
    }
    r.spec.trace = r.trace;
    if (f.error) return *f.error;
    if (auto e = logit_bias(f, model.hparams().vocab_size, limits.max_logit_bias, r.spec.reply.logit_bias)) return *e;
    if (auto e = unsupported_field(f)) return *e;
    return r;
}

json models_list(const ServedModel& served) {
    const Model& m = *served.model;
    const format::HyperParams& hp = m.hparams();
    json meta{{"family", format::family_name(m.family())}, {"layers", hp.n_layers}, {"experts", hp.n_experts},
              {"active_experts", hp.n_experts_active}, {"vocab_size", hp.vocab_size}, {"max_position", hp.max_position},
              {"tokenizer", m.tokenizer() != nullptr}, {"chat_template", !m.chat_template().empty()},
              {"hidden_size", hp.hidden_size}, {"context", served.context}};
    json moe = json::array();
    for (uint32_t l = 0; l < hp.n_layers; ++l)
        if (m.layers()[l].is_moe) moe.push_back(l);
    meta["moe_layers"] = moe;
    // Across ranks, which rank holds each routed expert: the JSON --placement reads (a replicated expert a list).
    const ExpertParallel* parallel = m.expert_parallel();
    const uint32_t ranks = parallel != nullptr ? parallel->comm->size() : 1;
    meta["ranks"] = ranks;
    if (ranks > 1) meta["placement"] = json::parse(parallel->placement.to_json());
    return {{"object", "list"},
            {"data", json::array({{{"id", served.id}, {"object", "model"}, {"created", served.created}, {"owned_by", "colibri"},
                                   {"meta", meta}}})}};
}

// ---- responses ----

ResponseBuilder::ResponseBuilder(const ApiRequest& request, const ServedModel& served, std::string id, int64_t created)
    : request_(request), served_(served), id_(std::move(id)), created_(created) {}

std::string ResponseBuilder::token_bytes(int32_t id) const {
    const Tokenizer* tok = served_.model->tokenizer();
    return tok ? tok->decode_token_bytes(id) : std::string();
}

json ResponseBuilder::chunk(json choice) const {
    const bool chat = request_.endpoint == Endpoint::Chat;
    json c{{"id", id_}, {"object", chat ? "chat.completion.chunk" : "text_completion"}, {"created", created_},
           {"model", served_.id}, {"system_fingerprint", "colibri-0.1.0"}};
    c["choices"] = choice.is_null() ? json::array() : json::array({std::move(choice)});
    return c;
}

json ResponseBuilder::logprob_entry(const TokenEvent& e) {
    auto bytes_of = [](const std::string& s) {
        json b = json::array();
        for (unsigned char c : s) b.push_back(c);
        return b;
    };
    const std::string text = token_bytes(e.id);
    json top = json::array();
    for (const TokenLogprob& t : e.top) {
        const std::string tt = token_bytes(t.id);
        top.push_back({{"token", tt}, {"logprob", t.logprob}, {"bytes", bytes_of(tt)}});
    }
    return {{"token", text}, {"logprob", e.logprob.logprob}, {"bytes", bytes_of(text)}, {"top_logprobs", top}};
}

json ResponseBuilder::trace_json(const std::vector<PositionTrace>& traces) const {
    json out = json::array();
    for (const PositionTrace& t : traces) {
        json routing = json::array(), timings = json::array();
        for (const auto& r : t.routing)
            routing.push_back({{"layer", r.layer}, {"experts", r.experts}, {"weights", r.weights}, {"probs", r.probs}});
        for (const auto& l : t.timings)
            timings.push_back({{"layer", l.layer}, {"attention_ns", l.attention_ns}, {"router_ns", l.router_ns}, {"experts_ns", l.experts_ns}});
        json position{{"position", t.position}, {"token", t.token}, {"text", token_bytes(t.token)},
                      {"generated", t.position >= request_.spec.prompt.size()}, {"routing", routing}, {"timings", timings}};
        if (!t.ranks.empty()) {
            json ranks = json::array();
            for (const auto& r : t.ranks)
                ranks.push_back({{"layer", r.layer}, {"experts_ns", r.experts_ns}, {"exchange_ns", r.exchange_ns}, {"bytes", r.bytes},
                                 {"bytes_sent", r.bytes_sent}, {"bytes_received", r.bytes_received}});
            position["ranks"] = std::move(ranks);
        }
        out.push_back(std::move(position));
    }
    return out;
}

std::vector<json> ResponseBuilder::start_chunks() {
    if (request_.endpoint != Endpoint::Chat) return {};
    return {chunk({{"index", 0}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", nullptr}, {"finish_reason", nullptr}})};
}

std::vector<json> ResponseBuilder::event_chunks(const JobEvent& event) {
    const TokenEvent& e = event.token;
    const bool want_logprobs = request_.logprobs && !e.end_of_turn;
    // A chunk per generated token, as llama.cpp's server sends them, so that a client can count tokens as they
    // come; its text may be empty (part of a character, or text held back for a stop string). Only an end-of-turn
    // token without logprobs or a trace has none.
    if (e.end_of_turn && !want_logprobs && !request_.trace) return {};
    json choice{{"index", 0}, {"finish_reason", nullptr}};
    if (request_.endpoint == Endpoint::Chat) {
        choice["delta"] = e.text.empty() ? json::object() : json{{"content", e.text}};
        choice["logprobs"] = want_logprobs ? json{{"content", json::array({logprob_entry(e)})}} : json();
    } else {
        choice["text"] = e.text;
        if (want_logprobs) {
            const std::string t = token_bytes(e.id);
            json top = json::object();
            for (const TokenLogprob& x : e.top) top[token_bytes(x.id)] = x.logprob;
            choice["logprobs"] = {{"tokens", {t}}, {"token_logprobs", {e.logprob.logprob}}, {"top_logprobs", {top}},
                                  {"text_offset", {text_.size()}}};
        } else {
            choice["logprobs"] = nullptr;
        }
        text_ += e.text;  // only for text_offset
    }
    json c = chunk(std::move(choice));
    if (request_.trace)  // which token this is, where it will be evaluated, and the positions evaluated since
        c["colibri"] = {{"trace", trace_json(event.traces)}, {"token", e.id}, {"end_of_turn", e.end_of_turn},
                        {"position", request_.spec.prompt.size() + e.index}};
    return {std::move(c)};
}

std::vector<json> ResponseBuilder::end_chunks(const JobOutcome& outcome) {
    std::vector<json> out;
    json choice{{"index", 0}, {"finish_reason", finish_reason_name(outcome.finish)}, {"logprobs", nullptr}};
    if (request_.endpoint == Endpoint::Chat) choice["delta"] = json::object();
    else choice["text"] = "";
    json c = chunk(std::move(choice));
    if (!outcome.traces.empty()) c["colibri"] = {{"trace", trace_json(outcome.traces)}};
    out.push_back(std::move(c));
    if (request_.include_usage) {
        json u = chunk(nullptr);
        u["usage"] = usage(outcome);
        u["timings"] = timings(outcome);
        out.push_back(std::move(u));
    }
    return out;
}

void ResponseBuilder::add(const JobEvent& event) {
    const TokenEvent& e = event.token;
    if (request_.logprobs && !e.end_of_turn) {
        if (request_.endpoint == Endpoint::Chat) {
            logprobs_.push_back(logprob_entry(e));
        } else {
            const std::string t = token_bytes(e.id);
            json top = json::object();
            for (const TokenLogprob& x : e.top) top[token_bytes(x.id)] = x.logprob;
            tokens_.push_back(t);
            token_logprobs_.push_back(e.logprob.logprob);
            top_logprobs_.push_back(top);
            text_offset_.push_back(text_.size());
        }
    }
    text_ += e.text;
    if (!event.traces.empty())
        for (json& t : trace_json(event.traces)) traces_.push_back(std::move(t));
}

json ResponseBuilder::whole(const JobOutcome& outcome) const {
    const bool chat = request_.endpoint == Endpoint::Chat;
    json choice{{"index", 0}, {"finish_reason", finish_reason_name(outcome.finish)}};
    if (chat) {
        choice["message"] = {{"role", "assistant"}, {"content", text_}};
        choice["logprobs"] = request_.logprobs ? json{{"content", logprobs_}} : json();
    } else {
        choice["text"] = text_;
        choice["logprobs"] = request_.logprobs ? json{{"tokens", tokens_}, {"token_logprobs", token_logprobs_}, {"top_logprobs", top_logprobs_},
                                                      {"text_offset", text_offset_}}
                                               : json();
    }
    json r{{"id", id_}, {"object", chat ? "chat.completion" : "text_completion"}, {"created", created_}, {"model", served_.id},
           {"system_fingerprint", "colibri-0.1.0"}, {"choices", json::array({choice})}, {"usage", usage(outcome)},
           {"timings", timings(outcome)}};
    if (request_.trace) {
        json all = traces_;
        for (json& t : trace_json(outcome.traces)) all.push_back(std::move(t));
        r["colibri"] = {{"trace", all}};
    }
    return r;
}

json ResponseBuilder::usage(const JobOutcome& o) {
    return {{"prompt_tokens", o.prompt_tokens}, {"completion_tokens", o.completion_tokens},
            {"total_tokens", o.prompt_tokens + o.completion_tokens},
            {"prompt_tokens_details", {{"cached_tokens", o.cached_tokens}}}};
}

json ResponseBuilder::timings(const JobOutcome& o) {
    const uint32_t evaluated = o.prompt_tokens - o.cached_tokens;
    auto per_second = [](uint64_t n, double ms) { return TokenRate{n, ms / 1000.0}.per_second(); };
    return {{"queued_ms", o.queued_ms},
            {"cache_n", o.cached_tokens},
            {"prompt_n", evaluated},
            {"prompt_ms", o.prompt_ms},
            {"prompt_per_second", per_second(evaluated, o.prompt_ms)},
            {"predicted_n", o.completion_tokens},
            {"predicted_ms", o.decode_ms},
            // the first token is sampled at the end of the prompt: the decode time covers the others
            {"predicted_per_second", TokenRate::of_reply(o.completion_tokens, o.decode_ms / 1000.0).per_second()}};
}

}  // namespace colibri::server
