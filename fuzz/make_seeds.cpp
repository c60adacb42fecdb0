// colibri-fuzz-seeds: derives small fuzzing seeds from real files, so that a fuzzer spends its time on
// structure rather than on megabytes of weights or vocabulary. Each subcommand writes one kind of seed:
//   tokenizer-subset TOKENIZER.json CONFIG.json KEEP OUT_DIR   the first KEEP pieces, every added token
//                                                                (renumbered after them) and the merges
//                                                                that stay inside the subset
//   tokenizer-seeds DIR PARITY.json COUNT OUT_PREFIX            tokenizer.json \0 tokenizer_config.json \0
//                                                                text, for COUNT texts of a parity file
//   gguf-header IN.gguf OUT                                     header, key/values and tensor infos only
//   gguf-slim IN.gguf VOCAB OUT                                 a complete GGUF whose vocabulary (token
//                                                                arrays, embedding and output rows) is cut
//                                                                to VOCAB entries
//   safetensors-header IN OUT                                   the length prefix and JSON header only
//   jinja-seeds PARITY.json TOKENIZER_CONFIG.json OUT_DIR ...    template \0 context: every case of the chat
//                 [TEMPLATE.jinja]                              template parity data, the tokenizer config's
//                                                                template, and each TEMPLATE with a conversation
//   join OUT IN...                                              the files joined by NULs (config \0 generation
//                                                                config)
//   config-patch CONFIG GENERATION PATCH OUT                    config.json with the JSON object PATCH merged in,
//                                                                then \0 generation_config.json
//   gguf-hostile IN.gguf OUT_DIR                                files llama.cpp refuses, made from an f32/f16 GGUF:
//                                                                an expert stack with twice the experts, a gap
//                                                                before a tensor, a tensor that runs into the next,
//                                                                a key twice, general.alignment as a u64
//   safetensors-hostile OUT_DIR                                 headers with 3000 entries, a field given twice,
//                                                                a NUL after the JSON
//   bin-expert-elsewhere IN.bin OUT                             expert table entry 0 naming expert 1's section,
//                                                                the metadata resealed
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include <xxhash.h>

#include "engine/file/format.h"
#include "gguf_layout.h"

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

bool read_file(const std::string& path, std::string& out) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return false;
    std::stringstream ss;
    ss << in.rdbuf();
    out = ss.str();
    return true;
}

bool write_file(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return static_cast<bool>(out);
}

int fail(const std::string& why) {
    std::fprintf(stderr, "colibri-fuzz-seeds: %s\n", why.c_str());
    return 1;
}

int tokenizer_subset(const std::string& tok_path, const std::string& cfg_path, int64_t keep, const std::string& out_dir) {
    std::string text, cfg;
    if (!read_file(tok_path, text) || !read_file(cfg_path, cfg)) return fail("cannot read " + tok_path + " or " + cfg_path);
    json tok = json::parse(text);
    json& model = tok["model"];
    json vocab = json::object();
    for (auto& [piece, id] : model["vocab"].items())
        if (id.get<int64_t>() < keep) vocab[piece] = id;
    // Added tokens beyond the subset move to the ids just after it; the post-processor follows them.
    std::map<int64_t, int64_t> renumbered;
    int64_t next = keep;
    for (json& t : tok["added_tokens"]) {
        const int64_t id = t["id"].get<int64_t>();
        if (id < keep) continue;
        renumbered[id] = next;
        t["id"] = next;
        if (model["vocab"].contains(t["content"].get<std::string>())) vocab[t["content"].get<std::string>()] = next;
        ++next;
    }
    if (tok.contains("post_processor") && tok["post_processor"].is_object() && tok["post_processor"].contains("special_tokens")) {
        for (auto& [name, st] : tok["post_processor"]["special_tokens"].items())
            for (json& id : st["ids"])
                if (renumbered.count(id.get<int64_t>())) id = renumbered[id.get<int64_t>()];
    }
    const std::string prefix = model.value("continuing_subword_prefix", json()).is_string()
                                   ? model["continuing_subword_prefix"].get<std::string>()
                                   : std::string();
    json merges = json::array();
    for (const json& m : model["merges"]) {
        std::string a, b;
        if (m.is_string()) {
            const std::string line = m.get<std::string>();
            const size_t sp = line.find(' ');
            a = line.substr(0, sp);
            b = line.substr(sp + 1);
        } else {
            a = m[0].get<std::string>();
            b = m[1].get<std::string>();
        }
        const std::string merged = a + (b.size() >= prefix.size() ? b.substr(prefix.size()) : std::string());
        if (vocab.contains(a) && vocab.contains(b) && vocab.contains(merged)) merges.push_back(m);
    }
    model["vocab"] = vocab;
    model["merges"] = merges;
    fs::create_directories(out_dir);
    if (!write_file(out_dir + "/tokenizer.json", tok.dump()) || !write_file(out_dir + "/tokenizer_config.json", cfg))
        return fail("cannot write " + out_dir);
    return 0;
}

