// What the CLI's subcommands took out of app/ into the libraries: the logit comparison (tools/logit_compare.h),
// the model summary (tools/model_summary.h), the model and input options (tools/model_args.h, tools/byte_size.h),
// eval's requirements (tools/chat_eval.h) and the tree's one small generator (kernels/splitmix64.h).
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>
#include <nlohmann/json.hpp>
#include <vector>

#include "../test_support.h"
#include "kernels/splitmix64.h"
#include "engine/core/model.h"
#include "engine/core/open_model.h"
#include "tools/byte_size.h"
#include "tools/chat_eval.h"
#include "tools/logit_compare.h"
#include "tools/model_args.h"
#include "tools/model_summary.h"

using namespace colibri;
using namespace colibri::test;
using nlohmann::json;

class TestCliLibrary : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

private slots:
    // The reference outputs of splitmix64 from state 0 (Vigna's splitmix64.c): every generated model, random block
    // and seed's output in the tree stands on these.
    void splitmix64_reference_stream() {
        uint64_t state = 0;
        QCOMPARE(splitmix64(state), 0xE220A8397B1DCDAFull);
        QCOMPARE(splitmix64(state), 0x6E789E6AA1B965F4ull);
        QCOMPARE(splitmix64(state), 0x06C45D188009454Full);
        SplitMix64 g(0);
        QCOMPARE(g.next(), 0xE220A8397B1DCDAFull);
        SplitMix64 a(7), b(7);
        for (int i = 0; i < 100; ++i) QCOMPARE(a.gaussian(), b.gaussian());
    }

    // compare --random N --seed S: BOS, then ids the old inline generator gave for these seeds.
    void random_token_ids_are_fixed_by_the_seed() {
        QCOMPARE(tools::random_token_ids(8, 1000, 1, 1), (std::vector<int32_t>{1, 465, 519, 590, 235, 761, 48, 45}));
        QCOMPARE(tools::random_token_ids(5, 32000, -1, 42), (std::vector<int32_t>{11413, 12291, 11858, 15764, 11250}));
        QVERIFY(tools::random_token_ids(0, 1000, 1, 1).empty());
    }

    void logit_comparison() {
        tools::LogitComparison same;
        const std::vector<float> a{0.5f, 2.0f, -1.0f};
        same.add(a, a);
        same.add(a, a);
        json j = same.to_json();
        QCOMPARE(j["positions"].get<size_t>(), size_t(2));
        QCOMPARE(j["top1_agree"].get<size_t>(), size_t(2));
        QCOMPARE(j["top1_rate"].get<double>(), 1.0);
        QCOMPARE(j["mean_kl"].get<double>(), 0.0);
        QCOMPARE(j["max_abs_dlogit"].get<double>(), 0.0);
        QVERIFY(j["disagreements"].empty());

        // p = (1/4, 3/4) against q = (3/4, 1/4): KL(p || q) = ln 3 / 2, the top choices differ by a margin of ln 3.
        const float l3 = std::log(3.0f);
        tools::LogitComparison diff;
        diff.add(std::vector<float>{0.0f, l3}, std::vector<float>{l3, 0.0f});
        j = diff.to_json();
        QCOMPARE(j["top1_agree"].get<size_t>(), size_t(0));
        QVERIFY(std::fabs(j["mean_kl"].get<double>() - std::log(3.0) / 2) < 1e-6);
        QCOMPARE(j["max_kl"].get<double>(), j["mean_kl"].get<double>());
        QVERIFY(std::fabs(j["max_abs_dlogit"].get<double>() - std::log(3.0)) < 1e-6);
        const json d = j["disagreements"][0];
        QCOMPARE(d["position"].get<size_t>(), size_t(0));
        QCOMPARE(d["baseline_top"].get<size_t>(), size_t(1));
        QCOMPARE(d["model_top"].get<size_t>(), size_t(0));
        QVERIFY(std::fabs(d["baseline_margin"].get<double>() - std::log(3.0)) < 1e-6);
    }

    void logits_file_must_have_the_exact_size() {
        const std::vector<float> v{1, 2, 3, 4, 5, 6};
        const QString path = write_all(dir_.filePath("l.f32"), QByteArray(reinterpret_cast<const char*>(v.data()), 24));
        auto ok = tools::read_logits_file(path.toStdString(), 2, 3);
        QVERIFY2(ok, ok.message().c_str());
        QCOMPARE(ok.value(), v);
        auto wrong = tools::read_logits_file(path.toStdString(), 3, 3);
        QVERIFY(!wrong);
        QVERIFY2(QString::fromStdString(wrong.message()).contains("24 bytes, expected 3 positions x 3"), wrong.message().c_str());
        QVERIFY(!tools::read_logits_file(dir_.filePath("none.f32").toStdString(), 1, 1));
    }

    void ram_budgets_in_bytes_or_a_share() {
        QCOMPARE(tools::parse_ram_budget("6G")->bytes, uint64_t(6) << 30);
        QCOMPARE(tools::parse_ram_budget("512M")->bytes, uint64_t(512) << 20);
        QCOMPARE(tools::parse_ram_budget("50%")->file_share, 0.5);
        QCOMPARE(tools::parse_ram_budget("12.5%")->file_share, 0.125);
        QCOMPARE(tools::parse_ram_budget("100%")->file_share, 1.0);
        for (const char* bad : {"0%", "150%", "x%", "%", "-5%", "5%%", "lots", "0", "3X", ""}) {
            auto r = tools::parse_ram_budget(bad);
            QVERIFY2(!r, bad);
            QVERIFY2(QString::fromStdString(r.message()).contains(QString("'%1'").arg(bad)), r.message().c_str());
        }
        RamBudget share;
        share.file_share = 0.5;
        QCOMPARE(share.resolve(1001), uint64_t(500));
        share.file_share = 1e-9;
        QCOMPARE(share.resolve(1000), uint64_t(1));  // refused later as too small, never 0 (no budget)
        RamBudget bytes;
        bytes.bytes = 4096;
        QCOMPARE(bytes.resolve(1 << 30), uint64_t(4096));
    }

    // The budget options' combinations, each refused with the option it is about.
    void expert_cache_requests() {
        tools::ModelArgs a;
        QVERIFY(!tools::expert_cache_request(a).value().has_value());
        const auto refused = [](tools::ModelArgs args, const char* why) {
            auto r = tools::expert_cache_request(args);
            QVERIFY2(!r && QString::fromStdString(r.message()).contains(why), r ? "accepted" : r.message().c_str());
        };
        a.hot_trace = "t.json";
        refused(a, "--hot-trace needs --ram-budget");
        a = {};
        a.cache_prefetch = true;
        refused(a, "--cache-prefetch needs --ram-budget");
        a = {};
        a.ram_budget = "1G";
        a.cache_policy = "fifo";
        refused(a, "--cache-policy: unknown policy 'fifo'");
        a.cache_policy = "pinned";
        refused(a, "needs --hot-trace");
        a.cache_policy = "lfru";
        a.hot_trace = "t.json";
        refused(a, "--hot-trace is for --cache-policy pinned");
        a.hot_trace.clear();
        a.ram_budget = "25%";
        a.cache_prefetch = true;
        auto r = tools::expert_cache_request(a);
        QVERIFY(r && r->has_value());
        QCOMPARE((*r)->policy, CachePolicy::Lfru);
        QCOMPARE((*r)->budget.file_share, 0.25);
        QVERIFY((*r)->prefetch && !(*r)->hot_experts);
        a.path = "m.bin";
        a.threads = 3;
        a.context = 77;
        auto o = tools::open_options(a);
        QVERIFY(o);
        QCOMPARE(o->path, std::string("m.bin"));
        QCOMPARE(o->threads, 3u);
        QCOMPARE(o->context, 77u);
        QVERIFY(o->cache.has_value() && o->with_session);
    }

    void token_id_lists() {
        QCOMPARE(tools::parse_token_ids("1,2,3").value(), (std::vector<int32_t>{1, 2, 3}));
        QCOMPARE(tools::parse_token_ids("2147483647").value(), (std::vector<int32_t>{INT32_MAX}));
        for (const char* bad : {"", "1,,2", "-1", "2147483648", "1,x", "1 ,2", "1,"}) QVERIFY2(!tools::parse_token_ids(bad), bad);
    }

    void eval_requirements() {
        auto r = tools::parse_skill_requirement("math=0.75");
        QVERIFY(r);
        QCOMPARE(r->skill, std::string("math"));
        QCOMPARE(r->fraction, 0.75);
        QCOMPARE(tools::parse_skill_requirement("a=b=1")->skill, std::string("a=b"));
        for (const char* bad : {"math", "=0.5", "math=", "math=1.5", "math=-0.1", "math=0.5x"}) QVERIFY2(!tools::parse_skill_requirement(bad), bad);
        tools::EvalReport report;
        report.skills = {{"math", 4, 3, 0}, {"all", 4, 3, 0}};
        QVERIFY(tools::unmet_requirements(report, {{"math", 0.75}, {"all", 0.5}}, "d.jsonl").empty());
        const auto unmet = tools::unmet_requirements(report, {{"math", 0.8}, {"poetry", 0.1}}, "d.jsonl");
        QCOMPARE(unmet.size(), size_t(2));
        QCOMPARE(unmet[0], std::string("math accuracy 0.750 is below the required 0.800"));
        QCOMPARE(unmet[1], std::string("no cases of skill 'poetry' in d.jsonl"));
    }

    // colibri info's summary of a converted reference model, and the expert cache's with a budget.
    void model_summary() {
        const QString path = dir_.filePath("mixtral.bin");
        const CliResult c = run_cli({"convert", reference("hf/mixtral/model"), "-o", path, "-q"});
        QVERIFY2(c.exit_code == 0, c.err.constData());
        auto model = Model::load(path.toStdString());
        QVERIFY(model);
        const Model& m = *model.value();
        const json j = tools::model_info_json(m);
        QCOMPARE(j["family"].get<std::string>(), std::string("mixtral"));
        QCOMPARE(j["vocab_size"].get<uint32_t>(), m.hparams().vocab_size);
        QCOMPARE(j["layers"].get<uint32_t>(), m.hparams().n_layers);
        QCOMPARE(j["experts"].get<uint32_t>(), m.hparams().n_experts);
        QCOMPARE(j["tensors"].get<size_t>(), m.file().tensors().size());
        uint64_t bytes = 0;
        for (const auto& [type, n] : j["weight_bytes_by_type"].items()) bytes += n.get<uint64_t>();
        uint64_t want = 0;
        for (const TensorView& t : m.file().tensors()) want += t.size;
        QCOMPARE(bytes, want);
        QCOMPARE(j["routing"], tools::routing_json(m));
        QCOMPARE(j["routing"]["scoring"].get<std::string>(), std::string("softmax"));
        QCOMPARE(j["routing"]["top_k"].get<uint32_t>(), m.hparams().n_experts_active);
        QVERIFY(!j["routing"].contains("n_group"));

        OpenOptions o;
        o.path = path.toStdString();
        o.cache = ExpertCacheRequest{};
        o.cache->budget.file_share = 1.0;
        auto opened = open_model(o);
        QVERIFY2(opened, opened.message().c_str());
        const json cache = tools::expert_cache_json(*opened->model->expert_cache());
        QCOMPARE(cache["policy"].get<std::string>(), std::string("lru"));
        QCOMPARE(cache["ram_budget"].get<uint64_t>(), opened->model->file().size());
        QCOMPARE(cache["hits"].get<uint64_t>(), uint64_t(0));
    }
};

QTEST_GUILESS_MAIN(TestCliLibrary)
#include "test_cli_library.moc"
