// The auto-tuner: `colibri tune --quick --json` follows the schema the Studio imports, covers every supported
// variant and chooses one per (op, type); the cache file is written, read back, keyed by CPU model and version,
// and applied at startup. No timing is asserted: only that times are positive.
#include <sys/stat.h>
#include <unistd.h>

#include <QDir>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QMap>
#include <QSet>
#include <QTemporaryDir>
#include <QtTest>
#include <map>
#include <set>

#include "../test_support.h"
#include "kernels/cpu_info.h"
#include "kernels/registry.h"
#include "kernels/tuner.h"
#include "tools/tune_cache.h"

using namespace colibri;
using namespace colibri::kernels;
using namespace colibri::test;
using colibri::tools::configure_kernels;

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

    // The stored choice for (model, version); false when there is none or the cache cannot be used.
    static bool load_tune_cache(const std::string& path, const std::string& model, const std::string& version, TuneChoice* c,
                                std::string* error) {
        auto loaded = tools::load_tune_cache(path, model, version);
        if (!loaded) *error = loaded.message();
        if (!loaded || !loaded->has_value()) return false;
        *c = **loaded;
        return true;
    }
    static bool save_tune_cache(const TuneReport& report, const std::string& path, std::string* error) {
        const Status s = tools::save_tune_cache(report, path);
        *error = s.message();
        return bool(s);
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

    // --variants: only those are measured and chosen; an unknown or unsupported name is one line and exit 1.
    void only_the_variants_asked_for() {
        qputenv("COLIBRI_TUNE_CACHE", dir_.filePath("some/tune.json").toUtf8());
        const QString best = variant_name(supported_variants().back());
        CliResult r = run_cli({"tune", "--quick", "--json", "--variants", "scalar," + best});
        QVERIFY2(r.exit_code == 0 && !r.crashed, r.err.constData());
        std::set<QString> seen;
        for (const QJsonValue& v : QJsonDocument::fromJson(r.out).object()["results"].toArray()) seen.insert(v.toObject()["variant"].toString());
        QVERIFY(seen == (std::set<QString>{QStringLiteral("scalar"), best}));
        r = run_cli({"tune", "--quick", "--variants", "avx9000"});
        QCOMPARE(r.exit_code, 1);
        QCOMPARE(r.err, QByteArray("colibri: tune: --variants: unknown variant 'avx9000' (all, or some of: scalar, avx2, avx512, neon, neon_translated)\n"));
        QVERIFY(r.out.isEmpty());
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

    // A cache that cannot be used costs only the tuned choice: every kind of bad file is skipped with a one-line
    // warning, the CPUID default stays, nothing throws and nothing waits (a FIFO is refused, not opened for long).
    void unusable_caches_are_skipped() {
        const QString d = dir_.filePath("unusable");
        QVERIFY(QDir().mkpath(d));
        const std::string model = cpu_model(), version = library_version();
        QString nested;
        for (int k = 0; k < 100000; ++k) nested += '[';
        const QMap<QString, QByteArray> texts{
            {"garbage", QByteArray("\x00\xff{\"entries\"", 12)},
            {"nul-inside", QByteArray("{\"entries\": []}\0garbage", 24)},
            {"deep", "{\"entries\": " + nested.toUtf8() + "}"},
            {"entries-not-array", "{\"entries\": {\"cpu\": 1}}"},
            {"cpu-a-number", "{\"entries\": [{\"cpu\": 5, \"version\": []}]}"},
            {"choice-a-string", QString("{\"entries\": [{\"cpu\": \"%1\", \"version\": \"%2\", \"choice\": \"x\"}]}")
                                    .arg(QString::fromStdString(model), QString::fromStdString(version)).toUtf8()},
            {"op-a-number", QString("{\"entries\": [{\"cpu\": \"%1\", \"version\": \"%2\", \"choice\": {\"matvec\": 3}}]}")
                                .arg(QString::fromStdString(model), QString::fromStdString(version)).toUtf8()},
        };
        struct Case {
            QString name;
            bool warns;
        };
        std::vector<Case> cases;
        for (auto it = texts.begin(); it != texts.end(); ++it) {
            write_all(d + "/" + it.key(), it.value());
            // Wrong types inside a well-formed cache are an unusable entry (no warning), never an exception.
            cases.push_back({it.key(), !it.key().startsWith("cpu-") && !it.key().startsWith("choice-") && !it.key().startsWith("op-")});
        }
        QVERIFY(QDir().mkpath(d + "/a-directory"));
        cases.push_back({"a-directory", true});
        QVERIFY(mkfifo(QFile::encodeName(d + "/a-fifo").constData(), 0644) == 0);
        cases.push_back({"a-fifo", true});
        QVERIFY(QFile::link(d + "/loop-b", d + "/loop-a") && QFile::link(d + "/loop-a", d + "/loop-b"));
        cases.push_back({"loop-a", true});
        {
            QFile big(d + "/too-large");
            QVERIFY(big.open(QIODevice::WriteOnly) && big.resize(qint64(tools::kMaxTuneCacheBytes) + 1));
        }
        cases.push_back({"too-large", true});
        cases.push_back({"missing", false});
        for (const Case& c : cases) {
            qputenv("COLIBRI_TUNE_CACHE", (d + "/" + c.name).toUtf8());
            std::string error, warning = "stale";
            select_variant(Op::Matvec, WeightType::Q8_0, Variant::Scalar);
            QVERIFY2(configure_kernels(&error, &warning), qPrintable(c.name));
            QCOMPARE(selected_variant(Op::Matvec, WeightType::Q8_0), Variant::Scalar);  // nothing applied
            QVERIFY2(warning.empty() != c.warns, qPrintable(c.name + ": " + QString::fromStdString(warning)));
            QVERIFY2(warning.find('\n') == std::string::npos, warning.c_str());
            if (c.warns) QVERIFY2(warning.rfind("tune cache " + (d + "/" + c.name).toStdString() + ": ", 0) == 0, warning.c_str());
            select_best();
        }
        qputenv("COLIBRI_TUNE_CACHE", (d + "/a-directory").toUtf8());
        std::string error, warning;
        QVERIFY(configure_kernels(&error, &warning));
        QVERIFY2(warning.find("not a regular file (a directory)") != std::string::npos, warning.c_str());
    }

    // A save commits a complete file or leaves the old one: what is not a regular file is refused and left as it
    // is, a symlink's target is replaced (the link stays), and a planted PATH.tmp is never followed.
    void saving_is_safe() {
        const QString d = dir_.filePath("safe");
        QVERIFY(QDir().mkpath(d));
        const TuneReport report = report_with(cpu_model(), library_version(), Variant::Scalar);
        std::string error;
        QVERIFY(QDir().mkpath(d + "/dir.json"));
        QVERIFY(!save_tune_cache(report, (d + "/dir.json").toStdString(), &error));
        QVERIFY2(error.find("not a regular file (a directory): refusing to replace it") != std::string::npos, error.c_str());
        QVERIFY(QFileInfo(d + "/dir.json").isDir());
        QVERIFY(mkfifo(QFile::encodeName(d + "/fifo.json").constData(), 0644) == 0);
        QVERIFY(QFile::link(d + "/fifo.json", d + "/to-fifo.json"));
        for (const char* name : {"fifo.json", "to-fifo.json"}) {
            QVERIFY(!save_tune_cache(report, (d + "/" + name).toStdString(), &error));
            QVERIFY2(error.find("not a regular file (a FIFO)") != std::string::npos, error.c_str());
        }
        struct stat st {};
        QVERIFY(lstat(QFile::encodeName(d + "/fifo.json").constData(), &st) == 0 && S_ISFIFO(st.st_mode));
        QVERIFY(QFileInfo(d + "/to-fifo.json").isSymLink());

        // PATH.tmp planted as a link to a file the attacker wants overwritten: untouched.
        const QString victim = write_all(d + "/victim", "precious");
        QVERIFY(QFile::link(victim, d + "/tune.json.tmp"));
        QVERIFY2(save_tune_cache(report, (d + "/tune.json").toStdString(), &error), error.c_str());
        QCOMPARE(read_all(victim), QByteArray("precious"));
        QVERIFY(QFileInfo(d + "/tune.json.tmp").isSymLink());
        QVERIFY(!QFileInfo(d + "/tune.json").isSymLink());
        TuneChoice c;
        QVERIFY(load_tune_cache((d + "/tune.json").toStdString(), cpu_model(), library_version(), &c, &error));

        // Through a link to a regular file: the link stays, the target holds the cache.
        write_all(d + "/real.json", "old");
        QVERIFY(QFile::link(d + "/real.json", d + "/link.json"));
        QVERIFY2(save_tune_cache(report, (d + "/link.json").toStdString(), &error), error.c_str());
        QVERIFY(QFileInfo(d + "/link.json").isSymLink());
        QVERIFY(load_tune_cache((d + "/real.json").toStdString(), cpu_model(), library_version(), &c, &error));
        // Nothing else was left in the directory (no temporary file).
        QCOMPARE(QDir(d).entryList(QDir::AllEntries | QDir::Hidden | QDir::System | QDir::NoDotAndDotDot),
                 (QStringList{"dir.json", "fifo.json", "link.json", "real.json", "to-fifo.json", "tune.json", "tune.json.tmp", "victim"}));
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
