// Tokenizer: parity with independent tokenizer.json implementations on real tokenizers (Qwen3, gpt-oss's o200k and
// DeepSeek-V3 byte-level BPEs, a Llama-2-style SentencePiece BPE with byte fallback), hand-checked component semantics
// on small synthetic tokenizers, and error handling for broken input.
#include <QtTest>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <zstd.h>
#include <sstream>
#include <string>
#include <vector>

#include "engine/text/tokenizer.h"
#include "../test_support.h"

using colibri::Tokenizer;
using json = nlohmann::json;

namespace {

std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return {};
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

bool file_exists(const std::string& path) { return std::ifstream(path).good(); }

// path, or path + ".zst" decompressed (the large tokenizer.json files are stored compressed); empty when neither reads.
std::string read_maybe_zst(const std::string& path) {
    if (file_exists(path)) return read_file(path);
    const std::string in = read_file(path + ".zst");
    const unsigned long long n = ZSTD_getFrameContentSize(in.data(), in.size());
    if (in.empty() || n == ZSTD_CONTENTSIZE_ERROR || n == ZSTD_CONTENTSIZE_UNKNOWN) return {};
    std::string out(n, '\0');
    const size_t got = ZSTD_decompress(out.data(), out.size(), in.data(), in.size());
    return ZSTD_isError(got) || got != n ? std::string() : out;
}

std::string show(const std::string& s, size_t max = 160) {  // JSON-escaped, shortened
    std::string j = json(s).dump(-1, ' ', false, json::error_handler_t::replace);
    if (j.size() > max) {
        while (max > 0 && (static_cast<unsigned char>(j[max]) & 0xC0) == 0x80) --max;  // keep UTF-8 whole
        j = j.substr(0, max) + "...";
    }
    return j;
}

std::string show_ids(const std::vector<int32_t>& ids, size_t from, size_t count) {
    std::string out = "[";
    for (size_t i = from; i < ids.size() && i < from + count; ++i) {
        if (i > from) out += ",";
        out += std::to_string(ids[i]);
    }
    return out + (from + count < ids.size() ? ",...]" : "]");
}

std::string show_pieces(const Tokenizer& t, const std::vector<int32_t>& ids, size_t from, size_t count) {
    std::string out = "[";
    for (size_t i = from; i < ids.size() && i < from + count; ++i) {
        if (i > from) out += ",";
        out += show(t.piece(ids[i]), 40);
    }
    return out + "]";
}

std::vector<int32_t> ids_of(const json& a) { return a.get<std::vector<int32_t>>(); }

Tokenizer load_or_fail(const std::string& tj, const std::string& cfg = {}) {
    auto r = Tokenizer::from_json(tj, cfg);
    if (!r) {
        qWarning("from_json failed: %s", r.message().c_str());
        return Tokenizer();
    }
    return std::move(r).value();
}

// Runs every case of a parity file; returns the number of cases with any difference.
struct ParityStats {
    size_t cases = 0, failed = 0, checks = 0;
};

ParityStats run_parity(const Tokenizer& tok, const json& doc, const std::set<size_t>& known, bool byte_level) {
    ParityStats st;
    int printed = 0;
    const auto& cases = doc.at("cases");
    for (size_t i = 0; i < cases.size(); ++i) {
        const auto& c = cases[i];
        const std::string text = c.at("text").get<std::string>();
        std::vector<std::string> problems;
        auto check_ids = [&](const char* what, const std::vector<int32_t>& got, const std::vector<int32_t>& want) {
            ++st.checks;
            if (got == want) return;
            size_t k = 0;
            while (k < got.size() && k < want.size() && got[k] == want[k]) ++k;
            const size_t from = k > 3 ? k - 3 : 0;
            problems.push_back(std::string(what) + ": " + std::to_string(got.size()) + " ids, expected " +
                               std::to_string(want.size()) + "; first difference at " + std::to_string(k) +
                               "\n      got      " + show_ids(got, from, 8) + " " + show_pieces(tok, got, from, 8) +
                               "\n      expected " + show_ids(want, from, 8) + " " + show_pieces(tok, want, from, 8));
        };
        auto check_text = [&](const char* what, const std::string& got, const std::string& want) {
            ++st.checks;
            if (got == want) return;
            size_t k = 0;
            while (k < got.size() && k < want.size() && got[k] == want[k]) ++k;
            const size_t from = k > 10 ? k - 10 : 0;
            problems.push_back(std::string(what) + ": differs at byte " + std::to_string(k) + "\n      got      " +
                               show(got.substr(from, 60)) + "\n      expected " + show(want.substr(from, 60)));
        };
        const auto ids = *tok.encode(text, true);
        const auto ids_plain = *tok.encode(text, false);
        const auto want_ids = ids_of(c.at("ids"));
        const auto want_plain = ids_of(c.at("ids_no_special"));
        check_ids("encode(add_special=true)", ids, want_ids);
        check_ids("encode(add_special=false)", ids_plain, want_plain);
        check_text("decode(ids)", tok.decode(want_ids), c.at("decoded").get<std::string>());
        check_text("decode(ids_no_special)", tok.decode(want_plain), c.at("decoded_no_special").get<std::string>());
        check_text("decode(ids, skip_special)", tok.decode(want_ids, true), c.at("decoded_skip_special").get<std::string>());
        // Streaming: the bytes of the tokens one by one add up to the decoded text (SentencePiece decoders
        // also strip the one leading space that the Metaspace/Prepend step added).
        std::string streamed;
        for (int32_t id : want_plain) streamed += tok.decode_token_bytes(id);
        if (!byte_level && !streamed.empty() && streamed[0] == ' ') streamed.erase(0, 1);
        check_text("concatenated decode_token_bytes", streamed, c.at("decoded_no_special").get<std::string>());

        ++st.cases;
        if (problems.empty()) continue;
        if (known.count(i)) continue;
        ++st.failed;
        if (printed < 5) {
            ++printed;
            std::string msg = "case " + std::to_string(i) + " text " + show(text, 200);
            for (const auto& p : problems) msg += "\n    " + p;
            qWarning("%s", msg.c_str());
        }
    }
    return st;
}

// A byte-level vocabulary where every printable ASCII character is its own token (id = its code),
// 'Ġ' (space) = 32 and 'Ċ' (newline) = 10.
json ascii_vocab() {
    json v = json::object();
    for (int c = 0x21; c <= 0x7E; ++c) v[std::string(1, static_cast<char>(c))] = c;
    v["\xC4\xA0"] = 32;
    v["\xC4\x8A"] = 10;
    return v;
}

json bpe_model(json vocab, json merges = json::array(), json extra = json::object()) {
    json m = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"vocab", std::move(vocab)}, {"merges", std::move(merges)}};
    for (auto it = extra.begin(); it != extra.end(); ++it) m[it.key()] = it.value();
    return m;
}

json added(int id, const std::string& content, bool special, json flags = json::object()) {
    json a = {{"id", id}, {"content", content}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
              {"normalized", false}, {"special", special}};
    for (auto it = flags.begin(); it != flags.end(); ++it) a[it.key()] = it.value();
    return a;
}

json tokenizer_doc(json model, json normalizer, json pre, json post, json decoder, json added_tokens = json::array()) {
    return {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}, {"added_tokens", std::move(added_tokens)},
            {"normalizer", std::move(normalizer)}, {"pre_tokenizer", std::move(pre)}, {"post_processor", std::move(post)},
            {"decoder", std::move(decoder)}, {"model", std::move(model)}};
}

// A vocabulary of whole words, ignore_merges so that each pre-token that is in it becomes one id: shows splits.
Tokenizer word_tokenizer(const std::vector<std::string>& words, json normalizer, json pre, json added_tokens = json::array()) {
    json v = json::object();
    for (size_t i = 0; i < words.size(); ++i) v[words[i]] = static_cast<int>(i);
    return load_or_fail(tokenizer_doc(bpe_model(v, json::array(), {{"ignore_merges", true}}), normalizer, pre, nullptr,
                                      nullptr, added_tokens)
                            .dump());
}

