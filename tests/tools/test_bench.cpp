// `colibri bench --json` reports every field with sane values (no timing is asserted, only that the numbers
// are positive and ordered min <= median <= max), bytes per token add up from the model's tensors, bad
// arguments are one-line errors; `colibri route --router lut --compare` reports agreement; the bench preset
// of colibri-make-model has the benchmark shape. The library's measurement, which the Studio's kernel
// comparison calls too: its rates are TokenRate's, its greedy ids the session's own, a comparison stops when asked.
#include <QTemporaryDir>
#include <QtTest>
#include <algorithm>
#include <nlohmann/json.hpp>
#include <vector>

#include "../test_support.h"
#include "engine/base/token_rate.h"
#include "engine/core/model.h"
#include "engine/core/sampler.h"
#include "engine/core/thread_pool.h"
#include "kernels/registry.h"
#include "tools/bench.h"

using namespace colibri::test;

namespace {
void check_spread(const QJsonObject& o, const char* name) {
    const QJsonObject s = o[name].toObject();
    QVERIFY2(s.contains("median") && s.contains("min") && s.contains("max"), name);
    const double lo = s["min"].toDouble(), mid = s["median"].toDouble(), hi = s["max"].toDouble();
    QVERIFY2(lo > 0 && lo <= mid && mid <= hi, name);
}
}  // namespace

class TestBench : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    QString model_;

