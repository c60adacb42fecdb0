// Where every field of a GGUF file's header, key/values and tensor infos lies, for test tooling: the seed
// maker slims the reference GGUF with it and the corruption sweep truncates and flips bytes at its field
// boundaries; write_gguf() lays a file out again, as llama.cpp requires, after a test changed its tensors. The
// converter's own reader is tools/gguf.cpp; this one only walks well-formed files.
#pragma once
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "tools/gguf_format.h"

namespace colibri::fuzz {

struct GgufKv {
    std::string key;
    uint32_t type = 0;
    uint64_t begin = 0;     // the key's length field
    uint64_t type_at = 0;   // the value type
    uint64_t value_at = 0;  // the value; for arrays: item type, then count, then the items
    uint64_t end = 0;
    uint32_t item_type = 0;       // arrays only
    uint64_t count = 0;           // arrays only
    std::vector<uint64_t> items;  // arrays only: where each item starts
};

struct GgufTensorInfo {
    std::string name;
    std::vector<uint64_t> ne;
    uint32_t type = 0;
    uint64_t offset = 0;           // relative to the data section
    std::vector<uint64_t> fields;  // start of each field: name length, name, n_dims, each ne, type, offset; then the end
};

struct GgufLayout {
    uint32_t version = 0;
    std::vector<GgufKv> kvs;
    std::vector<GgufTensorInfo> infos;
    uint64_t infos_end = 0;  // first byte after the last tensor info
    uint64_t alignment = gguf::kDefaultAlignment;
    uint64_t data_start = 0;
};

namespace gguf_layout_detail {

class Cursor {
public:
    Cursor(const uint8_t* p, uint64_t n) : p_(p), n_(n) {}
    uint64_t pos() const { return pos_; }
    bool ok() const { return ok_; }
    template <typename T>
    T get() {
        T v{};
        if (!ok_ || n_ - pos_ < sizeof(T)) {
            ok_ = false;
            return v;
        }
        std::memcpy(&v, p_ + pos_, sizeof(T));
        pos_ += sizeof(T);
        return v;
    }
    std::string str() {
        const uint64_t len = get<uint64_t>();
        if (!ok_ || len > n_ - pos_) {
            ok_ = false;
            return {};
        }
        std::string s(reinterpret_cast<const char*>(p_ + pos_), len);
        pos_ += len;
        return s;
    }
    void skip_scalar(uint32_t type) {
        const uint64_t size = gguf::scalar_size(type);
        if (type == gguf::kString) {
            str();
        } else if (size != 0 && n_ - pos_ >= size) {
            pos_ += size;
        } else {
            ok_ = false;
        }
    }

private:
    const uint8_t* p_;
    uint64_t n_, pos_ = 0;
    bool ok_ = true;
};

}  // namespace gguf_layout_detail

// Nullopt when the file is not a GGUF this walker understands (nested arrays are not used by llama.cpp).
inline std::optional<GgufLayout> parse_gguf_layout(const uint8_t* p, uint64_t n) {
    gguf_layout_detail::Cursor c(p, n);
    GgufLayout g;
    if (n < gguf::kHeaderBytes || std::memcmp(p, gguf::kMagic, 4) != 0) return std::nullopt;
    c.get<uint32_t>();
    g.version = c.get<uint32_t>();
    const uint64_t n_tensors = c.get<uint64_t>(), n_kv = c.get<uint64_t>();
    for (uint64_t i = 0; i < n_kv && c.ok(); ++i) {
        GgufKv kv;
        kv.begin = c.pos();
        kv.key = c.str();
        kv.type_at = c.pos();
        kv.type = c.get<uint32_t>();
        kv.value_at = c.pos();
        if (kv.type == gguf::kArray) {
            kv.item_type = c.get<uint32_t>();
            kv.count = c.get<uint64_t>();
            if (kv.item_type == gguf::kArray || kv.count > n) return std::nullopt;
            for (uint64_t k = 0; k < kv.count && c.ok(); ++k) {
                kv.items.push_back(c.pos());
                c.skip_scalar(kv.item_type);
            }
        } else {
            if (kv.key == "general.alignment" && kv.type == gguf::kU32) {
                g.alignment = c.get<uint32_t>();
            } else {
                c.skip_scalar(kv.type);
            }
        }
        kv.end = c.pos();
        g.kvs.push_back(std::move(kv));
    }
    for (uint64_t i = 0; i < n_tensors && c.ok(); ++i) {
        GgufTensorInfo t;
        t.fields.push_back(c.pos());
        const uint64_t name_len = c.get<uint64_t>();
        t.fields.push_back(c.pos());
        if (!c.ok() || name_len > n - c.pos()) return std::nullopt;
        t.name.assign(reinterpret_cast<const char*>(p + c.pos()), name_len);
        for (uint64_t k = 0; k < name_len; ++k) c.get<uint8_t>();
        t.fields.push_back(c.pos());
        const uint32_t n_dims = c.get<uint32_t>();
        if (n_dims > gguf::kMaxDims) return std::nullopt;
        for (uint32_t d = 0; d < n_dims; ++d) {
            t.fields.push_back(c.pos());
            t.ne.push_back(c.get<uint64_t>());
        }
        t.fields.push_back(c.pos());
        t.type = c.get<uint32_t>();
        t.fields.push_back(c.pos());
        t.offset = c.get<uint64_t>();
        t.fields.push_back(c.pos());
        g.infos.push_back(std::move(t));
    }
    if (!c.ok() || g.alignment == 0) return std::nullopt;
    g.infos_end = c.pos();
    g.data_start = (g.infos_end + g.alignment - 1) / g.alignment * g.alignment;
    return g;
}

// A tensor for write_gguf: its info and its data.
struct GgufTensorData {
    std::string name;
    std::vector<uint64_t> ne;
    uint32_t type = 0;
    std::string data;
};

// The tensors of a parsed file, with their data (each tensor's bytes up to the next one's, or the file's, end: the
// alignment padding included, which write_gguf drops again).
inline std::vector<GgufTensorData> gguf_tensors(const std::string& file, const GgufLayout& g) {
    std::vector<GgufTensorData> out;
    for (size_t i = 0; i < g.infos.size(); ++i) {
        const GgufTensorInfo& t = g.infos[i];
        const uint64_t begin = g.data_start + t.offset;
        const uint64_t end = i + 1 < g.infos.size() ? g.data_start + g.infos[i + 1].offset : file.size();
        out.push_back({t.name, t.ne, t.type, begin < end && end <= file.size() ? file.substr(begin, end - begin) : std::string()});
    }
    return out;
}

// A GGUF file with the header and key/values of `file` (n_kv records, as they are there, or `kv_bytes` instead when
// given) and these tensors, laid out as llama.cpp requires: each tensor's data where the one before it ends, rounded
// up to the alignment. `data_bytes(t)` says how many of a tensor's data bytes are its own (the rest is padding).
template <typename DataBytes>
std::string write_gguf(const std::string& file, const GgufLayout& g, const std::vector<GgufTensorData>& tensors, DataBytes data_bytes,
                       const std::string* kv_bytes = nullptr, uint64_t n_kv = 0) {
    auto put_u32 = [](std::string& s, uint32_t v) { s.append(reinterpret_cast<const char*>(&v), 4); };
    auto put_u64 = [](std::string& s, uint64_t v) { s.append(reinterpret_cast<const char*>(&v), 8); };
    auto pad_to = [&](std::string& s) { s.append((g.alignment - s.size() % g.alignment) % g.alignment, '\0'); };
    std::string s = file.substr(0, 8);  // magic and version
    put_u64(s, tensors.size());
    if (kv_bytes != nullptr) {
        put_u64(s, n_kv);
        s += *kv_bytes;
    } else {
        put_u64(s, g.kvs.size());
        if (!g.kvs.empty()) s += file.substr(g.kvs.front().begin, g.kvs.back().end - g.kvs.front().begin);
    }
    std::string data;
    for (const GgufTensorData& t : tensors) {
        pad_to(data);
        put_u64(s, t.name.size());
        s += t.name;
        put_u32(s, static_cast<uint32_t>(t.ne.size()));
        for (uint64_t d : t.ne) put_u64(s, d);
        put_u32(s, t.type);
        put_u64(s, data.size());
        data += t.data.substr(0, data_bytes(t));
    }
    pad_to(s);
    return s + data;
}

}  // namespace colibri::fuzz
