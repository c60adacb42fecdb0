// The chat service (engine/core/chat_service.h): ReplyStream driven with chosen logits (UTF-8 never split, stop
// strings cut and never shown in part, end-of-turn ids, max_tokens, log-probabilities), and ChatService on the
// demo model (prefix reuse gives the tokens a fresh evaluation gives, a refused turn keeps the cache, cancel).
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>

#include "../test_support.h"
#include "engine/core/chat_service.h"
#include "engine/core/generate.h"

using namespace colibri;
using namespace colibri::test;

namespace {

const QString kDemo = QStringLiteral(COLIBRI_BUILD_DIR "/demo/demo.bin");

bool valid_utf8(const std::string& s) {
    size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        const size_t n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (n == 0 || i + n > s.size()) return false;
        for (size_t k = 1; k < n; ++k)
            if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
        i += n;
    }
    return true;
}

// Logits that make a greedy sampler pick `id`.
std::vector<float> pick(const Model& m, int32_t id) {
    std::vector<float> l(m.hparams().vocab_size, 0.0f);
    l[static_cast<size_t>(id)] = 10.0f;
    return l;
}

SamplerConfig greedy() {
    SamplerConfig c;
    c.greedy = true;
    return c;
}

// A collector of what a turn showed.
struct Recorder : TurnObserver {
    std::string shown;
    std::vector<int32_t> ids;
    int stop_after = -1;  // cancel once this many tokens were generated
    bool on_token(const TokenEvent& e) override {
        shown += e.text;
        ids.push_back(e.id);
        return stop_after < 0 || static_cast<int>(ids.size()) < stop_after;
    }
};

}  // namespace

class TestChatService : public QObject {
    Q_OBJECT
    std::unique_ptr<Model> model_;
    std::unique_ptr<ThreadPool> pool_;

    // Feeds the ids of `text` through a ReplyStream and returns the events' texts.
    std::vector<std::string> stream_text(const std::string& text, const ReplyOptions& options, FinishReason* finish = nullptr,
                                         std::string* rest = nullptr) {
        auto ids = model_->tokenizer()->encode(text, false);
        if (!ids) return {};
        Sampler sampler(greedy());
        ReplyStream reply(*model_, sampler, options, {});
        std::vector<std::string> texts;
        for (int32_t id : ids.value()) {
            if (reply.done()) break;
            texts.push_back(reply.next(pick(*model_, id)).text);
        }
        if (finish) *finish = reply.finish();
        if (rest) *rest = reply.done() ? std::string() : reply.flush();
        return texts;
    }

private slots:
    void initTestCase() {
        QVERIFY2(QFile::exists(kDemo), "the build did not make the demo model");
        auto m = Model::load(kDemo.toStdString());
        QVERIFY2(m, m.message().c_str());
        model_ = std::move(m.value());
        QVERIFY(model_->tokenizer() != nullptr);
        pool_ = std::make_unique<ThreadPool>(2);
    }

    void characters_are_never_split() {
        // Emoji and CJK are several byte-level tokens: each event shows only whole characters, and all of them
        // together are the text.
        const std::string text = "Hi 🦜🐦 — 蜂鸟 über café";
        auto ids = model_->tokenizer()->encode(text, false);
        QVERIFY(ids);
        QVERIFY2(ids->size() > 6, "the text should take several tokens");
        ReplyOptions o;
        o.max_tokens = static_cast<int32_t>(ids->size());
        std::string all;
        bool some_token_showed_nothing = false;
        for (const std::string& t : stream_text(text, o)) {
            QVERIFY2(valid_utf8(t), t.c_str());
            some_token_showed_nothing = some_token_showed_nothing || t.empty();
            all += t;
        }
        QCOMPARE(QString::fromStdString(all), QString::fromStdString(text));
        QVERIFY2(some_token_showed_nothing, "no character spanned two tokens: the case tests nothing");
    }

