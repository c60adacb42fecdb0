// The C API over Model, Session, Tokenizer, generate() and the chat service; no C++ exception crosses it.
#include "colibri/colibri.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>

#include "engine/core/chat_prompt.h"
#include "engine/core/chat_service.h"
#include "engine/core/generate.h"
#include "engine/core/model.h"
#include "engine/core/open_model.h"
#include "engine/core/session.h"
#include "engine/core/session_follow.h"
#include "engine/core/session_mirror.h"
#include "engine/distributed/launch.h"

struct colibri_model {
    // Under mpirun: the ranks and this rank's share of the experts (null in one process); they outlive the model.
    std::unique_ptr<colibri::Communicator> comm;
    std::unique_ptr<colibri::ExpertParallel> parallel;
    std::unique_ptr<colibri::Model> model;
    mutable std::atomic<int> sessions{0};  // open across ranks: one at a time (the other ranks follow one)
    colibri::Communicator* ranks() const { return comm && comm->size() > 1 ? comm.get() : nullptr; }
};

// Forwards the session's routing records to a C callback.
struct RouteForwarder : colibri::TraceObserver {
    colibri_route_callback callback = nullptr;
    void* user = nullptr;
    void on_routing(const colibri::RoutingRecord& r) override {
        const colibri_route c{r.layer, r.position, static_cast<uint32_t>(r.experts.size()), r.experts.data(), r.weights.data(),
                              r.selection.data(), static_cast<uint32_t>(r.groups.size()), r.groups.data()};
        callback(&c, user);
    }
};

struct colibri_session {
    const colibri_model* owner;
    std::unique_ptr<colibri::ThreadPool> pool;
    // Rank 0 across ranks: what the session tells the other ranks (before the session: it outlives it).
    std::unique_ptr<colibri::SessionMirror> mirror;
    std::unique_ptr<colibri::Session> session;
    RouteForwarder routes;
    ~colibri_session() {
        if (mirror) (void)mirror->stop();  // the other ranks' colibri_session_follow returns
        session.reset();
        if (owner->ranks()) owner->sessions = 0;
    }
};

struct colibri_chat {
    colibri_session* session;
    colibri::ChatService service;
    std::string reply;  // the last turn's reply, for colibri_chat_reply()
};

namespace {
thread_local std::string g_last_error;

void set_error(const std::string& e) { g_last_error = e; }

// Across ranks only rank 0 drives a session; the others follow it (colibri_session_follow). True, with the error
// set, on another rank.
bool refused_on_follower(const colibri_session* s) {
    const colibri::Communicator* ranks = s ? s->owner->ranks() : nullptr;
    if (ranks == nullptr || ranks->rank() == 0) return false;
    set_error("rank " + std::to_string(ranks->rank()) + " follows rank 0's session (colibri_session_follow): only rank 0 uses it");
    return true;
}

// COLIBRI_RANK_TIMEOUT (seconds) and COLIBRI_PLACEMENT (a `colibri placement` file): the ranks' options, as the
// command line's --rank-timeout and --placement.
colibri::Result<colibri::RankRequest> rank_request() {
    colibri::RankRequest request;
    if (const char* p = std::getenv("COLIBRI_PLACEMENT"); p != nullptr && *p != '\0') request.placement = p;
    if (const char* t = std::getenv("COLIBRI_RANK_TIMEOUT"); t != nullptr && *t != '\0') {
        char* end = nullptr;
        const double seconds = std::strtod(t, &end);
        if (end == t || *end != '\0' || !(seconds > 0.0) || seconds > 86400.0)
            return colibri::error(std::string("COLIBRI_RANK_TIMEOUT '") + t + "': seconds above 0, at most 86400");
        request.wait_limit = std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0 + 0.5));
    }
    return request;
}

colibri::SamplerConfig sampler_config(const colibri_sampler_params* params) {
    const colibri_sampler_params p = params ? *params : colibri_sampler_defaults();
    colibri::SamplerConfig cfg;
    cfg.greedy = p.greedy != 0;
    cfg.temperature = p.temperature;
    cfg.top_k = p.top_k;
    cfg.top_p = p.top_p;
    cfg.min_p = p.min_p;
    cfg.repetition_penalty = p.repetition_penalty;
    cfg.seed = p.seed;
    return cfg;
}

// Streams a chat turn's text to the caller's callback.
struct TextCallbackObserver final : colibri::TurnObserver {
    colibri_text_callback callback;
    void* user;
    TextCallbackObserver(colibri_text_callback c, void* u) : callback(c), user(u) {}
    bool on_token(const colibri::TokenEvent& e) override {
        return callback == nullptr || callback(e.text.c_str(), e.text.size(), e.id, user) != 0;
    }
};

