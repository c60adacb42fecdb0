#include "check.h"

#include <nlohmann/json.hpp>
#include <xxhash.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "check_damage.h"
#include "check_source.h"
#include "check_tokenizer.h"
#include "engine/core/generation_defaults.h"
#include "engine/file/file_rules.h"
#include "engine/file/format.h"

namespace colibri::tools {

using namespace format;

const char* checksum_state_name(ChecksumState s) {
    switch (s) {
        case ChecksumState::Ok: return "ok";
        case ChecksumState::Mismatch: return "mismatch";
        case ChecksumState::DamagedFrame: return "damaged_frame";
        case ChecksumState::Unreadable: return "unreadable";
        case ChecksumState::NotChecked: return "not_checked";
    }
    return "not_checked";
}

namespace {

std::string hex64(uint64_t v) {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
    return buf;
}

class Checker {
public:
    Checker(const std::string& path, const CheckOptions& options) : options_(options) { report_.path = path; }

    CheckReport run() {
        auto src = CheckSource::open(report_.path, &report_.unreadable);
        if (!src) {
            fatal(src.message());
            return std::move(report_);
        }
        src_ = &src.value();
        report_.compressed = src_->compressed();
        report_.stored_size = src_->stored_size();
        report_.image_size = src_->image_size();
        for (const std::string& p : src_->problems()) problem(p);
        problems_before_attach_ = src_->problems().size();
        if (!read_header()) return std::move(report_);
        read_tables();
        name_sections();
        // The loader's rules (engine/file/file_rules.h), every problem reported.
        const SectionNames names = [this](uint32_t i) { return name(i); };
        const ProblemSink sink = [this](const std::string& p) { problem(p); };
        check_sections(t_, names, sink);
        std::vector<bool> tensor_ok = check_tensor_entries(t_, names, sink, &by_name_);
        check_layer_and_expert_tables(t_, names, sink);
        // Without the family's tensor list (unusable hyper-parameters, reported) there is nothing to hold them to.
        if (const auto expected = expected_tensors(t_, sink); !expected.empty())
            check_tensor_set(t_, expected, by_name_, names, sink, &tensor_ok);
        describe_tensors(tensor_ok);
        src_->attach(t_.sections, [this](uint32_t i) { return report_.sections[i].name; });
        for (size_t k = problems_before_attach_; k < src_->problems().size(); ++k) problem(src_->problems()[k]);
        hash_sections();
        check_text_sections();
        for (TensorCheck& t : report_.tensors)
            if (t.section < report_.sections.size()) t.checksum = report_.sections[t.section].checksum;
        report_.valid = report_.problems.empty() && !report_.cancelled;
        return std::move(report_);
    }

private:
    void fatal(const std::string& why) {
        report_.fatal = why.rfind(report_.path, 0) == 0 ? why : report_.path + ": " + why;
        report_.problems.push_back(report_.fatal);
        report_.valid = false;
    }
    void problem(std::string line) { report_.problems.push_back(std::move(line)); }
    const std::string& name(uint32_t section) const { return report_.sections[section].name; }