    void stop_strings_end_the_reply_and_are_never_shown() {
        ReplyOptions o;
        o.max_tokens = 100;
        o.stop_strings = {"END", "\n\nUser:"};
        FinishReason finish{};
        std::string all;
        for (const std::string& t : stream_text("The answer is 42.\n\nUser: and then", o, &finish)) {
            QVERIFY2(t.find("\n\n") == std::string::npos, t.c_str());  // the stop string's start never leaks
            all += t;
        }
        QCOMPARE(finish, FinishReason::Stop);
        QCOMPARE(QString::fromStdString(all), QStringLiteral("The answer is 42."));
        // A held-back start that turns out not to be a stop string is shown after all.
        all.clear();
        std::string rest;
        for (const std::string& t : stream_text("ENTER the END", o, &finish, &rest)) all += t;
        QCOMPARE(finish, FinishReason::Stop);
        QCOMPARE(QString::fromStdString(all), QStringLiteral("ENTER the "));
        // No stop string at all: a partial match at the very end comes out when max_tokens ends the reply.
        auto ids = model_->tokenizer()->encode("ab EN", false);
        o.max_tokens = static_cast<int32_t>(ids->size());
        all.clear();
        for (const std::string& t : stream_text("ab EN", o, &finish)) all += t;
        QCOMPARE(finish, FinishReason::Length);
        QCOMPARE(QString::fromStdString(all), QStringLiteral("ab EN"));
    }

    void end_of_turn_ids_and_max_tokens() {
        const std::vector<int32_t> stops = default_stop_ids(*model_);
        QVERIFY(!stops.empty());
        Sampler sampler(greedy());
        ReplyOptions o;
        o.max_tokens = 10;
        o.stop_ids = stops;
        ReplyStream reply(*model_, sampler, o, {});
        const auto hi = model_->tokenizer()->encode("Hi", false);
        QVERIFY(hi && !hi->empty());
        QCOMPARE(QString::fromStdString(reply.next(pick(*model_, hi->front())).text), QStringLiteral("Hi"));
        const TokenEvent& end = reply.next(pick(*model_, stops.front()));
        QVERIFY(end.end_of_turn);
        QVERIFY(end.text.empty());
        QCOMPARE(reply.finish(), FinishReason::Stop);
        QCOMPARE(reply.tokens().size(), size_t(2));
        QCOMPARE(QString::fromStdString(reply.reply()), QStringLiteral("Hi"));

        ReplyStream two(*model_, sampler, ReplyOptions{2, {}, {}, -1, {}, {}}, {});
        two.next(pick(*model_, hi->front()));
        QVERIFY(!two.done());
        two.next(pick(*model_, hi->front()));
        QCOMPARE(two.finish(), FinishReason::Length);
        ReplyStream none(*model_, sampler, ReplyOptions{0, {}, {}, -1, {}, {}}, {});
        QCOMPARE(none.finish(), FinishReason::Length);
    }

    void logprobs_are_the_models_log_softmax() {
        std::vector<float> logits(model_->hparams().vocab_size);
        for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(float(i) * 0.37f) * 3.0f;
        logits[77] = 9.0f;
        logits[5] = 8.5f;
        double z = 0;
        for (float l : logits) z += std::exp(double(l));
        Sampler sampler(greedy());
        ReplyOptions o;
        o.top_logprobs = 3;
        ReplyStream reply(*model_, sampler, o, {});
        const TokenEvent& e = reply.next(logits);
        QCOMPARE(e.id, 77);
        QCOMPARE(e.logprob.id, 77);
        QVERIFY(std::fabs(e.logprob.logprob - float(9.0 - std::log(z))) < 1e-4f);
        QCOMPARE(e.top.size(), size_t(3));
        QCOMPARE(e.top[0].id, 77);
        QCOMPARE(e.top[1].id, 5);
        QVERIFY(e.top[1].logprob > e.top[2].logprob);
        QVERIFY(std::fabs(e.top[1].logprob - float(8.5 - std::log(z))) < 1e-4f);
    }

    void logit_bias_is_added_before_sampling() {
        // The logits above: +1 on token 5 makes it the greedy pick (8.5 + 1 > 9), -100 on 77 bans 77; ids outside
        // the vocabulary are ignored; log-probabilities and the caller's logits stay the model's.
        std::vector<float> logits(model_->hparams().vocab_size);
        for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(float(i) * 0.37f) * 3.0f;
        logits[77] = 9.0f;
        logits[5] = 8.5f;
        const std::vector<float> original = logits;
        double z = 0;
        for (float l : logits) z += std::exp(double(l));
        Sampler sampler(greedy());
        ReplyOptions o;
        o.top_logprobs = 1;
        o.logit_bias = {{5, 1.0f}, {-3, 50.0f}, {int32_t(logits.size()) + 7, 50.0f}};
        ReplyStream up(*model_, sampler, o, {});
        const TokenEvent& e = up.next(logits);
        QCOMPARE(e.id, 5);
        QVERIFY(std::fabs(e.logprob.logprob - float(8.5 - std::log(z))) < 1e-4f);
        QCOMPARE(e.top[0].id, 77);
        QVERIFY(logits == original);
        o.logit_bias = {{77, -100.0f}};
        ReplyStream banned(*model_, sampler, o, {});
        QCOMPARE(banned.next(logits).id, 5);
        QCOMPARE(banned.next(logits).id, 5);  // every token, not the first only
    }

