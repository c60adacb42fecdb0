#include "gguf.h"

#include <cstring>

#include "tools/gguf_format.h"

namespace colibri::tools {

using nlohmann::json;

namespace {

using namespace gguf;  // the value types, the ggml type table and the file's limits (tools/gguf_format.h)

// A bounds-checked cursor over the mapped file.
class Reader {
public:
    Reader(const uint8_t* p, uint64_t n) : p_(p), n_(n) {}
    bool ok() const { return ok_; }
    uint64_t pos() const { return pos_; }
    const uint8_t* data() const { return p_; }
    void fail_now(std::string why = {}) {
        if (ok_ && !why.empty()) why_ = std::move(why);
        ok_ = false;
    }
    const std::string& why() const { return why_; }
    bool skip(uint64_t n) {
        if (!ok_ || n > n_ - pos_) return ok_ = false;
        pos_ += n;
        return true;
    }
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
    std::string why_;  // set when the failure is not simply running past the end
};

// Moves past an array's scalar or string elements without building them; false when it runs off the file.
bool skip_array(Reader& r, uint32_t item, uint64_t n) {
    if (const uint64_t size = scalar_size(item); size != 0) return n <= UINT64_MAX / size && r.skip(n * size);
    if (item != kString) return false;
    for (uint64_t i = 0; i < n && r.ok(); ++i) {
        const uint64_t len = r.get<uint64_t>();
        if (len > (uint64_t(1) << 30) || !r.skip(len)) return false;  // as Reader::str
    }
    return r.ok();
}

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
            // llama.cpp refuses arrays of arrays; nothing sane is this long or of an unknown type.
            if (depth > 0 || n > (uint64_t(1) << 26) || (item != kString && scalar_size(item) == 0)) {
                r.fail_now("an array of " + std::to_string(n) + " elements of type " + std::to_string(item) +
                           " (at most 2^26 elements of a scalar type or strings)");
                return json();
            }
            const uint64_t start = r.pos();
            if (!skip_array(r, item, n)) {
                r.fail_now();
                return json();
            }
            // The elements' bytes as they are in the file: one allocation the size of the array.
            return json::binary(std::vector<uint8_t>(r.data() + start, r.data() + r.pos()), static_cast<std::uint8_t>(item));
        }
        default: r.str(); return json();  // unknown type: fail the reader below
    }
}

// A key or tensor name from the file as quoted in an error: cut when long, so that a damaged length field
// (which makes the rest of the header one "name") gives a short message.
std::string quoted_name(const std::string& name) {
    constexpr size_t kMax = 96;
    if (name.empty()) return "with an empty name";
    return "'" + (name.size() <= kMax ? name : name.substr(0, kMax) + "... (" + std::to_string(name.size()) + " bytes)") + "'";
}

}  // namespace

