#include <cmath>

#include "safetensors.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <unordered_set>

#include "engine/base/json_depth.h"
#include "engine/file/mapped_file.h"
#include "engine/file/temp_output.h"
#include "kernels/half.h"

namespace colibri::tools {

using nlohmann::json;

uint64_t SourceTensor::elements() const {
    uint64_t n = 1;
    for (uint64_t d : shape) n *= d;
    return n;
}

uint64_t source_index(const SourceTensor& t, uint64_t i) {
    const uint64_t cols = t.shape.size() == 2 ? t.shape[1] : 1;
    if (t.viewed) {
        const SourceTensor::View& v = t.view;
        const uint64_t r = i / cols, c = i % cols;
        const uint64_t per = v.rows_per_block ? v.rows_per_block : UINT64_MAX;
        return v.offset + (r / per) * v.block_stride + (r % per) * v.row_stride + c * v.col_stride;
    }
    if (t.row_order.empty() && t.col_order.empty()) return i;
    const uint64_t r = t.row_order.empty() ? i / cols : t.row_order[i / cols];
    return r * cols + (t.col_order.empty() ? i % cols : t.col_order[i % cols]);
}

float source_element(const SourceTensor& t, uint64_t i) {
    i = source_index(t, i);
    float f = 0.0f;
    switch (t.dtype) {
        case SourceDType::F32: std::memcpy(&f, t.data + i * 4, 4); break;
        case SourceDType::F16: {
            uint16_t h;
            std::memcpy(&h, t.data + i * 2, 2);
            f = kernels::f16_to_f32(h);
            break;
        }
        case SourceDType::BF16: {
            uint16_t h;
            std::memcpy(&h, t.data + i * 2, 2);
            f = kernels::bf16_to_f32(h);
            break;
        }
    }
    switch (t.value_map) {
        case SourceTensor::ValueMap::Same: return f;
        case SourceTensor::ValueMap::PlusOne: return f + 1.0f;
        case SourceTensor::ValueMap::NegExp: return -std::exp(f);
    }
    return f;
}

namespace {

// A SAX pass that finds the first key given twice in one object, in time linear in the text. (nlohmann's parse
// callback cannot do it: its DOM builder rescans the whole parent object whenever a nested value ends, so a
// header of 100,000 entries took over 15 minutes.)
class RepeatedKeyFinder {
public:
    const std::string& repeated() const { return repeated_; }
    bool repeated_at_top() const { return repeated_depth_ == 1; }

    bool null() { return true; }
    bool boolean(bool) { return true; }
    bool number_integer(json::number_integer_t) { return true; }
    bool number_unsigned(json::number_unsigned_t) { return true; }
    bool number_float(json::number_float_t, const json::string_t&) { return true; }
    bool string(json::string_t&) { return true; }
    bool binary(json::binary_t&) { return true; }
    bool start_object(std::size_t) {
        keys_.emplace_back();
        return true;
    }
    bool key(json::string_t& k) {
        if (repeated_.empty() && !keys_.back().insert(k).second) {
            repeated_ = k;
            repeated_depth_ = keys_.size();
        }
        return true;
    }
    bool end_object() {
        keys_.pop_back();
        return true;
    }
    bool start_array(std::size_t) { return true; }
    bool end_array() { return true; }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) { return false; }

private:
    std::vector<std::unordered_set<std::string>> keys_;  // keys seen in each open object, innermost last
    std::string repeated_;
    size_t repeated_depth_ = 0;  // objects open around the repeated key (1: the header itself)
};

}  // namespace