    // The header must be readable to locate anything; after that, every damage is a problem and the check goes on.
    bool read_header() {
        const auto prefix = src_->prefix();
        if (prefix.size() < sizeof(FileHeader)) {
            fatal("truncated file (" + std::to_string(prefix.size()) + " bytes, the header alone needs " +
                  std::to_string(sizeof(FileHeader)) + ")");
            return false;
        }
        std::memcpy(&h_, prefix.data(), sizeof h_);
        if (std::memcmp(h_.magic, kMagic, sizeof kMagic) != 0) {
            fatal("not a colibri model file (wrong magic)");
            return false;
        }
        report_.version_major = h_.version_major;
        report_.version_minor = h_.version_minor;
        if (!version_readable(h_.version_major)) {
            fatal("unsupported format version " + std::to_string(h_.version_major) + "." + std::to_string(h_.version_minor) +
                  " (this build reads " + std::to_string(kOldestReadableMajor) + ".x to " + std::to_string(kVersionMajor) + ".x)");
            return false;
        }
        if (const schema::FamilyInfo* fam = schema::find_family(h_.family)) report_.family = fam->name;
        const uint64_t image = src_->image_size();
        if (h_.file_size != image)
            problem((image < h_.file_size ? "metadata: truncated file: header says " : "metadata: file size mismatch: header says ") +
                    std::to_string(h_.file_size) + " bytes, the image has " + std::to_string(image));
        meta_ = h_.metadata_size;
        if (meta_ < sizeof(FileHeader) || meta_ > prefix.size()) {
            fatal("metadata size " + std::to_string(meta_) + " out of range (the file has " + std::to_string(prefix.size()) + " bytes)");
            return false;
        }
        if (!table_fits(h_.section_table_offset, h_.section_count, sizeof(SectionEntry), sizeof(FileHeader), meta_) ||
            h_.section_count == 0) {
            fatal("section table lies outside the metadata");
            return false;
        }
        // The metadata checksum: damage here is reported, and the tables are still read (bounds-checked).
        FileHeader zeroed = h_;
        zeroed.metadata_xxh64 = 0;
        const std::unique_ptr<XXH64_state_t, XXH_errorcode (*)(XXH64_state_t*)> st(XXH64_createState(), XXH64_freeState);
        if (!st) throw std::bad_alloc();
        XXH64_reset(st.get(), 0);
        XXH64_update(st.get(), &zeroed, sizeof zeroed);
        XXH64_update(st.get(), prefix.data() + sizeof(FileHeader), meta_ - sizeof(FileHeader));
        meta_sum_ = XXH64_digest(st.get());
        if (meta_sum_ != h_.metadata_xxh64) problem("metadata: xxh64 mismatch (header or tables damaged)");
        return true;
    }

    void read_tables() {
        const uint8_t* p = src_->prefix().data();
        t_.header = h_;
        t_.image_size = src_->image_size();
        t_.sections.resize(h_.section_count);
        std::memcpy(t_.sections.data(), p + h_.section_table_offset, t_.sections.size() * sizeof(SectionEntry));
        auto table = [&](const char* what, uint64_t offset, uint64_t count, uint64_t entry, auto& out) {
            if (count == 0) return;
            if (!table_fits(offset, count, entry, sizeof(FileHeader), meta_)) {
                problem(std::string("metadata: ") + what + " table lies outside the metadata");
                return;
            }
            out.resize(count);
            std::memcpy(out.data(), p + offset, count * entry);
        };
        table("tensor", h_.tensor_table_offset, h_.tensor_count, sizeof(TensorEntry), t_.tensors);
        table("layer", h_.layer_table_offset, h_.layer_count, sizeof(LayerEntry), t_.layers);
        table("expert", h_.expert_table_offset, h_.expert_count, sizeof(ExpertEntry), t_.experts);
    }

