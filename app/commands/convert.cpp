// `colibri convert`: a Hugging Face directory or a GGUF file to .bin or .bin.zst (tools/convert.h).
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "command.h"
#include "engine/file/format.h"
#include "model_options.h"
#include "tools/convert.h"
#include "tools/model_output.h"

namespace colibri::cli {

namespace {

using nlohmann::json;

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

class Convert final : public Command {
public:
    explicit Convert(CLI::App& app) {
        sub_ = app.add_subcommand("convert", "convert a Hugging Face directory or a GGUF file to .bin");
        sub_->add_option("source", src_, "Hugging Face model directory or .gguf file")->required();
        sub_->add_option("-o,--output", out_, "output .bin")->required();
        std::string type_help = "weight type:";
        for (const WeightTypeInfo& w : weight_types())
            if (w.quantisable) type_help += std::string(" ") + w.name + (w.type == WeightType::Q4_K ? " (or q4)," : ",");
        type_help.back() = ';';
        type_help += " a block type stores rows that are not whole blocks in its fallback type (see docs/QUANTIZATION.md)";
        sub_->add_option("--type", type_name_, type_help);
        sub_->add_flag("--zstd", zstd_, "write model.bin.zst: one zstd frame per section (implied by -o *.zst)");
        sub_->add_option("--zstd-level", zstd_level_, "zstd level 1..22")->check(CLI::Range(1, 22));
        sub_->add_flag("-q,--quiet", quiet_, "print nothing on success");
    }
    int run() override { return cmd_convert(src_, out_, type_name_, zstd_, zstd_level_, quiet_); }

private:
    std::string src_, out_, type_name_ = "f32";
    bool zstd_ = false, quiet_ = false;
    int zstd_level_ = 3;
};

}  // namespace

std::unique_ptr<Command> convert_command(CLI::App& app) { return std::make_unique<Convert>(app); }

}  // namespace colibri::cli
