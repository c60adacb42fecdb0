// colibri: the command-line interface. Entry point only; the work happens in libcolibri and libcolibri_tools.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "chat_command.h"
#include "line_editor.h"
#include "serve_command.h"
#include "tune_command.h"
#include "engine/text/chat_template.h"
#include "engine/core/generate.h"
#include "engine/core/model.h"
#include "engine/core/open_model.h"
#include "engine/core/sampler.h"
#include "engine/core/session.h"
#include "engine/file/temp_output.h"
#include "engine/text/utf8.h"
#include "tools/export_gguf.h"
#include "tools/bench.h"
#include "tools/byte_size.h"
#include "tools/cache_sim.h"
#include "tools/chat_eval.h"
#include "tools/check.h"
#include "tools/convert.h"
#include "tools/model_args.h"
#include "tools/model_output.h"
#include "tools/router_compare.h"

#ifndef COLIBRI_DEMO_MODEL
#define COLIBRI_DEMO_MODEL ""
#endif

using namespace colibri;
using nlohmann::json;

namespace {

int fail(const std::string& what, const std::string& why) {
    std::fprintf(stderr, "colibri: %s: %s\n", what.c_str(), why.c_str());
    return 1;
}

Result<std::vector<int32_t>> parse_tokens(const std::string& text) {
    std::vector<int32_t> ids;
    size_t pos = 0;
    while (pos <= text.size()) {
        const size_t comma = text.find(',', pos);
        const std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        char* end = nullptr;
        errno = 0;
        const long v = std::strtol(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0' || errno != 0 || v < 0 || v > INT32_MAX)
            return error("'" + item + "' is not a token id");
        ids.push_back(static_cast<int32_t>(v));
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    if (ids.empty()) return error("no token ids given");
    return ids;
}

using tools::ModelArgs;

// The RAM budget options, shared by every command that loads a model.
void add_budget_args(CLI::App* cmd, ModelArgs& m) {
    cmd->add_option("--ram-budget", m.ram_budget,
                    "keep the weights within SIZE (e.g. 6G, 512M) or a share of the model file (e.g. 50%): routed "
                    "experts in a cache of slots read from the file");
    cmd->add_option("--cache-policy", m.cache_policy, "expert cache policy: lru (default), lfru or pinned");
    cmd->add_option("--hot-trace", m.hot_trace, "pinned: learn the hot experts from this routing trace (route --json)");
    cmd->add_flag("--cache-prefetch", m.cache_prefetch,
                  "predict the next MoE layer's experts (its router on the current hidden state) and read them ahead");
}

void add_model_args(CLI::App* cmd, ModelArgs& m, bool required) {
    auto* opt = cmd->add_option("-m,--model", m.path, "model file (.bin)");
    if (required) opt->required();
    cmd->add_option("-t,--threads", m.threads, "worker threads (default: all cores)");
    cmd->add_option("-c,--context", m.context, "context length in tokens (default: min(model, 4096))");
    add_budget_args(cmd, m);
}

void add_input_args(CLI::App* cmd, std::string& tokens, std::string& prompt) {
    cmd->add_option("--tokens", tokens, "comma-separated token ids");
    cmd->add_option("--prompt", prompt, "text to tokenize");
}

using Loaded = OpenedModel;

Result<Loaded> load(const ModelArgs& args) {
    auto options = tools::open_options(args);
    if (!options) return options.status();
    return open_model(options.value());
}

Result<std::vector<int32_t>> tokens_or_prompt(const Model& model, const std::string& tokens, const std::string& prompt) {
    if (!tokens.empty()) return parse_tokens(tokens);
    if (prompt.empty()) return error("give --tokens or --prompt");
    if (model.tokenizer() == nullptr) return error("model has no tokenizer; use --tokens");
    auto ids = model.tokenizer()->encode(prompt, true);
    if (ids && ids->empty()) return error("prompt encodes to no tokens");
    return ids;
}

// Loads the model and resolves the input tokens (validated against the vocabulary).
struct LoadedInput {
    OpenedModel l;
    std::vector<int32_t> ids;
};
Result<LoadedInput> load_with_input(const ModelArgs& args, const std::string& tokens, const std::string& prompt) {
    auto loaded = load(args);
    if (!loaded) return loaded.status();
    auto ids = tokens_or_prompt(*loaded->model, tokens, prompt);
    if (!ids) return ids.status();
    COLIBRI_TRY(check_token_ids(*loaded->model, ids.value()));
    return LoadedInput{std::move(loaded.value()), std::move(ids.value())};
}

// Shows streamed text at once.
void print(const std::string& text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
}

// Writes a file through a temporary name (TempOutput) so a failure never leaves a partial output. A FIFO or a
// character device (/dev/stdout, a pipe) is written through, as the user asked; other non-files are refused.
Status write_output_file(const std::string& path, const void* data, size_t bytes) {
    const std::string target = follow_symlinks(path);
    struct stat st {};
    if (stat(target.c_str(), &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode))) {
        const int fd = ::open(target.c_str(), O_WRONLY | O_CLOEXEC);
        if (fd < 0) return error(path + ": " + std::strerror(errno));
        const auto* p = static_cast<const uint8_t*>(data);
        for (size_t left = bytes; left > 0;) {
            const ssize_t n = ::write(fd, p, left);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                const int e = errno;
                ::close(fd);
                return error(path + ": write failed: " + std::strerror(e));
            }
            p += n;
            left -= static_cast<size_t>(n);
        }
        if (::close(fd) != 0) return error(path + ": write failed: " + std::strerror(errno));
        return Status::ok();
    }
    return write_file_atomically(path, std::string_view(static_cast<const char*>(data), bytes));
}

// The expert cache's configuration and counters since load (--ram-budget).
json expert_cache_json(const ExpertCache& c) {
    const ExpertCacheStats t = c.total_stats();
    return {{"policy", cache_policy_name(c.policy())}, {"ram_budget", c.budget()}, {"resident_bytes", c.resident_bytes()},
            {"slot_bytes", c.slot_bytes()}, {"slots_per_layer", c.slots_per_layer()}, {"direct_io", c.direct_io()},
            {"hits", t.hits}, {"misses", t.misses}, {"bytes_read", t.bytes_read}, {"stall_ns", t.stall_ns},
            {"prefetch", c.prefetching()}, {"prefetched", t.prefetched}, {"predicted", t.predicted},
            {"predicted_right", t.predicted_right}};
}

// Bytes this process (all its threads) has caused to be read from storage: /proc/self/io's read_bytes, which
// counts page faults on the mapping and the expert cache's reads alike; nullopt where the kernel keeps no I/O
// accounting. (Page-cache hits are not storage reads, which is the point: it says what a budget costs in I/O.)
std::optional<uint64_t> storage_read_bytes() {
    std::ifstream io("/proc/self/io");
    std::string key;
    uint64_t value = 0;
    while (io >> key >> value)
        if (key == "read_bytes:") return value;
    return std::nullopt;
}

// ---- commands ----

int cmd_convert(const std::string& src, const std::string& out, const std::string& type_name, bool zstd, int zstd_level,
                bool quiet) {
    WeightType type;
    if (!format::weight_type_from_name(type_name, &type)) return fail("convert", "unknown weight type '" + type_name + "'");
    // The output's name says what it is: -o model.bin.zst implies --zstd, and --zstd needs a .zst name, so a
    // compressed file never hides behind a .bin suffix.
    const bool zst_name = tools::is_zst_name(out);
    if (zstd && !zst_name) return fail("convert", out + ": with --zstd the output name must end in .zst (model.bin.zst)");
    zstd = zstd || zst_name;

    tools::ConvertOptions options;
    options.type = type;
    options.zstd = zstd;
    options.zstd_level = zstd_level;
    const bool tty = isatty(STDERR_FILENO) && !quiet;
    if (tty) {
        options.progress = [zstd](uint64_t done, uint64_t total) {
            const char* phase = !zstd ? "converting" : 2 * done < total ? "converting" : "compressing";
            std::fprintf(stderr, "\r%s: %3d%%", phase, total ? int(100.0 * double(done) / double(total)) : 100);
            return true;
        };
    }
    auto summary = tools::convert_model(src, out, options);
    if (tty) std::fprintf(stderr, "\n");
    if (!summary) return fail("convert", summary.message());
    if (!quiet) {
        std::printf("wrote %s: %s, %s weights, %u tensors, %llu bytes", out.c_str(), format::family_name(summary->family),
                    type_name.c_str(), summary->tensors, static_cast<unsigned long long>(summary->stored_size));
        if (zstd) std::printf(" (%llu uncompressed)", static_cast<unsigned long long>(summary->file_size));
        std::printf("%s\n", summary->has_tokenizer ? ", with tokenizer" : ", no tokenizer");
    }
    return 0;
}

// Exit 0 valid, 1 invalid (every problem on its own line, naming the damaged section or tensor), 2 when the
// path cannot be read at all. Problems and the summary go to stdout: they are the command's output.
int cmd_check(const std::string& path, bool as_json, bool quiet) {
    tools::CheckOptions options;
    const bool tty = isatty(STDERR_FILENO) && !quiet && !as_json;
    if (tty) {
        options.progress = [last = -1](uint64_t done, uint64_t total) mutable {
            const int percent = total ? int(100.0 * double(done) / double(total)) : 100;
            if (percent != last) std::fprintf(stderr, "\rchecking: %3d%% of %.1f MiB", percent, double(total) / double(1 << 20));
            last = percent;
            return true;
        };
    }
    const tools::CheckReport report = tools::check_model(path, options);
    if (tty) std::fprintf(stderr, "\r\033[K");
    if (as_json) std::printf("%s\n", tools::check_report_json(report).c_str());
    if (!report.fatal.empty()) {
        fail("check", report.fatal);
        return report.unreadable ? 2 : 1;
    }
    if (as_json) return report.valid ? 0 : 1;
    for (const std::string& p : report.problems) std::printf("%s\n", p.c_str());
    if (!quiet) {
        std::printf("%s: %s: %zu sections, %zu tensors, %llu bytes checked%s\n", path.c_str(),
                    report.valid ? "valid" : "INVALID", report.sections.size(), report.tensors.size(),
                    static_cast<unsigned long long>(report.bytes_checked), report.compressed ? " (decompressed from .bin.zst)" : "");
    }
    return report.valid ? 0 : 1;
}

// What the model's router does (engine/core/router.h), for route's JSON.
json routing_json(const Model& m) {
    const RoutingRules& r = m.rules().routing;
    json j{{"scoring", router_scoring_name(r.scoring)}, {"renormalise", r.renormalise}, {"scaling", r.scaling},
           {"selection_bias", r.selection_bias}, {"top_k", m.hparams().n_experts_active}, {"experts", m.hparams().n_experts}};
    if (r.n_group > 1) j["n_group"] = r.n_group, j["topk_group"] = r.topk_group;
    return j;
}

json info_json(const Model& m) {
    const format::HyperParams& hp = m.hparams();
    json j;
    j["family"] = format::family_name(m.family());
    j["format_version"] = std::to_string(m.file().header().version_major) + "." + std::to_string(m.file().header().version_minor);
    j["file_size"] = m.file().size();
    j["compressed"] = m.file().compressed();
    j["stored_size"] = m.file().stored_size();  // bytes on disk (smaller than file_size for a .bin.zst)
    j["vocab_size"] = hp.vocab_size;
    j["hidden_size"] = hp.hidden_size;
    j["layers"] = hp.n_layers;
    j["moe_layers"] = m.moe_layer_count();
    j["heads"] = hp.n_heads;
    j["kv_heads"] = hp.n_kv_heads;
    j["head_dim"] = hp.head_dim;
    j["experts"] = hp.n_experts;
    j["active_experts"] = hp.n_experts_active;
    j["expert_ffn"] = hp.expert_ffn;
    j["shared_expert_ffn"] = hp.shared_expert_ffn;
    j["dense_ffn"] = hp.dense_ffn;
    j["max_position"] = hp.max_position;
    j["rms_eps"] = hp.rms_eps;
    j["rope_theta"] = hp.rope_theta;
    j["norm_topk_prob"] = (hp.flags & format::kNormTopkProb) != 0;
    j["clip_qkv"] = hp.clip_qkv;
    j["bos_id"] = hp.bos_id;
    j["eos_id"] = hp.eos_id;
    // What the family does, as the model decided it at load (format 2.1's hyper-parameters included).
    const ModelRules& rules = m.rules();
    j["routing"] = routing_json(m);
    j["rotary_dim"] = rules.attention.rotary_dim;
    j["rope_scaling"] = hp.rope_scaling == static_cast<uint8_t>(format::RopeScaling::Yarn) ? "yarn" : "none";
    if (rules.attention.sliding_window) j["sliding_window"] = rules.attention.sliding_window;
    if (rules.attention.sinks) j["attention_sinks"] = true;
    if (rules.attention.mla)
        j["latent_attention"] = json{{"q_lora_rank", rules.attention.q_lora_rank}, {"kv_lora_rank", rules.attention.kv_lora_rank},
                                     {"v_head_dim", rules.attention.v_head_dim}};
    if (rules.swiglu_limit > 0.0f) j["swiglu_limit"] = rules.swiglu_limit;
    std::map<std::string, uint64_t> types;
    for (const TensorView& t : m.file().tensors()) types[format::weight_type_name(t.type)] += t.size;
    j["weight_bytes_by_type"] = types;
    j["sections"] = m.file().sections().size();
    j["tensors"] = m.file().tensors().size();
    j["tokenizer"] = m.tokenizer() ? (m.tokenizer()->kind() == Tokenizer::Kind::ByteLevelBpe ? "byte-level BPE" : "SentencePiece BPE") : "none";
    if (m.tokenizer()) j["tokenizer_vocab"] = m.tokenizer()->vocab_size();
    j["chat_template"] = !m.chat_template().empty();
    return j;
}

int cmd_info(const std::string& path, bool as_json) {
    auto model = Model::load(path);
    if (!model) return fail("info", model.message());
    const json j = info_json(*model.value());
    if (as_json) {
        std::printf("%s\n", j.dump(1).c_str());
        return 0;
    }
    for (auto it = j.begin(); it != j.end(); ++it) std::printf("%-20s %s\n", it.key().c_str(), it.value().dump().c_str());
    return 0;
}

int cmd_logits(const ModelArgs& args, const std::string& tokens, const std::string& prompt, const std::string& out,
               int top, bool as_json) {
    auto loaded = load_with_input(args, tokens, prompt);
    if (!loaded) return fail("logits", loaded.message());
    Loaded& l = loaded->l;
    const std::vector<int32_t>& ids = loaded->ids;
    const size_t vocab = l.model->hparams().vocab_size;
    std::vector<float> all;
    all.reserve(ids.size() * vocab);
    for (int32_t id : ids) {
        auto logits = l.session->eval(id);
        if (!logits) return fail("logits", logits.message());
        all.insert(all.end(), logits->begin(), logits->end());
    }
    if (!out.empty()) {
        if (Status s = write_output_file(out, all.data(), all.size() * sizeof(float)); !s) return fail("logits", s.message());
    }
    if (as_json || top > 0 || out.empty()) {
        const int k = top > 0 ? top : 5;
        json positions = json::array();
        for (size_t p = 0; p < ids.size(); ++p) {
            const float* row = all.data() + p * vocab;
            std::vector<int32_t> order(vocab);
            for (size_t i = 0; i < vocab; ++i) order[i] = static_cast<int32_t>(i);
            const size_t kk = std::min<size_t>(static_cast<size_t>(k), vocab);
            std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(kk), order.end(),
                              [row](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
            json top_ids = json::array(), top_logits = json::array();
            for (size_t i = 0; i < kk; ++i) {
                top_ids.push_back(order[i]);
                top_logits.push_back(row[order[i]]);
            }
            positions.push_back({{"position", p}, {"token", ids[p]}, {"top_ids", top_ids}, {"top_logits", top_logits}});
        }
        if (as_json) {
            std::printf("%s\n", json{{"tokens", ids}, {"vocab", vocab}, {"positions", positions}}.dump().c_str());
        } else {
            for (const json& p : positions) std::printf("%s\n", p.dump().c_str());
        }
    }
    return 0;
}

// ---- compare: a model's logits against a baseline's, teacher-forced over the same tokens ----

// Accumulates, per position, top-1 agreement and KL(baseline || model) of the two softmax distributions.
class LogitComparison {
public:
    void add(std::span<const float> baseline, std::span<const float> model) {
        const size_t vocab = baseline.size();
        const auto top_b = static_cast<size_t>(colibri::argmax(baseline)), top_m = static_cast<size_t>(colibri::argmax(model));
        const double lse_b = log_sum_exp(baseline), lse_m = log_sum_exp(model);
        double kl = 0.0;
        for (size_t i = 0; i < vocab; ++i) {
            const double lb = baseline[i] - lse_b, lm = model[i] - lse_m;
            kl += std::exp(lb) * (lb - lm);
            max_abs_dlogit_ = std::max(max_abs_dlogit_, std::fabs(double(baseline[i]) - double(model[i])));
        }
        kl = std::max(kl, 0.0);  // rounding can leave a tiny negative for identical distributions
        kl_sum_ += kl;
        max_kl_ = std::max(max_kl_, kl);
        if (top_b == top_m) {
            ++agree_;
        } else {
            // How near a tie the baseline was: its top logit minus its logit for the model's choice.
            disagreements_.push_back({{"position", positions_}, {"baseline_top", top_b}, {"model_top", top_m},
                                      {"baseline_margin", baseline[top_b] - baseline[top_m]},
                                      {"model_margin", model[top_m] - model[top_b]}});
        }
        ++positions_;
    }
    json to_json() const {
        return {{"positions", positions_}, {"top1_agree", agree_},
                {"top1_rate", positions_ ? double(agree_) / double(positions_) : 0.0},
                {"mean_kl", positions_ ? kl_sum_ / double(positions_) : 0.0}, {"max_kl", max_kl_},
                {"max_abs_dlogit", max_abs_dlogit_}, {"disagreements", disagreements_}};
    }

private:
    static double log_sum_exp(std::span<const float> v) {
        const double mx = *std::max_element(v.begin(), v.end());
        double sum = 0.0;
        for (float x : v) sum += std::exp(double(x) - mx);
        return mx + std::log(sum);
    }
    size_t positions_ = 0, agree_ = 0;
    double kl_sum_ = 0.0, max_kl_ = 0.0, max_abs_dlogit_ = 0.0;
    json disagreements_ = json::array();
};

// n token ids uniform over the vocabulary (splitmix64: the same ids everywhere for a seed), after the BOS id
// when the model has one.
std::vector<int32_t> random_tokens(const Model& model, size_t n, uint64_t seed) {
    std::vector<int32_t> ids;
    if (model.hparams().bos_id >= 0 && n > 0) ids.push_back(model.hparams().bos_id);
    uint64_t state = seed;
    while (ids.size() < n) {
        uint64_t z = (state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        ids.push_back(static_cast<int32_t>(z % model.hparams().vocab_size));
    }
    return ids;
}

struct CompareArgs {
    std::string baseline_model, baseline_logits, tokens, prompt;
    size_t random = 0;
    uint64_t seed = 1;
};

int cmd_compare(const ModelArgs& args, const CompareArgs& c, bool as_json) {
    if (c.baseline_model.empty() == c.baseline_logits.empty())
        return fail("compare", "give exactly one of --baseline and --baseline-logits");
    auto loaded = load(args);
    if (!loaded) return fail("compare", loaded.message());
    Loaded& l = loaded.value();
    Result<std::vector<int32_t>> ids = c.random > 0 ? Result<std::vector<int32_t>>(random_tokens(*l.model, c.random, c.seed))
                                                    : tokens_or_prompt(*l.model, c.tokens, c.prompt);
    if (!ids) return fail("compare", ids.message());
    if (Status s = check_token_ids(*l.model, ids.value()); !s) return fail("compare", s.message());
    const size_t vocab = l.model->hparams().vocab_size, n = ids->size();

    Result<Loaded> base = error("unused");
    std::vector<float> fixed;  // --baseline-logits: [n x vocab]
    if (!c.baseline_model.empty()) {
        ModelArgs bargs = args;
        bargs.path = c.baseline_model;
        base = load(bargs);
        if (!base) return fail("compare", base.message());
        if (base->model->hparams().vocab_size != vocab)
            return fail("compare", c.baseline_model + ": vocabulary " + std::to_string(base->model->hparams().vocab_size) +
                                       " differs from the model's " + std::to_string(vocab));
    } else {
        std::ifstream in(c.baseline_logits, std::ios::binary | std::ios::ate);
        if (!in) return fail("compare", c.baseline_logits + ": cannot read");
        const auto bytes = static_cast<uint64_t>(in.tellg());
        if (bytes != uint64_t(n) * vocab * sizeof(float))
            return fail("compare", c.baseline_logits + ": " + std::to_string(bytes) + " bytes, expected " + std::to_string(n) +
                                       " positions x " + std::to_string(vocab) + " float32 logits");
        fixed.resize(n * vocab);
        in.seekg(0);
        if (!in.read(reinterpret_cast<char*>(fixed.data()), static_cast<std::streamsize>(bytes)))
            return fail("compare", c.baseline_logits + ": read failed");
    }

    LogitComparison cmp;
    std::vector<float> base_row;
    for (size_t p = 0; p < n; ++p) {
        std::span<const float> want(fixed.data() + (fixed.empty() ? 0 : p * vocab), fixed.empty() ? 0 : vocab);
        if (fixed.empty()) {
            auto b = base->session->eval(ids.value()[p]);
            if (!b) return fail("compare", c.baseline_model + ": " + b.message());
            base_row.assign(b->begin(), b->end());  // the next eval overwrites the session's logits
            want = base_row;
        }
        auto got = l.session->eval(ids.value()[p]);
        if (!got) return fail("compare", got.message());
        cmp.add(want, got.value());
    }
    json j = cmp.to_json();
    j["model_bytes"] = l.model->file().size();
    if (fixed.empty()) j["baseline_bytes"] = base->model->file().size();
    if (as_json) {
        std::printf("%s\n", j.dump().c_str());
    } else {
        std::printf("positions %zu, top-1 agreement %zu/%zu (%.2f%%), mean KL %.3g, max KL %.3g, max |dlogit| %.3g\n",
                    j["positions"].get<size_t>(), j["top1_agree"].get<size_t>(), j["positions"].get<size_t>(),
                    100.0 * j["top1_rate"].get<double>(), j["mean_kl"].get<double>(), j["max_kl"].get<double>(),
                    j["max_abs_dlogit"].get<double>());
        for (const json& d : j["disagreements"]) std::printf("disagreement: %s\n", d.dump().c_str());
    }
    return 0;
}

struct RouteCollector : TraceObserver {
    // per layer: per position
    std::map<uint32_t, std::vector<std::vector<int32_t>>> experts;
    std::map<uint32_t, std::vector<std::vector<float>>> weights, probs, selection;
    std::map<uint32_t, std::vector<std::vector<uint32_t>>> groups;
    std::map<uint32_t, json> cache;  // per layer: the expert cache's records (--ram-budget)
    std::map<uint32_t, std::vector<std::vector<int32_t>>> predicted;  // per layer: per position (--predict)
    void on_prediction(const PredictionRecord& p) override { predicted[p.layer].emplace_back(p.experts.begin(), p.experts.end()); }
    void on_cache(const CacheRecord& c) override {
        cache[c.layer].push_back({{"position", c.position}, {"tokens", c.tokens}, {"hits", c.hits}, {"misses", c.misses},
                                  {"bytes_read", c.bytes_read}, {"stall_ns", c.stall_ns}, {"prefetched", c.prefetched},
                                  {"predicted", c.predicted}, {"predicted_right", c.predicted_right}});
    }
    void on_routing(const RoutingRecord& r) override {
        experts[r.layer].emplace_back(r.experts.begin(), r.experts.end());
        weights[r.layer].emplace_back(r.weights.begin(), r.weights.end());
        probs[r.layer].emplace_back(r.router_probs.begin(), r.router_probs.end());
        selection[r.layer].emplace_back(r.selection.begin(), r.selection.end());
        groups[r.layer].emplace_back(r.groups.begin(), r.groups.end());
    }
};

// The LUT router implements softmax routing only; a front end says so instead of routing otherwise.
Status check_router_for(const Model& m, RouterKind kind) {
    if (kind == RouterKind::Lut && !lut_router_supports(m.rules().routing))
        return error(std::string("the lut router implements softmax routing only; this model's router is ") +
                     router_scoring_name(m.rules().routing.scoring));
    return Status::ok();
}

struct RouteArgs {
    std::string router = "exact";
    bool compare = false;  // agreement of --router with the exact router
    bool with_probs = false;
    bool predict = false;  // each MoE layer's experts predicted one layer ahead, per position
};

int cmd_route(const ModelArgs& args, const std::string& tokens, const std::string& prompt, const RouteArgs& ra) {
    const std::optional<RouterKind> kind = parse_router_kind(ra.router);
    if (!kind) return fail("route", "unknown router '" + ra.router + "' (exact or lut)");
    auto loaded = load_with_input(args, tokens, prompt);
    if (!loaded) return fail("route", loaded.message());
    Loaded& l = loaded->l;
    const std::vector<int32_t>& ids = loaded->ids;
    if (Status s = check_router_for(*l.model, *kind); !s) return fail("route", s.message());
    if (ra.compare) {
        auto a = tools::compare_routers(*l.model, *l.pool, ids, *kind);
        if (!a) return fail("route", a.message());
        std::printf("%s\n", tools::router_agreement_json(a.value()).dump().c_str());
        return 0;
    }
    RouteCollector collector;
    l.session->set_router(*kind);
    l.session->set_predict_experts(ra.predict);
    l.session->set_observer(&collector);
    if (auto r = l.session->eval(std::span<const int32_t>(ids)); !r) return fail("route", r.message());
    json layers = json::array();
    for (const auto& [layer, ex] : collector.experts) {
        // Existing fields first; selection_scores (what selected each expert: score + selection bias) and, for
        // group-limited routers, the groups each token's choice was limited to.
        json e{{"layer", layer}, {"experts", ex}, {"weights", collector.weights[layer]}, {"selection_scores", collector.selection[layer]}};
        if (l.model->rules().routing.n_group > 1) e["groups"] = collector.groups[layer];
        if (ra.with_probs) e["probs"] = collector.probs[layer];
        if (collector.cache.count(layer)) e["cache"] = collector.cache[layer];
        if (ra.predict && collector.predicted.count(layer)) e["predicted"] = collector.predicted[layer];
        layers.push_back(e);
    }
    json out{{"tokens", ids}, {"router", router_kind_name(*kind)}, {"routing", routing_json(*l.model)},
             {"n_experts", l.model->hparams().n_experts}, {"layers", layers}};
    if (const ExpertCache* c = l.model->expert_cache()) out["expert_cache"] = expert_cache_json(*c);
    std::printf("%s\n", out.dump().c_str());
    return 0;
}

struct CacheSimArgs {
    std::string trace;
    std::string slots;      // empty: tools::default_slot_counts
    std::string pin_trace;  // empty: the hot set is learned from the replayed trace itself
    bool as_json = false;
};

int cmd_cache_sim(const CacheSimArgs& a) {
    auto trace = tools::read_routing_trace(a.trace);
    if (!trace) return fail("cache-sim", trace.message());
    std::optional<tools::RoutingTrace> pin_source;
    if (!a.pin_trace.empty()) {
        auto p = tools::read_routing_trace(a.pin_trace);
        if (!p) return fail("cache-sim", p.message());
        if (p->n_experts > trace->n_experts)
            return fail("cache-sim", a.pin_trace + ": routes over " + std::to_string(p->n_experts) + " experts, the trace over " +
                                         std::to_string(trace->n_experts));
        pin_source = std::move(p.value());
    }
    std::vector<uint32_t> slots = tools::default_slot_counts(trace.value());
    if (!a.slots.empty()) {
        auto s = tools::parse_slot_counts(a.slots, trace.value());
        if (!s) return fail("cache-sim", "--slots: " + s.message());
        slots = std::move(s.value());
    }
    const tools::CacheSimReport rep = tools::cache_sim(trace.value(), slots, pin_source ? *pin_source : trace.value(),
                                                       pin_source ? a.pin_trace : std::string("in-sample"));
    if (a.as_json) std::printf("%s\n", tools::cache_sim_json(rep).dump().c_str());
    else std::fputs(tools::cache_sim_text(rep).c_str(), stdout);
    return 0;
}

struct BenchArgs {
    tools::BenchConfig config;
    std::string router = "exact";
    std::string kernel;  // --kernel: one variant, a list or "all" (a comparison)
    bool no_prefetch = false, prefetch = false, huge_pages = false, no_huge_pages = false;
    size_t bandwidth_mib = 0;
};

int cmd_bench(const ModelArgs& args, BenchArgs& ba, bool as_json) {
    if (args.path.empty()) return fail("bench", "no model given (use -m model.bin)");
    const std::optional<RouterKind> kind = parse_router_kind(ba.router);
    if (!kind) return fail("bench", "unknown router '" + ba.router + "' (exact or lut)");
    SessionOptions& so = ba.config.session;
    so = SessionOptions::from_environment();
    so.router = *kind;
    if (ba.prefetch) so.prefetch_experts = true;
    if (ba.no_prefetch) so.prefetch_experts = false;
    if (ba.huge_pages) so.huge_pages = true;
    if (ba.no_huge_pages) so.huge_pages = false;
    ba.config.bandwidth_buffer = ba.bandwidth_mib << 20;
    ba.config.context = args.context;
    auto cache = tools::expert_cache_request(args);
    if (!cache) return fail("bench", cache.message());
    ba.config.cache = std::move(cache.value());
    if (!ba.kernel.empty()) {
        auto variants = tools::parse_kernel_list(ba.kernel);
        if (!variants) return fail("bench", variants.message());
        std::vector<tools::KernelRun> runs;
        for (kernels::Variant v : variants.value()) {
            kernels::select_variant(v);  // every op and type, as COLIBRI_KERNEL=v would
            auto report = tools::run_bench(args.path, args.threads, ba.config);
            if (!report) return fail("bench", report.message());
            runs.push_back({v, std::move(report.value())});
        }
        if (runs.size() == 1 && !as_json) std::fputs(tools::bench_text(runs.front().report).c_str(), stdout);
        else if (runs.size() == 1) std::printf("%s\n", tools::bench_json(runs.front().report).dump(2).c_str());
        else if (as_json) std::printf("%s\n", tools::kernel_comparison_json(runs).dump(2).c_str());
        else std::fputs(tools::kernel_comparison_text(runs).c_str(), stdout);
        return 0;
    }
    auto report = tools::run_bench(args.path, args.threads, ba.config);
    if (!report) return fail("bench", report.message());
    if (as_json)
        std::printf("%s\n", tools::bench_json(report.value()).dump(2).c_str());
    else
        std::fputs(tools::bench_text(report.value()).c_str(), stdout);
    return 0;
}

void add_sampler_args(CLI::App* cmd, SamplerConfig& s) {
    cmd->add_flag("--greedy", s.greedy, "always take the most likely token");
    cmd->add_option("--seed", s.seed, "random seed");
    cmd->add_option("--temperature", s.temperature, "temperature (0, or below 1e-4, = greedy)");
    cmd->add_option("--top-k", s.top_k, "keep the k most likely tokens (0 = off)");
    cmd->add_option("--top-p", s.top_p, "nucleus sampling threshold (1 = off)");
    cmd->add_option("--min-p", s.min_p, "drop tokens below min-p x the best probability (0 = off)");
    cmd->add_option("--repeat-penalty", s.repetition_penalty, "repetition penalty (1 = off)");
    cmd->add_option("--repeat-last-n", s.repetition_window, "tokens the repetition penalty looks back over");
}

int cmd_generate(const ModelArgs& args, const std::string& tokens, const std::string& prompt, int n,
                 const SamplerConfig& sc, bool as_json) {
    if (const std::string p = sampler_config_problem(sc); !p.empty()) return fail("generate", p);
    auto loaded = load_with_input(args, tokens, prompt);
    if (!loaded) return fail("generate", loaded.message());
    Loaded& l = loaded->l;
    const std::vector<int32_t>& ids = loaded->ids;
    Sampler sampler(sc);
    GenerateRequest req;
    req.max_tokens = n;
    // With explicit token ids the caller decides when to stop, as HF generate with a fixed length does.
    if (tokens.empty()) req.stop_ids = default_stop_ids(*l.model);
    const Tokenizer* tok = l.model->tokenizer();
    Utf8Stream stream;
    GenerateStop stop = GenerateStop::MaxTokens;
    // Timing and storage reads: the prompt (to the first new token) and the decode after it, apart, so that a
    // budgeted run's cost per decoded token can be read off (tools/bench_ram_budget.py).
    using Clock = std::chrono::steady_clock;
    const Clock::time_point t0 = Clock::now();
    const std::optional<uint64_t> read0 = storage_read_bytes();
    Clock::time_point t_first = t0;
    std::optional<uint64_t> read_first;
    size_t produced = 0;
    auto out = generate(*l.session, sampler, ids, req, [&](int32_t id) {
        if (produced++ == 0) {
            t_first = Clock::now();
            read_first = storage_read_bytes();
        }
        if (!as_json && tok) print(stream.push(tok->decode_token_bytes(id)));
        return true;
    }, &stop);
    const Clock::time_point t_end = Clock::now();
    const std::optional<uint64_t> read_end = storage_read_bytes();
    if (!as_json && tok) print(stream.flush());
    if (!out) return fail("generate", out.message());
    if (as_json) {
        json j{{"prompt_ids", ids}, {"new_ids", out.value()},
               {"stop", stop == GenerateStop::StopToken ? "stop_token" : stop == GenerateStop::ContextFull ? "context_full" : "max_tokens"}};
        // The decode is every step after the first new token (which the prompt's evaluation produced).
        const auto secs = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
        const double decode_s = produced > 1 ? secs(t_first, t_end) : 0.0;
        j["timing"] = {{"prompt_s", produced ? secs(t0, t_first) : secs(t0, t_end)},
                       {"decode_s", decode_s},
                       {"decode_tokens", produced > 1 ? produced - 1 : 0},
                       {"decode_tokens_per_s", decode_s > 0 ? double(produced - 1) / decode_s : 0.0}};
        if (read0 && read_first && read_end)
            j["storage_read_bytes"] = {{"prompt", *read_first - *read0}, {"decode", *read_end - *read_first}};
        if (tok) j["text"] = tok->decode(out.value());
        if (const ExpertCache* c = l.model->expert_cache()) j["expert_cache"] = expert_cache_json(*c);
        std::printf("%s\n", j.dump().c_str());
    } else if (!tok) {
        for (size_t i = 0; i < out->size(); ++i) std::printf("%s%d", i ? "," : "", out.value()[i]);
        std::printf("\n");
    } else {
        std::printf("\n");
    }
    // Not an error: what was generated stands, and the user learns why it ended before -n tokens.
    if (stop == GenerateStop::ContextFull)
        std::fprintf(stderr, "colibri: generate: stopped after %zu tokens: the context of %u tokens is full (-c sets it)\n",
                     out->size(), l.session->context());
    return 0;
}

// Replaces one expert with a donor's and writes the result (a .bin, or a .bin.zst when -o ends in .zst).
int cmd_swap(const std::string& model_path, uint32_t layer, uint32_t expert, const std::string& donor_path,
             int64_t donor_layer, int64_t donor_expert, const std::string& out, int zstd_level, bool quiet) {
    auto model = Model::load(model_path);
    if (!model) return fail("swap", model.message());
    auto donor = ModelFile::open(donor_path);
    if (!donor) return fail("swap", donor.message());
    const uint32_t from_layer = donor_layer < 0 ? layer : static_cast<uint32_t>(donor_layer);
    const uint32_t from_expert = donor_expert < 0 ? expert : static_cast<uint32_t>(donor_expert);
    if (Status s = model.value()->swap_expert(layer, expert, *donor.value(), from_layer, from_expert); !s)
        return fail("swap", s.message());
    ZstOptions zst;
    zst.level = zstd_level;
    const ModelFile& file = model.value()->file();
    if (Status s = tools::write_model_output(out, tools::is_zst_name(out), zst, [&](const std::string& bin) { return file.save(bin); });
        !s)
        return fail("swap", s.message());
    if (!quiet)
        std::printf("wrote %s: layer %u expert %u replaced by %s layer %u expert %u\n", out.c_str(), layer, expert,
                    donor_path.c_str(), from_layer, from_expert);
    return 0;
}

int cmd_chat(const ModelArgs& args, const SamplerConfig& sc, cli::ChatOptions options) {
    if (const std::string p = sampler_config_problem(sc); !p.empty()) return fail("chat", p);
    auto loaded = load(args);
    if (!loaded) return fail("chat", loaded.message());
    Loaded& l = loaded.value();
    if (l.model->tokenizer() == nullptr)
        return fail("chat", args.path + ": model has no tokenizer (convert a directory with tokenizer.json)");
    options.model_path = args.path;
    options.history_path = cli::default_history_path();
    return cli::run_chat(*l.model, *l.session, sc, options);
}

// Held-out dialogues through the chat template, greedy; --require SKILL=FRACTION makes it a pass/fail check.
int cmd_eval(const ModelArgs& args, const std::string& dialogues, int max_tokens, const std::vector<std::string>& require,
             bool as_json) {
    std::vector<std::pair<std::string, double>> needs;
    for (const std::string& r : require) {
        const size_t eq = r.rfind('=');
        char* end = nullptr;
        const double v = eq == std::string::npos ? -1.0 : std::strtod(r.c_str() + eq + 1, &end);
        if (eq == std::string::npos || eq == 0 || end == r.c_str() + eq + 1 || *end != '\0' || !(v >= 0.0 && v <= 1.0))
            return fail("eval", "--require '" + r + "' is not SKILL=FRACTION with a fraction in [0, 1]");
        needs.emplace_back(r.substr(0, eq), v);
    }
    auto cases = tools::read_eval_cases(dialogues);
    if (!cases) return fail("eval", cases.message());
    auto loaded = load(args);
    if (!loaded) return fail("eval", loaded.message());
    Loaded& l = loaded.value();
    const bool tty = isatty(STDERR_FILENO);
    auto report = tools::run_chat_eval(*l.model, *l.session, std::move(cases.value()), max_tokens, [tty](size_t done, size_t total) {
        if (tty) std::fprintf(stderr, "\r%zu / %zu", done, total);
        return true;
    });
    if (tty) std::fprintf(stderr, "\r");
    if (!report) return fail("eval", report.message());
    if (as_json)
        std::printf("%s\n", tools::eval_json(report.value()).dump(1).c_str());
    else
        std::fputs(tools::eval_text(report.value()).c_str(), stdout);
    int status = 0;
    for (const auto& [skill, need] : needs) {
        const auto& skills = report->skills;
        auto it = std::find_if(skills.begin(), skills.end(), [&](const tools::SkillScore& s) { return s.skill == skill; });
        if (it == skills.end()) {
            status = fail("eval", "no cases of skill '" + skill + "' in " + dialogues);
        } else if (it->accuracy() < need) {
            char msg[200];
            std::snprintf(msg, sizeof msg, "%s accuracy %.3f is below the required %.3f", skill.c_str(), it->accuracy(), need);
            status = fail("eval", msg);
        }
    }
    return status;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"colibri: a CPU inference engine for Mixture-of-Experts models"};
    app.require_subcommand(1);
    app.set_version_flag("--version", "colibri 0.1.0");

    std::string src, out, type_name = "f32";
    bool zstd = false, quiet = false, as_json = false;
    int zstd_level = 3;
    auto* convert = app.add_subcommand("convert", "convert a Hugging Face directory or a GGUF file to .bin");
    convert->add_option("source", src, "Hugging Face model directory or .gguf file")->required();
    convert->add_option("-o,--output", out, "output .bin")->required();
    std::string type_help = "weight type:";
    for (const WeightTypeInfo& w : weight_types())
        if (w.quantisable) type_help += std::string(" ") + w.name + (w.type == WeightType::Q4_K ? " (or q4)," : ",");
    type_help.back() = ';';
    type_help += " a block type stores rows that are not whole blocks in its fallback type (see docs/QUANTIZATION.md)";
    convert->add_option("--type", type_name, type_help);
    convert->add_flag("--zstd", zstd, "write model.bin.zst: one zstd frame per section (implied by -o *.zst)");
    convert->add_option("--zstd-level", zstd_level, "zstd level 1..22")->check(CLI::Range(1, 22));
    convert->add_flag("-q,--quiet", quiet, "print nothing on success");

    std::string export_in, export_out;
    auto* export_cmd = app.add_subcommand("export", "write a .bin as a GGUF file for llama.cpp (the same tensors, no vocabulary)");
    export_cmd->add_option("model", export_in, ".bin model")->required();
    export_cmd->add_option("-o,--output", export_out, "output .gguf")->required();
    bool export_placeholder_vocab = false;
    export_cmd->add_flag("--placeholder-vocab", export_placeholder_vocab,
                         "a stand-in vocabulary (pieces \"<ID>\") for llama.cpp programs that print tokens, e.g. llama-server driven with token ids");

    std::string path;
    auto* check = app.add_subcommand("check", "validate a .bin or .bin.zst file: exit 0 valid, 1 invalid, 2 unreadable");
    check->add_option("model", path, "model file")->required();
    check->add_flag("--json", as_json, "JSON report (docs/FORMAT.md, \"Check report\")");
    check->add_flag("-q,--quiet", quiet, "no progress line and no summary: only the problems");

    auto* info = app.add_subcommand("info", "print a model's hyper-parameters");
    info->add_option("model", path, "model file")->required();
    info->add_flag("--json", as_json, "JSON output");

    ModelArgs margs;
    margs.path = COLIBRI_DEMO_MODEL;
    std::string tokens, prompt, logits_out;
    int top = 0, n = 32, max_tokens = 256;
    auto* logits = app.add_subcommand("logits", "print or dump the logits at every position");
    add_model_args(logits, margs, true);
    add_input_args(logits, tokens, prompt);
    logits->add_option("--out", logits_out, "write raw float32 [tokens x vocab] here");
    logits->add_option("--top", top, "show the top K logits per position");
    logits->add_flag("--json", as_json, "JSON output");

    auto* route = app.add_subcommand("route", "print the router's choices per layer and token");
    add_model_args(route, margs, true);
    add_input_args(route, tokens, prompt);
    route->add_flag("--json", as_json, "JSON output (the only format)");
    RouteArgs rargs;
    route->add_flag("--probs", rargs.with_probs, "include the full router distribution");
    route->add_option("--router", rargs.router, "router: exact (default) or lut (integer, table exp)");
    route->add_flag("--compare", rargs.compare, "report the top-k agreement of --router with the exact router");
    route->add_flag("--predict", rargs.predict,
                    "also the experts predicted for each MoE layer at the one before it (the next router on the current "
                    "hidden state, as --cache-prefetch reads ahead): per layer \"predicted\", for colibri cache-sim");

    BenchArgs bargs;
    auto* bench = app.add_subcommand("bench", "prompt and decode tokens/s, bytes per token, memory bandwidth, roofline");
    bench->add_option("-m,--model", margs.path, "model file (.bin)")->required();
    bench->add_option("-t,--threads", margs.threads, "worker threads (default: all cores)");
    bench->add_option("-c,--context", margs.context, "KV cache size in tokens (default: what -d, -p and -n need)");
    add_budget_args(bench, margs);
    bench->add_option("--kernel", bargs.kernel,
                      "kernel variant for every op and type: scalar, avx2, avx512, neon, neon_translated; a comma "
                      "list or 'all' runs the bench once per variant and compares them");
    bench->add_option("-p,--prompt-tokens", bargs.config.prompt_tokens, "prompt length in tokens (default 128)");
    bench->add_option("-n,--decode-tokens", bargs.config.decode_tokens, "tokens to decode (default 128)");
    bench->add_option("-d,--depth", bargs.config.depth,
                      "tokens of context before the timed prompt and decode (default 0, as llama-bench -d)");
    bench->add_option("-r,--reps", bargs.config.reps, "repetitions (default 5), after one warm-up");
    bench->add_option("--cold", bargs.config.cold_reps, "also time N cold starts (page cache of the file dropped)");
    bench->add_option("--cold-tokens", bargs.config.cold_tokens, "decode steps timed per cold start (default 16)");
    bench->add_option("--chunk", bargs.config.session.chunk, "prompt tokens per batched chunk (default 64)");
    bench->add_option("--router", bargs.router, "router: exact (default) or lut");
    bench->add_option("--bandwidth-mib", bargs.bandwidth_mib, "MiB the bandwidth benchmark reads (default: max(1 GiB, 4 x LLC))");
    bench->add_flag("--prefetch", bargs.prefetch, "madvise(WILLNEED) experts ahead of use");
    bench->add_flag("--no-prefetch", bargs.no_prefetch, "no expert prefetch");
    bench->add_flag("--huge-pages", bargs.huge_pages, "transparent huge pages for the KV cache and activations");
    bench->add_flag("--no-huge-pages", bargs.no_huge_pages, "no huge pages");
    bench->add_flag("--json", as_json, "JSON output");

    SamplerConfig sc;
    auto* gen = app.add_subcommand("generate", "generate tokens");
    add_model_args(gen, margs, true);
    add_input_args(gen, tokens, prompt);
    gen->add_option("-n", n, "tokens to generate");
    add_sampler_args(gen, sc);
    gen->add_flag("--json", as_json, "JSON output");

    CompareArgs cargs;
    auto* compare = app.add_subcommand("compare", "teacher-forced top-1 agreement and KL divergence against a baseline");
    add_model_args(compare, margs, true);
    compare->add_option("--baseline", cargs.baseline_model, "baseline model (.bin), run on the same tokens");
    compare->add_option("--baseline-logits", cargs.baseline_logits, "baseline logits: raw float32 [tokens x vocab]");
    add_input_args(compare, cargs.tokens, cargs.prompt);
    compare->add_option("--random", cargs.random, "N random token ids (after BOS) instead of --tokens/--prompt");
    compare->add_option("--seed", cargs.seed, "seed of --random");
    compare->add_flag("--json", as_json, "JSON output");

    std::string swap_model, swap_donor, swap_out;
    uint32_t swap_layer = 0, swap_expert = 0;
    int64_t swap_from_layer = -1, swap_from_expert = -1;
    auto* swap = app.add_subcommand("swap", "replace one expert's weights with another model's and write the result");
    swap->add_option("-m,--model", swap_model, "model file (.bin or .bin.zst)")->required();
    swap->add_option("--layer", swap_layer, "layer of the expert to replace")->required();
    swap->add_option("--expert", swap_expert, "expert to replace")->required();
    swap->add_option("--from", swap_donor, "donor model with the same shapes and weight types")->required();
    // Checked in full: a 64-bit number narrowed to 32 bits would name another expert.
    swap->add_option("--from-layer", swap_from_layer, "donor layer (default: --layer)")->check(CLI::Range(int64_t(0), int64_t(UINT32_MAX)));
    swap->add_option("--from-expert", swap_from_expert, "donor expert (default: --expert)")->check(CLI::Range(int64_t(0), int64_t(UINT32_MAX)));
    swap->add_option("-o,--output", swap_out, "output model (.bin, or .bin.zst)")->required();
    swap->add_option("--zstd-level", zstd_level, "zstd level 1..22 for a .zst output")->check(CLI::Range(1, 22));
    swap->add_flag("-q,--quiet", quiet, "print nothing on success");

    std::string system_prompt;
    bool no_prefix_cache = false, ignore_eos = false;
    auto* chat = app.add_subcommand("chat", "interactive chat (the demo model when -m is not given)");
    add_model_args(chat, margs, false);
    chat->add_option("--system", system_prompt, "system prompt");
    chat->add_option("-n,--max-tokens", max_tokens, "longest reply in tokens");
    chat->add_flag("--no-prefix-cache", no_prefix_cache, "re-evaluate the whole conversation each turn (for checking)");
    chat->add_flag("--ignore-eos", ignore_eos, "keep writing past end-of-turn tokens, up to --max-tokens (for measuring)");
    add_sampler_args(chat, sc);

    std::string eval_dialogues;
    std::vector<std::string> eval_require;
    int eval_max_tokens = 96;
    auto* eval = app.add_subcommand("eval", "score greedy replies to held-out dialogues (JSON lines: skill, prompt, expect_regex)");
    add_model_args(eval, margs, false);
    eval->add_option("--dialogues", eval_dialogues, "JSON-lines file of cases")->required();
    eval->add_option("-n,--max-tokens", eval_max_tokens, "longest reply in tokens (default 96)");
    eval->add_option("--require", eval_require, "SKILL=FRACTION: exit 1 when a skill's accuracy is lower ('all' for every case)");
    eval->add_flag("--json", as_json, "JSON output with every reply");

    bool tune_quick = false;
    CacheSimArgs csargs;
    auto* cache_sim = app.add_subcommand("cache-sim", "replay a routing trace (route --json): LRU, LFRU, pinned and Belady hit rates per layer");
    cache_sim->add_option("trace", csargs.trace, "routing trace (colibri route --json output)")->required();
    cache_sim->add_option("--slots", csargs.slots, "slots per layer: A..B, N or A,B,C (default: 12.5, 25, 50, 75 % of the experts)");
    cache_sim->add_option("--pin-trace", csargs.pin_trace, "learn the pinned hot set from this trace (default: the replayed one)");
    cache_sim->add_flag("--json", csargs.as_json, "JSON output");

    colibri::cli::ServeArgs sargs;
    auto* serve = app.add_subcommand("serve", "OpenAI-compatible HTTP server with continuous batching, and a local socket + shared-memory mode (docs/SERVER.md)");
    serve->add_option("-m,--model", sargs.model.path, "model file (.bin)")->required();
    serve->add_option("-t,--threads", sargs.model.threads, "worker threads (default: all cores)");
    serve->add_option("-c,--context", sargs.model.context, "context per slot in tokens (default: min(model, 4096))");
    add_budget_args(serve, sargs.model);
    serve->add_option("--host", sargs.host, "address to listen on, HOST or HOST:PORT (default 127.0.0.1:8080)");
    serve->add_option("--port", sargs.port, "port (default 8080; 0 picks a free one)");
    serve->add_option("--slots", sargs.slots, "sequences decoded together, each with its own KV cache (default 4)");
    serve->add_option("--api-key", sargs.api_keys, "require 'Authorization: Bearer KEY' (or set COLIBRI_API_KEY); repeat for several clients, each with its own prefix cache");
    serve->add_flag("--share-prefix-cache", sargs.share_prefix_cache, "a prompt prefix cached for one API key also serves the others (default: per key)");
    serve->add_option("--socket", sargs.socket_path, "local mode: Unix socket path (mode 0660: this user and group)");
    serve->add_option("--shm-key", sargs.shm_key, "local mode: names the connections' shared memory (memfd:KEY-reply; optional)");
    serve->add_option("--socket-connections", sargs.socket_connections, "local mode: connections open at once (default: max(16, slots + max-queue))");
    serve->add_option("--socket-per-user", sargs.socket_per_user, "local mode: connections one uid may hold (default: half of --socket-connections)");
    serve->add_option("--socket-idle", sargs.socket_idle_s, "local mode: seconds a connection may stay idle before it is closed (default 60)");
    serve->add_option("--max-queue", sargs.max_queue, "requests waiting for a slot before 429 (default 64)");
    serve->add_option("--max-tokens", sargs.max_tokens, "most tokens one request may generate (default: the context)");
    serve->add_option("--max-body", sargs.max_body, "largest request body in bytes (default 2 MiB)");
    serve->add_option("--timeout", sargs.timeout_s, "seconds a request may take to arrive, and one read or write to wait (default 10)");
    serve->add_option("--alias", sargs.aliases, "another name clients may give as \"model\"");
    serve->add_flag("-q,--quiet", sargs.quiet, "no line per request");

    auto* tune = app.add_subcommand("tune", "benchmark the kernel variants, pick the fastest per op and type, cache the choice");
    tune->add_flag("--json", as_json, "JSON output");
    tune->add_flag("--quick", tune_quick, "one shape, three repetitions");

    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        std::fprintf(stderr, "colibri: usage: %s (see colibri --help)\n", e.what());
        return 2;
    }

    // COLIBRI_KERNEL, else the tune cache; tune measures every variant itself and rewrites the cache.
    if (!*tune && !colibri::cli::configure_kernels_or_report()) return 1;
    try {
        if (*tune) return colibri::cli::cmd_tune(as_json, tune_quick);
        if (*convert) return cmd_convert(src, out, type_name, zstd, zstd_level, quiet);
        if (*check) return cmd_check(path, as_json, quiet);
        if (*export_cmd) {
            if (Status st = tools::export_gguf(export_in, export_out, export_placeholder_vocab); !st) return fail("export", st.message());
            return 0;
        }
        if (*info) return cmd_info(path, as_json);
        if (*logits) return cmd_logits(margs, tokens, prompt, logits_out, top, as_json);
        if (*route) return cmd_route(margs, tokens, prompt, rargs);
        if (*bench) return cmd_bench(margs, bargs, as_json);
        if (*cache_sim) return cmd_cache_sim(csargs);
        if (*serve) return colibri::cli::cmd_serve(sargs);
        if (*compare) return cmd_compare(margs, cargs, as_json);
        if (*gen) return cmd_generate(margs, tokens, prompt, n, sc, as_json);
        if (*swap)
            return cmd_swap(swap_model, swap_layer, swap_expert, swap_donor, swap_from_layer, swap_from_expert, swap_out,
                            zstd_level, quiet);
        if (*chat) {
            cli::ChatOptions options;
            options.system_prompt = system_prompt;
            options.max_tokens = max_tokens;
            options.reuse_prefix = !no_prefix_cache;
            options.ignore_eos = ignore_eos;
            return cmd_chat(margs, sc, options);
        }
        if (*eval) return cmd_eval(margs, eval_dialogues, eval_max_tokens, eval_require, as_json);
    } catch (const std::bad_alloc&) {
        return fail("error", "out of memory");
    } catch (const std::exception& e) {
        return fail("error", e.what());
    }
    return 1;
}