std::vector<std::string> pieces_of(const Tokenizer& t, const std::string& text) {
    std::vector<std::string> out;
    const std::vector<int32_t> ids = *t.encode(text, false);  // a copy: the Result is a temporary
    for (int32_t id : ids) out.push_back(id >= 0 ? t.piece(id) : std::string("?"));
    return out;
}

std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : "|") + x;
    return s;
}

// Broken tokenizer.json texts and a word their error message must contain.
const std::vector<std::pair<std::string, std::string>> kBadTokenizers = {
    {"", "empty"},
    {"   \n", "empty"},
    {"{", "not valid JSON"},
    {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []", "not valid JSON"},
    {"\xFF\xFEgarbage", "not valid JSON"},
    {"[]", "not an object"},
    {"42", "not an object"},
    {"{}", "no 'model'"},
    {R"({"model": null})", "no 'model'"},
    {R"({"model": {"type": "BPE", "merges": []}})", "vocab"},
    {R"({"model": {"type": "BPE", "vocab": {"a": 0}}})", "merges"},
    {R"({"model": {"type": "BPE", "vocab": [], "merges": []}})", "vocab"},
    {R"({"model": {"type": "BPE", "vocab": {"a": "zero"}, "merges": []}})", "integer"},
    {R"({"model": {"type": "BPE", "vocab": {"a": -3}, "merges": []}})", "out-of-range"},
{R"({"model": {"type": "BPE", "vocab": {"a": 2000000000}, "merges": []}})", "dense"},
    {R"({"model": {"type": "WordPiece", "vocab": {"a": 0}}})", "unsupported model type"},
    {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}})", "missing from the vocabulary"},
    {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a a a"]}})", "two tokens"},
    {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [7]}})", "merge 1"},
    {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "normalizer": {"type": "Magic"}})", "unsupported normalizer"},
    {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "normalizer": {"kind": "NFC"}})", "no 'type'"},
    {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated", "invert": false}})", "cannot compile regex"},
    {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "a"}, "behavior": "Sideways", "invert": false}})", "behavior"},
{R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "x\n(y"}, "behavior": "Isolated", "invert": false}})", "cannot compile regex"},
{R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": {"type": "Metaspace", "replacement": "ab"}})", "one character"},
{R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "post_processor": {"type": "BertProcessing", "sep": ["[SEP]"]}})", "[token, id]"},
    {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "decoder": {"type": "Sequence"}})", "decoders"},
    {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "post_processor": {"type": "TemplateProcessing", "single": "<s> $A", "special_tokens": {}}})", "missing special token"},
    {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "added_tokens": [{"content": "x"}]})", "no id"},
    {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "added_tokens": {"x": 1}})", "array"},
    {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [], "fuse_unk": "yes"}})", "boolean"},
};

const std::string kQwenDir = std::string(COLIBRI_REFERENCE_DIR) + "/tokenizers/qwen3";
const std::string kLlamaDir = std::string(COLIBRI_TEST_DATA_DIR) + "/tokenizer/llama2";
const std::string kDemoDir = std::string(COLIBRI_SOURCE_DIR) + "/resources/demo_model";
const std::string kGptOssDir = std::string(COLIBRI_TEST_DATA_DIR) + "/tokenizer/gptoss";
const std::string kDeepSeekDir = std::string(COLIBRI_TEST_DATA_DIR) + "/tokenizer/deepseek_v3";

}  // namespace

class TestTokenizer : public QObject {
    Q_OBJECT

private:
    void parity(const std::string& dir, const std::string& parity_file, const std::set<size_t>& known, bool byte_level,
                std::size_t min_cases = 1000) {
        const std::string tj = read_maybe_zst(dir + "/tokenizer.json");
        const std::string cfg = read_file(dir + "/tokenizer_config.json");
        QVERIFY2(!tj.empty(), ("cannot read " + dir + "/tokenizer.json(.zst)").c_str());
        auto r = Tokenizer::from_json(tj, cfg);
        QVERIFY2(r.is_ok(), r.is_ok() ? "" : r.message().c_str());
        const std::string pj = read_file(parity_file);
        QVERIFY2(!pj.empty(), ("cannot read " + parity_file).c_str());
        const json doc = json::parse(pj);
        QVERIFY(doc.at("cases").size() >= min_cases);
        const ParityStats st = run_parity(*r, doc, known, byte_level);
        qInfo("%s: %zu strings, %zu checks, %zu strings with a difference (%zu listed as known)",
              doc.at("tokenizer").get<std::string>().c_str(), st.cases, st.checks, st.failed, known.size());
        QCOMPARE(st.failed, size_t(0));
    }

private slots:
    // ---------------------------------------------------------------- parity with @huggingface/tokenizers
    void qwen3_parity() {
        if (!file_exists(kQwenDir + "/tokenizer.json")) QSKIP("shared/reference/tokenizers/qwen3 is not present");
        parity(kQwenDir, std::string(COLIBRI_TEST_DATA_DIR) + "/tokenizer/qwen3_parity.json", {}, true);
    }

    // Real chat text: jinja2's renders of every Qwen3, Qwen3.5 and Qwen2.5 conversation in the chat-template parity
    // data (XML-style tool calls, <tool_response> turns, vision placeholders, <think>), through the Qwen3 tokenizer.
    void qwen3_chat_parity() {
        if (!file_exists(kQwenDir + "/tokenizer.json")) QSKIP("shared/reference/tokenizers/qwen3 is not present");
        parity(kQwenDir, std::string(COLIBRI_TEST_DATA_DIR) + "/tokenizer/qwen3_chat_parity.json", {}, true, 70);
    }

    void llama2_parity() {
        parity(kLlamaDir, std::string(COLIBRI_TEST_DATA_DIR) + "/tokenizer/llama2_parity.json", {}, false);
    }

    // The demo model's own tokenizer (trained by training/demo_model/train.py): the file the build ships.
    void demo_parity() {
        parity(kDemoDir, std::string(COLIBRI_TEST_DATA_DIR) + "/tokenizer/demo_parity.json", {}, true);
    }

    // gpt-oss (o200k_harmony): 200k pieces, ignore_merges, the o200k Split regex with its Unicode case classes.
    void gptoss_parity() {
        parity(kGptOssDir, std::string(COLIBRI_TEST_DATA_DIR) + "/tokenizer/gptoss_parity.json", {}, true);
    }

    // DeepSeek-V3: three Split regexes (digits in threes, CJK runs, the rest), 818 added tokens; BOS added from
    // tokenizer_config.json's add_bos_token as transformers does.
    void deepseek_v3_parity() {
        parity(kDeepSeekDir, std::string(COLIBRI_TEST_DATA_DIR) + "/tokenizer/deepseek_v3_parity.json", {}, true);
    }

    void gptoss_basics() {
        const Tokenizer t = load_or_fail(read_maybe_zst(kGptOssDir + "/tokenizer.json"), read_file(kGptOssDir + "/tokenizer_config.json"));
        QCOMPARE(t.kind(), Tokenizer::Kind::ByteLevelBpe);
        QCOMPARE(t.vocab_size(), 200019);
        QCOMPARE(t.bos_id(), 199998);  // <|startoftext|>
        QCOMPARE(t.eos_id(), 200002);  // <|return|>
        QCOMPARE(t.token_id("<|start|>"), 200006);
        QCOMPARE(t.token_id("<|channel|>"), 200005);
        QCOMPARE(t.token_id("<|message|>"), 200008);
        QCOMPARE(t.token_id("<|end|>"), 200007);
        QCOMPARE(t.token_id("<|call|>"), 200012);
        // No add_bos_token in its config and a ByteLevel post-processor: nothing is added.
        QCOMPARE(*t.encode("Hello world", true), *t.encode("Hello world", false));
        const std::vector<int32_t> harmony = *t.encode("<|start|>assistant<|channel|>final<|message|>Hi<|end|>", false);
        QCOMPARE(harmony.front(), 200006);
        QCOMPARE(harmony.back(), 200007);
        QCOMPARE(t.decode(harmony, true), std::string("assistantfinalHi"));
        // A reply ends at <|return|> (the final answer) or <|call|> (a tool call), not at <|end|>, after which the
        // analysis channel's reply goes on with the final channel.
        QCOMPARE(t.end_of_turn_ids(), (std::vector<int32_t>{200002, 199999, 200012}));
    }

