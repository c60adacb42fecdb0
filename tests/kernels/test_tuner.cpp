// The auto-tuner: `colibri tune --quick --json` follows the schema the Studio imports, covers every supported
// variant and chooses one per (op, type); the cache file is written, read back, keyed by CPU model and version,
// and applied at startup. No timing is asserted: only that times are positive.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSet>
#include <QTemporaryDir>
#include <QtTest>
#include <map>
#include <set>

#include "../test_support.h"
#include "kernels/cpu_info.h"
#include "kernels/registry.h"
#include "kernels/tuner.h"

using namespace colibri;
using namespace colibri::kernels;
using namespace colibri::test;

class TestTuner : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

    static TuneReport report_with(const std::string& model, const std::string& version, Variant v) {
        TuneReport r;
        r.cpu_model = model;
        r.version = version;
        for (auto& op : r.choice.variant) std::fill(std::begin(op), std::end(op), v);
        return r;
    }

private slots:
    void initTestCase() { QVERIFY(dir_.isValid()); }
    void cleanup() {
        qunsetenv("COLIBRI_TUNE_CACHE");
        qunsetenv("COLIBRI_KERNEL");
        select_best();
    }

    void quick_json_schema_and_cache() {
        const QString cache = dir_.filePath("cli/tune.json");
        qputenv("COLIBRI_TUNE_CACHE", cache.toUtf8());
        const CliResult r = run_cli({"tune", "--quick", "--json"});
        QVERIFY2(r.exit_code == 0 && !r.crashed, r.err.constData());
        QJsonParseError perr;
        const QJsonDocument doc = QJsonDocument::fromJson(r.out, &perr);
        QVERIFY2(perr.error == QJsonParseError::NoError, qPrintable(perr.errorString()));
        const QJsonObject root = doc.object();
        QCOMPARE(root.keys(), (QStringList{"colibri_version", "cpu", "results"}));
        QCOMPARE(root["colibri_version"].toString().toStdString(), library_version());
        QCOMPARE(root["cpu"].toObject()["model"].toString().toStdString(), cpu_model());
        QVERIFY(root["cpu"].toObject()["features"].isArray());

        std::set<std::string> variants;
        std::map<std::pair<QString, QString>, std::set<QString>> chosen, measured;
        for (const QJsonValue& v : root["results"].toArray()) {
            const QJsonObject o = v.toObject();
            QCOMPARE(o.keys(), (QStringList{"chosen", "cols", "gbps", "gflops", "ns_median", "op", "rows", "type", "variant"}));
            QVERIFY(o["op"].toString() == "matvec" || o["op"].toString() == "matmul");
            QCOMPARE(o["rows"].toInt(), 1024);
            QCOMPARE(o["cols"].toInt(), 1024);
            QVERIFY(o["ns_median"].toDouble() > 0 && o["gflops"].toDouble() > 0 && o["gbps"].toDouble() > 0);
            const auto key = std::make_pair(o["op"].toString(), o["type"].toString());
            measured[key].insert(o["variant"].toString());
            if (o["chosen"].toBool()) chosen[key].insert(o["variant"].toString());
            variants.insert(o["variant"].toString().toStdString());
        }
        std::set<std::string> supported;
        for (Variant v : supported_variants()) supported.insert(variant_name(v));
        QVERIFY(variants == supported);
        QCOMPARE(measured.size(), 2 * kernels::kernel_types().size());
        for (const auto& [key, set] : measured) {
            QCOMPARE(set.size(), supported.size());
            QVERIFY2(chosen[key].size() == 1, qPrintable(key.first + " " + key.second));
        }

        // The cache holds the same choice for this CPU and version, and nothing for another key.
        TuneChoice c;
        std::string error;
        QVERIFY(load_tune_cache(cache.toStdString(), cpu_model(), library_version(), &c, &error));
        for (const auto& [key, set] : chosen) {
            Op op;
            QVERIFY(op_from_name(key.first.toStdString(), &op));
            for (size_t t = 0; t <= kLastWeightType; ++t) {
                if (key.second == weight_type_label(WeightType(t))) {
                    QCOMPARE(QString(variant_name(c.variant[size_t(op)][t])), *set.begin());
                }
            }
        }
        QVERIFY(!load_tune_cache(cache.toStdString(), "Some Other CPU", library_version(), &c, &error));
        QVERIFY(!load_tune_cache(cache.toStdString(), cpu_model(), "0.0.0-other", &c, &error));
        QVERIFY(error.empty());
    }

    void table_output() {
        qputenv("COLIBRI_TUNE_CACHE", dir_.filePath("table/tune.json").toUtf8());
        const CliResult r = run_cli({"tune", "--quick"});
        QVERIFY2(r.exit_code == 0 && !r.crashed, r.err.constData());
        QVERIFY(r.out.contains("median ns"));
        QVERIFY(r.out.contains("Scalar"));
        QVERIFY(r.out.contains(" *\n"));
        QVERIFY(r.out.contains("choice saved to"));
    }

    // Entries of other machines survive a save; the matching one is replaced.
    void cache_keeps_other_keys() {
        const std::string path = dir_.filePath("keys/tune.json").toStdString();
        std::string error;
        QVERIFY(save_tune_cache(report_with("CPU A", "1.0", Variant::Scalar), path, &error));
        QVERIFY(save_tune_cache(report_with(cpu_model(), library_version(), Variant::Scalar), path, &error));
        QVERIFY(save_tune_cache(report_with(cpu_model(), library_version(), best_variant()), path, &error));
        TuneChoice c;
        QVERIFY(load_tune_cache(path, "CPU A", "1.0", &c, &error));
        QCOMPARE(c.variant[0][0], Variant::Scalar);
        QVERIFY(load_tune_cache(path, cpu_model(), library_version(), &c, &error));
        QCOMPARE(c.variant[1][3], best_variant());
        const QJsonDocument doc = read_json(QString::fromStdString(path));
        QCOMPARE(doc.object()["entries"].toArray().size(), 2);
    }

    // configure_kernels: the cache entry for this CPU is applied; COLIBRI_KERNEL beats it; a broken cache is
    // skipped with a warning; an entry naming a variant this CPU cannot run is ignored.
    void startup_configuration() {
        const QString path = dir_.filePath("startup/tune.json");
        qputenv("COLIBRI_TUNE_CACHE", path.toUtf8());
        std::string error, warning;
        QVERIFY(save_tune_cache(report_with(cpu_model(), library_version(), Variant::Scalar), path.toStdString(), &error));
        QVERIFY(configure_kernels(&error, &warning));
        QCOMPARE(selected_variant(Op::Matvec, WeightType::Q8_0), Variant::Scalar);
        QCOMPARE(selected_variant(Op::Matmul, WeightType::F16), Variant::Scalar);

        select_best();
        qputenv("COLIBRI_KERNEL", variant_name(best_variant()));
        QVERIFY(configure_kernels(&error, &warning));
        QCOMPARE(selected_variant(Op::Matvec, WeightType::Q8_0), best_variant());
        qputenv("COLIBRI_KERNEL", "not_a_variant");
        QVERIFY(!configure_kernels(&error, &warning));
        QVERIFY2(error.rfind("COLIBRI_KERNEL: unknown kernel variant", 0) == 0, error.c_str());
        qunsetenv("COLIBRI_KERNEL");

        select_best();
        write_all(path, "{ not json");
        warning.clear();
        QVERIFY(configure_kernels(&error, &warning));
        QVERIFY2(warning.find("not a colibri tune cache") != std::string::npos, warning.c_str());
        QCOMPARE(selected_variant(Op::Matvec, WeightType::Q8_0), best_variant());

        for (size_t i = 0; i < kVariantCount; ++i) {
            if (variant_supported(Variant(i))) continue;
            QVERIFY(save_tune_cache(report_with(cpu_model(), library_version(), Variant(i)), path.toStdString(), &error));
            TuneChoice c;
            QVERIFY(!load_tune_cache(path.toStdString(), cpu_model(), library_version(), &c, &error));
        }
    }

    void cache_path_precedence() {
        qputenv("COLIBRI_TUNE_CACHE", "/x/explicit.json");
        QCOMPARE(tune_cache_path(), std::string("/x/explicit.json"));
        qunsetenv("COLIBRI_TUNE_CACHE");
        const QByteArray xdg = qgetenv("XDG_CACHE_HOME"), home = qgetenv("HOME");
        qputenv("XDG_CACHE_HOME", "/x/cache");
        QCOMPARE(tune_cache_path(), std::string("/x/cache/colibri/tune.json"));
        qunsetenv("XDG_CACHE_HOME");
        qputenv("HOME", "/x/home");
        QCOMPARE(tune_cache_path(), std::string("/x/home/.cache/colibri/tune.json"));
        if (xdg.isNull()) qunsetenv("XDG_CACHE_HOME");
        else qputenv("XDG_CACHE_HOME", xdg);
        qputenv("HOME", home);
    }

    // The progress callback sees every measurement and can cancel the run.
    void progress_and_cancel() {
        TuneOptions o;
        o.shapes = {{48, 256}};
        o.reps = 1;
        size_t calls = 0, last_total = 0;
        const TuneReport full = run_tuner(o, [&](size_t done, size_t total, const TuneResult&) {
            ++calls;
            last_total = total;
            return done == calls;
        });
        QVERIFY(!full.cancelled);
        QCOMPARE(calls, full.results.size());
        QCOMPARE(last_total, kernels::kernel_types().size() * supported_variants().size() * 2);
        const TuneReport part = run_tuner(o, [](size_t done, size_t, const TuneResult&) { return done < 3; });
        QVERIFY(part.cancelled);
        QCOMPARE(part.results.size(), size_t(3));
    }
};

QTEST_GUILESS_MAIN(TestTuner)
#include "test_tuner.moc"