template <typename F, typename R>
R guarded(R on_error, F&& f) {
    try {
        return f();
    } catch (const std::exception& e) {
        set_error(e.what());
    } catch (...) {
        set_error("unknown error");
    }
    return on_error;
}
}  // namespace

extern "C" {

const char* colibri_version(void) { return "0.1.0"; }
const char* colibri_last_error(void) { return g_last_error.c_str(); }

colibri_sampler_params colibri_sampler_defaults(void) {
    const colibri::SamplerConfig d;
    return colibri_sampler_params{d.greedy ? 1 : 0, d.temperature, d.top_k, d.top_p, d.min_p, d.repetition_penalty, d.seed};
}

namespace {
// Both ways of opening a model go through open_model's steps (engine/core/open_model.h).
colibri_model* open_with(const char* path, std::optional<colibri::ExpertCacheRequest> cache) {
    if (path == nullptr) {
        set_error("no path given");
        return nullptr;
    }
    colibri::OpenOptions options;
    options.path = path;
    options.cache = std::move(cache);
    options.with_session = false;
    // Launched by mpirun with several ranks: this process joins them (every rank opens the same model).
    if (colibri::launched_ranks() > 1) {
        auto ranks = rank_request();
        if (!ranks) return set_error(ranks.message()), nullptr;
        options.ranks = std::move(ranks.value());
    }
    auto m = colibri::open_model(options);
    if (!m) {
        set_error(m.message());
        return nullptr;
    }
    auto* opened = new colibri_model;
    opened->comm = std::move(m->comm);
    opened->parallel = std::move(m->parallel);
    opened->model = std::move(m->model);
    return opened;
}
}  // namespace

colibri_model* colibri_model_open(const char* path) {
    return guarded<>(static_cast<colibri_model*>(nullptr), [&]() -> colibri_model* { return open_with(path, std::nullopt); });
}

colibri_model_options colibri_model_options_defaults(void) { return colibri_model_options{0, nullptr, 0}; }

colibri_model* colibri_model_open_with(const char* path, const colibri_model_options* options) {
    return guarded<>(static_cast<colibri_model*>(nullptr), [&]() -> colibri_model* {
        if (options == nullptr || options->ram_budget == 0) return open_with(path, std::nullopt);
        const char* name = options->cache_policy ? options->cache_policy : "lru";
        const std::optional<colibri::CachePolicy> policy = colibri::parse_cache_policy(name);
        if (!policy || *policy == colibri::CachePolicy::Pinned) {  // the C API takes no routing trace
            set_error(std::string("cache policy '") + name + "': use lru or lfru");
            return nullptr;
        }
        colibri::ExpertCacheRequest cache;
        cache.budget.bytes = options->ram_budget;
        cache.policy = *policy;
        cache.prefetch = options->prefetch != 0;
        return open_with(path, std::move(cache));
    });
}

int colibri_model_cache_stats(const colibri_model* model, colibri_cache_stats* stats) {
    const colibri::ExpertCache* c = model ? model->model->expert_cache() : nullptr;
    if (c == nullptr || stats == nullptr) {
        set_error(model ? "the model has no RAM budget" : "no model given");
        return -1;
    }
    const colibri::ExpertCacheStats t = c->total_stats();
    *stats = colibri_cache_stats{t.hits, t.misses, t.bytes_read, t.stall_ns, c->slots_per_layer(), t.prefetched, t.predicted,
                                 t.predicted_right};
    return 0;
}

void colibri_model_close(colibri_model* model) { delete model; }

int colibri_model_swap_expert(colibri_model* model, uint32_t layer, uint32_t expert, const char* donor_path,
                              uint32_t donor_layer, uint32_t donor_expert) {
    return guarded<>(-1, [&]() -> int {
        if (model == nullptr || donor_path == nullptr) {
            set_error("no model or donor path given");
            return -1;
        }
        if (model->ranks()) return set_error("expert hot-swap: not across ranks (each rank holds its own share of the experts)"), -1;
        auto donor = colibri::ModelFile::open(donor_path);
        if (!donor) {
            set_error(donor.message());
            return -1;
        }
        if (colibri::Status s = model->model->swap_expert(layer, expert, *donor.value(), donor_layer, donor_expert); !s) {
            set_error(s.message());
            return -1;
        }
        return 0;
    });
}
int32_t colibri_model_vocab_size(const colibri_model* m) { return m ? static_cast<int32_t>(m->model->hparams().vocab_size) : -1; }
int32_t colibri_model_layer_count(const colibri_model* m) { return m ? static_cast<int32_t>(m->model->hparams().n_layers) : -1; }
int32_t colibri_model_expert_count(const colibri_model* m) { return m ? static_cast<int32_t>(m->model->hparams().n_experts) : -1; }
const char* colibri_model_family(const colibri_model* m) { return m ? colibri::format::family_name(m->model->family()) : nullptr; }

int32_t colibri_tokenize(const colibri_model* m, const char* text, int add_special, int32_t* ids, size_t capacity) {
    return guarded<>(int32_t(-1), [&]() -> int32_t {
        if (m == nullptr || text == nullptr) return set_error("null argument"), -1;
        const colibri::Tokenizer* tok = m->model->tokenizer();
        if (tok == nullptr) return set_error("model has no tokenizer"), -1;
        auto encoded = tok->encode(text, add_special != 0);
        if (!encoded) return set_error(encoded.message()), -1;
        const std::vector<int32_t>& v = encoded.value();
        if (ids != nullptr) std::memcpy(ids, v.data(), std::min(capacity, v.size()) * sizeof(int32_t));
        return static_cast<int32_t>(v.size());
    });
}

int32_t colibri_detokenize(const colibri_model* m, const int32_t* ids, size_t count, char* text, size_t capacity) {
    return guarded<>(int32_t(-1), [&]() -> int32_t {
        if (m == nullptr || (ids == nullptr && count > 0)) return set_error("null argument"), -1;
        const colibri::Tokenizer* tok = m->model->tokenizer();
        if (tok == nullptr) return set_error("model has no tokenizer"), -1;
        const std::string s = tok->decode(std::vector<int32_t>(ids, ids + count));
        if (text != nullptr && capacity > 0) {
            const size_t n = std::min(capacity - 1, s.size());
            std::memcpy(text, s.data(), n);
            text[n] = '\0';
        }
        return static_cast<int32_t>(s.size());
    });
}

colibri_session* colibri_session_new(const colibri_model* m, unsigned threads, uint32_t context) {
    return guarded<>(static_cast<colibri_session*>(nullptr), [&]() -> colibri_session* {
        if (m == nullptr) return set_error("null model"), nullptr;
        colibri::Communicator* ranks = m->ranks();
        int none = 0;
        if (ranks && !m->sessions.compare_exchange_strong(none, 1))
            return set_error("across ranks a model has one session at a time (free the other one first)"), nullptr;
        auto parts = colibri::open_session(*m->model, threads, context, colibri::SessionOptions::from_environment());
        if (!parts) {
            if (ranks) m->sessions = 0;
            return set_error(parts.message()), nullptr;
        }
        // From here the session counts itself out when it goes.
        auto* s = new colibri_session{m, std::move(parts->pool), nullptr, std::move(parts->session), {}};
        if (ranks == nullptr || ranks->rank() != 0) return s;  // another rank's follows rank 0's (colibri_session_follow)
        // Rank 0: the session tells the other ranks each operation; the heartbeat keeps them waiting between calls.
        s->mirror = std::make_unique<colibri::SessionMirror>(ranks);
        s->session->set_mirror(s->mirror.get(), 0);
        if (colibri::Status st = s->mirror->start_heartbeat(); !st) {
            delete s;
            return set_error(st.message()), nullptr;
        }
        return s;
    });
}

int colibri_session_follow(colibri_session* s) {
    return guarded<>(-1, [&]() -> int {
        if (s == nullptr) return set_error("null session"), -1;
        colibri::Communicator* ranks = s->owner->ranks();
        if (ranks == nullptr || ranks->rank() == 0)
            return set_error("colibri_session_follow: this process drives its session (rank 0, or one process alone)"), -1;
        colibri::Session* const sessions[] = {s->session.get()};
        if (colibri::Status st = colibri::follow_slots(*ranks, sessions); !st) return set_error(st.message()), -1;
        return 0;
    });
}

int32_t colibri_model_rank(const colibri_model* m) {
    if (m == nullptr) return set_error("null model"), -1;
    return m->ranks() ? static_cast<int32_t>(m->ranks()->rank()) : 0;
}

int32_t colibri_model_rank_count(const colibri_model* m) {
    if (m == nullptr) return set_error("null model"), -1;
    return m->ranks() ? static_cast<int32_t>(m->ranks()->size()) : 1;
}

void colibri_session_free(colibri_session* s) { delete s; }
void colibri_session_reset(colibri_session* s) {
    if (s && !refused_on_follower(s)) s->session->reset();
}
uint32_t colibri_session_position(const colibri_session* s) { return s ? s->session->position() : 0; }

int colibri_session_set_router(colibri_session* s, const char* router) {
    if (refused_on_follower(s)) return -1;
    const auto kind = s && router ? colibri::parse_router_kind(router) : std::nullopt;
    if (!kind) {
        set_error(std::string("unknown router '") + (router ? router : "") + "' (exact or lut)");
        return -1;
    }
    if (colibri::Status st = colibri::check_router_supports(s->owner->model->rules().routing, *kind); !st) {
        set_error(st.message());
        return -1;
    }
    s->session->set_router(*kind);
    return 0;
}

int colibri_model_routing(const colibri_model* m, colibri_routing_info* info) {
    if (m == nullptr || info == nullptr) return set_error("null argument"), -1;
    const colibri::RoutingRules& r = m->model->rules().routing;
    *info = colibri_routing_info{colibri::router_scoring_name(r.scoring), r.renormalise ? 1 : 0, r.scaling, r.selection_bias ? 1 : 0,
                                 r.n_group, r.topk_group, m->model->hparams().n_experts, m->model->hparams().n_experts_active};
    return 0;
}

int colibri_session_set_route_callback(colibri_session* s, colibri_route_callback callback, void* user) {
    if (s == nullptr) return set_error("null session"), -1;
    s->routes.callback = callback;
    s->routes.user = user;
    s->session->set_observer(callback ? &s->routes : nullptr);
    return 0;
}

int colibri_session_eval(colibri_session* s, const int32_t* tokens, size_t count, float* logits) {
    return guarded<>(-1, [&]() -> int {
        if (s == nullptr || tokens == nullptr || count == 0) return set_error("no tokens"), -1;
        if (refused_on_follower(s)) return -1;
        auto r = s->session->eval(std::span<const int32_t>(tokens, count));
        if (!r) return set_error(r.message()), -1;
        if (logits) std::memcpy(logits, r->data(), r->size() * sizeof(float));
        return 0;
    });
}

int32_t colibri_generate(colibri_session* s, const int32_t* prompt, size_t prompt_count, int32_t max_tokens,
                         const colibri_sampler_params* params, int32_t* out, size_t capacity,
                         colibri_token_callback callback, void* user) {
    return guarded<>(int32_t(-1), [&]() -> int32_t {
        if (s == nullptr || prompt == nullptr || prompt_count == 0) return set_error("no prompt"), -1;
        if (refused_on_follower(s)) return -1;
        const colibri::SamplerConfig cfg = sampler_config(params);
        if (const std::string problem = colibri::sampler_config_problem(cfg); !problem.empty()) return set_error(problem), -1;
        colibri::Sampler sampler(cfg);
        colibri::GenerateRequest req;
        req.max_tokens = max_tokens;
        req.stop_ids = colibri::default_stop_ids(*s->owner->model);
        auto r = colibri::generate(*s->session, sampler, std::span<const int32_t>(prompt, prompt_count), req,
                                   [&](int32_t id) { return callback == nullptr || callback(id, user) != 0; });
        if (!r) return set_error(r.message()), -1;
        const size_t n = std::min(capacity, r->size());
        if (out != nullptr) std::memcpy(out, r->data(), n * sizeof(int32_t));
        return static_cast<int32_t>(n);
    });
}

colibri_chat* colibri_chat_new(colibri_session* session) {
    return guarded<>(static_cast<colibri_chat*>(nullptr), [&]() -> colibri_chat* {
        if (session == nullptr) return set_error("null session"), nullptr;
        return new colibri_chat{session, colibri::ChatService(*session->owner->model, *session->session), {}};
    });
}

void colibri_chat_free(colibri_chat* chat) { delete chat; }

void colibri_chat_reset(colibri_chat* chat) {
    if (chat && !refused_on_follower(chat->session)) chat->service.reset();
}

int32_t colibri_chat_turn(colibri_chat* chat, const colibri_chat_message* messages, size_t count, int32_t max_tokens,
                          const colibri_sampler_params* params, colibri_text_callback callback, void* user) {
    return guarded<>(int32_t(-1), [&]() -> int32_t {
        if (chat == nullptr || messages == nullptr || count == 0) return set_error("no messages"), -1;
        if (refused_on_follower(chat->session)) return -1;
        std::vector<colibri::ChatMessage> conversation;
        for (size_t i = 0; i < count; ++i) {
            if (messages[i].role == nullptr || messages[i].content == nullptr) return set_error("message without role or content"), -1;
            conversation.push_back({messages[i].role, messages[i].content});
        }
        const colibri::Model& model = chat->service.model();
        auto ids = colibri::chat_prompt_ids(model, conversation);
        if (!ids) return set_error(ids.message()), -1;
        const colibri::SamplerConfig cfg = sampler_config(params);
        if (const std::string problem = colibri::sampler_config_problem(cfg); !problem.empty()) return set_error(problem), -1;
        colibri::Sampler sampler(cfg);
        colibri::TurnOptions options;
        options.reply.max_tokens = max_tokens;
        options.reply.stop_ids = colibri::default_stop_ids(model);
        TextCallbackObserver observer(callback, user);
        auto r = chat->service.run(ids.value(), sampler, options, &observer);
        if (!r) return set_error(r.message()), -1;
        chat->reply = r->reply;
        return static_cast<int32_t>(r->tokens.size());
    });
}

const char* colibri_chat_reply(const colibri_chat* chat) { return chat ? chat->reply.c_str() : ""; }

}  // extern "C"
