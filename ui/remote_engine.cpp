// EngineWorker's remote mode: a `colibri serve` elsewhere runs the model, the Studio shows what it reports.
// Chats go to /v1/chat/completions (token ids to /v1/completions) as streams with the trace extension
// (docs/SERVER.md), on the worker's thread like a local generation: each chunk's trace becomes the views'
// TokenTrace, each token tokenGenerated, the usage chunk the statistics. Stop closes the connection, which
// cancels the request on the server.
#include <httplib.h>

#include <QUrl>
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <nlohmann/json.hpp>

#include "ui/engine_worker.h"

namespace colibri::studio {

namespace {

using nlohmann::json;

constexpr size_t kMaxStreamEvent = size_t(16) << 20;  // no chunk of a reply comes near this
constexpr int kMaxPosition = 1 << 24;                   // nor a position this

// A position the server reported, checked: the conversation is indexed by it.
int checked_position(int position) {
    if (position < 0 || position >= kMaxPosition) throw std::runtime_error("position " + std::to_string(position) + " out of range");
    return position;
}

QString qstr(const std::string& s) { return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size())); }

httplib::Headers auth_headers(const std::string& api_key) {
    httplib::Headers h;
    if (!api_key.empty()) h.emplace("Authorization", "Bearer " + api_key);
    return h;
}

// Why no response came, in words (httplib's own names are "Connection", "Read", ...).
QString transport_error(httplib::Error e) {
    switch (e) {
    case httplib::Error::Connection: return QObject::tr("nothing answered there (the connection was refused or could not be made)");
    case httplib::Error::ConnectionTimeout: return QObject::tr("no connection within 5 s");
    case httplib::Error::Read: return QObject::tr("the connection broke or timed out while reading the answer");
    case httplib::Error::Write: return QObject::tr("the connection broke while sending the request");
    default: return QString::fromStdString(httplib::to_string(e));
    }
}

// The server's error body's message, else the status.
QString http_error(const httplib::Result& res) {
    if (!res) return transport_error(res.error());
    const json j = json::parse(res->body, nullptr, false);
    if (j.is_object() && j.contains("error") && j["error"].is_object() && j["error"].value("message", json()).is_string())
        return QStringLiteral("HTTP %1: %2").arg(res->status).arg(qstr(j["error"]["message"].get<std::string>()));
    return QStringLiteral("HTTP %1").arg(res->status);
}

// What in a server's model description no model has (the views size their tables by it); empty when nothing.
QString out_of_range(const ModelSummary& s) {
    if (s.layers < 1 || s.layers > 4096) return QObject::tr("%1 layers").arg(s.layers);
    if (s.experts < 1 || s.experts > 65536) return QObject::tr("%1 experts").arg(s.experts);
    if (s.active_experts < 1 || s.active_experts > s.experts) return QObject::tr("%1 active of %2 experts").arg(s.active_experts).arg(s.experts);
    if (s.moe_layer_ids.empty() || s.moe_layer_ids.size() > size_t(s.layers)) return QObject::tr("%1 MoE layers").arg(s.moe_layer_ids.size());
    for (int l : s.moe_layer_ids)
        if (l < 0 || l >= s.layers) return QObject::tr("MoE layer %1 of %2 layers").arg(l).arg(s.layers);
    constexpr int kLarge = 1 << 24;
    if (s.vocab_size < 0 || s.vocab_size > kLarge || s.hidden_size < 0 || s.hidden_size > kLarge) return QObject::tr("a vocabulary of %1, a hidden size of %2").arg(s.vocab_size).arg(s.hidden_size);
    if (s.context < 0 || s.context > kLarge || s.max_position < 0) return QObject::tr("a context of %1").arg(s.context);
    return {};
}

// A JSON number that is a count or a time: unsigned, or the stream is not colibri serve's.
uint64_t unsigned_of(const json& v, const char* what) {
    if (!v.is_number_unsigned()) throw std::runtime_error(std::string(what) + " is not an unsigned number");
    return v.get<uint64_t>();
}

