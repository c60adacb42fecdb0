// colibri-serve-bench: measures an OpenAI-compatible server from the outside (docs/SERVER.md), so that colibri
// serve and llama.cpp's llama-server are timed by the same client.
//   throughput: N concurrent streams of /v1/completions (the same prompt token ids, ignore_eos, greedy), the
//               aggregate decode tokens/s while all N decode together (the window from the last stream's first
//               token to the first stream's last token), for each N of --streams, repeated and interleaved.
//   latency:    requests that generate one token, alternating between the local transport (--socket) and HTTP
//               on loopback, round trip p50/p99 each, and the same minus the server's own time (its overhead).
#include <httplib.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "colibri_client.h"

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    const double at = p * double(v.size() - 1);
    const size_t lo = static_cast<size_t>(std::floor(at)), hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (at - double(lo));
}

double median(std::vector<double> v) { return percentile(std::move(v), 0.5); }

struct Target {
    std::string host = "127.0.0.1";
    int port = 8080;
    std::string model;  // sent as "model" (llama-server ignores it)
    std::string api_key;
};

// One streamed completion; the arrival time of every token chunk.
struct StreamTimes {
    std::vector<Clock::time_point> tokens;
    bool ok = false;
    std::string error;
};

StreamTimes stream_completion(const Target& t, const std::vector<int32_t>& prompt, int max_tokens) {
    httplib::Client client(t.host, t.port);
    client.set_tcp_nodelay(true);
    client.set_read_timeout(600, 0);
    json body{{"prompt", prompt}, {"max_tokens", max_tokens}, {"n_predict", max_tokens}, {"stream", true}, {"ignore_eos", true},
              {"temperature", 0.0}, {"cache_prompt", false}};
    if (!t.model.empty()) body["model"] = t.model;
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = body.dump();
    req.set_header("Content-Type", "application/json");
    if (!t.api_key.empty()) req.set_header("Authorization", "Bearer " + t.api_key);
    StreamTimes out;
    std::string pending;
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
        pending.append(data, n);
        for (size_t nl; (nl = pending.find("\n\n")) != std::string::npos;) {
            const std::string event = pending.substr(0, nl);
            pending.erase(0, nl + 2);
            if (event.rfind("data: ", 0) != 0 || event == "data: [DONE]") continue;
            const json j = json::parse(event.substr(6), nullptr, false);
            if (j.is_discarded() || !j.contains("choices") || j["choices"].empty()) continue;
            // One chunk per token for both servers (llama-server streams every token, an empty text too).
            out.tokens.push_back(Clock::now());
        }
        return true;
    };
    auto res = client.send(req);
    if (!res || res->status != 200) {
        out.error = res ? "status " + std::to_string(res->status) + ": " + res->body : httplib::to_string(res.error());
        return out;
    }
    out.ok = true;
    return out;
}

// N streams at once; the aggregate decode rate while all of them decode.
double concurrent_decode_rate(const Target& t, int streams, const std::vector<int32_t>& prompt, int max_tokens, std::string& error) {
    std::vector<StreamTimes> results(static_cast<size_t>(streams));
    std::vector<std::thread> threads;
    for (int i = 0; i < streams; ++i) threads.emplace_back([&, i] { results[size_t(i)] = stream_completion(t, prompt, max_tokens); });
    for (auto& th : threads) th.join();
    Clock::time_point begin = Clock::time_point::min(), end = Clock::time_point::max();
    for (const StreamTimes& r : results) {
        if (!r.ok || r.tokens.size() < 4) {
            error = r.ok ? "a stream returned fewer than 4 tokens" : r.error;
            return 0.0;
        }
        begin = std::max(begin, r.tokens.front());
        end = std::min(end, r.tokens.back());
    }
    if (end <= begin) {
        Clock::time_point t0 = Clock::time_point::max();
        for (const StreamTimes& r : results) t0 = std::min(t0, r.tokens.front());
        error = "the streams did not decode at the same time (first and last token of each, ms:";
        for (const StreamTimes& r : results)
            error += " " + std::to_string(int(seconds(t0, r.tokens.front()) * 1000)) + "-" + std::to_string(int(seconds(t0, r.tokens.back()) * 1000));
        error += ")";
        return 0.0;
    }
    size_t tokens = 0;
    for (const StreamTimes& r : results)
        tokens += static_cast<size_t>(std::count_if(r.tokens.begin(), r.tokens.end(), [&](auto tp) { return tp > begin && tp <= end; }));
    return double(tokens) / seconds(begin, end);
}

