#include "gguf.h"


#include <cstring>

namespace colibri::tools {

using nlohmann::json;

namespace {

enum : uint32_t { kU8, kI8, kU16, kI16, kU32, kI32, kF32, kBool, kString, kArray, kU64, kI64, kF64 };

// ggml types: block size in elements and bytes per block.
struct TypeInfo {
    const char* name;
    uint64_t block;
    uint64_t bytes;
};
const std::map<uint32_t, TypeInfo>& type_table() {
    static const std::map<uint32_t, TypeInfo> t = {
        {0, {"f32", 1, 4}},      {1, {"f16", 1, 2}},       {2, {"q4_0", 32, 18}}, {3, {"q4_1", 32, 20}},
        {6, {"q5_0", 32, 22}},   {7, {"q5_1", 32, 24}},    {8, {"q8_0", 32, 34}}, {10, {"q2_k", 256, 84}},
        {11, {"q3_k", 256, 110}}, {12, {"q4_k", 256, 144}}, {13, {"q5_k", 256, 176}}, {14, {"q6_k", 256, 210}},
        {30, {"bf16", 1, 2}},    {39, {"mxfp4", 32, 17}},
    };
    return t;
}

// A bounds-checked cursor over the mapped file.
class Reader {
public:
    Reader(const uint8_t* p, uint64_t n) : p_(p), n_(n) {}
    bool ok() const { return ok_; }
    uint64_t pos() const { return pos_; }
    template <typename T>
    T get() {
        T v{};
        if (!ok_ || n_ - pos_ < sizeof(T)) return fail<T>();
        std::memcpy(&v, p_ + pos_, sizeof(T));
        pos_ += sizeof(T);
        return v;
    }
    std::string str() {
        const uint64_t len = get<uint64_t>();
        if (!ok_ || len > n_ - pos_ || len > (uint64_t(1) << 30)) return fail<std::string>();
        std::string s(reinterpret_cast<const char*>(p_ + pos_), len);
        pos_ += len;
        return s;
    }

private:
    template <typename T>
    T fail() {
        ok_ = false;
        return T{};
    }
    const uint8_t* p_;
    uint64_t n_, pos_ = 0;
    bool ok_ = true;
};

json read_value(Reader& r, uint32_t type, int depth) {
    switch (type) {
        case kU8: return r.get<uint8_t>();
        case kI8: return r.get<int8_t>();
        case kU16: return r.get<uint16_t>();
        case kI16: return r.get<int16_t>();
        case kU32: return r.get<uint32_t>();
        case kI32: return r.get<int32_t>();
        case kF32: return r.get<float>();
        case kBool: return r.get<uint8_t>() != 0;
        case kString: return r.str();
        case kU64: return r.get<uint64_t>();
        case kI64: return r.get<int64_t>();
        case kF64: return r.get<double>();
        case kArray: {
            const uint32_t item = r.get<uint32_t>();
            const uint64_t n = r.get<uint64_t>();
            if (depth > 2 || n > (uint64_t(1) << 26)) {
                r.get<uint8_t>();  // nothing sane is this deep or long
                return json();
            }
            json a = json::array();
            for (uint64_t i = 0; i < n && r.ok(); ++i) a.push_back(read_value(r, item, depth + 1));
            return a;
        }
        default: r.str(); return json();  // unknown type: fail the reader below
    }
}

// A key or tensor name from the file as quoted in an error: cut when long, so that a damaged length field
// (which makes the rest of the header one "name") gives a short message.
std::string quoted_name(const std::string& name) {
    constexpr size_t kMax = 96;
    return name.size() <= kMax ? name : name.substr(0, kMax) + "... (" + std::to_string(name.size()) + " bytes)";
}

}  // namespace

std::string ggml_type_name(uint32_t type) {
    auto it = type_table().find(type);
    return it == type_table().end() ? "type " + std::to_string(type) : it->second.name;
}

Result<std::unique_ptr<GgufFile>> GgufFile::open(const std::string& path) {
    auto map = MappedFile::open(path);
    if (!map) return map.status();
    if (map->size() < 24) return error(path + ": not a GGUF file (too short)");
    std::unique_ptr<GgufFile> f(new GgufFile());
    f->map_ = std::move(map.value());
    const uint8_t* base = f->map_.data();
    const uint64_t size = f->map_.size();

    Reader r(base, size);
    if (std::memcmp(base, "GGUF", 4) != 0) return error(path + ": not a GGUF file (wrong magic)");
    r.get<uint32_t>();
    f->version_ = r.get<uint32_t>();
    if (f->version_ != 2 && f->version_ != 3) return error(path + ": unsupported GGUF version " + std::to_string(f->version_));
    const uint64_t n_tensors = r.get<uint64_t>(), n_kv = r.get<uint64_t>();
    if (n_tensors > (uint64_t(1) << 24) || n_kv > (uint64_t(1) << 24)) return error(path + ": GGUF header counts are implausible");
    f->metadata_ = json::object();
    for (uint64_t i = 0; i < n_kv && r.ok(); ++i) {
        const std::string key = r.str();
        const uint32_t type = r.get<uint32_t>();
        if (type > kF64) return error(path + ": GGUF key " + quoted_name(key) + " has unknown type " + std::to_string(type));
        f->metadata_[key] = read_value(r, type, 0);
    }
    if (!r.ok()) return error(path + ": GGUF metadata runs past the end of the file");
    struct Info {
        std::string name;
        std::vector<uint64_t> ne;
        uint32_t type;
        uint64_t offset;
    };
    std::vector<Info> infos;
    for (uint64_t i = 0; i < n_tensors && r.ok(); ++i) {
        Info t;
        t.name = r.str();
        const uint32_t n_dims = r.get<uint32_t>();
        if (n_dims == 0 || n_dims > 4) return error(path + ": GGUF tensor " + quoted_name(t.name) + " has " + std::to_string(n_dims) + " dims");
        for (uint32_t d = 0; d < n_dims; ++d) t.ne.push_back(r.get<uint64_t>());
        t.type = r.get<uint32_t>();
        t.offset = r.get<uint64_t>();
        infos.push_back(std::move(t));
    }
    if (!r.ok()) return error(path + ": GGUF tensor infos run past the end of the file");
    uint64_t alignment = 32;
    if (f->metadata_.contains("general.alignment") && f->metadata_["general.alignment"].is_number_unsigned())
        alignment = f->metadata_["general.alignment"].get<uint64_t>();
    if (alignment == 0 || alignment > 65536 || (alignment & (alignment - 1)) != 0) return error(path + ": bad GGUF alignment");
    const uint64_t data_start = (r.pos() + alignment - 1) / alignment * alignment;
    // A vocabulary-only file (no tensors) may end right after its metadata, before the alignment padding.
    if (data_start > size && !infos.empty()) return error(path + ": GGUF data section missing");
    const uint64_t data_size = data_start > size ? 0 : size - data_start;
    for (const Info& t : infos) {
        auto ti = type_table().find(t.type);
        if (ti == type_table().end()) return error(path + ": GGUF tensor " + quoted_name(t.name) + " has unknown ggml type " + std::to_string(t.type));
        uint64_t n = 1;
        for (uint64_t d : t.ne) {
            if (d == 0 || n > (uint64_t(1) << 48) / d) return error(path + ": GGUF tensor " + quoted_name(t.name) + " has a bad shape");
            n *= d;
        }
        if (t.ne[0] % ti->second.block != 0) return error(path + ": GGUF tensor " + quoted_name(t.name) + " rows are not whole blocks");
        const uint64_t bytes = n / ti->second.block * ti->second.bytes;
        if (t.offset > data_size || bytes > data_size - t.offset)
            return error(path + ": GGUF tensor " + quoted_name(t.name) + " lies past the end of the file");
        if (!f->tensors_.emplace(t.name, GgufTensor{t.name, t.ne, t.type, base + data_start + t.offset, bytes}).second)
            return error(path + ": GGUF tensor " + quoted_name(t.name) + " appears twice");
    }
    return f;
}

}  // namespace colibri::tools