    // Names first, so every later problem can use them; expert-like sections list the projections they hold.
    void name_sections() {
        std::vector<std::string> projections(t_.sections.size());
        for (const TensorEntry& t : t_.tensors) {
            if (t.section >= t_.sections.size()) continue;
            const std::string n(t.name, strnlen(t.name, kTensorNameBytes));
            const size_t dot = n.rfind('.');
            std::string& list = projections[t.section];
            list += (list.empty() ? "" : " ") + (dot == std::string::npos ? n : n.substr(dot + 1));
        }
        std::map<std::tuple<uint32_t, uint32_t, uint32_t>, uint32_t> seen;
        for (uint32_t i = 0; i < t_.sections.size(); ++i) {
            const SectionEntry& s = t_.sections[i];
            const bool ffn_like = s.kind == static_cast<uint32_t>(SectionKind::Expert) ||
                                  s.kind == static_cast<uint32_t>(SectionKind::SharedExpert) ||
                                  s.kind == static_cast<uint32_t>(SectionKind::DenseMlp);
            SectionCheck c;
            c.index = i;
            c.kind = s.kind <= static_cast<uint32_t>(SectionKind::Output) ? section_kind_name(static_cast<SectionKind>(s.kind)) : "unknown";
            c.name = section_description(s, i, ffn_like ? projections[i] : std::string());
            c.layer = s.layer == kNone ? -1 : static_cast<int64_t>(s.layer);
            c.expert = s.expert == kNone ? -1 : static_cast<int64_t>(s.expert);
            c.offset = s.offset;
            c.size = s.size;
            c.stored_size = src_->stored_section_size(i, s);
            c.aligned = s.offset % kSectionAlignment == 0;
            c.in_bounds = range_fits(s.offset, s.size, src_->image_size());
            c.xxh64_expected = i == 0 ? h_.metadata_xxh64 : s.xxh64;
            // A file with two sections claiming the same thing (check_sections reports it): tell them apart by index.
            if (!seen.emplace(std::make_tuple(s.kind, s.layer, s.expert), i).second) c.name += " (section #" + std::to_string(i) + ")";
            report_.sections.push_back(std::move(c));
        }
    }

    // The report's entry of each tensor; shape_ok is what the rules found.
    void describe_tensors(const std::vector<bool>& ok) {
        for (uint32_t i = 0; i < t_.tensors.size(); ++i) {
            const TensorEntry& t = t_.tensors[i];
            TensorCheck c;
            c.name = std::string(t.name, strnlen(t.name, kTensorNameBytes));
            c.section = t.section;
            c.offset = t.offset;
            c.size = t.size;
            c.aligned = t.offset % kTensorAlignment == 0;
            c.type = weight_type_is_known(t.weight_type) ? weight_type_name(static_cast<WeightType>(t.weight_type)) : "unknown";
            c.shape = t.n_dims == 1 ? std::vector<uint64_t>{t.dims[0]} : std::vector<uint64_t>{t.dims[0], t.dims[1]};
            c.shape_ok = ok[i];
            report_.tensors.push_back(std::move(c));
        }
    }

    bool keep_going(uint64_t done) {
        if (options_.cancel != nullptr && options_.cancel->load(std::memory_order_relaxed)) return false;
        if (options_.progress && !options_.progress(done, total_)) return false;
        return true;
    }