    void prefix_reuse_gives_what_a_fresh_evaluation_gives() {
        // Sampling with a repetition penalty and a seed: the penalty sees the whole conversation whether or not
        // its prefix was cached, so both give the same tokens turn after turn.
        SamplerConfig sc;
        sc.seed = 7;
        sc.temperature = 0.9f;
        sc.repetition_penalty = 1.3f;
        std::vector<std::vector<int32_t>> replies[2];
        uint32_t reused_second_turn = 0;
        for (int reuse = 0; reuse < 2; ++reuse) {
            Session session(*model_, *pool_, 512);
            ChatService chat(*model_, session);
            chat.set_reuse_prefix(reuse == 1);
            std::vector<ChatMessage> messages;
            for (const char* text : {"Hello there", "Tell me more", "And a third"}) {
                messages.push_back({"user", text});
                auto ids = chat_prompt_ids(*model_, messages);
                QVERIFY(ids);
                Sampler sampler(sc);
                TurnOptions o;
                o.reply.max_tokens = 8;
                o.reply.stop_ids = default_stop_ids(*model_);
                auto r = chat.run(ids.value(), sampler, o);
                QVERIFY2(r, r.message().c_str());
                if (reuse == 1 && messages.size() == 3) reused_second_turn = r->reused;
                replies[reuse].push_back(r->tokens);
                messages.push_back({"assistant", r->reply});
            }
        }
        QCOMPARE(replies[1], replies[0]);
        QVERIFY(reused_second_turn > 10);
    }

    // A Gated DeltaNet hybrid (qwen3_next): turns that extend the conversation, a regenerated reply (the same prompt
    // again) and an edited earlier turn (a prompt that leaves the conversation early) give with prefix reuse
    // (truncate: a state checkpoint and re-evaluation) the tokens a session that re-reads every prompt gives.
    void hybrid_rewinds_give_what_a_fresh_evaluation_gives() {
        QTemporaryDir dir;
        const QString path = dir.filePath("qwen3_next.bin");
        QCOMPARE(run_cli({"convert", reference("hf/qwen3_next/model"), "-o", path, "-q"}).exit_code, 0);
        auto m = Model::load(path.toStdString());
        QVERIFY2(m, m.message().c_str());
        const Model& model = *m.value();
        std::vector<std::vector<int32_t>> replies[2];
        uint32_t reused[3] = {};
        for (int reuse = 0; reuse < 2; ++reuse) {
            Session session(model, *pool_, 512);
            ChatService chat(model, session);
            chat.set_reuse_prefix(reuse == 1);
            std::vector<int32_t> conversation;
            auto turn = [&](const std::vector<int32_t>& prompt) -> uint32_t {
                Sampler sampler(greedy());
                TurnOptions o;
                o.reply.max_tokens = 12;
                auto r = chat.run(prompt, sampler, o);
                if (!r) {
                    QTest::qFail(r.message().c_str(), __FILE__, __LINE__);
                    return 0;
                }
                replies[reuse].push_back(r->tokens);
                conversation = prompt;
                conversation.insert(conversation.end(), r->tokens.begin(), r->tokens.end());
                return r->reused;
            };
            std::vector<int32_t> first(70);
            for (size_t i = 0; i < first.size(); ++i) first[i] = static_cast<int32_t>(1 + (37 * i) % 4000);
            turn(first);
            std::vector<int32_t> second = conversation;
            for (int32_t t : {5, 17, 29, 41, 53}) second.push_back(t);
            const uint32_t r2 = turn(second);
            const uint32_t r3 = turn(second);  // regenerate
            std::vector<int32_t> edited(first.begin(), first.begin() + 40);  // an earlier turn edited
            for (int32_t t : {7, 8, 9}) edited.push_back(t);
            const uint32_t r4 = turn(edited);
            if (reuse == 1) reused[0] = r2, reused[1] = r3, reused[2] = r4;
        }
        QCOMPARE(replies[1], replies[0]);
        QVERIFY(reused[0] > 70 && reused[1] > 70 && reused[2] == 40);
    }

