// libFuzzer target: libcolibri_client's reader of a reply ring (server/client/colibri_ring_reader.h), fed rings
// a server could have written and rings it could not. Whatever the bytes, the reader reads only inside the ring
// (a heap buffer of exactly its size, so that AddressSanitizer sees every byte outside), takes only records
// that lie whole between its tail and the published head, moves forward with every record, and ends: at the
// head, at the request's last record, or with a one-line reason for the damage.
#include <cstring>
#include <memory>
#include <string_view>

#include "client_ring_input.h"
#include "colibri_ring_reader.h"
#include "fuzz_support.h"

using colibri::fuzz::ClientRingInput;
using colibri::fuzz::fuzz_check;

namespace {

// Reads every byte of a text the reader hands out, so that AddressSanitizer checks it.
uint32_t touch(const char* p, size_t n) {
    uint32_t sum = 0;
    for (size_t i = 0; i < n; ++i) sum = sum * 31 + static_cast<uint8_t>(p[i]);
    return sum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    ClientRingInput in{};
    if (size < sizeof in) return 0;
    std::memcpy(&in, data, sizeof in);
    const uint32_t ring_bytes = colibri::fuzz::client_ring_bytes(in);
    std::unique_ptr<uint8_t[]> ring(new uint8_t[ring_bytes]);
    const size_t given = std::min<size_t>(size - sizeof in, ring_bytes);
    std::memcpy(ring.get(), data + sizeof in, given);
    std::memset(ring.get() + given, 0, ring_bytes - given);
    const char* begin = reinterpret_cast<const char*>(ring.get());
    const char* end = begin + ring_bytes;

    colibri_ring_reader reader{ring.get(), ring_bytes, in.tail};
    volatile uint32_t sink = 0;
    for (int h = 0; h < std::min<int>(in.heads, 4); ++h) {
        const uint64_t head = in.head[h];
        for (;;) {
            const uint64_t before = reader.tail;
            colibri_ring_record record;
            const char* why = nullptr;
            const int got = colibri_ring_next(&reader, head, &record, &why);
            if (got == COLIBRI_RING_DAMAGED) {
                fuzz_check(why != nullptr && *why != '\0' && std::string_view(why).find('\n') == std::string_view::npos, "damage without a reason");
                return 0;
            }
            if (got == COLIBRI_RING_EMPTY) {
                fuzz_check(reader.tail == head, "empty before the head");
                break;
            }
            // Forward by at least a record header, never past the head: the loop ends.
            fuzz_check(reader.tail >= before + 8 && reader.tail <= head, "the tail did not move forward within the head");
            if (got == COLIBRI_RING_TOKEN) {
                fuzz_check(record.text >= begin && record.text + record.token.text_length <= end, "a token's text outside the ring");
                sink = sink + touch(record.text, record.token.text_length);
            } else if (got == COLIBRI_RING_ERROR) {
                fuzz_check(record.body >= begin && record.body + record.error.length <= end, "an error's text outside the ring");
                sink = sink + touch(record.body, record.error.length);
                return 0;
            } else {
                fuzz_check(got == COLIBRI_RING_END, "an unknown result");
                return 0;
            }
        }
    }
    return 0;
}