    void deepseek_v3_basics() {
        const Tokenizer t = load_or_fail(read_maybe_zst(kDeepSeekDir + "/tokenizer.json"), read_file(kDeepSeekDir + "/tokenizer_config.json"));
        QCOMPARE(t.kind(), Tokenizer::Kind::ByteLevelBpe);
        QCOMPARE(t.vocab_size(), 128815);
        QCOMPARE(t.bos_id(), 0);  // bos_token is an AddedToken object in its config
        QCOMPARE(t.eos_id(), 1);
        const std::vector<int32_t> plain = *t.encode("Hello world", false);
        const std::vector<int32_t> with = *t.encode("Hello world", true);
        QCOMPARE(with.size(), plain.size() + 1);
        QCOMPARE(with.front(), 0);
        QVERIFY(std::equal(plain.begin(), plain.end(), with.begin() + 1));
        // Digits split in threes, CJK runs apart from what surrounds them.
        QCOMPARE(join(pieces_of(t, "1234567")), std::string("123|456|7"));
        const std::vector<int32_t> cjk = *t.encode("abc中文def", false);
        std::vector<std::string> parts;
        for (int32_t id : cjk) parts.push_back(t.decode_token_bytes(id));
        QVERIFY2(std::find(parts.begin(), parts.end(), std::string("abc")) != parts.end(), join(parts).c_str());
        QCOMPARE(t.end_of_turn_ids(), (std::vector<int32_t>{1}));  // <｜end▁of▁sentence｜>
    }

    // GLM-4.5's replies end where it would open the next turn (<|user|>, or <|observation|> for a tool's result):
    // its generation_config lists both as eos beside <|endoftext|>. <|assistant|> is no end.
    void end_of_turn_ids_of_chat_formats() {
        const json added_tokens = json::array({added(200, "<|user|>", true), added(201, "<|observation|>", true),
                                               added(202, "<|assistant|>", true), added(203, "<|endoftext|>", true)});
        const std::string tj = tokenizer_doc(bpe_model(ascii_vocab()), nullptr, {{"type", "ByteLevel"}, {"add_prefix_space", false}},
                                             {{"type", "ByteLevel"}}, {{"type", "ByteLevel"}}, added_tokens).dump();
        QCOMPARE(load_or_fail(tj, R"({"eos_token": "<|endoftext|>"})").end_of_turn_ids(), (std::vector<int32_t>{203, 200, 201}));
        QCOMPARE(load_or_fail(tj, R"({"eos_token": "<|user|>"})").end_of_turn_ids(), (std::vector<int32_t>{200, 203, 201}));
        if (!file_exists(kQwenDir + "/tokenizer.json")) QSKIP("shared/reference/tokenizers/qwen3 is not present");
        const Tokenizer q = load_or_fail(read_file(kQwenDir + "/tokenizer.json"), read_file(kQwenDir + "/tokenizer_config.json"));
        QCOMPARE(q.end_of_turn_ids(), (std::vector<int32_t>{q.token_id("<|im_end|>"), q.token_id("<|endoftext|>")}));
    }