    void a_refused_turn_keeps_the_cache() {
        Session session(*model_, *pool_, 64);
        ChatService chat(*model_, session);
        auto ids = chat_prompt_ids(*model_, {{"user", "Hi"}});
        QVERIFY(ids);
        Sampler sampler(greedy());
        TurnOptions o;
        o.reply.max_tokens = 4;
        QVERIFY(chat.run(ids.value(), sampler, o));
        const std::vector<int32_t> held(chat.cached().begin(), chat.cached().end());
        QCOMPARE(held.size(), size_t(session.position()));
        o.reply.max_tokens = 1000;
        auto refused = chat.run(ids.value(), sampler, o);
        QVERIFY(!refused);
        QVERIFY2(refused.message().find("context of 64 tokens") != std::string::npos, refused.message().c_str());
        std::vector<int32_t> bad = ids.value();
        bad.push_back(static_cast<int32_t>(model_->hparams().vocab_size));
        o.reply.max_tokens = 4;
        auto out_of_range = chat.run(bad, sampler, o);
        QVERIFY(!out_of_range);
        QVERIFY(out_of_range.message().find("out of range") != std::string::npos);
        QCOMPARE(std::vector<int32_t>(chat.cached().begin(), chat.cached().end()), held);
        QCOMPARE(session.position(), uint32_t(held.size()));
    }

    void cancel_and_evaluate_last() {
        Session session(*model_, *pool_, 256);
        ChatService chat(*model_, session);
        auto ids = chat_prompt_ids(*model_, {{"user", "Count to ten"}});
        QVERIFY(ids);
        Sampler sampler(greedy());
        TurnOptions o;
        o.reply.max_tokens = 50;
        Recorder rec;
        rec.stop_after = 3;
        auto r = chat.run(ids.value(), sampler, o, &rec);
        QVERIFY(r);
        QCOMPARE(r->finish, FinishReason::Cancelled);
        QCOMPARE(r->tokens.size(), size_t(3));
        QCOMPARE(QString::fromStdString(r->text), QString::fromStdString(rec.shown));
        // Without evaluate_last the session holds all but the last sampled token; with it, all of them.
        QCOMPARE(session.position(), uint32_t(ids->size() + 2));
        // The decode rate counts the forward passes of generated tokens: the first token is the prompt's.
        QCOMPARE(r->decode_evaluated, 2u);
        QCOMPARE(r->decode_rate().per_second(), 2 / r->decode_seconds);
        QCOMPARE(r->decode_rate().per_second(), TokenRate::of_reply(r->tokens.size(), r->decode_seconds).per_second());
        QCOMPARE(r->prompt_rate().per_second(), r->prompt_evaluated / r->prompt_seconds);
        chat.reset();
        o.evaluate_last = true;
        Recorder all;
        all.stop_after = 3;
        r = chat.run(ids.value(), sampler, o, &all);
        QVERIFY(r);
        QCOMPARE(session.position(), uint32_t(ids->size() + 3));
        QCOMPARE(chat.cached().size(), size_t(ids->size() + 3));
        QCOMPARE(r->decode_evaluated, 3u);
    }

    void generate_gives_the_same_tokens() {
        // generate() and a ChatService turn agree: greedy ids on the same prompt are the same.
        auto ids = chat_prompt_ids(*model_, {{"user", "Hello"}});
        QVERIFY(ids);
        Session a(*model_, *pool_, 128), b(*model_, *pool_, 128);
        Sampler s1(greedy()), s2(greedy());
        GenerateRequest req;
        req.max_tokens = 6;
        auto g = generate(a, s1, ids.value(), req);
        QVERIFY(g);
        ChatService chat(*model_, b);
        TurnOptions o;
        o.reply.max_tokens = 6;
        auto t = chat.run(ids.value(), s2, o);
        QVERIFY(t);
        QCOMPARE(g.value(), t->tokens);
    }
};

QTEST_GUILESS_MAIN(TestChatService)
#include "test_chat_service.moc"