private slots:
    void initTestCase() {
        model_ = dir_.filePath("qwen2_moe.bin");
        const CliResult r = run_cli({"convert", reference("hf/qwen2_moe/model"), "-o", model_, "--type", "q8_0", "-q"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
    }

    void json_has_all_fields() {
        const CliResult r = run_cli({"bench", "-m", model_, "-t", "2", "-p", "12", "-n", "6", "--reps", "3", "--json",
                                     "--bandwidth-mib", "64", "--cold", "1", "--cold-tokens", "2"});
        QVERIFY2(r.exit_code == 0 && !r.crashed, r.err.constData());
        QJsonParseError err;
        const QJsonObject j = QJsonDocument::fromJson(r.out, &err).object();
        QCOMPARE(err.error, QJsonParseError::NoError);
        QCOMPARE(j["threads"].toInt(), 2);
        QCOMPARE(j["prompt_tokens"].toInt(), 12);
        QCOMPARE(j["decode_tokens"].toInt(), 6);
        QCOMPARE(j["reps"].toInt(), 3);
        // As llama-bench's pp and tg tests: both from an empty context unless --depth says otherwise.
        QCOMPARE(j["depth"].toInt(), 0);
        QCOMPARE(j["prompt_first_position"].toInt(), 0);
        QCOMPARE(j["decode_first_position"].toInt(), 0);
        QCOMPARE(j["router"].toString(), QString("exact"));
        check_spread(j, "prompt_tokens_per_s");
        check_spread(j, "decode_tokens_per_s");
        check_spread(j, "bandwidth_gb_per_s");
        check_spread(j, "cold_tokens_per_s");
        // The spread beyond min–max, and the machine's other load over the timed repetitions with the verdict.
        const QJsonObject decode_spread = j["decode_tokens_per_s"].toObject();
        QVERIFY(decode_spread["q1"].toDouble() <= decode_spread["median"].toDouble() &&
                decode_spread["median"].toDouble() <= decode_spread["q3"].toDouble());
        QCOMPARE(decode_spread["large"].toBool(), decode_spread["relative_range"].toDouble() > 0.2);
        const QJsonObject load = j["machine_load"].toObject();
        QVERIFY2(load["measured"].toBool() && load["cpus"].toInt() >= 1 && load["other_cpus"].toDouble() >= 0, r.out.constData());
        QCOMPARE(load["busy"].toBool(), load["other_cpus"].toDouble() >= load["busy_threshold_cpus"].toDouble());
        QCOMPARE(j["unreliable"].toString().isEmpty(), !load["busy"].toBool() && !decode_spread["large"].toBool() &&
                                                           !j["prompt_tokens_per_s"].toObject()["large"].toBool());
        QCOMPARE(j["bandwidth_buffer_bytes"].toDouble(), 64.0 * 1024 * 1024);
        // The bandwidth of every read pattern (streams per thread, software prefetch), and the roofline's figure
        // is the best median.
        const QJsonObject by = j["bandwidth_by_pattern"].toObject();
        QCOMPARE(by.keys(), QStringList({"1", "2", "2+prefetch", "4", "4+prefetch"}));
        double best = 0;
        for (const QString& k : by.keys()) {
            check_spread(by, k.toUtf8().constData());
            best = std::max(best, by[k].toObject()["median"].toDouble());
        }
        const QString pattern = j["bandwidth_pattern"].toString();
        QVERIFY2(by.contains(pattern), qPrintable(pattern));
        QCOMPARE(by[pattern].toObject()["median"].toDouble(), best);
        QCOMPARE(j["bandwidth_gb_per_s"].toObject()["median"].toDouble(), best);
        // The variant running each weight type's kernels: q8_0 matrices, f32 norms and router.
        for (const char* type : {"q8_0", "f32"}) {
            const QJsonObject k = j["kernels"].toObject()[type].toObject();
            QVERIFY2(!k["matvec"].toString().isEmpty() && !k["matmul"].toString().isEmpty(), type);
        }

        // Bytes per token: the parts add up, and each part that this model has is there.
        const QJsonObject d = j["bytes_per_token_detail"].toObject();
        double sum = 0;
        for (const char* k : {"attention", "router", "experts", "shared_expert", "dense_ffn", "norms", "lm_head", "embedding"}) {
            QVERIFY2(d.contains(k), k);
            sum += d[k].toDouble();
        }
        QCOMPARE(sum, j["bytes_per_token"].toDouble());
        for (const char* k : {"attention", "router", "experts", "shared_expert", "norms", "lm_head", "embedding"})
            QVERIFY2(d[k].toDouble() > 0, k);
        QCOMPARE(d["dense_ffn"].toDouble(), 0.0);
        // q8_0 lm head: 4096 rows of 64 columns, 34 bytes per 32 values.
        QCOMPARE(d["lm_head"].toDouble(), 4096.0 * 64 / 32 * 34);

        const double roofline = j["roofline_tokens_per_s"].toDouble();
        QVERIFY(roofline > 0);
        QVERIFY(std::fabs(roofline - j["bandwidth_gb_per_s"].toObject()["median"].toDouble() * 1e9 / j["bytes_per_token"].toDouble()) <= 1e-6 * roofline);
        QVERIFY(std::fabs(j["roofline_fraction_of_medians"].toDouble() - j["decode_tokens_per_s"].toObject()["median"].toDouble() / roofline) < 1e-9);
        // The headline fraction pairs each decode repetition with the bandwidth passes either side of it: pass r
        // follows repetition r (pass 0 the warm-up), in the roofline's pattern.
        const QJsonArray decode = j["decode_tokens_per_s"].toObject()["samples"].toArray();
        const QJsonArray passes = j["bandwidth_gb_per_s"].toObject()["samples"].toArray();
        const QJsonArray paired = j["roofline_fraction_samples"].toArray();
        QCOMPARE(paired.size(), 3);
        QVERIFY(passes.size() >= 4);
        std::vector<double> fractions;
        for (int i = 0; i < 3; ++i) {
            const double bw = 0.5 * (passes[i].toDouble() + passes[i + 1].toDouble());
            const double want = decode[i].toDouble() * j["bytes_per_token"].toDouble() / (bw * 1e9);
            QVERIFY2(std::fabs(paired[i].toDouble() - want) <= 1e-9 * want, qPrintable(QString::number(i)));
            fractions.push_back(paired[i].toDouble());
        }
        std::sort(fractions.begin(), fractions.end());
        QCOMPARE(j["roofline_fraction"].toDouble(), fractions[1]);
    }

    // --depth D (llama-bench -d D): the session holds D tokens when the timed prompt and the timed decode begin.
    void depth_puts_context_before_both_tests() {
        const CliResult r = run_cli({"bench", "-m", model_, "-t", "2", "-p", "5", "-n", "3", "--depth", "7", "--reps", "1",
                                     "--json", "--bandwidth-mib", "64"});
        QVERIFY2(r.exit_code == 0 && !r.crashed, r.err.constData());
        const QJsonObject j = QJsonDocument::fromJson(r.out).object();
        QCOMPARE(j["depth"].toInt(), 7);
        QCOMPARE(j["prompt_first_position"].toInt(), 7);
        QCOMPARE(j["decode_first_position"].toInt(), 7);
        check_spread(j, "decode_tokens_per_s");

        const CliResult text = run_cli({"bench", "-m", model_, "-t", "1", "-p", "4", "-n", "2", "-d", "3", "--reps", "1",
                                        "--bandwidth-mib", "64"});
        QVERIFY2(text.exit_code == 0, text.err.constData());
        QVERIFY2(text.out.contains("positions 3..6") && text.out.contains("positions 3..4"), text.out.constData());
    }

    void text_report() {
        const CliResult r = run_cli({"bench", "-m", model_, "-t", "1", "-p", "4", "-n", "4", "--reps", "1", "--bandwidth-mib", "64",
                                     "--router", "lut", "--prefetch", "--huge-pages"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        for (const char* s : {"prompt", "decode", "bytes per decoded token", "memory bandwidth", "roofline", "router lut", "prefetch on",
                              "machine: other processes used "})
            QVERIFY2(r.out.contains(s), s);
    }

    // -c sets the session's context (reported); the decode's time per layer adds up to the token's time.
    void context_and_layer_times() {
        const CliResult r = run_cli({"bench", "-m", model_, "-t", "1", "-p", "4", "-n", "3", "--reps", "1", "-c", "512",
                                     "--json", "--bandwidth-mib", "64"});
        QVERIFY2(r.exit_code == 0 && !r.crashed, r.err.constData());
        const QJsonObject j = QJsonDocument::fromJson(r.out).object();
        QCOMPARE(j["context"].toInt(), 512);
        const QJsonArray layers = j["decode_layers"].toArray();
        QCOMPARE(layers.size(), 2);
        double sum = 0;
        for (int i = 0; i < layers.size(); ++i) {
            const QJsonObject l = layers[i].toObject();
            QCOMPARE(l["layer"].toInt(), i);
            QVERIFY(l["attention_us"].toDouble() > 0 && l["experts_us"].toDouble() > 0);
            QCOMPARE(l["total_us"].toDouble(), l["attention_us"].toDouble() + l["router_us"].toDouble() + l["experts_us"].toDouble());
            sum += l["total_us"].toDouble();
        }
        QVERIFY(j["decode_lm_head_us"].toDouble() > 0);
        QVERIFY(sum + j["decode_lm_head_us"].toDouble() <= j["decode_token_us"].toDouble());
        const CliResult small = run_cli({"bench", "-m", model_, "-p", "10", "-n", "4", "-c", "8"});
        QVERIFY(small.exit_code != 0 && small.err.trimmed().startsWith("colibri: bench: -c 8 is less than"));
    }

    // --kernel V runs the bench with one variant everywhere; a list compares them side by side; a variant the
    // CPU cannot run, or an unknown one, is a one-line error.
    void kernel_variants() {
        const CliResult one = run_cli({"bench", "-m", model_, "-t", "1", "-p", "4", "-n", "2", "--reps", "1", "--kernel", "scalar",
                                       "--json", "--bandwidth-mib", "64"});
        QVERIFY2(one.exit_code == 0, one.err.constData());
        const QJsonObject kernels = QJsonDocument::fromJson(one.out).object()["kernels"].toObject();
        QVERIFY(!kernels.isEmpty());
        for (const QString& type : kernels.keys()) {
            QCOMPARE(kernels[type].toObject()["matvec"].toString(), QString("scalar"));
            QCOMPARE(kernels[type].toObject()["matmul"].toString(), QString("scalar"));
        }
        const CliResult all = run_cli({"bench", "-m", model_, "-t", "1", "-p", "4", "-n", "2", "--reps", "1", "--kernel", "all",
                                       "--json", "--bandwidth-mib", "64"});
        QVERIFY2(all.exit_code == 0, all.err.constData());
        const QJsonArray runs = QJsonDocument::fromJson(all.out).object()["kernel_comparison"].toArray();
        QVERIFY(runs.size() >= 2);  // scalar and at least the machine's own
        QCOMPARE(runs[0].toObject()["kernel"].toString(), QString("scalar"));
        for (const auto& v : runs) {
            const QJsonObject run = v.toObject();
            check_spread(run, "decode_tokens_per_s");
            const QString kernel = run["kernel"].toString();
            for (const auto& k : run["kernels"].toObject()) QCOMPARE(k.toObject()["matvec"].toString(), kernel);
        }
        const QString two = runs[0].toObject()["kernel"].toString() + "," + runs[1].toObject()["kernel"].toString();
        const CliResult text = run_cli({"bench", "-m", model_, "-t", "1", "-p", "4", "-n", "2", "--reps", "1", "--kernel", two,
                                        "--bandwidth-mib", "64"});
        QVERIFY2(text.exit_code == 0, text.err.constData());
        QVERIFY2(text.out.startsWith("kernel comparison:") && text.out.contains("Scalar") && text.out.contains("== kernel scalar"),
                 text.out.constData());
        for (const char* bad : {"sse9", "scalar,bogus"}) {
            const CliResult r = run_cli({"bench", "-m", model_, "--kernel", bad});
            QVERIFY(r.exit_code != 0 && r.err.trimmed().startsWith("colibri: bench: --kernel: unknown variant"));
        }
#if defined(__x86_64__)
        const CliResult neon = run_cli({"bench", "-m", model_, "--kernel", "neon"});
        QVERIFY2(neon.exit_code != 0 && neon.err.contains("cannot run it"), neon.err.constData());
#endif
    }

    // One rate definition: forward passes over seconds; a reply's first token is the prompt's.
    void token_rate_definition() {
        QCOMPARE(colibri::TokenRate({6, 2.0}).per_second(), 3.0);
        QCOMPARE(colibri::TokenRate({6, 0.0}).per_second(), 0.0);
        QCOMPARE(colibri::TokenRate::of_reply(7, 2.0).tokens, uint64_t(6));
        QCOMPARE(colibri::TokenRate::of_reply(7, 2.0).per_second(), 3.0);
        QCOMPARE(colibri::TokenRate::of_reply(1, 2.0).per_second(), 0.0);
        QCOMPARE(colibri::TokenRate::of_reply(0, 2.0).tokens, uint64_t(0));
    }

    // measure_repetition (run_bench's loop) and compare_kernels (the Studio's comparison) measure alike: the
    // repetition's rates are its tokens over its seconds, its ids the greedy decode of a plain session, and every
    // variant's comparison run decodes those same ids.
    void shared_measurement() {
        using namespace colibri;
        auto model = Model::load(model_.toStdString());
        QVERIFY2(model.is_ok(), model.message().c_str());
        auto pool = ThreadPool::create(1);
        QVERIFY(pool.is_ok());
        Session s(*model.value(), *pool.value(), 32);
        const std::vector<int32_t> prompt{3, 1, 4, 1, 5};
        const int32_t first = tools::decode_start_token(*model.value());
        const tools::BenchStart start = [&] {
            s.reset();
            return Status::ok();
        };
        auto rep = tools::measure_repetition(s, prompt, first, 4, start);
        QVERIFY2(rep.is_ok(), rep.message().c_str());
        QCOMPARE(rep->prompt.tokens, uint64_t(5));
        QCOMPARE(rep->decode.tokens, uint64_t(4));
        QVERIFY(rep->prompt.seconds > 0 && rep->decode.seconds > 0);
        QCOMPARE(rep->decode.per_second(), 4 / rep->decode.seconds);
        QCOMPARE(rep->decode_first_position, 0u);
        std::vector<int32_t> greedy{first};
        s.reset();
        for (int i = 0; i < 3; ++i) {
            auto logits = s.eval(greedy.back());
            QVERIFY(logits.is_ok());
            greedy.push_back(argmax(logits.value()));
        }
        QCOMPARE(rep->decoded, greedy);

        tools::KernelComparisonConfig config;
        config.prompt = prompt;
        config.decode_tokens = 4;
        config.reps = 2;
        config.variants = {kernels::Variant::Scalar, kernels::supported_variants().back()};
        std::vector<int> asked;
        auto compared = tools::compare_kernels(*model.value(), s, config, [&](int done, int total, kernels::Variant, int) {
            asked.push_back(done);
            return total == 4;
        });
        QVERIFY2(compared.is_ok(), compared.message().c_str());
        QCOMPARE(asked, std::vector<int>({0, 1, 2, 3}));
        QVERIFY(!compared->stopped);
        QCOMPARE(compared->runs.size(), size_t(2));
        for (const tools::KernelRun& r : compared->runs) {
            QCOMPARE(r.decoded, rep->decoded);
            QCOMPARE(r.report.decode_tps.samples.size(), size_t(2));
            QCOMPARE(r.report.config.reps, 2u);
            QVERIFY(r.report.decode_tps.min > 0);
            QCOMPARE(r.report.decode_layers.size(), size_t(model.value()->hparams().n_layers));
        }
        QCOMPARE(compared->runs[0].variant, kernels::Variant::Scalar);
        // The machine's load comes from the injected reader: a busy stretch (other processes on 3 of 4 CPUs)
        // flags every run; the figures' JSON and text say so.
        int reads = 0;
        config.load_reader = [&reads]() -> colibri::Result<tools::LoadReading> {
            // 100 ticks of 4 CPUs pass; busy 80 of them, 5 this process's own.
            const uint64_t n = static_cast<uint64_t>(reads++);
            return tools::LoadReading{{80 * n, 100 * n, 4}, 5 * n};
        };
        auto busy = tools::compare_kernels(*model.value(), s, config, {});
        QVERIFY(busy.is_ok());
        QCOMPARE(reads, 2);
        QVERIFY(busy->load.measured && busy->load.busy());
        QCOMPARE(busy->load.other_cpus, 3.0);
        QCOMPARE(busy->load.own_cpus, 0.2);
        for (const tools::KernelRun& r : busy->runs) QVERIFY(r.report.load.busy());
        const std::string why = tools::comparison_unreliable(busy->runs);
        QVERIFY2(why.find("the machine was busy: other processes used 3.0 of 4 CPUs") == 0, why.c_str());
        QVERIFY(tools::kernel_comparison_text(busy->runs).find("UNRELIABLE: the machine was busy") != std::string::npos);
        QCOMPARE(tools::kernel_comparison_json(busy->runs)["unreliable"].get<std::string>(), why);
        QCOMPARE(tools::bench_json(busy->runs[0].report)["machine_load"]["busy"].get<bool>(), true);
        config.load_reader = [] { return colibri::Result<tools::LoadReading>(colibri::error("/proc/stat: cannot read")); };
        auto unknown = tools::compare_kernels(*model.value(), s, config, {});
        QVERIFY(unknown.is_ok() && !unknown->load.measured && !unknown->load.busy());
        QCOMPARE(unknown->load.not_measured, std::string("/proc/stat: cannot read"));
        config.load_reader = tools::read_machine_load;
        // Stopped in the second repetition: only the first, which every variant finished, counts.
        auto stopped = tools::compare_kernels(*model.value(), s, config, [](int done, int, kernels::Variant, int) { return done < 3; });
        QVERIFY(stopped.is_ok());
        QVERIFY(stopped->stopped);
        for (const tools::KernelRun& r : stopped->runs) QCOMPARE(r.report.decode_tps.samples.size(), size_t(1));
        // Stopped before any variant ran: nothing to compare.
        auto none = tools::compare_kernels(*model.value(), s, config, [](int, int, kernels::Variant, int) { return false; });
        QVERIFY(none.is_ok() && none->stopped && none->runs.empty());
        kernels::select_variant(kernels::supported_variants().back());
        // What cannot be measured is a one-line error before anything runs.
        config.prompt.assign(40, 1);
        auto too_long = tools::compare_kernels(*model.value(), s, config, {});
        QVERIFY(!too_long.is_ok() && too_long.message().find("tokens of context") != std::string::npos);
        config.prompt = {-1};
        auto bad_id = tools::compare_kernels(*model.value(), s, config, {});
        QVERIFY(!bad_id.is_ok() && bad_id.message().find("out of range") != std::string::npos);
    }

    // The spread of repetitions and the machine's load read from synthetic /proc/stat snapshots: what counts as
    // busy, what as far apart, and /proc/stat text that is not one.
    void spread_and_machine_load() {
        using namespace colibri::tools;
        const Spread s = Spread::of({10, 12, 11, 30, 9});
        QCOMPARE(s.median, 11.0);
        QCOMPARE(s.min, 9.0);
        QCOMPARE(s.max, 30.0);
        QCOMPARE(s.q1, 10.0);
        QCOMPARE(s.q3, 12.0);
        QCOMPARE(s.samples, std::vector<double>({10, 12, 11, 30, 9}));
        QVERIFY(spread_is_large(s));  // 21 / 11 apart
        QVERIFY(!spread_is_large(Spread::of({100, 104, 98})));
        QVERIFY(!spread_is_large(Spread::of({100})));  // one repetition: nothing to judge
        QCOMPARE(Spread::of({1, 2, 3, 4}).median, 2.5);

        const char* quiet_before =
            "cpu  1000 0 500 8000 100 0 10 0 0 0\ncpu0 500 0 250 4000 50 0 5 0 0 0\ncpu1 500 0 250 4000 50 0 5 0 0 0\n"
            "intr 1 2 3\nctxt 99\n";
        const char* quiet_after =  // 200 ticks: 50 busy, of them 40 this process's
            "cpu  1030 0 520 8150 100 0 10 0 0 0\ncpu0 515 0 260 4075 50 0 5 0 0 0\ncpu1 515 0 260 4075 50 0 5 0 0 0\n";
        const char* busy_after =  // 200 ticks: 180 busy (steal included), 40 this process's
            "cpu  1100 50 510 8020 100 0 10 20 0 0\ncpu0 550 25 255 4010 50 0 5 10 0 0\ncpu1 550 25 255 4010 50 0 5 10 0 0\n";
        auto a = parse_proc_stat(quiet_before);
        QVERIFY2(a.is_ok(), a.message().c_str());
        QCOMPARE(a->cpus, 2u);
        QCOMPARE(a->busy, uint64_t(1510));
        QCOMPARE(a->total, uint64_t(9610));
        auto q = parse_proc_stat(quiet_after);
        auto b = parse_proc_stat(busy_after);
        QVERIFY(q.is_ok() && b.is_ok());
        const MachineLoad quiet = load_between({a.value(), 100}, {q.value(), 140});
        QVERIFY(quiet.measured && !quiet.busy());
        QCOMPARE(quiet.own_cpus, 0.4);
        QCOMPARE(quiet.other_cpus, 0.1);
        QCOMPARE(quiet.describe(), std::string("other processes used 0.1 of 2 CPUs (this one 0.4)"));
        QCOMPARE(unreliable_reason(quiet, {{"decode", Spread::of({100, 101, 99})}}), std::string());
        QCOMPARE(unreliable_reason(quiet, {{"decode", Spread::of({100, 150, 99})}}), std::string("decode varied 51 % between repetitions"));
        const MachineLoad busy = load_between({a.value(), 100}, {b.value(), 140});
        QVERIFY(busy.busy());
        QCOMPARE(busy.other_cpus, 1.4);
        QCOMPARE(unreliable_reason(busy, {}), std::string("the machine was busy: other processes used 1.4 of 2 CPUs (this one 0.4)"));
        // A reading that did not move (a run within one tick) is not measured, never a division by zero.
        const MachineLoad still = load_between({a.value(), 100}, {a.value(), 100});
        QVERIFY(!still.measured && !still.busy() && !still.not_measured.empty());
        // The threshold grows with the machine: 1.4 other CPUs of 64 is not busy.
        MachineLoad big = busy;
        big.cpus = 64;
        QVERIFY(!big.busy());
        big.other_cpus = 7;
        QVERIFY(big.busy());
        // A LoadWatch reads at its start and at stop(), through the injected reader.
        std::vector<std::string> snapshots{quiet_before, busy_after};
        size_t at = 0;
        LoadWatch watch([&]() -> colibri::Result<LoadReading> {
            auto cpu = parse_proc_stat(snapshots[at]);
            if (!cpu) return cpu.status();
            return LoadReading{cpu.value(), 100 + 40 * at++};
        });
        QCOMPARE(watch.stop().other_cpus, 1.4);
        // Text that is not /proc/stat.
        QVERIFY(!parse_proc_stat("").is_ok());
        QVERIFY(!parse_proc_stat("cpu0 1 2 3 4\n").is_ok());
        QVERIFY(!parse_proc_stat("cpu  1 2\n").is_ok());
        QVERIFY(!parse_proc_stat("cpu  x y z w\n").is_ok());
        // The real machine reads.
        auto here = read_machine_load();
        QVERIFY2(here.is_ok(), here.message().c_str());
        QVERIFY(here->cpu.cpus >= 1 && here->cpu.total > 0);
    }

    void bad_arguments() {
        struct Case {
            QStringList args;
            const char* why;
        };
        const QList<Case> cases{
            {{"bench", "-m", model_, "-p", "0"}, "at least 1"},
            {{"bench", "-m", model_, "--reps", "0"}, "at least 1"},
            {{"bench", "-m", model_, "--router", "fast"}, "unknown router"},
            {{"bench", "-m", model_, "-p", "5000", "-n", "10"}, "exceed"},
            {{"bench", "-m", model_, "-p", "10", "-n", "10", "--depth", "5000"}, "exceed"},
            {{"bench", "-m", dir_.filePath("missing.bin")}, "missing.bin"},
            {{"route", "-m", model_, "--tokens", "1,2", "--router", "fast"}, "unknown router"},
        };
        for (const Case& c : cases) {
            const CliResult r = run_cli(c.args);
            QVERIFY2(!r.crashed && r.exit_code != 0, qPrintable(c.args.join(' ')));
            const QByteArray err = r.err.trimmed();
            QVERIFY2(err.startsWith("colibri: ") && !err.contains('\n') && err.contains(c.why), err.constData());
        }
    }

    void route_compare_reports_agreement() {
        const QJsonArray ids = read_json(reference("hf/qwen2_moe/ref/input_ids.json")).array();
        const CliResult r = run_cli({"route", "-m", model_, "--tokens", ids_arg(ids), "--router", "lut", "--compare"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        const QJsonObject j = QJsonDocument::fromJson(r.out).object();
        QCOMPARE(j["router"].toString(), QString("lut"));
        QCOMPARE(j["tokens"].toInt(), ids.size());
        for (const char* mode : {"same_logits", "end_to_end"}) {
            const QJsonObject o = j[mode].toObject();
            QCOMPARE(o["decisions"].toInt(), ids.size() * 2);  // two MoE layers
            const double set = o["set_agreement"].toDouble(), order = o["order_agreement"].toDouble();
            QVERIFY(order <= set && set <= 1.0 && order >= 0.0);
            QVERIFY(o["max_weight_diff"].toDouble() >= 0.0);
        }
        QCOMPARE(j["layers"].toArray().size(), 2);

        // Routing with the LUT router gives the same JSON shape as the exact one.
        const CliResult lut = run_cli({"route", "-m", model_, "--tokens", ids_arg(ids), "--router", "lut"});
        QVERIFY2(lut.exit_code == 0, lut.err.constData());
        const QJsonObject lj = QJsonDocument::fromJson(lut.out).object();
        QCOMPARE(lj["router"].toString(), QString("lut"));
        QCOMPARE(lj["layers"].toArray().size(), 2);
    }

    // Every tensor a decoded token reads is in bytes per token, counted from the file's tensor table by name
    // (not from the LayerWeights fields the count itself uses): the whole of every decoder layer but its routed
    // experts, k experts of average size per MoE layer, one embedding row; a multi-token-prediction head not.
    // Gated DeltaNet layers (qwen3_next, qwen3_5_moe), the attention output gate, MLA, sinks and biases included.
    void bytes_per_token_counts_every_tensor_a_token_reads_data() {
        QTest::addColumn<QString>("family");
        for (const char* f : {"qwen2_moe", "qwen3_next", "qwen3_5_moe", "deepseek_v3", "glm4_moe_lite", "gpt_oss", "minimax_m2"})
            QTest::newRow(f) << QString(f);
    }
    void bytes_per_token_counts_every_tensor_a_token_reads() {
        QFETCH(QString, family);
        const QString bin = dir_.filePath(family + "-bytes.bin");
        QString source = reference("hf/" + family + "/model");
        if (family == "qwen3_5_moe") {  // its shape with a multi-token-prediction head, which the count must leave out
            source = dir_.filePath("qwen3_5_moe-mtp");
            QProcess make;
            make.start(QStringLiteral(COLIBRI_BUILD_DIR "/bin/colibri-make-model"),
                       {"--config", reference("hf/qwen3_5_moe/model/config.json"), "--mtp-layers", "1", "-o", source});
            QVERIFY(make.waitForFinished(60000));
            QCOMPARE(make.exitCode(), 0);
        }
        const CliResult r = run_cli({"convert", source, "-o", bin, "-q"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        auto loaded = colibri::Model::load(bin.toStdString());
        QVERIFY2(loaded, loaded ? "" : loaded.message().c_str());
        const colibri::Model& m = *loaded.value();
        const auto& hp = m.hparams();
        uint64_t want = 0;
        std::vector<uint64_t> experts(hp.n_layers, 0);
        for (const colibri::TensorView& t : m.file().tensors()) {
            if (t.name == "embed") {
                want += t.size / t.rows;  // one row
                continue;
            }
            if (t.name.starts_with("layers.")) {
                const uint32_t layer = uint32_t(std::stoul(t.name.substr(7)));
                if (layer >= hp.n_layers) continue;  // the MTP head's
                if (t.name.find(".experts.") != std::string::npos) {
                    experts[layer] += t.size;
                    continue;
                }
            }
            want += t.size;
        }
        for (uint64_t e : experts) want += e / hp.n_experts * hp.n_experts_active;
        const colibri::tools::TokenBytes b = colibri::tools::decode_token_bytes(m);
        QCOMPARE(b.total(), want);
        QVERIFY(b.attention > 0 && b.experts > 0 && b.lm_head > 0);
        if (family == "qwen3_5_moe") QCOMPARE(m.mtp_layers().size(), size_t(1));
    }

    void bench_preset_shape() {
        const QString out = dir_.filePath("bench-hf");
        QProcess p;
        p.start(QStringLiteral(COLIBRI_BUILD_DIR "/bin/colibri-make-model"), {"--preset", "bench", "--config-only", "-o", out});
        QVERIFY(p.waitForFinished(60000));
        QCOMPARE(p.exitCode(), 0);
        const QJsonObject c = read_json(out + "/config.json").object();
        QCOMPARE(c["model_type"].toString(), QString("mixtral"));
        QCOMPARE(c["num_hidden_layers"].toInt(), 8);
        QCOMPARE(c["hidden_size"].toInt(), 1024);
        QCOMPARE(c["num_attention_heads"].toInt(), 16);
        QCOMPARE(c["num_key_value_heads"].toInt(), 4);
        QCOMPARE(c["intermediate_size"].toInt(), 2816);
        QCOMPARE(c["num_local_experts"].toInt(), 8);
        QCOMPARE(c["num_experts_per_tok"].toInt(), 2);
        QCOMPARE(c["vocab_size"].toInt(), 32000);
        QVERIFY(!QFile::exists(out + "/model.safetensors"));

        QProcess bad;
        bad.start(QStringLiteral(COLIBRI_BUILD_DIR "/bin/colibri-make-model"), {"--preset", "bench", "--hidden", "64", "-o", out});
        QVERIFY(bad.waitForFinished(60000));
        QVERIFY(bad.exitCode() != 0);
    }
};

QTEST_GUILESS_MAIN(TestBench)
#include "test_bench.moc"