int tokenizer_seeds(const std::string& dir, const std::string& parity_path, int64_t count, const std::string& out_prefix) {
    std::string tok, cfg, parity;
    if (!read_file(dir + "/tokenizer.json", tok) || !read_file(dir + "/tokenizer_config.json", cfg) ||
        !read_file(parity_path, parity))
        return fail("cannot read the tokenizer in " + dir + " or " + parity_path);
    const json cases = json::parse(parity)["cases"];
    const size_t step = std::max<size_t>(1, cases.size() / static_cast<size_t>(count));
    for (int64_t k = 0; k < count && size_t(k) * step < cases.size(); ++k) {
        const std::string sample = cases[size_t(k) * step]["text"].get<std::string>();
        std::string seed = tok;
        seed.push_back('\0');
        seed += cfg;
        seed.push_back('\0');
        seed += sample;
        if (!write_file(out_prefix + "-" + std::to_string(k) + ".seed", seed)) return fail("cannot write " + out_prefix);
    }
    return 0;
}

int gguf_header(const std::string& in, const std::string& out) {
    std::string bytes;
    if (!read_file(in, bytes)) return fail("cannot read " + in);
    auto layout = colibri::fuzz::parse_gguf_layout(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    if (!layout) return fail(in + ": not a GGUF file this tool understands");
    return write_file(out, bytes.substr(0, layout->data_start)) ? 0 : fail("cannot write " + out);
}

void put_u32(std::string& s, uint32_t v) { s.append(reinterpret_cast<const char*>(&v), 4); }
void put_u64(std::string& s, uint64_t v) { s.append(reinterpret_cast<const char*>(&v), 8); }

int gguf_slim(const std::string& in, uint64_t vocab, const std::string& out) {
    using namespace colibri::fuzz;
    std::string b;
    if (!read_file(in, b)) return fail("cannot read " + in);
    auto parsed = parse_gguf_layout(reinterpret_cast<const uint8_t*>(b.data()), b.size());
    if (!parsed) return fail(in + ": not a GGUF file this tool understands");
    const GgufLayout& g = *parsed;
    std::string kvs;
    for (const GgufKv& kv : g.kvs) {
        if (kv.type == colibri::gguf::kArray && kv.count > vocab) {  // the per-token arrays
            kvs += b.substr(kv.begin, kv.value_at - kv.begin);
            put_u32(kvs, kv.item_type);
            put_u64(kvs, vocab);
            kvs += b.substr(kv.items[0], kv.items[vocab] - kv.items[0]);
        } else if (kv.key.size() > 11 && kv.key.compare(kv.key.size() - 11, 11, ".vocab_size") == 0 && kv.type == colibri::gguf::kU32) {
            kvs += b.substr(kv.begin, kv.value_at - kv.begin);
            put_u32(kvs, static_cast<uint32_t>(vocab));
        } else {
            kvs += b.substr(kv.begin, kv.end - kv.begin);
        }
    }
    // The vocabulary dimension cut (leading rows: ne[1] is the outer dimension), offsets packed again.
    std::vector<GgufTensorData> tensors = gguf_tensors(b, g);
    for (GgufTensorData& t : tensors) {
        if ((t.name == "token_embd.weight" || t.name == "output.weight") && t.ne.size() == 2) t.ne[1] = std::min(t.ne[1], vocab);
        if (t.type != 0 && t.type != 1 && t.type != 30) return fail(in + ": tensor " + t.name + " is not f32, f16 or bf16");
    }
    const auto bytes = [](const GgufTensorData& t) {
        uint64_t elems = 1;
        for (uint64_t d : t.ne) elems *= d;
        return elems * (t.type == 0 ? 4 : 2);
    };
    return write_file(out, write_gguf(b, g, tensors, bytes, &kvs, g.kvs.size())) ? 0 : fail("cannot write " + out);
}

int safetensors_header(const std::string& in, const std::string& out) {
    std::string bytes;
    if (!read_file(in, bytes) || bytes.size() < 8) return fail("cannot read " + in);
    uint64_t len = 0;
    std::memcpy(&len, bytes.data(), 8);
    if (len > bytes.size() - 8) return fail(in + ": header longer than the file");
    return write_file(out, bytes.substr(0, 8 + len)) ? 0 : fail("cannot write " + out);
}

int jinja_seeds(const std::vector<std::string>& a) {
    // a: jinja-seeds PARITY TOKENIZER_CONFIG OUT_DIR [TEMPLATE...]
    std::string text;
    if (!read_file(a[1], text)) return fail("cannot read " + a[1]);
    const json parity = json::parse(text);
    fs::create_directories(a[3]);
    int n = 0;
    std::string conversation;
    for (const json& c : parity.at("cases")) {
        const std::string tpl = c.at("template").get<std::string>(), ctx = c.at("context").dump();
        if (conversation.empty() && c.value("case", "") == "multi_turn") conversation = ctx;
        if (!write_file(a[3] + "/case-" + std::to_string(n++) + ".seed", tpl + std::string(1, '\0') + ctx)) return fail("cannot write seeds");
    }
    if (conversation.empty()) conversation = R"({"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": true})";
    std::vector<std::string> templates;
    if (read_file(a[2], text)) {
        const json cfg = json::parse(text, nullptr, false);
        if (cfg.is_object() && cfg.contains("chat_template") && cfg["chat_template"].is_string()) templates.push_back(cfg["chat_template"]);
    }
    for (size_t k = 4; k < a.size(); ++k) {
        if (!read_file(a[k], text)) return fail("cannot read " + a[k]);
        templates.push_back(text);
    }
    for (size_t k = 0; k < templates.size(); ++k) {
        if (!write_file(a[3] + "/template-" + std::to_string(k) + ".seed", templates[k] + std::string(1, '\0') + conversation) ||
            !write_file(a[3] + "/template-" + std::to_string(k) + "-default.seed", templates[k]))
            return fail("cannot write seeds");
    }
    return 0;
}

int join_files(const std::vector<std::string>& a) {
    std::string out, part;
    for (size_t k = 2; k < a.size(); ++k) {
        if (!read_file(a[k], part)) return fail("cannot read " + a[k]);
        if (k > 2) out += '\0';
        out += part;
    }
    return write_file(a[1], out) ? 0 : fail("cannot write " + a[1]);
}

int config_patch(const std::string& config, const std::string& generation, const std::string& patch, const std::string& out) {
    std::string text, gen;
    if (!read_file(config, text) || !read_file(generation, gen)) return fail("cannot read " + config + " or " + generation);
    json cfg = json::parse(text);
    cfg.merge_patch(json::parse(patch));
    return write_file(out, cfg.dump(1) + std::string(1, '\0') + gen) ? 0 : fail("cannot write " + out);
}

int gguf_hostile(const std::string& in, const std::string& out_dir) {
    using namespace colibri::fuzz;
    std::string b;
    if (!read_file(in, b)) return fail("cannot read " + in);
    const auto parsed = parse_gguf_layout(reinterpret_cast<const uint8_t*>(b.data()), b.size());
    if (!parsed || parsed->infos.size() < 3) return fail(in + ": not a GGUF file this tool understands");
    const GgufLayout& g = *parsed;
    const std::vector<GgufTensorData> tensors = gguf_tensors(b, g);
    const auto bytes = [](const GgufTensorData& t) {
        uint64_t n = t.type == 0 ? 4 : 2;
        for (uint64_t d : t.ne) n *= d;
        return n;
    };
    for (const GgufTensorData& t : tensors)
        if (t.type != 0 && t.type != 1 && t.type != 30) return fail(in + ": tensor " + t.name + " is not f32, f16 or bf16");
    fs::create_directories(out_dir);
    // Twice the experts in the first stack, laid out correctly.
    std::vector<GgufTensorData> doubled = tensors;
    bool stack = false;
    for (GgufTensorData& t : doubled)
        if (!stack && t.ne.size() == 3) {
            const std::string own = t.data.substr(0, bytes(t));
            t.data = own + own;
            t.ne[2] *= 2;
            stack = true;
        }
    if (!stack) return fail(in + ": no expert stack");
    if (!write_file(out_dir + "/expert-stack-doubled.gguf", write_gguf(b, g, doubled, bytes))) return fail("cannot write seeds");
    // Patches of one field of the file as it is: the third tensor's offset one alignment further (a gap), the
    // first tensor's outer dimension doubled (its data runs into the next tensor's).
    const auto patched = [&](uint64_t at, uint64_t value) {
        std::string f = b;
        std::memcpy(f.data() + at, &value, 8);
        return f;
    };
    const GgufTensorInfo& third = g.infos[2];
    const GgufTensorInfo& first = g.infos[0];
    if (!write_file(out_dir + "/offset-gap.gguf", patched(third.fields[third.fields.size() - 2], third.offset + g.alignment)) ||
        !write_file(out_dir + "/runs-into-next.gguf", patched(first.fields[2 + first.ne.size()], first.ne.back() * 2)))
        return fail("cannot write seeds");
    // Key/values: the first key once more; general.alignment as a u64.
    const GgufKv& kv0 = g.kvs.front();
    std::string twice = b.substr(g.kvs.front().begin, g.kvs.back().end - g.kvs.front().begin) + b.substr(kv0.begin, kv0.end - kv0.begin);
    std::string aligned = b.substr(g.kvs.front().begin, g.kvs.back().end - g.kvs.front().begin);
    const std::string key = "general.alignment";
    put_u64(aligned, key.size());
    aligned += key;
    put_u32(aligned, colibri::gguf::kU64);
    put_u64(aligned, g.alignment);
    if (!write_file(out_dir + "/key-twice.gguf", write_gguf(b, g, tensors, bytes, &twice, g.kvs.size() + 1)) ||
        !write_file(out_dir + "/alignment-u64.gguf", write_gguf(b, g, tensors, bytes, &aligned, g.kvs.size() + 1)))
        return fail("cannot write seeds");
    return 0;
}

int safetensors_hostile(const std::string& out_dir) {
    fs::create_directories(out_dir);
    const auto file = [](std::string header, uint64_t data_bytes) {
        header.append((8 - header.size() % 8) % 8, ' ');
        std::string out(8, '\0');
        const uint64_t len = header.size();
        std::memcpy(out.data(), &len, 8);
        return out + header + std::string(data_bytes, '\0');
    };
    const auto entry = [](const std::string& name, uint64_t i) {
        return "\"" + name + "\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[" + std::to_string(4 * i) + "," + std::to_string(4 * i + 4) + "]}";
    };
    std::string many = "{\"__metadata__\":{\"format\":\"pt\"}";
    for (uint64_t i = 0; i < 3000; ++i) many += "," + entry("model.layers." + std::to_string(i) + ".weight", i);
    many += "}";
    const std::string repeated = "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"data_offsets\":[4,8]}}";
    const std::string nul = "{" + entry("a", 0) + "}" + std::string(1, '\0') + "{" + entry("b", 1) + "}";
    if (!write_file(out_dir + "/many-entries.safetensors", file(many, 4 * 3000)) ||
        !write_file(out_dir + "/field-twice.safetensors", file(repeated, 8)) || !write_file(out_dir + "/nul-in-header.safetensors", file(nul, 8)))
        return fail("cannot write seeds");
    return 0;
}

int bin_expert_elsewhere(const std::string& in, const std::string& out) {
    using namespace colibri::format;
    std::string b;
    if (!read_file(in, b) || b.size() < sizeof(FileHeader)) return fail("cannot read " + in);
    FileHeader h;
    std::memcpy(&h, b.data(), sizeof h);
    if (h.expert_count < 2 || h.metadata_size > b.size()) return fail(in + ": not a model with experts");
    ExpertEntry e0, e1;
    std::memcpy(&e0, b.data() + h.expert_table_offset, sizeof e0);
    std::memcpy(&e1, b.data() + h.expert_table_offset + sizeof e0, sizeof e1);
    e0.section = e1.section;
    e0.offset = e1.offset;
    e0.size = e1.size;
    std::memcpy(b.data() + h.expert_table_offset, &e0, sizeof e0);
    h.metadata_xxh64 = 0;
    std::memcpy(b.data(), &h, sizeof h);
    h.metadata_xxh64 = XXH64(b.data(), h.metadata_size, 0);
    std::memcpy(b.data(), &h, sizeof h);
    return write_file(out, b) ? 0 : fail("cannot write " + out);
}

}  // namespace

