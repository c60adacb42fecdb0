// libFuzzer target: the Jinja chat-template parser and renderer. The input is a template, optionally followed
// by a NUL and the context as JSON (without one, a two-message conversation as `colibri chat` renders it).
// Rendering must give text within the output limit or one error line; never a crash, a hang (libFuzzer's
// -timeout) or unbounded memory (its -rss_limit_mb), whatever the template nests, loops over or builds.
#include <cstdint>
#include <string_view>

#include "engine/text/chat_template.h"
#include "engine/text/jinja.h"
#include "fuzz_support.h"

using namespace colibri;
using colibri::fuzz::fuzz_check;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const size_t nul = input.find('\0');
    const std::string_view source = input.substr(0, nul);
    Result<std::string> out = error("unset");
    if (nul == std::string_view::npos) {
        ChatTemplateInput in;
        in.messages = {{"system", "Be brief."}, {"user", "Hello <|im_start|> {{ x }} \xc3\xa9"}};
        in.bos_token = "<s>";
        in.eos_token = "</s>";
        out = render_chat_template(source, in);
    } else {
        out = render_chat_template_json(source, input.substr(nul + 1));
    }
    if (!out) {
        fuzz::check_error_message(out.message());
        fuzz_check(out.message().rfind("chat template: ", 0) == 0, "a template error that does not say where it comes from");
    } else {
        fuzz_check(out.value().size() <= jinja::kMaxOutputBytes, "rendered text past the output limit");
    }
    return 0;
}