void release_source_pages(const SourceTensor& t) {
    const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t begin = (reinterpret_cast<uintptr_t>(t.data) + page - 1) / page * page;
    const uintptr_t end = (reinterpret_cast<uintptr_t>(t.data) + t.size) / page * page;
    if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
    auto map = MappedFile::open(path);
    if (!map) return map.status();
    if (map->size() < 8) return error(path + ": not a safetensors file (too short)");
    std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
    f->path_ = path;
    f->map_ = std::move(map.value());
    const uint8_t* base = f->map_.data();
    const uint64_t size = f->map_.size();

    uint64_t header_len;
    std::memcpy(&header_len, base, 8);
    if (header_len > size - 8 || header_len > (uint64_t(100) << 20))
        return error(path + ": safetensors header length " + std::to_string(header_len) + " exceeds the file");
    const std::string_view header_text(reinterpret_cast<const char*>(base + 8), header_len);
    if (const std::string why = json_text_problem(header_text); !why.empty()) return error(path + ": safetensors header " + why);
    // A name given twice would silently keep the last entry: the file says two things about one tensor.
    RepeatedKeyFinder repeats;
    if (!json::sax_parse(header_text.begin(), header_text.end(), &repeats)) return error(path + ": safetensors header is not valid JSON");
    if (!repeats.repeated().empty())
        return error(path + ": safetensors header names " + (repeats.repeated_at_top() ? "tensor '" : "'") + repeats.repeated() + "' twice");
    json header = json::parse(header_text, nullptr, false);
    if (header.is_discarded()) return error(path + ": safetensors header is not valid JSON");
    if (!header.is_object()) return error(path + ": safetensors header is not a JSON object");
    const uint64_t data_start = 8 + header_len;
    const uint64_t data_size = size - data_start;
    for (auto it = header.begin(); it != header.end(); ++it) {
        if (it.key() == "__metadata__") continue;
        const std::string& name = it.key();
        const json& e = it.value();
        const std::string where = path + ": safetensors tensor " + name;
        if (!e.is_object() || !e.contains("dtype") || !e["dtype"].is_string() || !e.contains("shape") ||
            !e["shape"].is_array() || !e.contains("data_offsets") || !e["data_offsets"].is_array() ||
            e["data_offsets"].size() != 2)
            return error(where + ": malformed header entry");
        SourceTensor t;
        t.name = name;
        const std::string dtype = e["dtype"];
        uint64_t elem = 0;
        if (dtype == "F32") { t.dtype = SourceDType::F32; elem = 4; }
        else if (dtype == "F16") { t.dtype = SourceDType::F16; elem = 2; }
        else if (dtype == "BF16") { t.dtype = SourceDType::BF16; elem = 2; }
        else return error(where + ": unsupported dtype " + dtype + " (f32, f16 and bf16 are supported)");
        uint64_t n = 1;
        for (const json& d : e["shape"]) {
            if (!d.is_number_unsigned()) return error(where + ": shape is not a list of sizes");
            const uint64_t v = d.get<uint64_t>();
            if (v != 0 && n > (uint64_t(1) << 50) / v) return error(where + ": shape too large");
            n *= v;
            t.shape.push_back(v);
        }
        const json& off = e["data_offsets"];
        if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned()) return error(where + ": bad data_offsets");
        const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
        if (begin > end || end > data_size)
            return error(where + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                         ") exceed the data section (" + std::to_string(data_size) + " bytes)");
        if (end - begin != n * elem)
            return error(where + ": shape needs " + std::to_string(n * elem) + " bytes but data_offsets give " +
                         std::to_string(end - begin));
        t.data = base + data_start + begin;
        t.size = end - begin;
        f->tensors_.emplace(name, std::move(t));
    }
    // Two tensors sharing bytes are a damaged or hostile header, not two tensors.
    std::vector<const SourceTensor*> by_offset;
    for (const auto& [name, t] : f->tensors_)
        if (t.size > 0) by_offset.push_back(&t);
    std::sort(by_offset.begin(), by_offset.end(), [](const SourceTensor* a, const SourceTensor* b) { return a->data < b->data; });
    for (size_t i = 1; i < by_offset.size(); ++i)
        if (by_offset[i - 1]->data + by_offset[i - 1]->size > by_offset[i]->data)
            return error(path + ": safetensors tensors " + by_offset[i - 1]->name + " and " + by_offset[i]->name + " overlap");
    return f;
}

