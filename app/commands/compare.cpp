// `colibri compare`: teacher-forced top-1 agreement and KL divergence against a baseline (tools/logit_compare.h).
#include <cstdio>
#include <nlohmann/json.hpp>
#include <span>
#include <vector>

#include "command.h"
#include "engine/core/model.h"
#include "model_options.h"
#include "tools/logit_compare.h"

namespace colibri::cli {

namespace {

using nlohmann::json;

struct CompareArgs {
    std::string baseline_model, baseline_logits, tokens, prompt;
    size_t random = 0;
    uint64_t seed = 1;
};

int cmd_compare(const tools::ModelArgs& args, const CompareArgs& c, bool as_json) {
    if (c.baseline_model.empty() == c.baseline_logits.empty())
        return fail("compare", "give exactly one of --baseline and --baseline-logits");
    auto loaded = load(args);
    if (!loaded) return fail("compare", loaded.message());
    OpenedModel& l = loaded.value();
    const format::HyperParams& hp = l.model->hparams();
    Result<std::vector<int32_t>> ids = c.random > 0
                                           ? Result<std::vector<int32_t>>(tools::random_token_ids(c.random, hp.vocab_size, hp.bos_id, c.seed))
                                           : tools::tokens_or_prompt(*l.model, c.tokens, c.prompt);
    if (!ids) return fail("compare", ids.message());
    if (Status s = check_token_ids(*l.model, ids.value()); !s) return fail("compare", s.message());
    const size_t vocab = l.model->hparams().vocab_size, n = ids->size();

    Result<OpenedModel> base = error("unused");
    std::vector<float> fixed;  // --baseline-logits: [n x vocab]
    if (!c.baseline_model.empty()) {
        tools::ModelArgs bargs = args;
        bargs.path = c.baseline_model;
        base = load(bargs);
        if (!base) return fail("compare", base.message());
        if (base->model->hparams().vocab_size != vocab)
            return fail("compare", c.baseline_model + ": vocabulary " + std::to_string(base->model->hparams().vocab_size) +
                                       " differs from the model's " + std::to_string(vocab));
    } else {
        auto read = tools::read_logits_file(c.baseline_logits, n, vocab);
        if (!read) return fail("compare", read.message());
        fixed = std::move(read.value());
    }

    tools::LogitComparison cmp;
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

class Compare final : public Command {
public:
    explicit Compare(CLI::App& app) {
        sub_ = app.add_subcommand("compare", "teacher-forced top-1 agreement and KL divergence against a baseline");
        add_model_args(sub_, args_, true);
        sub_->add_option("--baseline", compare_.baseline_model, "baseline model (.bin), run on the same tokens");
        sub_->add_option("--baseline-logits", compare_.baseline_logits, "baseline logits: raw float32 [tokens x vocab]");
        add_input_args(sub_, compare_.tokens, compare_.prompt);
        sub_->add_option("--random", compare_.random, "N random token ids (after BOS) instead of --tokens/--prompt");
        sub_->add_option("--seed", compare_.seed, "seed of --random");
        sub_->add_flag("--json", as_json_, "JSON output");
    }
    int run() override { return cmd_compare(args_, compare_, as_json_); }

private:
    tools::ModelArgs args_;
    CompareArgs compare_;
    bool as_json_ = false;
};

}  // namespace

std::unique_ptr<Command> compare_command(CLI::App& app) { return std::make_unique<Compare>(app); }

}  // namespace colibri::cli