// /v1/models' placement (the JSON --placement reads) into s.placement; what is wrong with it, if anything. Every
// layer named must be one of the MoE layers, with one holder per expert: a rank in [0, ranks) or a list of them.
QString read_placement(const json& p, ModelSummary& s) {
    if (!p.is_object() || !p.contains("layers") || !p["layers"].is_object()) return QObject::tr("placement has no layers");
    if (p.value("ranks", json()) != json(s.placement.ranks)) return QObject::tr("placement is for other ranks than the server's");
    if (qsizetype(p["layers"].size()) * s.experts > kMaxPlacementEntries) return QObject::tr("placement of %1 layers is too large").arg(p["layers"].size());
    for (const auto& [key, experts] : p["layers"].items()) {
        bool number = false;
        const int layer = QString::fromStdString(key).toInt(&number);
        if (!number || !s.moe_layer_ids.contains(layer)) return QObject::tr("placement names layer “%1”, not an MoE layer").arg(qstr(key).left(20));
        if (!experts.is_array() || experts.size() != size_t(s.experts))
            return QObject::tr("placement of layer %1 lists %2 experts, the model has %3").arg(layer).arg(experts.is_array() ? experts.size() : 0).arg(s.experts);
        QVector<QVector<int>> holders;
        holders.reserve(s.experts);
        for (const json& h : experts) {
            QVector<int> ranks;
            for (const json& r : h.is_array() ? h : json::array({h})) {
                if (!r.is_number_unsigned() || r.get<uint64_t>() >= uint64_t(s.placement.ranks) || ranks.size() >= s.placement.ranks)
                    return QObject::tr("placement of layer %1 names %2, not a rank of %3").arg(layer).arg(qstr(r.dump()).left(20)).arg(s.placement.ranks);
                ranks.push_back(r.get<int>());
            }
            if (ranks.isEmpty()) return QObject::tr("placement of layer %1 has an expert on no rank").arg(layer);
            std::sort(ranks.begin(), ranks.end());
            holders.push_back(std::move(ranks));
        }
        s.placement.holders.insert(layer, std::move(holders));
    }
    return {};
}

// A position's rank timings (a server across `ranks` ranks with `moe_layers` MoE layers): one entry per MoE layer at
// most, each with every rank's time. Anything else throws: the stream is not what colibri serve sends.
std::vector<LayerRanks> ranks_of(const json& entries, int ranks, int moe_layers) {
    if (!entries.is_array()) throw std::runtime_error("rank timings are not a list");
    if (ranks < 2) throw std::runtime_error("rank timings from a server of one rank");
    if (entries.size() > size_t(moe_layers)) throw std::runtime_error("rank timings of " + std::to_string(entries.size()) + " layers");
    std::vector<LayerRanks> out;
    for (const json& e : entries) {
        LayerRanks r;
        r.layer = e.value("layer", -1);
        const json times = e.value("experts_ns", json());
        if (!times.is_array() || times.size() != size_t(ranks))
            throw std::runtime_error("rank timings of " + std::to_string(times.is_array() ? times.size() : 0) + " ranks, the server has " + std::to_string(ranks));
        for (const json& ns : times) r.experts_ns.push_back(unsigned_of(ns, "a rank's time"));
        r.exchange_ns = unsigned_of(e.value("exchange_ns", json()), "exchange_ns");
        r.bytes = unsigned_of(e.value("bytes", json()), "bytes");
        r.bytes_sent = unsigned_of(e.value("bytes_sent", json()), "bytes_sent");
        r.bytes_received = unsigned_of(e.value("bytes_received", json()), "bytes_received");
        out.push_back(std::move(r));
    }
    return out;
}

