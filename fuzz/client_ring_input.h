// The input of fuzz_client_ring, shared with the program that makes its seeds (make_ring_seeds.cpp): this
// header, then the ring's bytes (cut to the ring's size, or zero-filled up to it).
#pragma once
#include <cstdint>

namespace colibri::fuzz {

struct ClientRingInput {
    uint8_t ring_log2;   // the ring holds 8 << (ring_log2 % 14) bytes: 8 B to 64 KiB
    uint8_t heads;       // how many of head[] the server publishes, one after another (at most 4)
    uint8_t pad[6];
    uint64_t tail;       // where the reader starts
    uint64_t head[4];
};
static_assert(sizeof(ClientRingInput) == 48);

inline uint32_t client_ring_bytes(const ClientRingInput& in) { return 8u << (in.ring_log2 % 14); }

}  // namespace colibri::fuzz
