// libFuzzer target: a .bin model file. ModelFile::open must refuse it with one error line or hand out only
// views that lie inside the file (and expert entries that name their own sections); Model::load must refuse it or bind it, and a bound model runs two tokens
// through a Session (one thread, context 2) so the binding and the kernels meet whatever the checks let
// through; an embedded tokenizer encodes and decodes a string.
#include <cstdint>
#include <cstring>

#include "engine/core/model.h"
#include "engine/core/session.h"
#include "fuzz_support.h"

using namespace colibri;
using colibri::fuzz::fuzz_check;

namespace {

void check_views(const ModelFile& f) {
    for (const format::SectionEntry& s : f.sections())
        fuzz_check(s.offset <= f.size() && s.size <= f.size() - s.offset, "a section outside the file");
    // The expert cache reads an expert through its entry: an entry must name its own expert's section.
    for (const format::ExpertEntry& e : f.experts()) {
        fuzz_check(e.section < f.sections().size(), "an expert entry naming no section");
        const format::SectionEntry& s = f.sections()[e.section];
        fuzz_check(s.kind == static_cast<uint32_t>(format::SectionKind::Expert) && s.layer == e.layer && s.expert == e.expert,
                   "an expert entry naming another section than its expert's");
    }
    for (const TensorView& t : f.tensors()) {
        if (t.offset > f.size() || t.size > f.size() - t.offset) fuzz::fuzz_fail("tensor " + t.name + " outside the file");
        if (t.data != f.data() + t.offset) fuzz::fuzz_fail("tensor " + t.name + " does not point at its offset");
    }
    for (const format::SectionKind kind : {format::SectionKind::TokenizerJson, format::SectionKind::TokenizerConfig,
                                           format::SectionKind::ChatTemplate, format::SectionKind::GenerationConfig}) {
        const std::string_view text = f.section_text(kind);
        if (text.empty()) continue;
        const auto* p = reinterpret_cast<const uint8_t*>(text.data());
        fuzz_check(p >= f.data() && text.size() <= f.size() - uint64_t(p - f.data()), "a text section outside the file");
    }
}

void run_tokens(const Model& model) {
    static ThreadPool pool(1);
    Session session(model, pool, 2);
    const uint32_t vocab = model.hparams().vocab_size;
    for (const int32_t token : {0, static_cast<int32_t>(vocab - 1)}) {
        auto logits = session.eval(token);
        if (!logits) {
            fuzz::check_error_message(logits.message());
            return;
        }
        fuzz_check(logits->size() == vocab, "logits of the wrong size");
    }
}

void run_tokenizer(const Model& model) {
    const Tokenizer* tok = model.tokenizer();
    if (tok == nullptr) return;
    const auto encoded = tok->encode("Hello, world! <|im_start|> 123");
    if (!encoded) return;
    const std::vector<int32_t>& ids = encoded.value();
    for (int32_t id : ids) fuzz_check(id >= 0, "the embedded tokenizer made a negative id");
    (void)tok->decode(ids);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static fuzz::MemFile file("colibri-fuzz-bin");
    file.write(data, size);
    {
        auto opened = ModelFile::open(file.path());
        if (!opened) {
            fuzz::check_error_message(opened.message());
            return 0;
        }
        check_views(*opened.value());
    }
    auto model = Model::load(file.path());
    if (!model) {
        fuzz::check_error_message(model.message());
        return 0;
    }
    run_tokens(*model.value());
    run_tokenizer(*model.value());
    return 0;
}
