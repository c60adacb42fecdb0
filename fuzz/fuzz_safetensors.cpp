// libFuzzer target: a safetensors file. SafetensorsFile::open must refuse it with one error line, or give, from a
// header without a NUL byte, tensors whose bytes lie inside the mapped file and match their dtype and shape; the
// first and last element of each are read back as the converter reads them.
#include <cstdint>
#include <cstring>

#include "fuzz_support.h"
#include "tools/safetensors.h"

using namespace colibri;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static fuzz::MemFile file("colibri-fuzz-safetensors");
    file.write(data, size);
    auto opened = tools::SafetensorsFile::open(file.path());
    if (!opened) {
        fuzz::check_error_message(opened.message());
        return 0;
    }
    const fuzz::MemFile::Mapping mapped = file.mapping();
    // A NUL would have ended the JSON parse early: an accepted header holds none.
    uint64_t header_len = 0;
    std::memcpy(&header_len, data, 8);
    fuzz::fuzz_check(std::memchr(data + 8, 0, header_len) == nullptr, "a header with a NUL byte was accepted");
    for (const auto& [name, t] : opened.value()->tensors()) {
        if (!mapped.holds(t.data, t.size)) fuzz::fuzz_fail("tensor " + name + " lies outside the file");
        const uint64_t elem = t.dtype == tools::SourceDType::F32 ? 4 : 2;
        const uint64_t n = t.elements();
        if (n * elem != t.size) fuzz::fuzz_fail("tensor " + name + " size does not match its shape");
        if (n == 0) continue;
        volatile float sink = tools::source_element(t, 0) + tools::source_element(t, n - 1);
        (void)sink;
    }
    return 0;
}
