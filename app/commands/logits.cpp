// `colibri logits`: the logits at every position, printed (top K) or written raw.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "command.h"
#include "model_options.h"
#include "tools/model_output.h"

namespace colibri::cli {

namespace {

using nlohmann::json;

int cmd_logits(const tools::ModelArgs& args, const std::string& tokens, const std::string& prompt, const std::string& out,
               int top, bool as_json) {
    auto loaded = load_with_input(args, tokens, prompt);
    if (!loaded) return fail("logits", loaded.message());
    OpenedModel& l = loaded->l;
    const std::vector<int32_t>& ids = loaded->ids;
    const size_t vocab = l.model->hparams().vocab_size;
    std::vector<float> all;
    all.reserve(ids.size() * vocab);
    for (int32_t id : ids) {
        auto logits = l.session->eval(id);
        if (!logits) return fail("logits", logits.message());
        all.insert(all.end(), logits->begin(), logits->end());
    }
    if (!out.empty() && !(l.comm && l.comm->rank() != 0)) {  // under mpirun, rank 0 writes the file
        if (Status s = tools::write_output_file(out, all.data(), all.size() * sizeof(float)); !s) return fail("logits", s.message());
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

class Logits final : public Command {
public:
    explicit Logits(CLI::App& app) {
        sub_ = app.add_subcommand("logits", "print or dump the logits at every position");
        add_model_args(sub_, args_, true);
        add_rank_args(sub_, args_);
        add_input_args(sub_, tokens_, prompt_);
        sub_->add_option("--out", out_, "write raw float32 [tokens x vocab] here");
        sub_->add_option("--top", top_, "show the top K logits per position");
        sub_->add_flag("--json", as_json_, "JSON output");
    }
    int run() override { return cmd_logits(args_, tokens_, prompt_, out_, top_, as_json_); }

private:
    tools::ModelArgs args_;
    std::string tokens_, prompt_, out_;
    int top_ = 0;
    bool as_json_ = false;
};

}  // namespace

std::unique_ptr<Command> logits_command(CLI::App& app) { return std::make_unique<Logits>(app); }

}  // namespace colibri::cli