int main(int argc, char** argv) {
    const std::vector<std::string> a(argv + 1, argv + argc);
    try {
        if (a.size() == 5 && a[0] == "tokenizer-subset") return tokenizer_subset(a[1], a[2], std::stoll(a[3]), a[4]);
        if (a.size() == 5 && a[0] == "tokenizer-seeds") return tokenizer_seeds(a[1], a[2], std::stoll(a[3]), a[4]);
        if (a.size() == 3 && a[0] == "gguf-header") return gguf_header(a[1], a[2]);
        if (a.size() == 4 && a[0] == "gguf-slim") return gguf_slim(a[1], std::stoull(a[2]), a[3]);
        if (a.size() == 3 && a[0] == "safetensors-header") return safetensors_header(a[1], a[2]);
        if (a.size() >= 4 && a[0] == "jinja-seeds") return jinja_seeds(a);
        if (a.size() >= 3 && a[0] == "join") return join_files(a);
        if (a.size() == 5 && a[0] == "config-patch") return config_patch(a[1], a[2], a[3], a[4]);
        if (a.size() == 3 && a[0] == "gguf-hostile") return gguf_hostile(a[1], a[2]);
        if (a.size() == 2 && a[0] == "safetensors-hostile") return safetensors_hostile(a[1]);
        if (a.size() == 3 && a[0] == "bin-expert-elsewhere") return bin_expert_elsewhere(a[1], a[2]);
    } catch (const std::exception& e) {
        return fail(e.what());
    }
    return fail("usage: tokenizer-subset | tokenizer-seeds | gguf-header | gguf-slim | safetensors-header | jinja-seeds | join | "
                "config-patch | gguf-hostile | safetensors-hostile | bin-expert-elsewhere (see the source)");
}