// One position of the trace extension as the views' TokenTrace.
TokenTrace trace_of(const json& t, int ranks, int moe_layers) {
    TokenTrace out;
    out.position = t.value("position", -1);
    out.token = t.value("token", -1);
    out.text = qstr(t.value("text", std::string()));
    out.generated = t.value("generated", false);
    for (const json& r : t.value("routing", json::array())) {
        LayerRouting lr;
        lr.layer = r.value("layer", 0);
        lr.experts = r.value("experts", std::vector<int32_t>());
        lr.weights = r.value("weights", std::vector<float>());
        lr.probs = r.value("probs", std::vector<float>());
        out.routing.push_back(std::move(lr));
    }
    uint64_t total = 0;
    for (const json& l : t.value("timings", json::array())) {
        LayerProfile p;
        p.layer = l.value("layer", 0);
        p.attention_ns = l.value("attention_ns", uint64_t(0));
        p.router_ns = l.value("router_ns", uint64_t(0));
        p.experts_ns = l.value("experts_ns", uint64_t(0));
        total += p.attention_ns + p.router_ns + p.experts_ns;
        out.layers.push_back(std::move(p));
    }
    out.step_ns = total;  // the server reports its layers' times; its own step and sampling are not in the trace
    if (t.contains("ranks")) out.ranks = ranks_of(t["ranks"], ranks, moe_layers);
    return out;
}

// The Studio's view of a server's model (/v1/models' first entry and its meta); what is wrong with it, if anything.
QString describe(const json& m, const json& meta, const QUrl& url, std::string& model, ModelSummary& s) {
    try {  // a field of the wrong type throws
        model = m.value("id", std::string());
        s.path = QStringLiteral("%1 (%2)").arg(url.toString(QUrl::RemoveUserInfo | QUrl::StripTrailingSlash), qstr(model));
        s.family = qstr(meta.value("family", std::string()));
        s.layers = meta.value("layers", 0);
        for (const json& l : meta["moe_layers"]) s.moe_layer_ids.push_back(l.get<int>());
        s.moe_layers = static_cast<int>(s.moe_layer_ids.size());
        s.experts = meta.value("experts", 0);
        s.active_experts = meta.value("active_experts", 0);
        s.hidden_size = meta.value("hidden_size", 0);
        s.vocab_size = meta.value("vocab_size", 0);
        s.context = meta.value("context", 0);
        s.max_position = meta.value("max_position", 0);
        s.has_tokenizer = meta.value("tokenizer", false);
        s.tokenizer = s.has_tokenizer ? QObject::tr("on the server") : QStringLiteral("none");
        s.has_chat_template = meta.value("chat_template", false);
        // A server from before expert parallelism says nothing: one rank. Read wide, so that a huge count is refused.
        const json ranks = meta.value("ranks", json(1));
        if (!ranks.is_number_integer()) return QObject::tr("has ranks that are not a count");
        if (ranks.get<int64_t>() < 1 || ranks.get<int64_t>() > kMaxRanks) return QObject::tr("is out of range: %1 ranks").arg(ranks.get<int64_t>());
        s.placement.ranks = ranks.get<int>();
    } catch (const json::exception& e) {
        return QObject::tr("has a field of the wrong type (%1)").arg(QString::fromUtf8(e.what()));
    }
    if (const QString bad = out_of_range(s); !bad.isEmpty()) return QObject::tr("is out of range: %1").arg(bad);
    if (s.placement.ranks > 1 && meta.contains("placement"))
        if (const QString bad = read_placement(meta["placement"], s); !bad.isEmpty()) return QObject::tr("is wrong: %1").arg(bad);
    return {};
}

}  // namespace

