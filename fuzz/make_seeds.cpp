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
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

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
void pad_to(std::string& s, uint64_t alignment) { s.append((alignment - s.size() % alignment) % alignment, '\0'); }

int gguf_slim(const std::string& in, uint64_t vocab, const std::string& out) {
    using namespace colibri::fuzz;
    std::string b;
    if (!read_file(in, b)) return fail("cannot read " + in);
    auto parsed = parse_gguf_layout(reinterpret_cast<const uint8_t*>(b.data()), b.size());
    if (!parsed) return fail(in + ": not a GGUF file this tool understands");
    const GgufLayout& g = *parsed;
    std::string s = b.substr(0, 24);  // magic, version and both counts stay
    for (const GgufKv& kv : g.kvs) {
        if (kv.type == kGgufArray && kv.count > vocab) {  // the per-token arrays
            s += b.substr(kv.begin, kv.value_at - kv.begin);
            put_u32(s, kv.item_type);
            put_u64(s, vocab);
            s += b.substr(kv.items[0], kv.items[vocab] - kv.items[0]);
        } else if (kv.key.size() > 11 && kv.key.compare(kv.key.size() - 11, 11, ".vocab_size") == 0 && kv.type == kGgufU32) {
            s += b.substr(kv.begin, kv.value_at - kv.begin);
            put_u32(s, static_cast<uint32_t>(vocab));
        } else {
            s += b.substr(kv.begin, kv.end - kv.begin);
        }
    }
    // Tensor infos with the vocabulary dimension cut, offsets packed again; then the data.
    std::string data;
    for (const GgufTensorInfo& t : g.infos) {
        std::vector<uint64_t> ne = t.ne;
        if ((t.name == "token_embd.weight" || t.name == "output.weight") && ne.size() == 2) ne[1] = std::min(ne[1], vocab);
        uint64_t elems = 1;
        for (uint64_t d : ne) elems *= d;
        const uint64_t elem_bytes = t.type == 0 ? 4 : (t.type == 1 || t.type == 30) ? 2 : 0;
        if (elem_bytes == 0) return fail(in + ": tensor " + t.name + " is not f32, f16 or bf16");
        pad_to(data, g.alignment);
        put_u64(s, t.name.size());
        s += t.name;
        put_u32(s, static_cast<uint32_t>(ne.size()));
        for (uint64_t d : ne) put_u64(s, d);
        put_u32(s, t.type);
        put_u64(s, data.size());
        data += b.substr(g.data_start + t.offset, elems * elem_bytes);  // leading rows: ne[1] is the outer dimension
    }
    pad_to(s, g.alignment);
    return write_file(out, s + data) ? 0 : fail("cannot write " + out);
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
    } catch (const std::exception& e) {
        return fail(e.what());
    }
    return fail("usage: tokenizer-subset | tokenizer-seeds | gguf-header | gguf-slim | safetensors-header | jinja-seeds | join (see the source)");
}
