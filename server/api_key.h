// The API key check both front ends share (HTTP's Bearer key, the local socket's HELLO).
#pragma once
#include <algorithm>
#include <string>

namespace colibri::server {

// Compares in a time that depends only on the lengths, so that a wrong key's timing does not reveal a prefix.
inline bool constant_time_equal(const std::string& a, const std::string& b) {
    unsigned char diff = a.size() == b.size() ? 0 : 1;
    for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i % std::max<size_t>(b.size(), 1)]);
    return diff == 0;
}

}  // namespace colibri::server
