// `colibri export`: a .bin as a GGUF file for llama.cpp (tools/export_gguf.h).
#include <nlohmann/json.hpp>

#include "command.h"
#include "model_options.h"
#include "tools/export_gguf.h"

namespace colibri::cli {

namespace {

using nlohmann::json;

class Export final : public Command {
public:
    explicit Export(CLI::App& app) {
        sub_ = app.add_subcommand("export", "write a .bin as a GGUF file for llama.cpp (the same tensors, no vocabulary)");
        sub_->add_option("model", in_, ".bin model")->required();
        sub_->add_option("-o,--output", out_, "output .gguf")->required();
        sub_->add_flag("--placeholder-vocab", placeholder_vocab_,
                       "a stand-in vocabulary (pieces \"<ID>\") for llama.cpp programs that print tokens, e.g. llama-server driven with token ids");
    }
    int run() override {
        if (Status st = tools::export_gguf(in_, out_, placeholder_vocab_); !st) return fail("export", st.message());
        return 0;
    }

private:
    std::string in_, out_;
    bool placeholder_vocab_ = false;
};

}  // namespace

std::unique_ptr<Command> export_command(CLI::App& app) { return std::make_unique<Export>(app); }

}  // namespace colibri::cli