void EngineWorker::do_connect(const QString& url_text, const QString& api_key) {
    // The model in use (local or another server) stays until this server has answered as colibri serve.
    const QUrl url(url_text.trimmed());
    if (!url.isValid() || url.scheme() != QStringLiteral("http") || url.host().isEmpty()) {
        emit loadFailed(url_text, tr("not a server address: give http://HOST:PORT"), LoadFailure::Server);
        return;
    }
    Remote r;
    r.host = url.host().toStdString();
    r.port = url.port(80);
    r.api_key = api_key.toStdString();
    httplib::Client client(r.host, r.port);
    client.set_connection_timeout(5, 0);
    client.set_read_timeout(10, 0);
    auto res = client.Get("/v1/models", auth_headers(r.api_key));
    if (!res || res->status != 200) {
        emit loadFailed(url_text, tr("the server did not answer /v1/models: %1").arg(http_error(res)), LoadFailure::Server);
        return;
    }
    const json j = json::parse(res->body, nullptr, false);
    if (!j.is_object() || !j.contains("data") || !j["data"].is_array() || j["data"].empty() || !j["data"][0].is_object()) {
        emit loadFailed(url_text, tr("the server's /v1/models is not an OpenAI model list"), LoadFailure::Server);
        return;
    }
    const json& m = j["data"][0];
    const json meta = m.value("meta", json::object());
    if (!meta.is_object() || !meta.contains("moe_layers")) {
        emit loadFailed(url_text, tr("the server is not colibri serve (its model list has no routing description)"), LoadFailure::Server);
        return;
    }
    ModelSummary s;
    if (const QString bad = describe(m, meta, url, r.model, s); !bad.isEmpty()) {
        emit loadFailed(url_text, tr("the server's model description %1").arg(bad), LoadFailure::Server);
        return;
    }
    r.context = s.context;
    r.ranks = s.placement.ranks;
    r.moe_layers = s.moe_layers;
    s.remote = true;
    do_unload();
    remote_ = std::move(r);
    CounterSet counters;
    counters.hardware_status = counters.software_status = tr("not available: the model runs on a server");
    emit loaded(s, counters);
}

