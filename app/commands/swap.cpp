// `colibri swap`: one expert's weights replaced by another model's, written as a new file.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "command.h"
#include "engine/core/model.h"
#include "engine/file/model_file.h"
#include "engine/file/zst_writer.h"
#include "model_options.h"
#include "tools/model_output.h"

namespace colibri::cli {

namespace {

using nlohmann::json;

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

class Swap final : public Command {
public:
    explicit Swap(CLI::App& app) {
        sub_ = app.add_subcommand("swap", "replace one expert's weights with another model's and write the result");
        sub_->add_option("-m,--model", model_, "model file (.bin or .bin.zst)")->required();
        sub_->add_option("--layer", layer_, "layer of the expert to replace")->required();
        sub_->add_option("--expert", expert_, "expert to replace")->required();
        sub_->add_option("--from", donor_, "donor model with the same shapes and weight types")->required();
        // Checked in full: a 64-bit number narrowed to 32 bits would name another expert.
        sub_->add_option("--from-layer", from_layer_, "donor layer (default: --layer)")->check(CLI::Range(int64_t(0), int64_t(UINT32_MAX)));
        sub_->add_option("--from-expert", from_expert_, "donor expert (default: --expert)")->check(CLI::Range(int64_t(0), int64_t(UINT32_MAX)));
        sub_->add_option("-o,--output", out_, "output model (.bin, or .bin.zst)")->required();
        sub_->add_option("--zstd-level", zstd_level_, "zstd level 1..22 for a .zst output")->check(CLI::Range(1, 22));
        sub_->add_flag("-q,--quiet", quiet_, "print nothing on success");
    }
    int run() override {
        return cmd_swap(model_, layer_, expert_, donor_, from_layer_, from_expert_, out_, zstd_level_, quiet_);
    }

private:
    std::string model_, donor_, out_;
    uint32_t layer_ = 0, expert_ = 0;
    int64_t from_layer_ = -1, from_expert_ = -1;
    int zstd_level_ = 3;
    bool quiet_ = false;
};

}  // namespace

std::unique_ptr<Command> swap_command(CLI::App& app) { return std::make_unique<Swap>(app); }

}  // namespace colibri::cli
