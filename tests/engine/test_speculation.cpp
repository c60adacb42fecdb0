// Speculative decoding changes how many passes generation takes, never what it generates: greedy and seeded
// sampling give plain decoding's ids with drafts that are accepted and rejected, on the demo model and on
// converted reference models of several families (a sliding-window one, MLA, the Gated DeltaNet hybrids, whose
// rejected rows are dropped by replaying the recurrence). A stop token inside an accepted run, a full context and a
// rewound conversation end where plain decoding's do, with the session holding the same positions and states.
// The prompt-lookup drafter's matching, and the check's rows against plain evaluation, bit for bit.
#include <QJsonArray>
#include <QProcess>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>
#include <cstring>
#include <random>

#include "../test_support.h"
#include "engine/core/chat_service.h"
#include "engine/core/generate.h"
#include "engine/core/lookup_drafter.h"
#include "engine/core/mtp_drafter.h"
#include "engine/core/model.h"
#include "engine/core/session.h"
#include "engine/core/speculation.h"

using namespace colibri;
using namespace colibri::test;

namespace {

const QString kDemo = QStringLiteral(COLIBRI_BUILD_DIR "/demo/demo.bin");

// The MTP drafter, recording each proposal: the history it drafted after and what it drafted.
struct RecordingMtp final : Drafter {
    MtpDrafter head;
    std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> proposals;
    uint32_t propose(Session& session, std::span<const int32_t> history, std::span<int32_t> drafts) override {
        const uint32_t n = head.propose(session, history, drafts);
        proposals.push_back({std::vector<int32_t>(history.begin(), history.end()), std::vector<int32_t>(drafts.begin(), drafts.begin() + n)});
        return n;
    }
    void on_verified(uint32_t proposed, uint32_t accepted) override { head.on_verified(proposed, accepted); }
    void reset() override { head.reset(); }
};

// Drafts from a known answer (plain decoding's ids after the prompt), with every `wrong_every`-th draft made
// wrong: checks with drafts accepted, checks cut short, and checks rejected at their first draft.
struct OracleDrafter final : Drafter {
    std::vector<int32_t> answer;
    size_t prompt_size = 0;
    uint32_t vocab = 0, wrong_every = 4, proposals = 0;
    uint32_t propose(Session&, std::span<const int32_t> history, std::span<int32_t> drafts) override {
        const size_t done = history.size() - prompt_size;  // answer tokens in history
        uint32_t n = 0;
        for (; n < drafts.size() && done + n < answer.size(); ++n) {
            int32_t t = answer[done + n];
            if (++proposals % wrong_every == 0) t = static_cast<int32_t>((uint32_t(t) + 1) % vocab);
            drafts[n] = t;
        }
        return n;
    }
};

struct Outcome {
    std::vector<int32_t> ids;
    GenerateStop stop = GenerateStop::MaxTokens;
    uint32_t position = 0;
    SpeculationStats stats;
    std::vector<float> next_logits;  // after one more token (ids.back()) is fed: the session's state, observed
};

Outcome run(const Model& model, std::span<const int32_t> prompt, const SamplerConfig& sc, int32_t max_tokens, Drafter* drafter,
            std::vector<int32_t> stop_ids = {}, uint32_t context = 0, unsigned threads = 2) {
    ThreadPool pool(threads);
    SessionOptions so;
    so.chunk = 16;
    Session session(model, pool, context, so);
    Sampler sampler(sc);
    GenerateRequest req;
    req.max_tokens = max_tokens;
    req.stop_ids = std::move(stop_ids);
    req.drafter = drafter;
    Outcome o;
    req.speculation = &o.stats;
    auto out = generate(session, sampler, prompt, req, nullptr, &o.stop);
    if (!out) qWarning("generate: %s", out.message().c_str());
    if (out) o.ids = out.value();
    o.position = session.position();
    if (session.position() < session.context() && !o.ids.empty())
        if (auto l = session.eval(o.ids.back())) o.next_logits.assign(l->begin(), l->end());
    return o;
}

SamplerConfig greedy() {
    SamplerConfig sc;
    sc.greedy = true;
    return sc;
}

bool bit_equal(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

class TestSpeculation : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

    std::unique_ptr<Model> convert(const QString& family) {
        const QString path = dir_.filePath(family + ".bin");
        if (!QFile::exists(path)) {
            const CliResult r = run_cli({"convert", reference("hf/" + family + "/model"), "-o", path, "--type", "f32", "-q"});
            if (r.exit_code != 0) qWarning("convert: %s", r.err.constData());
        }
        auto m = Model::load(path.toStdString());
        return m.is_ok() ? std::move(m.value()) : nullptr;
    }

    std::unique_ptr<Model> open(const QString& family) {
        if (family == "demo") {
            auto m = Model::load(kDemo.toStdString());
            return m.is_ok() ? std::move(m.value()) : nullptr;
        }
        return convert(family);
    }

    // `colibri generate --greedy --json --speculate MODE` of n tokens after `prompt`; empty on a failure.
    static QJsonObject generate_json(const QString& model, const std::vector<int32_t>& prompt, int n, const char* mode) {
        QStringList ids;
        for (int32_t id : prompt) ids << QString::number(id);
        const CliResult r = run_cli({"generate", "-m", model, "--tokens", ids.join(','), "-n", QString::number(n), "--greedy", "--json",
                                     "--speculate", mode});
        return r.exit_code == 0 ? QJsonDocument::fromJson(r.out).object() : QJsonObject();
    }

    // A prompt that repeats itself, so that prompt lookup finds matches: 12 random ids three times.
    static std::vector<int32_t> repeating_prompt(uint32_t vocab, unsigned seed = 11) {
        std::mt19937 rng(seed);
        std::vector<int32_t> base;
        for (int i = 0; i < 12; ++i) base.push_back(static_cast<int32_t>(rng() % std::min<uint32_t>(vocab, 4000)));
        std::vector<int32_t> ids;
        for (int r = 0; r < 3; ++r) ids.insert(ids.end(), base.begin(), base.end());
        return ids;
    }

private slots:
    void lookup_finds_the_most_recent_longest_match() {
        int32_t d[8];
        // The last 2 tokens (5 6) occurred twice before; the later occurrence's continuation wins.
        const std::vector<int32_t> h{5, 6, 1, 2, 9, 5, 6, 3, 4, 7, 5, 6};
        QCOMPARE(LookupDrafter::lookup(h, 4, 2, d), 5u);  // 3 4 7, then the suffix itself: all that follows the match
        QCOMPARE(d[0], 3);
        QCOMPARE(d[1], 4);
        QCOMPARE(d[2], 7);
        QCOMPARE(d[4], 6);
        // A longer match beats a more recent shorter one: 7 5 6 matches at the start's 7 5 6 only with n = 3.
        const std::vector<int32_t> g{7, 5, 6, 8, 8, 1, 5, 6, 2, 2, 7, 5, 6};
        QCOMPARE(LookupDrafter::lookup(g, 4, 2, d), 8u);
        QCOMPARE(d[0], 8);
        QCOMPARE(d[1], 8);
        // The drafts' room bounds the count.
        QCOMPARE(LookupDrafter::lookup(g, 4, 2, std::span<int32_t>(d, 2)), 2u);
        // No earlier occurrence, or shorter than min_ngram: nothing.
        const std::vector<int32_t> none{1, 2, 3, 4, 5};
        QCOMPARE(LookupDrafter::lookup(none, 4, 2, d), 0u);
        const std::vector<int32_t> single{1, 2, 3, 1};  // only a 1-gram match
        QCOMPARE(LookupDrafter::lookup(single, 4, 2, d), 0u);
        QCOMPARE(LookupDrafter::lookup(single, 4, 1, d), 3u);
        QCOMPARE(d[0], 2);
        QCOMPARE(LookupDrafter::lookup(std::vector<int32_t>{}, 4, 1, d), 0u);
        QCOMPARE(LookupDrafter::lookup(std::vector<int32_t>{3}, 4, 1, d), 0u);
        QCOMPARE(LookupDrafter::lookup(h, 4, 2, std::span<int32_t>()), 0u);
    }

    void lookup_adapts_its_length() {
        LookupDrafter drafter(LookupOptions{4, 1, 8});
        const std::vector<int32_t> h{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 1};
        int32_t d[16];
        ThreadPool pool(1);
        auto model = Model::load(kDemo.toStdString());
        QVERIFY(model.is_ok());
        Session s(*model.value(), pool, 64);
        QCOMPARE(drafter.propose(s, h, d), 8u);
        drafter.on_verified(8, 2);  // rejected at the third: the next step drafts 3
        QCOMPARE(drafter.propose(s, h, d), 3u);
        drafter.on_verified(3, 3);  // all accepted: doubles
        QCOMPARE(drafter.propose(s, h, d), 6u);
        drafter.reset();
        QCOMPARE(drafter.propose(s, h, d), 8u);
        // A check that keeps nothing: no drafts for 2 proposals, then checks of 1; two misses in a row rest 4.
        drafter.on_verified(8, 0);
        QCOMPARE(drafter.propose(s, h, d), 0u);
        QCOMPARE(drafter.propose(s, h, d), 0u);
        QCOMPARE(drafter.propose(s, h, d), 1u);
        drafter.on_verified(1, 0);
        for (int i = 0; i < 4; ++i) QCOMPARE(drafter.propose(s, h, d), 0u);
        QCOMPARE(drafter.propose(s, h, d), 1u);
        drafter.on_verified(1, 1);  // kept: drafting resumes at once, the length doubles
        QCOMPARE(drafter.propose(s, h, d), 2u);
        drafter.on_verified(2, 2);
        QCOMPARE(drafter.propose(s, h, d), 4u);
    }

    // The MTP drafter's pacing: one draft first, growing to three while every draft is kept, back to one more than
    // were kept after a rejection, and resting 2, 4 ... proposals after checks that keep nothing.
    void mtp_drafts_pace_themselves() {
        DraftPacer p(kMtpPacing);
        QCOMPARE(p.next(), 1u);
        p.on_verified(1, 1);
        QCOMPARE(p.next(), 2u);
        p.on_verified(2, 2);
        QCOMPARE(p.next(), 3u);
        p.on_verified(3, 3);
        QCOMPARE(p.next(), 3u);  // at most three
        p.on_verified(3, 1);
        QCOMPARE(p.next(), 2u);
        p.on_verified(2, 0);
        QCOMPARE(p.next(), 0u);
        QCOMPARE(p.next(), 0u);
        QCOMPARE(p.next(), 1u);
        p.on_verified(1, 0);
        for (int i = 0; i < 4; ++i) QCOMPARE(p.next(), 0u);
        QCOMPARE(p.next(), 1u);
        p.reset();
        QCOMPARE(p.next(), 1u);
        // Not adapting: the same length whatever is kept, never resting.
        DraftPacer fixed(DraftPacing{.max_drafts = 3, .first = 3, .max_rest = 0, .adapt = false});
        fixed.on_verified(3, 0);
        QCOMPARE(fixed.next(), 3u);
    }

    void parse_modes() {
        QCOMPARE(parse_speculate_mode("lookup").value(), SpeculateMode::Lookup);
        QCOMPARE(parse_speculate_mode("off").value(), SpeculateMode::Off);
        QCOMPARE(parse_speculate_mode("mtp").value(), SpeculateMode::Mtp);
        QVERIFY(!parse_speculate_mode("Lookup").is_ok());
        QVERIFY(!parse_speculate_mode("").is_ok());
        auto model = Model::load(kDemo.toStdString());
        QVERIFY(model.is_ok());
        auto mtp = make_drafter(SpeculateMode::Mtp, *model.value());
        QVERIFY(!mtp.is_ok());
        QVERIFY(QString::fromStdString(mtp.message()).contains("no multi-token-prediction head"));
        QVERIFY(make_drafter(SpeculateMode::Off, *model.value()).value() == nullptr);
        QVERIFY(make_drafter(SpeculateMode::Lookup, *model.value()).value() != nullptr);
    }

    // A check's rows are plain evaluation's logits, bit for bit; keeping some of them leaves the session as
    // plain evaluation of those tokens does (a hybrid's recurrent state included).
    void check_rows_equal_plain_eval_data() {
        QTest::addColumn<QString>("family");
        for (const char* f : {"demo", "qwen3_next", "deepseek_v3"}) QTest::newRow(f) << QString(f);
    }
    void check_rows_equal_plain_eval() {
        QFETCH(QString, family);
        auto model = open(family);
        QVERIFY(model != nullptr);
        const uint32_t V = model->hparams().vocab_size;
        const std::vector<int32_t> prompt = repeating_prompt(V);
        const std::vector<int32_t> step{3, 1, 4, 1, 5};
        ThreadPool pool(2);
        SessionOptions so;
        so.chunk = 16;
        Session plain(*model, pool, 0, so), spec(*model, pool, 0, so);
        QVERIFY(plain.eval(prompt).is_ok());
        QVERIFY(spec.eval(prompt).is_ok());
        spec.reserve_verify(8);
        QCOMPARE(spec.verify_room(), 8u);
        auto rows = spec.verify(step);
        QVERIFY(rows.is_ok());
        std::vector<float> copy(rows->begin(), rows->end());
        for (size_t i = 0; i < step.size(); ++i) {
            auto l = plain.eval(step[i]);
            QVERIFY(l.is_ok());
            QVERIFY2(std::memcmp(l->data(), copy.data() + i * V, V * sizeof(float)) == 0, qPrintable(QString("row %1").arg(i)));
        }
        // Keep 2 of 5: then the same token after them gives the same logits and states as plain decoding.
        spec.keep_verified(2);
        QCOMPARE(spec.position(), uint32_t(prompt.size() + 2));
        QVERIFY(plain.truncate(uint32_t(prompt.size())).is_ok());
        QVERIFY(plain.eval(std::span<const int32_t>(step.data(), 2)).is_ok());
        auto a = plain.eval(9), b = spec.eval(9);
        QVERIFY(a.is_ok() && b.is_ok());
        QVERIFY(std::memcmp(a->data(), b->data(), V * sizeof(float)) == 0);
        for (uint32_t l = 0; l < model->hparams().n_layers; ++l) {
            const auto sa = plain.linear_recurrent_state(l), sb = spec.linear_recurrent_state(l);
            QCOMPARE(sa.size(), sb.size());
            if (!sa.empty()) QVERIFY(std::memcmp(sa.data(), sb.data(), sa.size_bytes()) == 0);
        }
        // A step past the room is refused with nothing evaluated.
        const std::vector<int32_t> long_step(9, 1);
        QVERIFY(!spec.verify(long_step).is_ok());
        QCOMPARE(spec.position(), uint32_t(prompt.size() + 3));
    }

    // Greedy and seeded sampling, drafts accepted and rejected, on several families.
    void output_equals_plain_decoding_data() {
        QTest::addColumn<QString>("family");
        QTest::addColumn<bool>("greedy");
        for (const char* f : {"demo", "qwen3_moe", "gpt_oss", "deepseek_v3", "qwen3_next", "qwen3_5_moe"}) {
            QTest::newRow(qPrintable(QString(f) + "-greedy")) << QString(f) << true;
            QTest::newRow(qPrintable(QString(f) + "-seeded")) << QString(f) << false;
        }
    }
    void output_equals_plain_decoding() {
        QFETCH(QString, family);
        QFETCH(bool, greedy);
        auto model = open(family);
        QVERIFY(model != nullptr);
        const uint32_t V = model->hparams().vocab_size;
        const std::vector<int32_t> prompt = repeating_prompt(V);
        SamplerConfig sc;
        sc.greedy = greedy;
        sc.temperature = 1.0f;
        sc.seed = 42;
        sc.repetition_penalty = 1.1f;  // the sampler's history matters too
        const int32_t n = 40;
        const Outcome plain = run(*model, prompt, sc, n, nullptr);
        QCOMPARE(plain.ids.size(), size_t(n));
        OracleDrafter oracle;
        oracle.answer = plain.ids, oracle.prompt_size = prompt.size(), oracle.vocab = V;
        const Outcome spec = run(*model, prompt, sc, n, &oracle);
        QCOMPARE(spec.ids, plain.ids);
        QCOMPARE(spec.position, plain.position);
        QVERIFY(bit_equal(spec.next_logits, plain.next_logits));
        QVERIFY(spec.stats.accepted > 0);
        QVERIFY(spec.stats.drafted > spec.stats.accepted);  // some rejected
        QVERIFY(spec.stats.passes < plain.stats.passes);
        QCOMPARE(spec.stats.tokens(), plain.stats.passes);  // every decode token's logits, fewer passes
        if (model->hparams().n_experts > 0) {
            // A check reads the union of its rows' experts: at least one token's top-k, at most all rows'.
            QVERIFY(spec.stats.check_layers > 0);
            QVERIFY(spec.stats.experts_per_check_layer() >= model->hparams().n_experts_active);
            QCOMPARE(plain.stats.experts_per_single_layer(), double(model->hparams().n_experts_active));
        }
        // Prompt lookup itself (whatever it drafts) changes nothing either.
        LookupDrafter lookup;
        const Outcome looked = run(*model, prompt, sc, n, &lookup);
        QCOMPARE(looked.ids, plain.ids);
        QVERIFY(bit_equal(looked.next_logits, plain.next_logits));
    }

    // A stop token that arrives inside a run of accepted drafts ends generation there: nothing after it, and the
    // session holds what plain decoding's holds.
    void stop_inside_accepted_drafts() {
        auto model = open("qwen3_next");
        QVERIFY(model != nullptr);
        const uint32_t V = model->hparams().vocab_size;
        const std::vector<int32_t> prompt = repeating_prompt(V);
        const SamplerConfig sc = greedy();
        const Outcome full = run(*model, prompt, sc, 30, nullptr);
        // A stop id that first appears at index >= 6 of the plain output.
        size_t at = 6;
        while (at < full.ids.size() && std::find(full.ids.begin(), full.ids.begin() + ptrdiff_t(at), full.ids[at]) != full.ids.begin() + ptrdiff_t(at)) ++at;
        QVERIFY(at < full.ids.size());
        const std::vector<int32_t> stops{full.ids[at]};
        const Outcome plain = run(*model, prompt, sc, 30, nullptr, stops);
        QCOMPARE(plain.ids.size(), at + 1);
        OracleDrafter oracle;
        oracle.answer = full.ids, oracle.prompt_size = prompt.size(), oracle.vocab = V, oracle.wrong_every = 1000;  // all right
        const Outcome spec = run(*model, prompt, sc, 30, &oracle, stops);
        QCOMPARE(spec.stop, GenerateStop::StopToken);
        QCOMPARE(spec.ids, plain.ids);
        QCOMPARE(spec.position, plain.position);
        QVERIFY(bit_equal(spec.next_logits, plain.next_logits));
        QVERIFY(spec.stats.accepted >= 5);
    }

    // A hybrid's state checkpoints after speculative decoding are plain decoding's: a check never saves one nor
    // evicts one, and the one at an interval position is made as plain decoding makes it. Rewinding both sessions
    // to the same points re-evaluates the same spans (the same experts read) and gives the same logits.
    void hybrid_checkpoints_are_plain_decodings_data() {
        QTest::addColumn<uint32_t>("wrong_every");
        QTest::newRow("drafts rejected") << 4u;
        QTest::newRow("drafts all right") << 1000u;  // checks run up to the interval positions
    }
    void hybrid_checkpoints_are_plain_decodings() {
        QFETCH(uint32_t, wrong_every);
        auto model = open("qwen3_next");
        QVERIFY(model != nullptr);
        const uint32_t V = model->hparams().vocab_size;
        const std::vector<int32_t> prompt = repeating_prompt(V);
        ThreadPool pool(2);
        SessionOptions so;
        so.chunk = 16;
        so.checkpoint_interval = 16;
        so.state_checkpoints = 3;
        const SamplerConfig sc = greedy();
        GenerateRequest req;
        req.max_tokens = 40;
        Session plain(*model, pool, 0, so), spec(*model, pool, 0, so);
        Sampler s0(sc), s1(sc);
        auto expect = generate(plain, s0, prompt, req);
        QVERIFY(expect.is_ok());
        OracleDrafter oracle;
        oracle.answer = expect.value(), oracle.prompt_size = prompt.size(), oracle.vocab = V, oracle.wrong_every = wrong_every;
        req.drafter = &oracle;
        SpeculationStats stats;
        req.speculation = &stats;
        auto got = generate(spec, s1, prompt, req);
        QVERIFY(got.is_ok());
        QCOMPARE(got.value(), expect.value());
        QVERIFY(stats.accepted > 0);
        QCOMPARE(spec.checkpoint_positions(), plain.checkpoint_positions());
        QCOMPARE(plain.checkpoint_positions(), (std::vector<uint32_t>{36, 48, 64}));  // the prompt's end and the intervals
        for (uint32_t n : {uint32_t(prompt.size()) + 30, uint32_t(prompt.size()) + 20, uint32_t(prompt.size()) + 3, 40u}) {
            const Session::ExpertReads a0 = plain.expert_reads(), b0 = spec.expert_reads();
            QVERIFY(plain.truncate(n).is_ok());
            QVERIFY(spec.truncate(n).is_ok());
            QCOMPARE(spec.expert_reads().layer_passes - b0.layer_passes, plain.expert_reads().layer_passes - a0.layer_passes);
            auto a = plain.eval(5), b = spec.eval(5);
            QVERIFY(a.is_ok() && b.is_ok());
            QVERIFY(std::memcmp(a->data(), b->data(), V * sizeof(float)) == 0);
            QVERIFY(plain.truncate(n).is_ok() && spec.truncate(n).is_ok());
        }
    }

    // A full context ends both at the same token, with drafts bounded by the positions left.
    void context_full() {
        auto model = open("demo");
        QVERIFY(model != nullptr);
        const uint32_t V = model->hparams().vocab_size;
        const std::vector<int32_t> prompt = repeating_prompt(V);
        const SamplerConfig sc = greedy();
        const uint32_t context = uint32_t(prompt.size()) + 20;
        const Outcome plain = run(*model, prompt, sc, 100, nullptr, {}, context);
        QCOMPARE(plain.stop, GenerateStop::ContextFull);
        OracleDrafter oracle;
        oracle.answer = plain.ids, oracle.prompt_size = prompt.size(), oracle.vocab = V, oracle.wrong_every = 1000;
        oracle.answer.resize(oracle.answer.size() + 40, 1);  // it would draft past the end
        const Outcome spec = run(*model, prompt, sc, 100, &oracle, {}, context);
        QCOMPARE(spec.stop, GenerateStop::ContextFull);
        QCOMPARE(spec.ids, plain.ids);
        QCOMPARE(spec.position, plain.position);
        QVERIFY(spec.stats.accepted > 0);
    }

    // max_tokens: no draft past the last token plain decoding evaluates.
    void max_tokens_bounds_the_drafts() {
        auto model = open("demo");
        QVERIFY(model != nullptr);
        const std::vector<int32_t> prompt = repeating_prompt(model->hparams().vocab_size);
        const SamplerConfig sc = greedy();
        for (int32_t n : {1, 2, 3, 9}) {
            const Outcome plain = run(*model, prompt, sc, n, nullptr);
            OracleDrafter oracle;
            oracle.answer = plain.ids, oracle.prompt_size = prompt.size(), oracle.vocab = model->hparams().vocab_size, oracle.wrong_every = 1000;
            oracle.answer.resize(oracle.answer.size() + 20, 1);
            const Outcome spec = run(*model, prompt, sc, n, &oracle);
            QCOMPARE(spec.ids, plain.ids);
            QCOMPARE(spec.position, plain.position);
        }
    }

    // The chat service: a turn with speculation, then the same turn again (regenerate: the session is cut back
    // to the prompt) gives what a fresh session's plain turn gives.
    void rewind_after_speculation_data() {
        QTest::addColumn<QString>("family");
        for (const char* f : {"demo", "qwen3_next"}) QTest::newRow(f) << QString(f);
    }
    void rewind_after_speculation() {
        QFETCH(QString, family);
        auto model = open(family);
        QVERIFY(model != nullptr);
        const uint32_t V = model->hparams().vocab_size;
        const std::vector<int32_t> prompt = repeating_prompt(V);
        ThreadPool pool(2);
        const SamplerConfig sc = greedy();
        TurnOptions turn;
        turn.reply.max_tokens = 24;
        Session fresh_session(*model, pool);
        ChatService fresh(*model, fresh_session);
        Sampler s0(sc);
        auto expect = fresh.run(prompt, s0, turn);
        QVERIFY(expect.is_ok());
        OracleDrafter oracle;
        oracle.answer = expect->tokens, oracle.prompt_size = prompt.size(), oracle.vocab = V;
        turn.drafter = &oracle;
        Session session(*model, pool);
        ChatService chat(*model, session);
        Sampler s1(sc);
        auto first = chat.run(prompt, s1, turn);
        QVERIFY(first.is_ok());
        QCOMPARE(first->tokens, expect->tokens);
        QCOMPARE(first->context_used, expect->context_used);
        QVERIFY(first->speculation.accepted > 0);
        oracle.proposals = 0;
        Sampler s2(sc);
        auto again = chat.run(prompt, s2, turn);  // regenerate
        QVERIFY(again.is_ok());
        QCOMPARE(again->tokens, expect->tokens);
        QCOMPARE(again->context_used, expect->context_used);
        // A follow-up turn on top of the speculative one equals the plain conversation's.
        std::vector<int32_t> next = prompt;
        next.insert(next.end(), expect->tokens.begin(), expect->tokens.end());
        next.insert(next.end(), prompt.begin(), prompt.begin() + 5);
        Sampler s3(sc), s4(sc);
        turn.drafter = nullptr;
        auto plain_next = fresh.run(next, s3, turn);
        LookupDrafter lookup;
        turn.drafter = &lookup;
        auto spec_next = chat.run(next, s4, turn);
        QVERIFY(plain_next.is_ok() && spec_next.is_ok());
        QCOMPARE(spec_next->tokens, plain_next->tokens);
    }

    // --speculate on generate, chat, bench and serve: a bad value or mtp on a model without the head is one line
    // and exit 1; generate's ids are the same with lookup, its statistics in --json; bench compares both.
    // --speculate mtp: the model's own head drafts (the session runs it), output unchanged. After checks whose
    // drafts were rejected the head's cache is cut back with the model's (keep_verified): each proposal equals what a
    // fresh session that evaluated the same history drafts. A model without a head and the server refuse it.
    void mtp_head_drafts_data() {
        QTest::addColumn<QString>("family");
        QTest::addColumn<QStringList>("shape");
        // The hybrid (its rejected rows also replay the Gated DeltaNet recurrence) in its reference's shape.
        QTest::newRow("qwen3_next") << "qwen3_next" << QStringList{"--config", reference("hf/qwen3_next/model/config.hub_style.json")};
        QTest::newRow("deepseek_v3") << "deepseek_v3"
                                     << QStringList{"--family", "deepseek_v3", "--layers", "4", "--hidden", "64", "--vocab", "512",
                                                    "--experts", "8", "--top-k", "2", "--ffn", "32"};
    }
    void mtp_head_drafts() {
        QFETCH(QString, family);
        QFETCH(QStringList, shape);
        const QString hf = dir_.filePath(family + "-mtp"), bin = dir_.filePath(family + "-mtp.bin");
        QProcess make;
        make.start(QStringLiteral(COLIBRI_BUILD_DIR "/bin/colibri-make-model"), shape + QStringList{"--mtp-layers", "1", "--embedding-init", "1", "-o", hf});
        QVERIFY(make.waitForFinished(120000));
        QVERIFY2(make.exitCode() == 0, make.readAllStandardError().constData());
        CliResult r = run_cli({"convert", hf, "-o", bin, "--type", "f32", "-q"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        auto loaded = Model::load(bin.toStdString());
        QVERIFY(loaded.is_ok());
        const Model& model = *loaded.value();
        QCOMPARE(model.mtp_layers().size(), size_t(1));
        const std::vector<int32_t> prompt = repeating_prompt(model.hparams().vocab_size);

        ThreadPool pool(2);
        SessionOptions so;
        so.chunk = 16;
        so.mtp = true;
        Session session(model, pool, 0, so);
        Sampler sampler(greedy());
        GenerateRequest req;
        req.max_tokens = 32;
        RecordingMtp drafter;
        req.drafter = &drafter;
        SpeculationStats stats;
        req.speculation = &stats;
        auto spec = generate(session, sampler, prompt, req);
        QVERIFY(spec.is_ok());
        const Outcome plain = run(model, prompt, greedy(), 32, nullptr);
        QCOMPARE(spec.value(), plain.ids);
        QVERIFY(stats.drafted > 0);
        QVERIFY2(stats.drafted > stats.accepted, "a random head's drafts are rejected too");
        QVERIFY(drafter.proposals.size() > 2);
        // Paced: never more than kMtpPacing's drafts a check, and a head that guesses wrong rests, so it drafts
        // fewer than one per generated token (unpaced, 15 per check: about 14 per token).
        for (const auto& p : drafter.proposals) QVERIFY(p.second.size() <= kMtpPacing.max_drafts);
        QVERIFY2(stats.drafted < 32 || stats.accepted * 2 > stats.drafted, qPrintable(QString::number(stats.drafted)));
        // A check whose drafts are all rejected, then a plain eval of another token, then a draft: the head's row
        // that read the rejected draft must be gone (keep_verified cuts it), so the head's logits are a fresh
        // session's that evaluated the kept history, bit for bit.
        {
            Session s2(model, pool, 0, so);
            s2.reserve_verify(3);
            QVERIFY(s2.eval(prompt).is_ok());
            const int32_t next = 5, x = 9;
            std::vector<int32_t> d(2);
            QVERIFY(s2.mtp_draft(next, d).is_ok());
            const std::vector<int32_t> check{next, 11, 12};  // drafts the sampler is taken to reject
            QVERIFY(s2.verify(check).is_ok());
            s2.keep_verified(1);
            QVERIFY(s2.eval(x).is_ok());
            std::vector<int32_t> history = prompt;
            history.push_back(next), history.push_back(x);
            Session fresh(model, pool, 0, so);
            QVERIFY(fresh.eval(history).is_ok());
            std::vector<int32_t> a(1), b(1);
            QVERIFY(s2.mtp_draft(3, a).is_ok() && fresh.mtp_draft(3, b).is_ok());
            QVERIFY2(bit_equal(std::vector<float>(s2.mtp_logits().begin(), s2.mtp_logits().end()),
                               std::vector<float>(fresh.mtp_logits().begin(), fresh.mtp_logits().end())),
                     "the head kept a row that read a rejected draft");
        }
        for (size_t i = 1; i < drafter.proposals.size(); i += 3) {  // every third proposal against a fresh session's
            const auto& [history, drafts] = drafter.proposals[i];
            Session fresh(model, pool, 0, so);
            QVERIFY(fresh.eval(std::span<const int32_t>(history.data(), history.size() - 1)).is_ok());
            std::vector<int32_t> again(drafts.size());
            auto n = fresh.mtp_draft(history.back(), again);
            QVERIFY(n.is_ok());
            QCOMPARE(n.value(), uint32_t(drafts.size()));
            QVERIFY2(again == drafts, qPrintable(QString("proposal %1 differs from a fresh session's").arg(i)));
        }

        const QJsonObject off = generate_json(bin, prompt, 24, "off"), mtp = generate_json(bin, prompt, 24, "mtp");
        QCOMPARE(off["new_ids"].toArray().size(), 24);
        QCOMPARE(mtp["new_ids"], off["new_ids"]);
        QCOMPARE(mtp["speculation"].toObject()["mode"].toString(), QStringLiteral("mtp"));
        QVERIFY(mtp["speculation"].toObject()["drafted"].toInt() > 0);
        const CliResult serve = run_cli({"serve", "-m", bin, "--port", "0", "--speculate", "mtp"});
        QCOMPARE(serve.exit_code, 1);
        QVERIFY2(serve.err.contains("not served yet") && serve.err.count('\n') == 1, serve.err.constData());
    }

    void cli_option() {
        const QList<QStringList> commands{{"generate", "-m", kDemo, "--prompt", "x"},
                                          {"chat", "-m", kDemo},
                                          {"bench", "-m", kDemo, "-p", "4", "-n", "4", "-r", "1"},
                                          {"serve", "-m", kDemo, "--port", "0"}};
        for (const QStringList& cmd : commands) {
            for (const auto& [value, why] : {std::pair{"sometimes", "'sometimes' is not one of lookup, mtp, off"},
                                             std::pair{"mtp", "this model has no multi-token-prediction head"}}) {
                const CliResult r = run_cli(cmd + QStringList{"--speculate", value}, "hello\n", 60000);
                QVERIFY2(r.exit_code == 1, qPrintable(cmd.front() + ": " + r.err));
                QVERIFY2(r.err.contains(why), r.err.constData());
                QVERIFY2(r.err.startsWith("colibri: " + cmd.front().toUtf8() + ": "), r.err.constData());
                QCOMPARE(r.err.count('\n'), 1);
            }
        }
        auto model = Model::load(kDemo.toStdString());
        QVERIFY(model.is_ok());
        const std::vector<int32_t> prompt = repeating_prompt(model.value()->hparams().vocab_size);
        QStringList ids;
        for (int32_t id : prompt) ids << QString::number(id);
        const QJsonObject plain = generate_json(kDemo, prompt, 40, "off"), spec = generate_json(kDemo, prompt, 40, "lookup");
        QCOMPARE(plain["new_ids"].toArray().size(), 40);
        QCOMPARE(spec["new_ids"], plain["new_ids"]);
        QVERIFY(!plain.contains("speculation"));
        const CliResult by_default = run_cli({"generate", "-m", kDemo, "--tokens", ids.join(','), "-n", "40", "--greedy", "--json"});
        QVERIFY(!QJsonDocument::fromJson(by_default.out).object().contains("speculation"));  // off unless asked
        QCOMPARE(QJsonDocument::fromJson(by_default.out).object()["new_ids"], plain["new_ids"]);
        // Whether lookup finds a match depends on what the model writes after the prompt: over a few prompts it
        // drafts somewhere, and every one decodes plain's ids.
        int drafted = spec["speculation"].toObject()["drafted"].toInt();
        for (unsigned seed : {12u, 13u, 14u, 15u}) {
            const std::vector<int32_t> other = repeating_prompt(model.value()->hparams().vocab_size, seed);
            const QJsonObject p = generate_json(kDemo, other, 40, "off"), l = generate_json(kDemo, other, 40, "lookup");
            QCOMPARE(l["new_ids"], p["new_ids"]);
            drafted += l["speculation"].toObject()["drafted"].toInt();
        }
        QVERIFY(drafted > 0);
        const CliResult bench = run_cli({"bench", "-m", kDemo, "-p", "8", "-n", "24", "-r", "1", "--bandwidth-mib", "16", "--speculate", "lookup", "--json"});
        QVERIFY2(bench.exit_code == 0, bench.err.constData());
        const QJsonObject sb = QJsonDocument::fromJson(bench.out).object()["speculation"].toObject();
        QCOMPARE(sb["identical"].toBool(), true);
        QVERIFY(sb["speculative_tok_s"].toObject()["median"].toDouble() > 0);
        QVERIFY(sb["plain_tok_s"].toObject()["median"].toDouble() > 0);
        QCOMPARE(sb["decode_tokens"].toInt(), 24);
        const CliResult missing = run_cli({"bench", "-m", kDemo, "-p", "4", "-n", "4", "-r", "1", "--bandwidth-mib", "16", "--speculate", "lookup",
                                           "--speculate-text", "/nonexistent/text"});
        QCOMPARE(missing.exit_code, 1);
        QVERIFY2(missing.err.contains("/nonexistent/text: cannot read it"), missing.err.constData());
    }
};

QTEST_GUILESS_MAIN(TestSpeculation)
#include "test_speculation.moc"