void EngineWorker::do_generate_remote(const GenerationRequest& request, uint64_t id) {
    const Remote& r = *remote_;
    json body{{"model", r.model}, {"max_tokens", std::max(1, request.max_tokens)}, {"stream", true},
              {"stream_options", {{"include_usage", true}}}, {"colibri", {{"trace", true}}}};
    const SamplerConfig& sc = request.sampling;
    body["temperature"] = sc.greedy ? 0.0f : sc.temperature;
    body["top_p"] = sc.top_p;
    body["top_k"] = sc.top_k;
    body["min_p"] = sc.min_p;
    body["repeat_penalty"] = sc.repetition_penalty;
    body["seed"] = static_cast<int64_t>(sc.seed);  // the API takes a signed 64-bit seed; the server reads the same bits back
    std::string path;
    if (request.token_ids.empty()) {
        path = "/v1/chat/completions";
        json messages = json::array();
        for (const ChatTurn& t : request.messages) messages.push_back({{"role", t.role.toStdString()}, {"content", t.content.toStdString()}});
        body["messages"] = messages;
        body["logprobs"] = true;
        body["top_logprobs"] = 5;
    } else {
        path = "/v1/completions";
        body["prompt"] = request.token_ids;
        body["ignore_eos"] = true;  // explicit ids: the caller decides when to stop, as locally
        body["logprobs"] = 5;
    }

    GenerationStats stats;
    stats.context_size = r.context;
    stats.kernel = tr("remote");
    QString reply;
    bool started = false, cancelled = false, usage = false;
    int end_position = 0;  // one past the last position the server reported
    std::string pending, failure;
    auto handle = [&](const json& c) {
        if (c.contains("error")) {
            failure = c["error"].value("message", std::string("the server failed"));
            return;
        }
        const json ext = c.value("colibri", json::object());
        if (!started && ext.is_object() && (ext.contains("token") || !ext.value("trace", json::array()).empty())) {
            // The server evaluates from the first position its cache did not hold: what comes before stays as
            // the views have it (the first chunk's trace starts there; a fully cached prompt, at the token).
            started = true;
            const json trace = ext.value("trace", json::array());
            const int reused = !trace.empty() && trace[0].is_object() ? trace[0].value("position", 0) : ext.value("position", 0);
            emit generationStarted(checked_position(reused));
        }
        if (c.contains("usage") && c["usage"].is_object()) {
            usage = true;
            const json& u = c["usage"];
            const json t = c.value("timings", json::object());
            stats.generated = u.value("completion_tokens", 0);
            stats.reused_tokens = u.value("prompt_tokens_details", json::object()).value("cached_tokens", 0);
            stats.prompt_tokens = u.value("prompt_tokens", 0) - stats.reused_tokens;
            // Every position of the conversation, the last sampled token too (the server evaluates it with the
            // next turn): the transcript keeps the whole reply, as with a local model.
            stats.context_used = u.value("prompt_tokens", 0) + stats.generated;
            stats.prompt_seconds = t.value("prompt_ms", 0.0) / 1000.0;
            stats.decode_seconds = t.value("predicted_ms", 0.0) / 1000.0;
            // The server's decode time covers the tokens after the first (its predicted_per_second).
            stats.decode_evaluated = std::max(stats.generated - 1, 0);  // TokenRate::of_reply
        }
        // Positions the server evaluated since the previous chunk (this chunk's token's predecessors).
        for (const json& t : ext.value("trace", json::array())) {
            const TokenTrace trace = trace_of(t, r.ranks, r.moe_layers);
            end_position = std::max(end_position, checked_position(trace.position) + 1);
            emit tokenEvaluated(trace);
        }
        if (!c.contains("choices") || !c["choices"].is_array() || c["choices"].empty() || !ext.contains("token")) return;
        const json& choice = c["choices"][0];
        std::string text;
        if (choice.contains("delta")) text = choice["delta"].value("content", std::string());
        else text = choice.value("text", std::string());
        const bool end = ext.value("end_of_turn", false);
        reply += qstr(text);
        const int position = checked_position(ext.value("position", 0));
        end_position = std::max(end_position, position + 1);
        emit tokenGenerated(position, ext.value("token", -1), qstr(text), end);
    };

    httplib::Client client(r.host, r.port);
    client.set_connection_timeout(5, 0);
    client.set_read_timeout(300, 0);
    httplib::Request req;
    req.method = "POST";
    req.path = path;
    req.headers = auth_headers(r.api_key);
    req.body = body.dump();
    req.set_header("Content-Type", "application/json");
    std::string error_body;
    bool broken = false;  // the stream was closed here: it did not make sense
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
        if (id <= cancelled_.load()) {
            cancelled = true;
            return false;  // closing the connection cancels the request on the server
        }
        pending.append(data, n);
        for (size_t nl; (nl = pending.find("\n\n")) != std::string::npos;) {
            const std::string event = pending.substr(0, nl);
            pending.erase(0, nl + 2);
            if (event.rfind("data: ", 0) != 0) {
                error_body += event;  // an error status's body
                continue;
            }
            if (event == "data: [DONE]") continue;
            const json c = json::parse(event.substr(6), nullptr, false);
            if (!c.is_object()) continue;
            try {
                handle(c);
            } catch (const std::exception& e) {  // a field of the wrong type or range: the stream cannot be trusted further
                failure = std::string("a stream chunk of the wrong shape (") + e.what() + ")";
                broken = true;
                return false;
            }
        }
        if (pending.size() > kMaxStreamEvent) {
            failure = "a stream event larger than 16 MiB";
            broken = true;
            return false;
        }
        return true;
    };
    auto res = client.send(req);
    // Stopped before the usage chunk: the positions reported so far; none (-1): the transcript stays as it is.
    if (!usage) stats.context_used = end_position > 0 ? end_position : -1;
    if (cancelled) {
        stats.stopped = true;
        stats.reply = reply;
        emit generationFinished(stats);
        return;
    }
    if (broken) {
        emit generationFailed(tr("the server: %1").arg(qstr(failure)));
        return;
    }
    if (!res || res->status != 200) {
        if (res && !pending.empty()) res->body = error_body + pending;
        emit generationFailed(tr("the server: %1").arg(http_error(res)));
        return;
    }
    if (!failure.empty()) {
        emit generationFailed(tr("the server: %1").arg(qstr(failure)));
        return;
    }
    stats.reply = reply;
    emit generationFinished(stats);
}

}  // namespace colibri::studio