Result<SafetensorsSet> SafetensorsSet::open_dir(const std::string& dir) {
    namespace fs = std::filesystem;
    SafetensorsSet set;
    std::vector<std::string> shards;
    const fs::path index = fs::path(dir) / "model.safetensors.index.json";
    const fs::path single = fs::path(dir) / "model.safetensors";
    std::error_code ec;
    if (fs::exists(index, ec)) {
        auto text = read_small_file(index.string());
        if (!text) return text.status();
        if (const std::string why = json_text_problem(text.value()); !why.empty()) return error(index.string() + ": " + why);
        json j = json::parse(text.value(), nullptr, false);
        if (j.is_discarded() || !j.contains("weight_map") || !j["weight_map"].is_object())
            return error(index.string() + ": not a valid safetensors index (no weight_map)");
        std::set<std::string> unique;
        for (auto& [name, file] : j["weight_map"].items()) {
            if (!file.is_string()) return error(index.string() + ": weight_map entry " + name + " is not a file name");
            const std::string f = file.get<std::string>();
            if (f.find('/') != std::string::npos || f.find("..") != std::string::npos)
                return error(index.string() + ": shard name " + f + " leaves the model directory");
            // Opening "a\0b" would open "a": the name would be cut where the system reads it as a C string.
            if (f.empty() || f.find('\0') != std::string::npos) return error(index.string() + ": shard name '" + f + "' is not a file name");
            unique.insert(f);
        }
        shards.assign(unique.begin(), unique.end());
    } else if (fs::exists(single, ec)) {
        shards.push_back("model.safetensors");
    } else {
        return error(dir + ": no model.safetensors or model.safetensors.index.json");
    }
    for (const std::string& s : shards) {
        auto f = SafetensorsFile::open((fs::path(dir) / s).string());
        if (!f) return f.status();
        set.files_.push_back(std::move(f.value()));
    }
    for (const auto& f : set.files_) {
        for (const auto& [name, t] : f->tensors()) {
            if (!set.index_.emplace(name, &t).second) return error(dir + ": tensor " + name + " appears in two shards");
        }
    }
    return set;
}

const SourceTensor* SafetensorsSet::find(const std::string& name) const {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : it->second;
}

}  // namespace colibri::tools

namespace colibri::tools {

Status write_safetensors(const std::string& path, const std::vector<OutputTensor>& tensors) {
    json header = json::object();
    uint64_t offset = 0;
    auto elem_size = [](SourceDType d) { return d == SourceDType::F32 ? 4u : 2u; };
    for (const OutputTensor& t : tensors) {
        uint64_t n = 1;
        for (uint64_t d : t.shape) n *= d;
        if (n != t.values.size()) return error("tensor " + t.name + ": shape does not match its values");
        const char* dtype = t.dtype == SourceDType::F32 ? "F32" : t.dtype == SourceDType::F16 ? "F16" : "BF16";
        const uint64_t bytes = n * elem_size(t.dtype);
        header[t.name] = {{"dtype", dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
        offset += bytes;
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');  // keeps the data 8-byte aligned
    TempOutput out;
    COLIBRI_TRY(out.create(path));
    const uint64_t len = text.size();
    uint64_t at = 0;
    auto put = [&](const void* data, uint64_t bytes) {
        Status s = out.write_at(at, data, bytes);
        at += bytes;
        return s;
    };
    COLIBRI_TRY(put(&len, 8));
    COLIBRI_TRY(put(text.data(), text.size()));
    std::vector<uint16_t> half;
    for (const OutputTensor& t : tensors) {
        if (t.dtype == SourceDType::F32) {
            COLIBRI_TRY(put(t.values.data(), t.values.size() * 4));
            continue;
        }
        half.resize(t.values.size());
        for (size_t i = 0; i < half.size(); ++i)
            half[i] = t.dtype == SourceDType::F16 ? kernels::f32_to_f16(t.values[i]) : kernels::f32_to_bf16(t.values[i]);
        COLIBRI_TRY(put(half.data(), half.size() * 2));
    }
    return out.commit();
}

}  // namespace colibri::tools