    // tokenizer_config.json's add_bos_token / add_eos_token replace the tokenizer.json post-processor, as in
    // transformers (a TemplateProcessing "[bos] $A [eos]"); without them the file's post-processor is used.
    void config_add_bos_eos_replace_post_processor() {
        json added_tokens = json::array({added(200, "<B>", true), added(201, "<E>", true)});
        const json bos_post = {{"type", "TemplateProcessing"},
                               {"single", json::array({{{"SpecialToken", {{"id", "<B>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
                               {"special_tokens", {{"<B>", {{"id", "<B>"}, {"ids", {200}}, {"tokens", {"<B>"}}}}}}};
        const std::string byte_level = tokenizer_doc(bpe_model(ascii_vocab()), nullptr, {{"type", "ByteLevel"}, {"add_prefix_space", false}},
                                                     {{"type", "ByteLevel"}}, {{"type", "ByteLevel"}}, added_tokens).dump();
        const std::string templated = tokenizer_doc(bpe_model(ascii_vocab()), nullptr, {{"type", "ByteLevel"}, {"add_prefix_space", false}},
                                                    bos_post, {{"type", "ByteLevel"}}, added_tokens).dump();
        auto ids = [](const std::string& tj, const std::string& cfg) { return *load_or_fail(tj, cfg).encode("ab", true); };
        const std::string names = R"("bos_token": "<B>", "eos_token": {"content": "<E>", "special": true})";
        QCOMPARE(ids(byte_level, "{" + names + "}"), (std::vector<int32_t>{'a', 'b'}));
        QCOMPARE(ids(byte_level, "{" + names + R"(, "add_bos_token": true})"), (std::vector<int32_t>{200, 'a', 'b'}));
        QCOMPARE(ids(byte_level, "{" + names + R"(, "add_eos_token": true})"), (std::vector<int32_t>{'a', 'b', 201}));
        QCOMPARE(ids(byte_level, "{" + names + R"(, "add_bos_token": true, "add_eos_token": true})"), (std::vector<int32_t>{200, 'a', 'b', 201}));
        QCOMPARE(ids(templated, "{" + names + "}"), (std::vector<int32_t>{200, 'a', 'b'}));
        // Named but false: transformers replaces the file's BOS template by a bare "$A".
        QCOMPARE(ids(templated, "{" + names + R"(, "add_bos_token": false})"), (std::vector<int32_t>{'a', 'b'}));
        QCOMPARE(ids(templated, "{" + names + R"(, "add_bos_token": null, "add_eos_token": true})"), (std::vector<int32_t>{'a', 'b', 201}));
        // A flag without its token adds nothing (transformers would refuse to load; the text is still encoded).
        QCOMPARE(ids(byte_level, R"({"add_bos_token": true, "bos_token": null})"), (std::vector<int32_t>{'a', 'b'}));
        QCOMPARE(ids(byte_level, ""), (std::vector<int32_t>{'a', 'b'}));
    }

    void demo_basics() {
        const Tokenizer t = load_or_fail(read_file(kDemoDir + "/tokenizer.json"), read_file(kDemoDir + "/tokenizer_config.json"));
        QCOMPARE(t.kind(), Tokenizer::Kind::ByteLevelBpe);
        QCOMPARE(t.vocab_size(), 4096);
        QCOMPARE(t.eos_id(), t.token_id("<|im_end|>"));
        // Every digit is its own token, whatever digits surround it: arithmetic is learnable one digit at a time.
        const std::vector<int32_t> ids = *t.encode("What is 23 plus 45? 1234567890");
        std::string digits;
        for (int32_t id : ids) {
            const std::string piece = t.decode_token_bytes(id);
            if (piece.find_first_of("0123456789") != std::string::npos) {
                QCOMPARE(piece.size(), size_t(1));
                digits += piece;
            }
        }
        QCOMPARE(digits, std::string("23451234567890"));
    }

    void qwen3_basics() {
        if (!file_exists(kQwenDir + "/tokenizer.json")) QSKIP("shared/reference/tokenizers/qwen3 is not present");
        const Tokenizer t = load_or_fail(read_file(kQwenDir + "/tokenizer.json"), read_file(kQwenDir + "/tokenizer_config.json"));
        QCOMPARE(t.kind(), Tokenizer::Kind::ByteLevelBpe);
        QCOMPARE(t.vocab_size(), 151669);
        QCOMPARE(t.bos_id(), -1);  // bos_token is null in its tokenizer_config.json and it has no <s>
        QCOMPARE(t.eos_id(), 151645);
        QCOMPARE(t.token_id("<|im_end|>"), 151645);
        QCOMPARE(t.token_id("<|endoftext|>"), 151643);
        QCOMPARE(t.token_id("no such piece"), -1);
        QCOMPARE(t.piece(151644), std::string("<|im_start|>"));
        QCOMPARE(t.piece(-1), std::string());
        QCOMPARE(t.piece(10000000), std::string());
        QCOMPARE(*t.encode("Hello world"), (std::vector<int32_t>{9707, 1879}));
        QCOMPARE(t.decode_token_bytes(t.token_id("\xC4\xA0world")), std::string(" world"));
        // "😀" is 4 bytes; whatever pieces carry it, their bytes add up to it.
        std::string bytes;
        const std::vector<int32_t> emoji = *t.encode("\xF0\x9F\x98\x80");  // a copy: the Result is a temporary
        for (int32_t id : emoji) bytes += t.decode_token_bytes(id);
        QCOMPARE(bytes, std::string("\xF0\x9F\x98\x80"));
        // A lone continuation byte decodes to U+FFFD.
        const int32_t lone = t.token_id("\xC4\xA2");  // U+0122, byte 0x80 in the byte-level alphabet
        QVERIFY(lone >= 0);
        QCOMPARE(t.decode({lone}), std::string("\xEF\xBF\xBD"));
        QCOMPARE(t.decode_token_bytes(lone), std::string("\x80"));
    }

    void llama2_basics() {
        const Tokenizer t = load_or_fail(read_file(kLlamaDir + "/tokenizer.json"), read_file(kLlamaDir + "/tokenizer_config.json"));
        QCOMPARE(t.kind(), Tokenizer::Kind::SentencePieceBpe);
        QCOMPARE(t.vocab_size(), 32000);
        QCOMPARE(t.bos_id(), 1);
        QCOMPARE(t.eos_id(), 2);
        QCOMPARE((*t.encode("Hello", true)).front(), 1);
        QVERIFY((*t.encode("Hello", false)).front() != 1);
        QCOMPARE(*t.encode("", true), std::vector<int32_t>{1});
        QCOMPARE(*t.encode("", false), std::vector<int32_t>{});
        QCOMPARE(t.decode_token_bytes(t.token_id("\xE2\x96\x81Hello")), std::string(" Hello"));
        QCOMPARE(t.decode_token_bytes(t.token_id("<0x0A>")), std::string("\n"));
    }

    // ---------------------------------------------------------------- units
    void byte_fallback() {
        const std::string lower = "\xE2\x96\x81";  // ▁
        json v = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}, {lower, 3}, {"a", 4}, {"b", 5}, {lower + "a", 6}, {"ab", 7},
                  {lower + "ab", 8}, {"<0xC3>", 9}, {"<0xA9>", 10}};
        json merges = {lower + " a", "a b", json::array({lower + "a", "b"})};  // both merge forms
        json norm = {{"type", "Sequence"}, {"normalizers", {{{"type", "Prepend"}, {"prepend", lower}},
                                                             {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", lower}}}}};
        json post = {{"type", "TemplateProcessing"}, {"single", "<s> $A"}, {"pair", "<s> $A <s> $B"},
                     {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}};
        json dec = {{"type", "Sequence"}, {"decoders", {{{"type", "Replace"}, {"pattern", {{"String", lower}}}, {"content", " "}},
                                                         {{"type", "ByteFallback"}}, {{"type", "Fuse"}},
                                                         {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
        json at = {added(0, "<unk>", true), added(1, "<s>", true), added(2, "</s>", true)};
        for (bool fuse : {true, false}) {
            json model = bpe_model(v, merges, {{"unk_token", "<unk>"}, {"byte_fallback", true}, {"fuse_unk", fuse}});
            const Tokenizer t = load_or_fail(tokenizer_doc(model, norm, nullptr, post, dec, at).dump());
            QCOMPARE(*t.encode("ab"), (std::vector<int32_t>{1, 8}));
            QCOMPARE(*t.encode("ab", false), (std::vector<int32_t>{8}));
            QCOMPARE(*t.encode("\xC3\xA9", false), (std::vector<int32_t>{3, 9, 10}));  // é -> <0xC3><0xA9>
            // ñ = C3 B1 has no <0xB1>: the whole character becomes <unk>, fused or not.
            QCOMPARE(*t.encode("\xC3\xB1\xC3\xB1", false), fuse ? (std::vector<int32_t>{3, 0}) : (std::vector<int32_t>{3, 0, 0}));
            QCOMPARE(t.decode({3, 9, 10}), std::string("\xC3\xA9"));
            QCOMPARE(t.decode({1, 3, 9, 10}), std::string("<s> \xC3\xA9"));
            QCOMPARE(t.decode({1, 3, 9, 10}, true), std::string("\xC3\xA9"));
            // An invalid byte run becomes one U+FFFD per byte (the Rust ByteFallback decoder).
            QCOMPARE(t.decode({9, 9}), std::string("\xEF\xBF\xBD\xEF\xBF\xBD"));
            QCOMPARE(t.decode({9, 4}), std::string("\xEF\xBF\xBD" "a"));
            QCOMPARE(t.decode_token_bytes(9), std::string("\xC3"));
            QCOMPARE(t.decode_token_bytes(8), std::string(" ab"));
            QCOMPARE(t.kind(), Tokenizer::Kind::SentencePieceBpe);
            QCOMPARE(t.bos_id(), 1);
            QCOMPARE(t.eos_id(), 2);
        }
    }

    void empty_string() {
        const Tokenizer t = load_or_fail(read_file(kLlamaDir + "/tokenizer.json"), read_file(kLlamaDir + "/tokenizer_config.json"));
        QCOMPARE(*t.encode("", false), std::vector<int32_t>{});
        QCOMPARE(t.decode({}), std::string());
        QCOMPARE(t.decode_token_bytes(-5), std::string());
        const Tokenizer empty;  // default-constructed: usable, empty
        QCOMPARE(*empty.encode("abc"), std::vector<int32_t>{});
        QCOMPARE(empty.decode({1, 2}), std::string());
        QCOMPARE(empty.vocab_size(), 0);
        Tokenizer moved = load_or_fail(read_file(kLlamaDir + "/tokenizer.json"));
        Tokenizer target = std::move(moved);
        QCOMPARE(*moved.encode("x"), std::vector<int32_t>{});  // NOLINT(bugprone-use-after-move): defined as empty
        QVERIFY(!(*target.encode("x")).empty());
    }

    void unknown_id_decode() {
        const Tokenizer t = load_or_fail(read_file(kLlamaDir + "/tokenizer.json"), read_file(kLlamaDir + "/tokenizer_config.json"));
        const auto ids = *t.encode("Hello world", false);
        auto with_bad = ids;
        with_bad.insert(with_bad.begin() + 1, {-1, 32000, 1 << 30});
        QCOMPARE(t.decode(with_bad), t.decode(ids));  // unknown ids are dropped, as HF does
        QCOMPARE(t.decode({-7}), std::string());
        QCOMPARE(t.decode_token_bytes(32000), std::string());
        QCOMPARE(t.piece(32000), std::string());
    }

    void invalid_utf8_input() {
        const Tokenizer t = load_or_fail(read_file(kLlamaDir + "/tokenizer.json"), read_file(kLlamaDir + "/tokenizer_config.json"));
        // Invalid bytes are read as U+FFFD (like from_utf8_lossy) before tokenizing.
        QCOMPARE(*t.encode("a\xFF" "b", false), *t.encode("a\xEF\xBF\xBD" "b", false));
        QCOMPARE(*t.encode("\xE2\x82", false), *t.encode("\xEF\xBF\xBD", false));
        const auto nul = *t.encode(std::string("a\0b", 3), false);  // NUL is a character like any other
        QVERIFY(std::find(nul.begin(), nul.end(), t.token_id("<0x00>")) != nul.end());
    }

    void malformed_json() {
        for (const auto& [text, needle] : kBadTokenizers) {
            auto r = Tokenizer::from_json(text);
            QVERIFY2(!r.is_ok(), ("accepted: " + show(text)).c_str());
            const std::string& m = r.message();
            QVERIFY2(m.find(needle) != std::string::npos, ("message '" + m + "' lacks '" + needle + "' for " + show(text)).c_str());
            QVERIFY2(m.find('\n') == std::string::npos, ("multi-line message: " + m).c_str());
        }
        // A good tokenizer.json with a broken tokenizer_config.json is an error too.
        const std::string good = R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})";
        QVERIFY(Tokenizer::from_json(good).is_ok());
        auto r = Tokenizer::from_json(good, "{\"bos_token\": ");
        QVERIFY(!r.is_ok());
        QVERIFY(r.message().find("tokenizer_config.json") != std::string::npos);
        QVERIFY(!Tokenizer::from_json(good, "[1]").is_ok());
    }

    void truncated_json() {
        const std::string full = read_file(kLlamaDir + "/tokenizer.json");
        QVERIFY(full.size() > 100000);
        for (size_t cut : {size_t(1), size_t(100), full.size() / 3, full.size() / 2, full.size() - 2}) {
            auto r = Tokenizer::from_json(std::string_view(full).substr(0, cut));
            QVERIFY2(!r.is_ok(), ("truncated at " + std::to_string(cut) + " was accepted").c_str());
            QVERIFY(r.message().find("not valid JSON") != std::string::npos);
        }
        // Valid JSON that lost its required parts.
        json doc = json::parse(full);
        doc["model"].erase("merges");
        auto r = Tokenizer::from_json(doc.dump());
        QVERIFY(!r.is_ok());
        QVERIFY(r.message().find("merges") != std::string::npos);
        doc.erase("model");
        QVERIFY(!Tokenizer::from_json(doc.dump()).is_ok());
    }

    // Split behaviours, exactly as the Rust NormalizedString::split test spells them out.
    void split_behaviours() {
        const std::vector<std::string> words = {"The", "final", "countdown", "-", "The-", "final-", "-final", "-countdown", "--"};
        const std::map<std::string, std::string> expected = {
            {"Removed", "The|final|countdown"},
            {"Isolated", "The|-|final|-|-|countdown"},
            {"MergedWithPrevious", "The-|final-|-|countdown"},
            {"MergedWithNext", "The|-final|-|-countdown"},
            {"Contiguous", "The|-|final|--|countdown"},
        };
        for (const auto& [behavior, want] : expected) {
            for (const char* kind : {"String", "Regex"}) {
                json pre = {{"type", "Split"}, {"pattern", {{kind, "-"}}}, {"behavior", behavior}, {"invert", false}};
                const Tokenizer t = word_tokenizer(words, nullptr, pre);
                QCOMPARE(join(pieces_of(t, "The-final--countdown")), want);
            }
        }
        // invert: the pattern matches the pieces to keep.
        json pre = {{"type", "Split"}, {"pattern", {{"Regex", "[a-z]+"}}}, {"behavior", "Removed"}, {"invert", true}};
        QCOMPARE(join(pieces_of(word_tokenizer({"he", "final", "countdown"}, nullptr, pre), "The-final--countdown")),
                 std::string("he|final|countdown"));
    }

    void pre_tokenizers() {
        // Digits
        const std::vector<std::string> w = {"abc", "123", "def", "4", "1", "2", "3", " ", "x"};
        QCOMPARE(join(pieces_of(word_tokenizer(w, nullptr, {{"type", "Digits"}, {"individual_digits", false}}), "abc123def4")),
                 std::string("abc|123|def|4"));
        QCOMPARE(join(pieces_of(word_tokenizer(w, nullptr, {{"type", "Digits"}, {"individual_digits", true}}), "abc123def4")),
                 std::string("abc|1|2|3|def|4"));
        // Whitespace / WhitespaceSplit / Punctuation
        const std::vector<std::string> w2 = {"Hey", "friend", "!", "How", "are", "you", "?!", "?", "you?!"};
        QCOMPARE(join(pieces_of(word_tokenizer(w2, nullptr, {{"type", "Whitespace"}}), "Hey friend!     How are you?!")),
                 std::string("Hey|friend|!|How|are|you|?!"));
        QCOMPARE(join(pieces_of(word_tokenizer(w2, nullptr, {{"type", "WhitespaceSplit"}}), "Hey \t How\nare  you?!")),
                 std::string("Hey|How|are|you?!"));
        QCOMPARE(join(pieces_of(word_tokenizer({"you", "?", "!"}, nullptr, {{"type", "Punctuation"}}), "you?!")), std::string("you|?|!"));
        QCOMPARE(join(pieces_of(word_tokenizer({"you", "?!"}, nullptr, {{"type", "Punctuation"}, {"behavior", "Contiguous"}}), "you?!")),
                 std::string("you|?!"));

        // Metaspace prepend schemes, with an added token cutting the text (prepend "first" only at offset 0).
        const std::string m = "\xE2\x96\x81";
        const std::vector<std::string> w3 = {m + "hello", "hello", m + "world", "world", "<s>", m};
        json at = {added(4, "<s>", true)};
        auto meta = [&](const char* scheme) {
            return json{{"type", "Metaspace"}, {"replacement", m}, {"prepend_scheme", scheme}, {"split", true}};
        };
        QCOMPARE(join(pieces_of(word_tokenizer(w3, nullptr, meta("first"), at), "hello world")), m + "hello|" + m + "world");
        QCOMPARE(join(pieces_of(word_tokenizer(w3, nullptr, meta("first"), at), "<s>hello world")), "<s>|hello|" + m + "world");
        QCOMPARE(join(pieces_of(word_tokenizer(w3, nullptr, meta("always"), at), "<s>hello world")), "<s>|" + m + "hello|" + m + "world");
        QCOMPARE(join(pieces_of(word_tokenizer(w3, nullptr, meta("never"), at), "hello world")), "hello|" + m + "world");
        QCOMPARE(join(pieces_of(word_tokenizer(w3, nullptr, meta("first"), at), "hello<s> world")), m + "hello|<s>|" + m + "world");
        json nosplit = meta("always");
        nosplit["split"] = false;
        QCOMPARE(join(pieces_of(word_tokenizer({m + "hello" + m + "world"}, nullptr, nosplit), "hello world")), m + "hello" + m + "world");
        // legacy form: add_prefix_space false means never
        json legacy = {{"type", "Metaspace"}, {"replacement", m}, {"add_prefix_space", false}};
        QCOMPARE(join(pieces_of(word_tokenizer(w3, nullptr, legacy), "hello world")), "hello|" + m + "world");
    }

    void normalizers() {
        json seq = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFKC"}}, {{"type", "Lowercase"}}, {{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}}}}};
        QCOMPARE(join(pieces_of(word_tokenizer({"abc", "i\xCC\x87"}, seq, nullptr), "  \xEF\xBC\xA1\xEF\xBC\xA2\xEF\xBC\xA3 \xE3\x80\x80")), std::string("abc"));
        QCOMPARE(join(pieces_of(word_tokenizer({"abc", "i\xCC\x87"}, seq, nullptr), "\xC4\xB0")), std::string("i\xCC\x87"));  // İ -> i̇
        json re = {{"type", "Replace"}, {"pattern", {{"Regex", "\\s+"}}}, {"content", "_"}};
        QCOMPARE(join(pieces_of(word_tokenizer({"a_b_c"}, re, nullptr), "a  b\t\nc")), std::string("a_b_c"));
        json nfc = {{"type", "NFC"}};
        QCOMPARE(join(pieces_of(word_tokenizer({"caf\xC3\xA9"}, nfc, nullptr), "cafe\xCC\x81")), std::string("caf\xC3\xA9"));
        json nfd = {{"type", "NFD"}};
        QCOMPARE(join(pieces_of(word_tokenizer({"cafe\xCC\x81"}, nfd, nullptr), "caf\xC3\xA9")), std::string("cafe\xCC\x81"));
        json sa = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFD"}}, {{"type", "StripAccents"}}}}};
        QCOMPARE(join(pieces_of(word_tokenizer({"cafe"}, sa, nullptr), "caf\xC3\xA9")), std::string("cafe"));
        json strip_left = {{"type", "Strip"}, {"strip_left", true}, {"strip_right", false}};
        QCOMPARE(join(pieces_of(word_tokenizer({"x  "}, strip_left, nullptr), " \t x  ")), std::string("x  "));
        json prepend = {{"type", "Prepend"}, {"prepend", ">"}};
        QCOMPARE(join(pieces_of(word_tokenizer({">x", "<s>"}, prepend, nullptr, {added(1, "<s>", true)}), "<s>x")), std::string("<s>|>x"));
    }

    void added_token_flags() {
        json bl = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
        json at = {added(200, "<x>", true, {{"lstrip", true}}), added(201, "[y]", true, {{"rstrip", true}}),
                   added(202, "word", false, {{"single_word", true}}), added(203, "<x>y", true), added(204, "ok", false, {{"normalized", true}})};
        json lower = {{"type", "Lowercase"}};
        const Tokenizer t = load_or_fail(tokenizer_doc(bpe_model(ascii_vocab()), lower, bl, {{"type", "ByteLevel"}}, bl, at).dump());
        QCOMPARE(t.kind(), Tokenizer::Kind::ByteLevelBpe);
        QCOMPARE(*t.encode("a  <x>b"), (std::vector<int32_t>{'a', 200, 'b'}));             // lstrip eats the spaces
        QCOMPARE(*t.encode("a [y]  b"), (std::vector<int32_t>{'a', 32, 201, 'b'}));        // rstrip eats the spaces
        QCOMPARE(*t.encode("<x>y"), (std::vector<int32_t>{203}));                           // longest match first
        QCOMPARE(*t.encode("<x>z"), (std::vector<int32_t>{200, 'z'}));
        QCOMPARE(*t.encode("word"), (std::vector<int32_t>{202}));
        QCOMPARE(*t.encode("a word."), (std::vector<int32_t>{'a', 32, 202, '.'}));
        QCOMPARE(*t.encode("words"), (std::vector<int32_t>{'w', 'o', 'r', 'd', 's'}));    // not a single word
        QCOMPARE(*t.encode("sword"), (std::vector<int32_t>{'s', 'w', 'o', 'r', 'd'}));
        QCOMPARE(*t.encode("OK"), (std::vector<int32_t>{204}));                              // normalized: matched after lowercasing
        QCOMPARE(*t.encode("<X>"), (std::vector<int32_t>{'<', 'x', '>'}));                  // not normalized: raw text only
        QCOMPARE(t.decode({'a', 32, 202, '.'}), std::string("a word."));
        QCOMPARE(t.decode({'a', 200, 'b'}, true), std::string("ab"));
        QCOMPARE(t.decode({'a', 200, 'b'}), std::string("a<x>b"));
        QCOMPARE(t.decode_token_bytes(32), std::string(" "));
        QCOMPARE(t.bos_id(), -1);
        QCOMPARE(t.eos_id(), -1);
        QCOMPARE(t.vocab_size(), 205);
    }

    void bpe_merging() {
        // Merge ranks decide the order, and the leftmost pair wins a tie.
        json v = {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"bc", 4}, {"abc", 5}, {"aa", 6}, {"aaa", 7}, {"aaaa", 8}};
        const Tokenizer t1 = load_or_fail(tokenizer_doc(bpe_model(v, {"b c", "a b", "a bc", "a a", "aa aa", "aa a"}), nullptr, nullptr, nullptr, nullptr).dump());
        QCOMPARE(*t1.encode("abc"), (std::vector<int32_t>{5}));      // b c first, then a bc
        QCOMPARE(*t1.encode("abab"), (std::vector<int32_t>{3, 3}));
        QCOMPARE(*t1.encode("aaaaa"), (std::vector<int32_t>{8, 0}));  // (a a)(a a) a -> aaaa a
        QCOMPARE(*t1.encode("aaa"), (std::vector<int32_t>{7}));       // a a -> aa (leftmost), then aa a -> aaa
        const Tokenizer t2 = load_or_fail(tokenizer_doc(bpe_model(v, {"a b", "b c", "ab c"}), nullptr, nullptr, nullptr, nullptr).dump());
        QCOMPARE(*t2.encode("abc"), (std::vector<int32_t>{5}));
        QCOMPARE(*t2.encode("bcab"), (std::vector<int32_t>{4, 3}));
        // No model type: still BPE when it has merges. Unknown characters without unk/byte fallback vanish.
        const Tokenizer t3 = load_or_fail(R"({"model": {"vocab": {"a": 0, "b": 1}, "merges": []}})");
        QCOMPARE(*t3.encode("azb"), (std::vector<int32_t>{0, 1}));
        QCOMPARE(t3.decode({0, 1}), std::string("a b"));  // no decoder: pieces joined by spaces
        // continuing_subword_prefix / end_of_word_suffix
        json v4 = {{"a", 0}, {"##b", 1}, {"##c</w>", 2}, {"a##b", 3}, {"ab", 4}, {"##b##c</w>", 5}, {"abc</w>", 6}, {"b", 7}, {"c</w>", 8}};
        const Tokenizer t4 = load_or_fail(tokenizer_doc(bpe_model(v4, {"a ##b", "ab ##c</w>"}, {{"continuing_subword_prefix", "##"}, {"end_of_word_suffix", "</w>"}}),
                                                        nullptr, nullptr, nullptr, {{"type", "BPEDecoder"}, {"suffix", "</w>"}}).dump());
        QCOMPARE(*t4.encode("abc"), (std::vector<int32_t>{6}));
        QCOMPARE(t4.decode({6, 6}), std::string("abc abc"));
    }

    void post_processors() {
        json v = ascii_vocab();
        json at = {added(250, "[CLS]", true), added(251, "[SEP]", true)};
        json tmpl = {{"type", "TemplateProcessing"},
                     {"single", {{{"SpecialToken", {{"id", "[CLS]"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                 {{"SpecialToken", {{"id", "[SEP]"}, {"type_id", 0}}}}}},
                     {"pair", "[CLS] $A [SEP] $B:1 [SEP]:1"},
                     {"special_tokens", {{"[CLS]", {{"id", "[CLS]"}, {"ids", {250}}, {"tokens", {"[CLS]"}}}},
                                         {"[SEP]", {{"id", "[SEP]"}, {"ids", {251}}, {"tokens", {"[SEP]"}}}}}}};
        const Tokenizer t = load_or_fail(tokenizer_doc(bpe_model(v), nullptr, nullptr, tmpl, nullptr, at).dump());
        QCOMPARE(*t.encode("ab"), (std::vector<int32_t>{250, 'a', 'b', 251}));
        QCOMPARE(*t.encode("ab", false), (std::vector<int32_t>{'a', 'b'}));
        json bert = {{"type", "BertProcessing"}, {"sep", {"[SEP]", 251}}, {"cls", {"[CLS]", 250}}};
        json seq = {{"type", "Sequence"}, {"processors", {{{"type", "ByteLevel"}, {"trim_offsets", false}}, bert}}};
        const Tokenizer tb = load_or_fail(tokenizer_doc(bpe_model(v), nullptr, nullptr, seq, nullptr, at).dump());
        QCOMPARE(*tb.encode("a"), (std::vector<int32_t>{250, 'a', 251}));
        json roberta = {{"type", "RobertaProcessing"}, {"sep", {"[SEP]", 251}}, {"cls", {"[CLS]", 250}}, {"trim_offsets", true}, {"add_prefix_space", true}};
        const Tokenizer tr = load_or_fail(tokenizer_doc(bpe_model(v), nullptr, nullptr, roberta, nullptr, at).dump());
        QCOMPARE(*tr.encode(""), (std::vector<int32_t>{250, 251}));
        // No post-processor: tokenizer_config.json's add_bos_token / add_eos_token apply.
        json v2 = v;
        v2["<s>"] = 252;
        v2["</s>"] = 253;
        const std::string doc = tokenizer_doc(bpe_model(v2), nullptr, nullptr, nullptr, nullptr).dump();
        const Tokenizer tc = load_or_fail(doc, R"({"add_bos_token": true, "add_eos_token": true, "bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "</s>"})");
        QCOMPARE(*tc.encode("a"), (std::vector<int32_t>{252, 'a', 253}));
        QCOMPARE(*tc.encode("a", false), (std::vector<int32_t>{'a'}));
        const Tokenizer tn = load_or_fail(doc, "");
        QCOMPARE(*tn.encode("a"), (std::vector<int32_t>{'a'}));
        QCOMPARE(tn.bos_id(), -1);  // "<s>" is only a vocabulary piece here, not an added token
        QCOMPARE(tn.eos_id(), -1);
        const std::string doc_added = tokenizer_doc(bpe_model(v2), nullptr, nullptr, nullptr, nullptr,
                                                    {added(252, "<s>", true), added(253, "</s>", true)}).dump();
        const Tokenizer ta = load_or_fail(doc_added, "");
        QCOMPARE(ta.bos_id(), 252);  // found by its well-known name
        QCOMPARE(ta.eos_id(), 253);
        const Tokenizer tnull = load_or_fail(doc_added, R"({"bos_token": null})");
        QCOMPARE(tnull.bos_id(), -1);  // an explicit null means none
        QCOMPARE(tnull.eos_id(), 253);
        const Tokenizer tx = load_or_fail(doc, R"({"bos_token": "</s>", "eos_token": {"content": "<s>"}})");
        QCOMPARE(tx.bos_id(), 253);
        QCOMPARE(tx.eos_id(), 252);
    }

    void decoders() {
        const std::string m = "\xE2\x96\x81";
        json v = {{m + "hello", 0}, {m + "world", 1}, {m + m + "a", 2}, {"x", 3}};
        json meta = {{"type", "Metaspace"}, {"replacement", m}, {"prepend_scheme", "always"}, {"split", true}};
        const Tokenizer t = load_or_fail(tokenizer_doc(bpe_model(v), nullptr, meta, nullptr, meta).dump());
        QCOMPARE(t.decode({0, 1}), std::string("hello world"));
        QCOMPARE(t.decode({2, 1}), std::string("a world"));  // the first token loses every replacement char (Rust)
        QCOMPARE(t.decode_token_bytes(1), std::string(" world"));
        QCOMPARE(t.kind(), Tokenizer::Kind::SentencePieceBpe);
        json meta_never = meta;
        meta_never["prepend_scheme"] = "never";
        const Tokenizer tn = load_or_fail(tokenizer_doc(bpe_model(v), nullptr, meta_never, nullptr, meta_never).dump());
        QCOMPARE(tn.decode({0, 1}), std::string(" hello world"));
        // WordPiece decoder with cleanup, Strip both ends, clean_up_tokenization_spaces from the config.
        json v2 = {{"he", 0}, {"##llo", 1}, {",", 2}, {"world", 3}, {"!", 4}, {"n't", 5}, {"do", 6}};
        json wp = {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}};
        const Tokenizer tw = load_or_fail(tokenizer_doc(bpe_model(v2), nullptr, nullptr, nullptr, wp).dump());
        QCOMPARE(tw.decode({0, 1, 2, 3, 4}), std::string("hello, world!"));
        json strip = {{"type", "Strip"}, {"content", "x"}, {"start", 2}, {"stop", 1}};
        json v3 = {{"xxxaxx", 0}, {"x", 1}};
        const Tokenizer ts = load_or_fail(tokenizer_doc(bpe_model(v3), nullptr, nullptr, nullptr, strip).dump());
        QCOMPARE(ts.decode({0}), std::string("xax"));
        QCOMPARE(ts.decode({1}), std::string());
        const Tokenizer tclean = load_or_fail(tokenizer_doc(bpe_model(v2), nullptr, nullptr, nullptr, nullptr).dump(),
                                              R"({"clean_up_tokenization_spaces": true})");
        QCOMPARE(tclean.decode({6, 5, 2, 3, 4}), std::string("don't, world!"));
    }

    // ---------------------------------------------------------------- hostile tokenizer.json (issue 20)
    // A Sequence nested 30,000 deep: refused at load, not a stack overflow (the file's JSON is checked before
    // it is parsed; the component parsers have their own bound).
    void deep_sequences_are_refused() {
        const std::vector<std::pair<std::string, std::string>> kinds = {
            {"normalizer", "normalizers"}, {"pre_tokenizer", "pretokenizers"}, {"post_processor", "processors"}, {"decoder", "decoders"}};
        const std::string model = R"("model": {"type": "BPE", "vocab": {"a": 0}, "merges": []})";
        for (const auto& [part, list] : kinds) {
            for (int depth : {30000, 40}) {
                std::string doc = "{" + model + ", \"" + part + "\": ";
                for (int k = 0; k < depth; ++k) doc += "{\"type\": \"Sequence\", \"" + list + "\": [";
                doc += "{\"type\": \"ByteLevel\"}";
                for (int k = 0; k < depth; ++k) doc += "]}";
                doc += "}";
                auto r = Tokenizer::from_json(doc);
                QVERIFY2(!r, (part + " nested " + std::to_string(depth) + " deep was accepted").c_str());
                QVERIFY2(r.message().find("depth limit") != std::string::npos || r.message().find("nests deeper") != std::string::npos,
                         r.message().c_str());
            }
            // A few levels are fine.
            std::string doc = "{" + model + ", \"" + part + "\": ";
            for (int k = 0; k < 4; ++k) doc += "{\"type\": \"Sequence\", \"" + list + "\": [";
            doc += "{\"type\": \"ByteLevel\"}";
            for (int k = 0; k < 4; ++k) doc += "]}";
            doc += "}";
            auto r = Tokenizer::from_json(doc);
            QVERIFY2(r, r.message().c_str());
        }
        // JSON nested deeply anywhere (an unused field) is refused the same way, and so is a deep tokenizer_config.json.
        const std::string deep = std::string(100000, '[') + std::string(100000, ']');
        QVERIFY(!Tokenizer::from_json("{" + model + ", \"x\": " + deep + "}"));
        QVERIFY(!Tokenizer::from_json("{" + model + "}", "{\"x\": " + deep + "}"));
    }

    // A Split regex that rescans the rest of the text from every position would take ~20 minutes on 1 MB; one that
    // backtracks exponentially hits PCRE2's match limit. Both are errors, quickly, never a shortened encoding.
    void regex_work_is_bounded() {
        const std::string mb(1u << 20, 'a');
        using clock = std::chrono::steady_clock;
        for (const char* pattern : {"\\w*X|\\w", "(?:a+)+b|a", "(a|aa)*c|a", "a*a*a*a*a*b|a"}) {
            const json pre = {{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"}, {"invert", false}};
            const Tokenizer t = word_tokenizer({"a", "b"}, nullptr, pre);
            const auto t0 = clock::now();
            auto r = t.encode(mb, false);
            const double secs = std::chrono::duration<double>(clock::now() - t0).count();
            QVERIFY2(!r, pattern);
            QVERIFY2(r.message().find("regex") != std::string::npos, r.message().c_str());
            QVERIFY2(r.message().find('\n') == std::string::npos, r.message().c_str());
            qInfo("%s on 1 MiB: refused in %.2f s: %s", pattern, secs, r.message().c_str());
            QVERIFY2(secs < 60 * colibri::test::build_slowdown(), pattern);
        }
        // The match limit on a short text: an error, not the rest of the text dropped.
        {
            const json pre = {{"type", "Split"}, {"pattern", {{"Regex", "(?:a+)+b|."}}}, {"behavior", "Isolated"}, {"invert", false}};
            const Tokenizer t = word_tokenizer({"a", "c"}, nullptr, pre);
            auto r = t.encode(std::string(40, 'a') + "c", false);
            QVERIFY2(!r, "a match limit was not reported");
            QVERIFY(r.message().find("regex") != std::string::npos);
        }
        // A long String pattern is searched in linear time ("aaa...ab" in "aaa...a").
        {
            const json pre = {{"type", "Split"}, {"pattern", {{"String", std::string(100000, 'a') + "b"}}}, {"behavior", "Isolated"}, {"invert", false}};
            const Tokenizer t = word_tokenizer({"a"}, nullptr, pre);
            const auto t0 = clock::now();
            auto r = t.encode(mb, false);
            QVERIFY2(r, r.message().c_str());
            QCOMPARE(r->size(), mb.size());
            QVERIFY(std::chrono::duration<double>(clock::now() - t0).count() < 30);
        }
        // Real tokenizers stay well inside the bound on long, awkward texts (runs of spaces, digits, one long word).
        if (file_exists(kQwenDir + "/tokenizer.json")) {
            auto q = Tokenizer::from_json(read_file(kQwenDir + "/tokenizer.json"), read_file(kQwenDir + "/tokenizer_config.json"));
            QVERIFY(q);
            std::string text;
            while (text.size() < (1u << 20))
                text += "Hello, world! It's 12345678901234567890 o'clock.  \n\n\t " + std::string(300, ' ') + std::string(5000, 'x') +
                        " \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E caf\xC3\xA9 \xF0\x9F\x98\x80!!!???... a1b2c3 ";
            auto r = q->encode(text, false);
            QVERIFY2(r, r.message().c_str());
            QVERIFY(r->size() > 10000);
        }
    }

    // Normalizers and post-processors that multiply the text or its tokens are stopped.
    void growth_is_bounded() {
        json doubling = json::array();
        for (int k = 0; k < 40; ++k) doubling.push_back({{"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", "aa"}});
        const Tokenizer t = word_tokenizer({"a"}, {{"type", "Sequence"}, {"normalizers", doubling}}, nullptr);
        auto r = t.encode(std::string(1000, 'a'), false);
        QVERIFY(!r);
        QVERIFY2(r.message().find("grows") != std::string::npos, r.message().c_str());
        json post = {{"type", "TemplateProcessing"}, {"single", {"$A", "$A"}}, {"special_tokens", json::object()}};
        json posts = json::array();
        for (int k = 0; k < 40; ++k) posts.push_back(post);
        json doc = tokenizer_doc(bpe_model(ascii_vocab()), nullptr, nullptr, {{"type", "Sequence"}, {"processors", posts}}, nullptr);
        const Tokenizer tp = load_or_fail(doc.dump());
        auto rp = tp.encode("abc", true);
        QVERIFY(!rp);
        QVERIFY2(rp.message().find("post-processor") != std::string::npos, rp.message().c_str());
        QVERIFY(tp.encode("abc", false));
    }

    void hostile_ids_and_decoders() {
        // An added token at id 2^31 - 1 would make the vocabulary size overflow int32.
        json doc = tokenizer_doc(bpe_model(ascii_vocab()), nullptr, nullptr, nullptr, nullptr, json::array({added(2147483647, "<x>", true)}));
        auto r = Tokenizer::from_json(doc.dump());
        QVERIFY(!r);
        QVERIFY2(r.message().find("out-of-range") != std::string::npos, r.message().c_str());
        doc = tokenizer_doc(bpe_model(ascii_vocab()), nullptr, nullptr, nullptr, nullptr, json::array({added(2147483646, "<x>", true)}));
        r = Tokenizer::from_json(doc.dump());
        QVERIFY(!r);
        QVERIFY2(r.message().find("far from") != std::string::npos, r.message().c_str());
        // Decoding runs no regex (it has no error to report): a Regex Replace decoder is refused at load.
        doc = tokenizer_doc(bpe_model(ascii_vocab()), nullptr, nullptr, nullptr,
                            {{"type", "Replace"}, {"pattern", {{"Regex", "(a+)+$"}}}, {"content", ""}});
        r = Tokenizer::from_json(doc.dump());
        QVERIFY(!r);
        QVERIFY2(r.message().find("Regex") != std::string::npos, r.message().c_str());
    }

    // ---------------------------------------------------------------- speed (informational)
    void gptoss_load_time() {
        using clock = std::chrono::steady_clock;
        const std::string tj = read_maybe_zst(kGptOssDir + "/tokenizer.json");
        const std::string cfg = read_file(kGptOssDir + "/tokenizer_config.json");
        QVERIFY(!tj.empty());
        const auto t0 = clock::now();
        auto r = Tokenizer::from_json(tj, cfg);
        const double load_s = std::chrono::duration<double>(clock::now() - t0).count();
        QVERIFY(r.is_ok());
        qInfo("gptoss: from_json %.3f s (%.1f MB tokenizer.json, %d ids)", load_s, tj.size() / 1e6, r->vocab_size());
    }

    void load_time_and_throughput() {
        if (!file_exists(kQwenDir + "/tokenizer.json")) QSKIP("shared/reference/tokenizers/qwen3 is not present");
        using clock = std::chrono::steady_clock;
        const auto t0 = clock::now();
        const std::string tj = read_file(kQwenDir + "/tokenizer.json");
        const std::string cfg = read_file(kQwenDir + "/tokenizer_config.json");
        auto r = Tokenizer::from_json(tj, cfg);
        const double load_s = std::chrono::duration<double>(clock::now() - t0).count();
        QVERIFY(r.is_ok());
        const json doc = json::parse(read_file(std::string(COLIBRI_TEST_DATA_DIR) + "/tokenizer/qwen3_parity.json"));
        std::vector<std::string> texts;
        size_t bytes = 0;
        for (const auto& c : doc.at("cases")) {
            texts.push_back(c.at("text").get<std::string>());
            bytes += texts.back().size();
        }
        size_t tokens = 0;
        const auto t1 = clock::now();
        for (const auto& s : texts) tokens += (*r->encode(s, false)).size();  // cold: BPE cache empty
        const double cold_s = std::chrono::duration<double>(clock::now() - t1).count();
        const auto t2 = clock::now();
        for (int rep = 0; rep < 3; ++rep)
            for (const auto& s : texts) tokens += (*r->encode(s, false)).size();
        const double warm_s = std::chrono::duration<double>(clock::now() - t2).count() / 3;
        qInfo("qwen3: load %.3f s (%.1f MB tokenizer.json); encode %.2f MB of text: cold %.2f MB/s, warm %.2f MB/s (%zu tokens/pass)",
              load_s, tj.size() / 1e6, bytes / 1e6, bytes / 1e6 / cold_s, bytes / 1e6 / warm_s, tokens / 4);
    }
};

QTEST_APPLESS_MAIN(TestTokenizer)
#include "test_tokenizer.moc"