std::vector<int> parse_list(const std::string& s) {
    std::vector<int> out;
    std::stringstream in(s);
    std::string item;
    while (std::getline(in, item, ',')) out.push_back(std::stoi(item));
    return out;
}

int throughput(const std::vector<Target>& targets, const std::vector<std::string>& names, const std::vector<int>& streams, int prompt_tokens,
               int max_tokens, int reps, bool as_json) {
    std::mt19937 rng(7);
    std::vector<int32_t> prompt(static_cast<size_t>(prompt_tokens));
    for (int32_t& id : prompt) id = static_cast<int32_t>(1 + rng() % 1000);  // ids every vocabulary has
    // rates[target][streams] over the repetitions; targets and stream counts interleave within a repetition.
    std::vector<std::vector<std::vector<double>>> rates(targets.size(), std::vector<std::vector<double>>(streams.size()));
    for (int rep = 0; rep < reps; ++rep)
        for (size_t s = 0; s < streams.size(); ++s)
            for (size_t t = 0; t < targets.size(); ++t) {
                std::string error;
                const double r = concurrent_decode_rate(targets[t], streams[s], prompt, max_tokens, error);
                if (!error.empty()) {
                    std::fprintf(stderr, "colibri-serve-bench: %s, %d streams: %s\n", names[t].c_str(), streams[s], error.c_str());
                    return 1;
                }
                rates[t][s].push_back(r);
                std::fprintf(stderr, "rep %d  %-14s %d streams  %8.1f tokens/s\n", rep + 1, names[t].c_str(), streams[s], r);
            }
    json out = json::array();
    if (!as_json) std::printf("%-14s %8s %16s %10s %10s %12s\n", "server", "streams", "median tokens/s", "min", "max", "x 1 stream");
    for (size_t t = 0; t < targets.size(); ++t) {
        const double one = median(rates[t][0]);
        for (size_t s = 0; s < streams.size(); ++s) {
            const auto& v = rates[t][s];
            const double m = median(v);
            out.push_back({{"server", names[t]}, {"streams", streams[s]}, {"median", m}, {"samples", v}, {"vs_first", one > 0 ? m / one : 0}});
            if (!as_json)
                std::printf("%-14s %8d %16.1f %10.1f %10.1f %12.2f\n", names[t].c_str(), streams[s], m, *std::min_element(v.begin(), v.end()),
                            *std::max_element(v.begin(), v.end()), one > 0 ? m / one : 0.0);
        }
    }
    if (as_json) std::printf("%s\n", out.dump(1).c_str());
    return 0;
}

int latency(const Target& http, const std::string& socket_path, int requests, bool as_json) {
    char error[512];
    colibri_client* local = colibri_client_connect_key(socket_path.c_str(), http.api_key.c_str(), error, sizeof error);
    if (local == nullptr) {
        std::fprintf(stderr, "colibri-serve-bench: %s\n", error);
        return 1;
    }
    httplib::Client client(http.host, http.port);
    client.set_keep_alive(true);
    // Without it the request's headers and body go out as two segments, and the body waits for the server's
    // delayed ACK (40 ms on Linux): a client that cares about latency sets it.
    client.set_tcp_nodelay(true);
    client.set_read_timeout(60, 0);
    const std::string body = R"({"prompt":[1],"max_tokens":1,"temperature":0,"ignore_eos":true})";
    json http_body = json::parse(body);
    if (!http.model.empty()) http_body["model"] = http.model;
    const std::string http_text = http_body.dump();
    std::vector<double> local_total, local_over, http_total, http_over;
    for (int i = 0; i < requests + 20; ++i) {  // the first 20 of each warm up
        colibri_client_result r;
        auto t0 = Clock::now();
        if (colibri_client_request(local, "completions", body.c_str(), nullptr, nullptr, &r) != 0) {
            std::fprintf(stderr, "colibri-serve-bench: local: %d %s\n", r.status, r.error);
            return 1;
        }
        const double lt = seconds(t0, Clock::now()) * 1e6;
        t0 = Clock::now();
        auto res = client.Post("/v1/completions", http_text, "application/json");
        const double ht = seconds(t0, Clock::now()) * 1e6;
        if (!res || res->status != 200) {
            std::fprintf(stderr, "colibri-serve-bench: http: %s\n", res ? res->body.c_str() : httplib::to_string(res.error()).c_str());
            return 1;
        }
        if (i < 20) continue;
        const json j = json::parse(res->body, nullptr, false);
        const double server_us = j.is_discarded() ? 0.0 : 1e3 * (j["timings"].value("queued_ms", 0.0) + j["timings"].value("prompt_ms", 0.0) +
                                                                 j["timings"].value("predicted_ms", 0.0));
        local_total.push_back(lt);
        local_over.push_back(lt - 1e3 * (r.queued_ms + r.prompt_ms + r.decode_ms));
        http_total.push_back(ht);
        http_over.push_back(ht - server_us);
    }
    colibri_client_close(local);
    const json out{{"requests", requests},
                   {"local", {{"p50_us", median(local_total)}, {"p99_us", percentile(local_total, 0.99)}, {"overhead_p50_us", median(local_over)},
                              {"overhead_p99_us", percentile(local_over, 0.99)}}},
                   {"http", {{"p50_us", median(http_total)}, {"p99_us", percentile(http_total, 0.99)}, {"overhead_p50_us", median(http_over)},
                             {"overhead_p99_us", percentile(http_over, 0.99)}}}};
    if (as_json) {
        std::printf("%s\n", out.dump(1).c_str());
    } else {
        std::printf("%d requests of one token each, alternating\n%-10s %12s %12s %16s %16s\n", requests, "transport", "p50 us", "p99 us",
                    "overhead p50 us", "overhead p99 us");
        for (const char* k : {"local", "http"})
            std::printf("%-10s %12.1f %12.1f %16.1f %16.1f\n", k, out[k]["p50_us"].get<double>(), out[k]["p99_us"].get<double>(),
                        out[k]["overhead_p50_us"].get<double>(), out[k]["overhead_p99_us"].get<double>());
    }
    return 0;
}

