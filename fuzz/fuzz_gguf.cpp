// libFuzzer target: a GGUF file. GgufFile::open must refuse it with one error line or give tensors whose
// bytes lie inside the mapped file, no two sharing a byte; then the GGUF converter plans and writes it into a scratch directory:
// it must fail with one error line and leave nothing behind, or write a .bin that loads (or is refused with
// one error line) and runs a token. Outputs beyond 32 MiB are cancelled after their first tensor.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <vector>

#include "engine/core/model.h"
#include "engine/core/session.h"
#include "fuzz_support.h"
#include "tools/convert.h"
#include "tools/gguf.h"

using namespace colibri;

namespace {

constexpr uint64_t kMaxOutputBytes = uint64_t(32) << 20;

bool scratch_is_empty() {
    std::error_code ec;
    return std::filesystem::is_empty(fuzz::scratch_dir(), ec);
}

void convert(const std::string& gguf_path) {
    const std::string out = fuzz::scratch_dir() + "/out.bin";
    tools::ConvertOptions options;
    options.progress = [](uint64_t, uint64_t total) { return total <= kMaxOutputBytes; };
    auto converted = tools::convert_gguf(gguf_path, out, options);
    if (!converted) {
        fuzz::check_error_message(converted.message());
        if (!scratch_is_empty()) fuzz::fuzz_fail("a failed conversion left a file behind: " + converted.message());
        return;
    }
    {
        auto model = Model::load(out);
        if (model) {
            static ThreadPool pool(1);
            Session session(*model.value(), pool, 1);
            auto logits = session.eval(0);
            if (!logits) fuzz::check_error_message(logits.message());
        } else {
            fuzz::check_error_message(model.message());
        }
    }
    std::filesystem::remove(out);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static fuzz::MemFile file("colibri-fuzz-gguf");
    file.write(data, size);
    {
        auto opened = tools::GgufFile::open(file.path());
        if (!opened) {
            fuzz::check_error_message(opened.message());
            return 0;
        }
        const fuzz::MemFile::Mapping mapped = file.mapping();
        std::vector<const tools::GgufTensor*> by_data;
        for (const auto& [name, t] : opened.value()->tensors()) {
            if (!mapped.holds(t.data, t.size)) fuzz::fuzz_fail("tensor " + name + " lies outside the file");
            by_data.push_back(&t);
        }
        // llama.cpp's layout: tensors never share bytes (each starts where the one before ends, aligned).
        std::sort(by_data.begin(), by_data.end(), [](const tools::GgufTensor* a, const tools::GgufTensor* b) { return a->data < b->data; });
        for (size_t k = 1; k < by_data.size(); ++k)
            if (by_data[k - 1]->data + by_data[k - 1]->size > by_data[k]->data)
                fuzz::fuzz_fail("tensors " + by_data[k - 1]->name + " and " + by_data[k]->name + " overlap");
    }
    convert(file.path());
    return 0;
}
