// The BPE model (the tokenizers crate's models::bpe): a word becomes its characters' ids (or bytes, or the unknown
// token), merged pair by pair in the order of the merges' ranks.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <xxhash.h>

#include "engine/text/tokenizer/parse_support.h"

namespace colibri::tokenizer_parts {

struct StrHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
template <class V>
using StrMap = std::unordered_map<std::string, V, StrHash, std::equal_to<>>;

// Open-addressing map from a pair of ids to (rank, merged id).
class MergeMap {
public:
    void reserve(size_t n) {
        size_t cap = 16;
        while (cap < n * 2) cap <<= 1;
        keys_.assign(cap, kEmpty);
        vals_.assign(cap, {0, 0});
        mask_ = cap - 1;
    }
    void put(int32_t a, int32_t b, uint32_t rank, int32_t id) {
        const uint64_t k = key(a, b);
        size_t i = hash(k) & mask_;
        while (keys_[i] != kEmpty && keys_[i] != k) i = (i + 1) & mask_;
        keys_[i] = k;
        vals_[i] = {rank, id};
    }
    bool get(int32_t a, int32_t b, uint32_t* rank, int32_t* id) const {
        if (keys_.empty()) return false;
        const uint64_t k = key(a, b);
        size_t i = hash(k) & mask_;
        while (keys_[i] != kEmpty) {
            if (keys_[i] == k) {
                *rank = vals_[i].first;
                *id = vals_[i].second;
                return true;
            }
            i = (i + 1) & mask_;
        }
        return false;
    }
    size_t capacity() const { return keys_.size(); }

private:
    static constexpr uint64_t kEmpty = ~0ull;
    static uint64_t key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
    static size_t hash(uint64_t k) {
        k ^= k >> 33;
        k *= 0xff51afd7ed558ccdULL;
        k ^= k >> 33;
        k *= 0xc4ceb9fe1a85ec53ULL;
        k ^= k >> 33;
        return static_cast<size_t>(k);
    }
    std::vector<uint64_t> keys_;
    std::vector<std::pair<uint32_t, int32_t>> vals_;
    size_t mask_ = 0;
};

// Piece -> id: open addressing over a 64-bit hash, the keys in one buffer. Loading gpt-oss's 446k merges looks up
// 1.3M pieces; with a node-based map every probe was a cache miss (a fifth of the load time).
class PieceIndex {
public:
    void reserve(size_t n) {
        size_t cap = 16;
        while (cap < n * 2) cap <<= 1;
        rehash(cap);
    }
    // Inserts the piece, or gives an existing one the new id (a later duplicate in vocab wins, as in a JSON object).
    void assign(std::string_view key, int32_t id) {
        if ((count_ + 1) * 2 > slots_.size()) rehash(std::max<size_t>(16, slots_.size() * 2));
        const uint64_t h = XXH3_64bits(key.data(), key.size());
        size_t i = h & mask_;
        for (; slots_[i].id >= 0; i = (i + 1) & mask_)
            if (slots_[i].hash == h && text(slots_[i]) == key) {
                slots_[i].id = id;
                return;
            }
        if (keys_.size() + key.size() > UINT32_MAX) throw std::length_error("the vocabulary's pieces exceed 4 GiB");
        slots_[i] = {h, static_cast<uint32_t>(keys_.size()), static_cast<uint32_t>(key.size()), id};
        keys_.append(key);
        ++count_;
    }
    int32_t find(std::string_view key) const {
        if (count_ == 0) return -1;
        const uint64_t h = XXH3_64bits(key.data(), key.size());
        for (size_t i = h & mask_; slots_[i].id >= 0; i = (i + 1) & mask_)
            if (slots_[i].hash == h && text(slots_[i]) == key) return slots_[i].id;
        return -1;
    }
    size_t size() const { return count_; }
    template <class F>
    void for_each(F&& f) const {
        for (const Slot& s : slots_)
            if (s.id >= 0) f(text(s), s.id);
    }

private:
    struct Slot {
        uint64_t hash;
        uint32_t off, len;
        int32_t id;  // -1: empty
    };
    std::string_view text(const Slot& s) const { return std::string_view(keys_).substr(s.off, s.len); }
    void rehash(size_t cap) {
        std::vector<Slot> old = std::move(slots_);
        slots_.assign(cap, Slot{0, 0, 0, -1});
        mask_ = cap - 1;
        for (const Slot& s : old) {
            if (s.id < 0) continue;
            size_t i = s.hash & mask_;
            while (slots_[i].id >= 0) i = (i + 1) & mask_;
            slots_[i] = s;
        }
    }
    std::vector<Slot> slots_;
    std::string keys_;
    size_t count_ = 0, mask_ = 0;
};

struct Bpe {
    PieceIndex vocab;
    std::vector<std::string> vocab_r;  // id -> piece ("" for a hole)
    std::vector<uint8_t> has_id;
    MergeMap merges;
    int32_t unk_id = -1;
    bool fuse_unk = false, byte_fallback = false, ignore_merges = false;
    std::optional<std::string> prefix, suffix;
    std::array<int32_t, 256> byte_ids{};

    static constexpr size_t kCacheMaxWordLen = 256;
    static constexpr size_t kCacheCapacity = 100000;
    mutable std::mutex cache_mu;
    mutable StrMap<std::vector<int32_t>> cache;

    int32_t find(std::string_view s) const { return vocab.find(s); }

    struct Symbol {
        int32_t id;
        int32_t prev, next;
        uint32_t len;
    };
    struct Merge {
        uint32_t rank;
        int32_t pos;
        int32_t new_id;
        bool operator<(const Merge& o) const {  // priority_queue pops the largest: lowest rank, then lowest pos
            if (rank != o.rank) return rank > o.rank;
            return pos > o.pos;
        }
    };

    void merge_word(std::string_view w, std::vector<int32_t>& out) const;
    // Appends the ids of one word; words shorter than kCacheMaxWordLen are remembered.
    void tokenize(std::string_view w, std::vector<int32_t>& out) const;
};

struct StreamedModel;
// The "model" object of tokenizer.json with its streamed vocab and merges (consumed).
void parse_bpe(const json& m, StreamedModel& st, Bpe& bpe);

}  // namespace colibri::tokenizer_parts