bool parse_target(const std::string& url, Target& t) {
    // http://HOST:PORT
    const std::string prefix = "http://";
    if (url.rfind(prefix, 0) != 0) return false;
    const std::string rest = url.substr(prefix.size());
    const size_t colon = rest.rfind(':');
    if (colon == std::string::npos) return false;
    t.host = rest.substr(0, colon);
    t.port = std::atoi(rest.substr(colon + 1).c_str());
    return t.port > 0;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"colibri-serve-bench: throughput and latency of OpenAI-compatible servers (docs/SERVER.md)"};
    std::vector<std::string> urls, names;
    std::string streams = "1,2,4,8", model, socket_path, api_key;
    int prompt_tokens = 32, max_tokens = 128, reps = 3, requests = 0;
    bool as_json = false;
    app.add_option("--url", urls, "server http://HOST:PORT (repeat to compare servers, interleaved)")->required();
    app.add_option("--name", names, "a name per --url for the report");
    app.add_option("--model", model, "\"model\" to send");
    app.add_option("--api-key", api_key, "Bearer key");
    app.add_option("--streams", streams, "concurrent stream counts (default 1,2,4,8)");
    app.add_option("--prompt-tokens", prompt_tokens, "prompt length (default 32)");
    app.add_option("-n,--tokens", max_tokens, "tokens per stream (default 128)");
    app.add_option("--reps", reps, "repetitions (default 3)");
    app.add_option("--latency", requests, "instead: N one-token requests over --socket and the first --url, alternating");
    app.add_option("--socket", socket_path, "the local transport's socket (for --latency)");
    app.add_flag("--json", as_json, "JSON output");
    CLI11_PARSE(app, argc, argv);
    std::vector<Target> targets;
    for (const std::string& u : urls) {
        Target t;
        if (!parse_target(u, t)) {
            std::fprintf(stderr, "colibri-serve-bench: --url %s: not http://HOST:PORT\n", u.c_str());
            return 2;
        }
        t.model = model;
        t.api_key = api_key;
        targets.push_back(t);
    }
    while (names.size() < urls.size()) names.push_back(urls[names.size()]);
    if (requests > 0) {
        if (socket_path.empty()) {
            std::fprintf(stderr, "colibri-serve-bench: --latency needs --socket\n");
            return 2;
        }
        return latency(targets.front(), socket_path, requests, as_json);
    }
    std::vector<int> counts;
    try {
        counts = parse_list(streams);
    } catch (const std::exception&) {
        std::fprintf(stderr, "colibri-serve-bench: --streams '%s' is not a list of numbers\n", streams.c_str());
        return 2;
    }
    return throughput(targets, names, counts, prompt_tokens, max_tokens, reps, as_json);
}