    // The long part: xxh64 of every section's contents, streamed, with progress and cancellation.
    void hash_sections() {
        report_.sections[0].xxh64_actual = meta_sum_;
        report_.sections[0].checksum = meta_sum_ == h_.metadata_xxh64 ? ChecksumState::Ok : ChecksumState::Mismatch;
        report_.sections[0].checksum_ok = report_.sections[0].checksum == ChecksumState::Ok;
        total_ = 0;
        for (uint32_t i = 1; i < t_.sections.size(); ++i)
            if (report_.sections[i].in_bounds) total_ += t_.sections[i].size;
        // Progress about 256 times over the file, at most every 8 MiB.
        const uint64_t step = std::clamp<uint64_t>(total_ / 256, uint64_t(64) << 10, uint64_t(8) << 20);
        uint64_t done = 0, reported = 0;
        if (!keep_going(0)) return cancel(1, 0);
        const std::unique_ptr<XXH64_state_t, XXH_errorcode (*)(XXH64_state_t*)> state(XXH64_createState(), XXH64_freeState);
        XXH64_state_t* st = state.get();
        if (st == nullptr) throw std::bad_alloc();
        for (uint32_t i = 1; i < t_.sections.size(); ++i) {
            SectionCheck& c = report_.sections[i];
            const SectionEntry& s = t_.sections[i];
            if (!c.in_bounds) {
                c.checksum = ChecksumState::Unreadable;  // reported by check_sections
                continue;
            }
            const bool keep_text = is_text_section(s.kind) && s.size <= kMaxTextSectionBytes && !texts_.count(s.kind);
            std::string text;
            XXH64_reset(st, 0);
            uint64_t section_done = 0;
            bool cancelled = false;
            std::string why;
            const auto r = src_->read(i, s, [&](const uint8_t* p, size_t k) {
                XXH64_update(st, p, k);
                if (keep_text) text.append(reinterpret_cast<const char*>(p), k);
                section_done += k;
                if (done + section_done - reported >= step) {
                    reported = done + section_done;
                    if (!keep_going(reported)) cancelled = true;
                }
                return !cancelled;
            }, &why);
            if (r == CheckSource::ReadResult::Cancelled) {
                report_.bytes_checked += section_done;
                return cancel(i, done + section_done);
            }
            done += s.size;  // a damaged frame still counts as checked, so progress reaches the total
            report_.bytes_checked += section_done;
            if (r == CheckSource::ReadResult::DamagedFrame) {
                c.checksum = ChecksumState::DamagedFrame;
                problem(c.name + ": damaged zstd frame (" + why + ")");
            } else if (r == CheckSource::ReadResult::OutOfBounds) {
                c.checksum = ChecksumState::Unreadable;
            } else {
                c.xxh64_actual = XXH64_digest(st);
                c.checksum = c.xxh64_actual == s.xxh64 ? ChecksumState::Ok : ChecksumState::Mismatch;
                if (c.checksum == ChecksumState::Mismatch) problem(c.name + ": xxh64 mismatch" + damage_detail(i, s));
                if (keep_text) texts_.emplace(s.kind, std::move(text));
            }
            c.checksum_ok = c.checksum == ChecksumState::Ok;
        }
        // The last call says "done"; the work is finished, so its answer no longer cancels anything.
        if (options_.progress && reported != total_) options_.progress(total_, total_);
    }

    // The byte range of a section whose checksum failed, and the tensor and byte the damage is in where its values
    // show it (check_damage.h); only mismatched sections are read again, and only up to kMaxLocatedBytes.
    std::string damage_detail(uint32_t i, const SectionEntry& s) {
        constexpr uint64_t kMaxLocatedBytes = uint64_t(1) << 30;
        std::string text = " in bytes " + hex_offset(s.offset) + ".." + hex_offset(s.offset + s.size - 1);
        std::vector<const TensorCheck*> held;
        for (const TensorCheck& t : report_.tensors)
            if (t.section == i) held.push_back(&t);
        if (held.empty()) return text;
        std::vector<uint8_t> bytes;
        std::string why;
        if (s.size <= kMaxLocatedBytes) {
            bytes.reserve(s.size);
            const auto r = src_->read(i, s, [&bytes](const uint8_t* p, size_t k) {
                bytes.insert(bytes.end(), p, p + k);
                return true;
            }, &why);
            if (r != CheckSource::ReadResult::Ok || bytes.size() != s.size) bytes.clear();
        }
        return text + locate_damage(held, s.offset, bytes);
    }

    void cancel(uint32_t first_unchecked, uint64_t done) {
        for (uint32_t i = first_unchecked; i < t_.sections.size(); ++i) report_.sections[i].checksum = ChecksumState::NotChecked;
        report_.cancelled = true;
        problem("check cancelled after " + std::to_string(done) + " of " + std::to_string(total_) + " bytes");
    }

