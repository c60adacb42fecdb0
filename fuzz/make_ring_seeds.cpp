// colibri-fuzz-ring-seeds OUT_DIR: seeds for fuzz_client_ring, written with the server's own ring writer
// (server/local_ring.h): a reply published in three steps, one that wraps around the ring's end, an error, a
// client that stopped reading (the request cut off with the record kept for it), a 64 KiB ring, and the forged
// record of issue 31 (a record at the ring's end that claims the whole ring).
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "client_ring_input.h"
#include "server/local_ring.h"

using colibri::fuzz::ClientRingInput;
using colibri::server::RingWriter;

namespace {

// A ring and its writer, as the server has them for one connection.
struct Ring {
    explicit Ring(uint8_t log2) : bytes(8u << log2), data(bytes, 0), writer(&segment, data.data(), bytes, &page) { input.ring_log2 = log2; }
    uint32_t bytes;
    std::vector<uint8_t> data;
    colibri_reply_segment segment{};
    colibri_client_page page{};
    RingWriter writer;
    ClientRingInput input{};

    bool token(int32_t id, const std::string& text) {
        const colibri_token_record t{id, -0.5f, static_cast<uint32_t>(text.size()), static_cast<uint32_t>(id)};
        return writer.write(COLIBRI_RECORD_TOKEN, &t, sizeof t, text.data(), text.size());
    }
    void end() {
        const colibri_end_record e{1, 12, 0, 30, 0.1, 2.0, 30.0};
        writer.write(COLIBRI_RECORD_END, &e, sizeof e, nullptr, 0, true);
    }
    void publish() { input.head[input.heads++] = writer.head(); }
    // The client read everything so far (a request before this one).
    void consume() { page.tail = input.tail = writer.head(); }
};

bool save(const std::string& path, const Ring& r) {
    FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) return false;
    const bool ok = std::fwrite(&r.input, sizeof r.input, 1, f) == 1 && std::fwrite(r.data.data(), 1, r.data.size(), f) == r.data.size();
    return std::fclose(f) == 0 && ok;
}

const char* const kWords[] = {"Once", " upon", " a", " time", ",", " a", " small", " hummingbird", " named", " Colibri",
                              " flew", " over", " the", " hills", " \xe2\x80\x94", " fast", " and", " bright", ".", "\n"};

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) return std::fprintf(stderr, "usage: colibri-fuzz-ring-seeds OUT_DIR\n"), 2;
    const std::string out = argv[1];
    bool ok = true;

    Ring reply(9);  // 4 KiB, a reply published in three steps
    for (int i = 0; i < 30; ++i) {
        reply.token(i, kWords[i % 20]);
        if (i % 10 == 9 && i < 29) reply.publish();
    }
    reply.end();
    reply.publish();
    ok = save(out + "/reply.seed", reply) && ok;

    Ring wrap(9);  // earlier requests brought the head near the end: this reply wraps (a PAD record first)
    while (wrap.writer.head() % wrap.bytes < wrap.bytes - 200) {
        wrap.token(1, " filler text of an earlier request");
        wrap.consume();
    }
    for (int i = 0; i < 12; ++i) wrap.token(i, kWords[i]);
    wrap.end();
    wrap.publish();
    ok = save(out + "/wrap.seed", wrap) && ok;

    Ring failed(9);  // a request that failed after two tokens
    failed.token(0, "Hi");
    failed.token(1, " there");
    const std::string body = R"({"error":{"message":"the engine failed","type":"server_error","param":null,"code":null}})";
    const colibri_error_record e{500, static_cast<uint32_t>(body.size())};
    failed.writer.write(COLIBRI_RECORD_ERROR, &e, sizeof e, body.data(), body.size(), true);
    failed.publish();
    ok = save(out + "/error.seed", failed) && ok;

    Ring stalled(9);  // the client stopped reading: tokens until the ring is full, then the error kept room for
    int n = 0;
    while (stalled.token(n, kWords[n % 20])) ++n;
    const std::string cut = R"({"error":{"message":"the client did not read its ring; the request was cancelled"}})";
    const colibri_error_record c{429, static_cast<uint32_t>(cut.size())};
    stalled.writer.write(COLIBRI_RECORD_ERROR, &c, sizeof c, cut.data(), cut.size(), true);
    stalled.publish();
    ok = save(out + "/stalled.seed", stalled) && ok;

    Ring large(13);  // 64 KiB, long texts
    for (int i = 0; i < 200; ++i) large.token(i, std::string(kWords[i % 20]) + std::string(static_cast<size_t>(i % 37), 'x'));
    large.end();
    large.publish();
    ok = save(out + "/large.seed", large) && ok;

    Ring forged(9);  // issue 31: a token record at the ring's last 8 bytes that claims the whole ring
    const uint32_t pos = forged.bytes - 8;
    const colibri_record_header h{forged.bytes, COLIBRI_RECORD_TOKEN, 0};
    std::memcpy(forged.data.data() + pos, &h, sizeof h);
    forged.input.tail = pos;
    forged.input.head[0] = pos + forged.bytes;
    forged.input.heads = 1;
    ok = save(out + "/forged.seed", forged) && ok;

    if (!ok) return std::fprintf(stderr, "colibri-fuzz-ring-seeds: cannot write the seeds to %s\n", out.c_str()), 1;
    return n > 0 ? 0 : 1;
}
