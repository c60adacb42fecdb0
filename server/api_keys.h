// The API keys a server accepts (`colibri serve --api-key`, repeatable). Each key is its own tenant: a slot's
// KV cache serves a later request's prompt prefix only when the same key sent it (JobSpec::cache_scope), so
// that no client can learn from cached_tokens or the prompt's timing how much of its guess another one sent.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace colibri::server {

class ApiKeys {
public:
    ApiKeys() = default;
    explicit ApiKeys(std::vector<std::string> keys) : keys_(std::move(keys)) {
        std::erase_if(keys_, [](const std::string& k) { return k.empty(); });
    }
    bool required() const { return !keys_.empty(); }

    // The cache scope of a request's "Authorization" value ("Bearer KEY"): 1 + the matching key's index, 0 when
    // none matches (a refused request) or no key is required (every request shares scope 0). Every key is
    // compared in full, so the time taken says nothing about which key, or how much of one, matched.
    uint32_t scope_of(std::string_view authorization) const {
        static constexpr std::string_view kBearer = "Bearer ";
        if (keys_.empty()) return 0;
        const bool bearer = authorization.substr(0, kBearer.size()) == kBearer;
        const uint32_t scope = scope_of_key(bearer ? authorization.substr(kBearer.size()) : std::string_view());
        return bearer ? scope : 0;
    }
    // The same for a key given as it is (the local socket's HELLO).
    uint32_t scope_of_key(std::string_view given) const {
        uint32_t scope = 0;
        for (size_t i = 0; i < keys_.size(); ++i)
            if (equal(given, keys_[i])) scope = static_cast<uint32_t>(i + 1);
        return scope;
    }

private:
    static bool equal(std::string_view given, std::string_view key) {
        unsigned char diff = given.size() == key.size() ? 0 : 1;
        for (size_t i = 0; i < key.size(); ++i) diff |= static_cast<unsigned char>(key[i] ^ (i < given.size() ? given[i] : 0));
        return diff == 0;
    }
    std::vector<std::string> keys_;
};

}  // namespace colibri::server