    // The tokenizer, its config, the chat template and the generation config, as read while hashing (whatever their checksums said).
    void check_text_sections() {
        if (report_.cancelled) return;
        TokenizerCheckInput in;
        bool unreadable = false;
        for (uint32_t i = 1; i < t_.sections.size(); ++i) {
            const uint32_t kind = t_.sections[i].kind;
            if (!is_text_section(kind)) continue;
            const auto it = texts_.find(kind);
            if (it == texts_.end()) {
                unreadable = true;  // out of bounds, damaged or too large: check_sections or hash_sections said so
                continue;
            }
            if (kind == static_cast<uint32_t>(SectionKind::GenerationConfig)) {  // the loader refuses what does not parse
                if (auto d = parse_generation_defaults(it->second); !d) report_.problems.push_back("generation config: " + d.message());
                continue;
            }
            std::optional<std::string_view>& slot = kind == static_cast<uint32_t>(SectionKind::TokenizerJson) ? in.tokenizer_json
                                                  : kind == static_cast<uint32_t>(SectionKind::TokenizerConfig) ? in.tokenizer_config
                                                                                                               : in.chat_template;
            if (!slot) slot = it->second;
        }
        if (unreadable) return;  // the damage is reported; a partial tokenizer would only add noise
        in.vocab_size = h_.hparams.vocab_size;
        in.bos_id = h_.hparams.bos_id;
        in.eos_id = h_.hparams.eos_id;
        check_tokenizer(in, &report_.problems);
    }

    CheckOptions options_;
    CheckReport report_;
    CheckSource* src_ = nullptr;
    FileHeader h_{};
    uint64_t meta_ = 0, meta_sum_ = 0, total_ = 0;
    size_t problems_before_attach_ = 0;
    FileTables t_;
    std::unordered_map<std::string, uint32_t> by_name_;
    std::map<uint32_t, std::string> texts_;  // first section of each text kind
};

}  // namespace

CheckReport check_model(const std::string& path, const CheckOptions& options) {
    try {
        return Checker(path, options).run();
    } catch (const std::bad_alloc&) {
        CheckReport r;
        r.path = path;
        r.fatal = path + ": out of memory while checking";
        r.problems.push_back(r.fatal);
        return r;
    }
}

CheckReport check_model(const std::string& path, const std::function<void(uint64_t, uint64_t)>& progress) {
    CheckOptions options;
    if (progress) options.progress = [&progress](uint64_t done, uint64_t total) {
        progress(done, total);
        return true;
    };
    return check_model(path, options);
}

std::string check_report_json(const CheckReport& r) {
    nlohmann::json j;
    j["path"] = r.path;
    j["valid"] = r.valid;
    j["cancelled"] = r.cancelled;
    if (!r.fatal.empty()) j["error"] = r.fatal;
    if (r.unreadable) j["unreadable"] = true;
    j["compressed"] = r.compressed;
    j["stored_size"] = r.stored_size;
    j["image_size"] = r.image_size;
    if (!r.family.empty()) j["family"] = r.family;
    if (r.version_major != 0) j["version"] = std::to_string(r.version_major) + "." + std::to_string(r.version_minor);
    j["bytes_checked"] = r.bytes_checked;
    j["problems"] = r.problems;
    j["sections"] = nlohmann::json::array();
    for (const SectionCheck& s : r.sections) {
        nlohmann::json e{{"index", s.index}, {"kind", s.kind}, {"name", s.name}, {"offset", s.offset}, {"size", s.size},
                         {"stored_size", s.stored_size}, {"aligned", s.aligned}, {"in_bounds", s.in_bounds},
                         {"checksum", checksum_state_name(s.checksum)}, {"checksum_ok", s.checksum_ok},
                         {"xxh64_expected", hex64(s.xxh64_expected)}};
        if (s.checksum == ChecksumState::Ok || s.checksum == ChecksumState::Mismatch) e["xxh64_actual"] = hex64(s.xxh64_actual);
        if (s.layer >= 0) e["layer"] = s.layer;
        if (s.expert >= 0) e["expert"] = s.expert;
        j["sections"].push_back(std::move(e));
    }
    j["tensors"] = nlohmann::json::array();
    for (const TensorCheck& t : r.tensors)
        j["tensors"].push_back({{"name", t.name}, {"shape", t.shape}, {"type", t.type}, {"section", t.section}, {"offset", t.offset},
                                {"size", t.size}, {"aligned", t.aligned}, {"shape_ok", t.shape_ok},
                                {"checksum", checksum_state_name(t.checksum)}});
    // Names and problems quote bytes of a damaged file: replace invalid UTF-8 rather than throw.
    return j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace colibri::tools