namespace {

// Element `i` of a scalar array's bytes, as a double or an int64 (false for strings or out-of-range reads).
template <typename T>
T load(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

bool binary_array(const json& v, uint32_t* type, const std::vector<uint8_t>** bytes) {
    if (!v.is_binary() || !v.get_binary().has_subtype()) return false;
    *type = static_cast<uint32_t>(v.get_binary().subtype());
    *bytes = &static_cast<const std::vector<uint8_t>&>(v.get_binary());
    return true;
}

}  // namespace

std::optional<std::vector<std::string>> gguf_strings(const json& v) {
    std::vector<std::string> out;
    if (v.is_array()) {
        out.reserve(v.size());
        for (const json& s : v) {
            if (!s.is_string()) return std::nullopt;
            out.push_back(s.get<std::string>());
        }
        return out;
    }
    uint32_t type;
    const std::vector<uint8_t>* bytes;
    if (!binary_array(v, &type, &bytes) || type != kString) return std::nullopt;
    Reader r(bytes->data(), bytes->size());
    while (r.pos() < bytes->size()) {
        out.push_back(r.str());
        if (!r.ok()) return std::nullopt;  // cannot happen: the reader checked these bytes when it kept them
    }
    return out;
}

std::optional<std::vector<int64_t>> gguf_integers(const json& v) {
    std::vector<int64_t> out;
    if (v.is_array()) {
        out.reserve(v.size());
        for (const json& x : v) {
            if (!x.is_number_integer()) return std::nullopt;
            if (x.is_number_unsigned() && x.get<uint64_t>() > uint64_t(INT64_MAX)) return std::nullopt;
            out.push_back(x.get<int64_t>());
        }
        return out;
    }
    uint32_t type;
    const std::vector<uint8_t>* bytes;
    if (!binary_array(v, &type, &bytes)) return std::nullopt;
    const uint64_t size = scalar_size(type);
    if (size == 0 || type == kF32 || type == kF64 || type == kBool) return std::nullopt;
    out.reserve(bytes->size() / size);
    for (size_t at = 0; at + size <= bytes->size(); at += size) {
        const uint8_t* p = bytes->data() + at;
        switch (type) {
            case kU8: out.push_back(load<uint8_t>(p)); break;
            case kI8: out.push_back(load<int8_t>(p)); break;
            case kU16: out.push_back(load<uint16_t>(p)); break;
            case kI16: out.push_back(load<int16_t>(p)); break;
            case kU32: out.push_back(load<uint32_t>(p)); break;
            case kI32: out.push_back(load<int32_t>(p)); break;
            case kI64: out.push_back(load<int64_t>(p)); break;
            case kU64: {
                const uint64_t u = load<uint64_t>(p);
                if (u > uint64_t(INT64_MAX)) return std::nullopt;
                out.push_back(static_cast<int64_t>(u));
                break;
            }
        }
    }
    return out;
}

std::optional<std::vector<double>> gguf_reals(const json& v) {
    std::vector<double> out;
    if (v.is_array()) {
        out.reserve(v.size());
        for (const json& x : v) {
            if (!x.is_number()) return std::nullopt;
            out.push_back(x.get<double>());
        }
        return out;
    }
    uint32_t type;
    const std::vector<uint8_t>* bytes;
    if (!binary_array(v, &type, &bytes)) return std::nullopt;
    if (type == kF32 || type == kF64) {
        const uint64_t size = scalar_size(type);
        out.reserve(bytes->size() / size);
        for (size_t at = 0; at + size <= bytes->size(); at += size)
            out.push_back(type == kF32 ? load<float>(bytes->data() + at) : load<double>(bytes->data() + at));
        return out;
    }
    auto ints = gguf_integers(v);
    if (!ints) return std::nullopt;
    out.assign(ints->begin(), ints->end());
    return out;
}

std::string ggml_type_name(uint32_t type) {
    const GgmlTypeInfo* t = ggml_type_info(type);
    return t == nullptr ? "type " + std::to_string(type) : t->name;
}

Result<std::unique_ptr<GgufFile>> GgufFile::open(const std::string& path) {
    auto map = MappedFile::open(path);
    if (!map) return map.status();
    if (map->size() < kHeaderBytes) return error(path + ": not a GGUF file (too short)");
    std::unique_ptr<GgufFile> f(new GgufFile());
    f->map_ = std::move(map.value());
    const uint8_t* base = f->map_.data();
    const uint64_t size = f->map_.size();

    Reader r(base, size);
    if (std::memcmp(base, kMagic, 4) != 0) return error(path + ": not a GGUF file (wrong magic)");
    r.get<uint32_t>();
    f->version_ = r.get<uint32_t>();
    if (f->version_ < kOldestVersion || f->version_ > kVersion) return error(path + ": unsupported GGUF version " + std::to_string(f->version_));
    const uint64_t n_tensors = r.get<uint64_t>(), n_kv = r.get<uint64_t>();
    if (n_tensors > (uint64_t(1) << 24) || n_kv > (uint64_t(1) << 24)) return error(path + ": GGUF header counts are implausible");
    f->metadata_ = json::object();
    uint64_t alignment = kDefaultAlignment;
    for (uint64_t i = 0; i < n_kv && r.ok(); ++i) {
        const std::string key = r.str();
        const uint32_t type = r.get<uint32_t>();
        if (!r.ok()) break;
        if (type > kLastValueType) return error(path + ": GGUF key " + quoted_name(key) + " has unknown type " + std::to_string(type));
        // As llama.cpp: a key given twice would say two things (the last one silently winning).
        if (key.empty() || f->metadata_.contains(key)) return error(path + ": GGUF key " + quoted_name(key) + (key.empty() ? "" : " appears twice"));
        f->metadata_[key] = read_value(r, type, 0);
        // llama.cpp reads general.alignment as a u32 (any other type aborts it) and refuses all but powers of two.
        if (key == "general.alignment" && r.ok()) {
            if (type != kU32) return error(path + ": GGUF general.alignment is not a u32 (llama.cpp requires one)");
            alignment = f->metadata_[key].get<uint32_t>();
            if (alignment == 0 || alignment > kMaxAlignment || (alignment & (alignment - 1)) != 0)
                return error(path + ": GGUF general.alignment " + std::to_string(alignment) + " is not a power of two up to " + std::to_string(kMaxAlignment));
        }
    }
    if (!r.ok()) return error(path + ": GGUF metadata " + (r.why().empty() ? "runs past the end of the file" : "holds " + r.why()));
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
        // ggml keeps names in a char[GGML_MAX_NAME = 64] with its NUL: llama.cpp refuses longer ones.
        if (r.ok() && t.name.size() >= kMaxTensorName)
            return error(path + ": GGUF tensor " + quoted_name(t.name) + " has a name of " + std::to_string(t.name.size()) + " bytes (at most " +
                         std::to_string(kMaxTensorName - 1) + ")");
        const uint32_t n_dims = r.get<uint32_t>();
        if (n_dims == 0 || n_dims > kMaxDims) return error(path + ": GGUF tensor " + quoted_name(t.name) + " has " + std::to_string(n_dims) + " dimensions (1 to 4)");
        for (uint32_t d = 0; d < n_dims; ++d) t.ne.push_back(r.get<uint64_t>());
        t.type = r.get<uint32_t>();
        t.offset = r.get<uint64_t>();
        infos.push_back(std::move(t));
    }
    if (!r.ok()) return error(path + ": GGUF tensor infos run past the end of the file");
    const uint64_t data_start = align_up(r.pos(), alignment);
    // A vocabulary-only file (no tensors) may end right after its metadata, before the alignment padding.
    if (data_start > size && !infos.empty()) return error(path + ": GGUF data section missing");
    const uint64_t data_size = data_start > size ? 0 : size - data_start;
    // llama.cpp's layout: the tensors' data in the order of their infos, each at the end of the one before rounded
    // up to the alignment. So a tensor's declared type and shape cannot make it run into the next one, and no two
    // tensors share bytes.
    uint64_t expected_offset = 0;
    std::string after = "the data section starts";  // where expected_offset comes from, for the error
    for (const Info& t : infos) {
        const GgmlTypeInfo* ti = ggml_type_info(t.type);
        if (ti == nullptr) return error(path + ": GGUF tensor " + quoted_name(t.name) + " has unknown ggml type " + std::to_string(t.type));
        uint64_t n = 1;
        for (uint64_t d : t.ne) {
            if (d == 0 || n > (uint64_t(1) << 48) / d) return error(path + ": GGUF tensor " + quoted_name(t.name) + " has a bad shape");
            n *= d;
        }
        if (t.ne[0] % ti->block != 0) return error(path + ": GGUF tensor " + quoted_name(t.name) + " rows are not whole blocks");
        const uint64_t bytes = n / ti->block * ti->bytes;
        if (t.offset != expected_offset)
            return error(path + ": GGUF tensor " + quoted_name(t.name) + " has offset " + std::to_string(t.offset) + ", expected " +
                         std::to_string(expected_offset) + " (where " + after + ")");
        if (t.offset > data_size || bytes > data_size - t.offset)
            return error(path + ": GGUF tensor " + quoted_name(t.name) + " lies past the end of the file");
        expected_offset = t.offset + align_up(bytes, alignment);  // no overflow: both are below the file size
        after = quoted_name(t.name) + ", " + std::to_string(bytes) + " bytes as " + ggml_type_name(t.type) + ", ends, aligned to " +
                std::to_string(alignment);
        if (!f->tensors_.emplace(t.name, GgufTensor{t.name, t.ne, t.type, base + data_start + t.offset, bytes}).second)
            return error(path + ": GGUF tensor " + quoted_name(t.name) + " appears twice");
    }
    return f;
}

}  // namespace colibri::tools
