// The corruption sweep: deterministic damage to every reference model converted to .bin (mixtral, qwen2_moe,
// olmoe; f32 and q8_0) and to llama.cpp's mixtral-f32.gguf, run in-process so that thousands of cases take
// seconds. A .bin is truncated at every header field, table entry and section boundary and at a stride over
// the file, and each byte of its header and tables is flipped, once as damage the metadata checksum must
// catch and once resealed, so that the structural checks behind the checksum must catch it; each case is
// opened, loaded and run for one token. The GGUF is truncated and flipped over its header, key/values and
// tensor infos and converted. Every case must end in one non-empty error line or a model that loads and
// runs: never a crash, a hang, an exception, or an output file left behind by a failed conversion.
// The same suite runs under ASan/UBSan in the sanitized tree (ctest --preset asan) on a sample of the same cases:
// `test_corruption --stride N` runs about one case in N of every sweep (the baselines always run); the ASan
// preset's run samples one in 3 (a clang fuzzing tree's test_corruption_asan, fuzz/CMakeLists.txt, one in 8).
#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QTemporaryDir>
#include <QtTest>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "../test_support.h"
#include "kernels/splitmix64.h"
#include "engine/file/format.h"
#include "engine/core/model.h"
#include "engine/core/session.h"
#include "fuzz/gguf_layout.h"
#include "tools/convert.h"

using namespace colibri;
using namespace colibri::format;
using namespace colibri::test;

namespace {

bool one_line(const std::string& message) { return !message.empty() && message.find('\n') == std::string::npos; }

// --stride N: the share of cases each sweep runs (1 = all). The ASan/UBSan tree's own run (ctest --preset asan)
// samples one in 3: the full sweep took 281 s there; the release tree runs it whole.
uint64_t g_stride = kSanitized ? 3 : 1;

// Whether candidate case k of a sweep is in the sample: a hash of k, not k itself, so that a stride cannot alias
// with the sweeps' own periods (patterns per byte, resealed or not, fields per table entry) and skip a kind of
// case altogether. Deterministic: the same cases every run.
bool sampled(uint64_t k) {
    if (g_stride <= 1) return true;
    return splitmix64(k) % g_stride == 0;
}

// A copy of a file that cases damage in place and restore, so that no case rewrites the whole file.
class WorkingCopy {
public:
    WorkingCopy(const QString& path, const QByteArray& bytes) : path_(path.toStdString()) {
        write_all(path, bytes);
        fd_ = ::open(path_.c_str(), O_RDWR | O_CLOEXEC);
    }
    ~WorkingCopy() {
        if (fd_ >= 0) ::close(fd_);
    }
    WorkingCopy(const WorkingCopy&) = delete;
    WorkingCopy& operator=(const WorkingCopy&) = delete;
    bool ok() const { return fd_ >= 0; }
    const std::string& path() const { return path_; }
    bool put(uint64_t offset, const void* data, size_t n) {
        return ::pwrite(fd_, data, n, static_cast<off_t>(offset)) == static_cast<ssize_t>(n);
    }
    bool truncate(uint64_t size) { return ::ftruncate(fd_, static_cast<off_t>(size)) == 0; }

private:
    std::string path_;
    int fd_ = -1;
};

// Counts the cases of one sweep and keeps the first failures for the report.
struct Tally {
    int cases = 0, loaded = 0, refused = 0, failed = 0;
    uint64_t candidates = 0;  // cases of the full sweep, sampled or not
    QStringList failures;
    // Call once per candidate case; false: not in this run's sample, skip it.
    bool take() { return sampled(candidates++); }
    void count(bool was_loaded) {
        ++cases;
        ++(was_loaded ? loaded : refused);
    }
    void fail(const QString& what, const std::string& why) {
        ++failed;
        if (failures.size() < 20) failures << what + ": " + visible(why);
    }
    // Messages may quote damaged bytes: show control characters and invalid UTF-8 as escapes, and cut them.
    static QString visible(const std::string& s) {
        QString out;
        for (const unsigned char c : s.substr(0, 300)) out += (c >= 0x20 && c < 0x7F) ? QString(QChar(c)) : QString("\\x%1").arg(c, 2, 16, QChar('0'));
        return s.size() > 300 ? out + "..." : out;
    }
    QString summary() const {
        const QString sample = g_stride > 1 ? QString(" (of %1, stride %2)").arg(candidates).arg(g_stride) : QString();
        return QString("%1 cases%2: %3 loaded and ran, %4 refused with one error line, %5 failed")
            .arg(cases).arg(sample).arg(loaded).arg(refused).arg(failed);
    }
};

// How one case ended: the error line when it was refused, and what broke the rules, if anything did.
struct Outcome {
    bool loaded = false;
    std::string error;
    std::string broken;
};

// Opens, loads and runs one token. A model may refuse the token, with one line.
Outcome load_and_run(const std::string& path, ThreadPool& pool) {
    Outcome o;
    try {
        auto model = Model::load(path);
        if (!model) {
            o.error = model.message();
            if (!one_line(o.error)) o.broken = "error is not one non-empty line: " + o.error;
            return o;
        }
        o.loaded = true;
        Session session(*model.value(), pool, 1);
        auto logits = session.eval(0);
        if (!logits && !one_line(logits.message())) o.broken = "eval error is not one line: " + logits.message();
        if (logits && logits->size() != model.value()->hparams().vocab_size) o.broken = "logits of the wrong size";
    } catch (const std::exception& e) {
        o.broken = std::string("exception: ") + e.what();
    }
    return o;
}

// Where the fields of the header, the hyper-parameters and every table entry begin and end.
std::set<uint64_t> metadata_boundaries(const FileHeader& h) {
    std::set<uint64_t> b;
    for (uint64_t f : {offsetof(FileHeader, magic), offsetof(FileHeader, version_major), offsetof(FileHeader, version_minor),
                       offsetof(FileHeader, family), offsetof(FileHeader, file_size), offsetof(FileHeader, metadata_size),
                       offsetof(FileHeader, metadata_xxh64), offsetof(FileHeader, section_table_offset),
                       offsetof(FileHeader, section_count), offsetof(FileHeader, tensor_count),
                       offsetof(FileHeader, tensor_table_offset), offsetof(FileHeader, layer_table_offset),
                       offsetof(FileHeader, layer_count), offsetof(FileHeader, expert_count),
                       offsetof(FileHeader, expert_table_offset), offsetof(FileHeader, hparams)})
        b.insert(f);
    for (uint64_t f = 0; f < sizeof(HyperParams); f += 4) b.insert(offsetof(FileHeader, hparams) + f);
    b.insert(sizeof(FileHeader));
    const struct {
        uint64_t offset, count, entry;
    } tables[] = {{h.section_table_offset, h.section_count, sizeof(SectionEntry)},
                  {h.tensor_table_offset, h.tensor_count, sizeof(TensorEntry)},
                  {h.layer_table_offset, h.layer_count, sizeof(LayerEntry)},
                  {h.expert_table_offset, h.expert_count, sizeof(ExpertEntry)}};
    for (const auto& t : tables)
        for (uint64_t i = 0; i <= t.count; ++i) b.insert(t.offset + i * t.entry);
    b.insert(h.metadata_size);
    return b;
}

// Truncation points of a .bin: every metadata boundary and its neighbours, every section's start and end,
// and 64 points spread over the file.
std::set<uint64_t> bin_truncations(const QByteArray& bytes) {
    FileHeader h;
    std::memcpy(&h, bytes.constData(), sizeof(h));
    std::set<uint64_t> at;
    for (uint64_t b : metadata_boundaries(h))
        for (uint64_t d : {uint64_t(0), uint64_t(1)}) at.insert(b + d), at.insert(b - d);
    const auto* sections = reinterpret_cast<const SectionEntry*>(bytes.constData() + h.section_table_offset);
    for (uint32_t i = 0; i < h.section_count; ++i) {
        at.insert(sections[i].offset);
        at.insert(sections[i].offset + 1);
        at.insert(sections[i].offset + sections[i].size);
    }
    const uint64_t size = static_cast<uint64_t>(bytes.size());
    for (uint64_t k = 0; k < 64; ++k) at.insert(size * k / 64);
    at.insert(size - 1);
    std::set<uint64_t> inside;
    for (uint64_t a : at)
        if (a < size) inside.insert(a);
    return inside;
}

// The flips at one metadata byte: all bytes get 0xFF; header bytes also 0x01 and 0x80; in the tables, the low
// byte of each 4-byte word also gets 0x01 (off by one) and the high byte 0x80 (huge values).
std::vector<uint8_t> flips_at(uint64_t offset) {
    if (offset < sizeof(FileHeader)) return {0xFF, 0x01, 0x80};
    if (offset % 4 == 0) return {0xFF, 0x01};
    if (offset % 4 == 3) return {0xFF, 0x80};
    return {0xFF};
}

// The metadata checksum of a file whose first bytes are `meta` (the rest as in `file`), as a writer would
// seal it: over [0, metadata_size) with the checksum field zeroed. Nullopt when that range is not in the file.
std::optional<uint64_t> seal(const QByteArray& meta, const QByteArray& file) {
    FileHeader h;
    std::memcpy(&h, meta.constData(), sizeof(h));
    if (h.metadata_size < sizeof(FileHeader) || h.metadata_size > static_cast<uint64_t>(file.size())) return std::nullopt;
    h.metadata_xxh64 = 0;
    XXH64_state_t* st = XXH64_createState();
    XXH64_reset(st, 0);
    XXH64_update(st, &h, sizeof(h));
    const uint64_t from_meta = std::min<uint64_t>(h.metadata_size, static_cast<uint64_t>(meta.size()));
    XXH64_update(st, meta.constData() + sizeof(h), from_meta - sizeof(h));
    if (h.metadata_size > from_meta) XXH64_update(st, file.constData() + from_meta, h.metadata_size - from_meta);
    const uint64_t sum = XXH64_digest(st);
    XXH64_freeState(st);
    return sum;
}

}  // namespace

class TestCorruption : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;
    ThreadPool pool_{1};
    int total_cases_ = 0;
    QElapsedTimer total_time_;

    QString bin_path(const QString& family, const QString& type) const { return dir_.filePath(family + "-" + type + ".bin"); }

    void report(const QString& name, const Tally& t, const QElapsedTimer& timer) {
        total_cases_ += t.cases;
        qInfo("%s: %s in %.1f s", qPrintable(name), qPrintable(t.summary()), timer.elapsed() / 1000.0);
        for (const QString& f : t.failures) qWarning("%s", qPrintable(f));
        QVERIFY2(t.failed == 0, qPrintable(QString("%1 cases failed (the first are listed above)").arg(t.failed)));
    }

    // Converts the GGUF working copy; checks the rules and returns the outcome (loaded = converted).
    Outcome convert_case(const std::string& gguf, const QString& out_dir) {
        Outcome o;
        const std::string out = QDir(out_dir).filePath("out.bin").toStdString();
        try {
            auto converted = tools::convert_gguf(gguf, out, tools::ConvertOptions{});
            if (!converted) {
                o.error = converted.message();
                if (!one_line(o.error)) o.broken = "error is not one non-empty line: " + o.error;
                else if (!QDir(out_dir).isEmpty()) o.broken = "a failed conversion left a file behind: " + o.error;
                return o;
            }
        } catch (const std::exception& e) {
            o.broken = std::string("exception: ") + e.what();
            return o;
        }
        o.loaded = true;
        const Outcome run = load_and_run(out, pool_);
        o.broken = run.broken;
        QFile::remove(QString::fromStdString(out));
        return o;
    }

private slots:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        total_time_.start();
        for (const char* family : {"mixtral", "qwen2_moe", "olmoe"}) {
            for (const auto& [name, type] : {std::pair{"f32", WeightType::F32}, std::pair{"q8_0", WeightType::Q8_0}}) {
                tools::ConvertOptions options;
                options.type = type;
                auto r = tools::convert_hf(reference(QString("hf/%1/model").arg(family)).toStdString(),
                                           bin_path(family, name).toStdString(), options);
                QVERIFY2(r.is_ok(), r.message().c_str());
            }
        }
    }

    void bin_sweep_data() {
        QTest::addColumn<QString>("family");
        QTest::addColumn<QString>("type");
        for (const char* family : {"mixtral", "qwen2_moe", "olmoe"})
            for (const char* type : {"f32", "q8_0"}) QTest::addRow("%s-%s", family, type) << QString(family) << QString(type);
    }

    void bin_sweep() {
        QFETCH(QString, family);
        QFETCH(QString, type);
        QElapsedTimer timer;
        timer.start();
        const QByteArray good = read_all(bin_path(family, type));
        FileHeader h;
        QVERIFY(static_cast<size_t>(good.size()) > sizeof(h));
        std::memcpy(&h, good.constData(), sizeof(h));
        const QByteArray meta = good.left(static_cast<qsizetype>(h.metadata_size));
        Tally t;
        {
            WorkingCopy copy(dir_.filePath("flip.bin"), good);
            QVERIFY(copy.ok());
            const Outcome baseline = load_and_run(copy.path(), pool_);
            QVERIFY2(baseline.loaded && baseline.broken.empty(), baseline.error.c_str());
            for (uint64_t at = 0; at < h.metadata_size; ++at) {
                for (const uint8_t pattern : flips_at(at)) {
                    for (const bool resealed : {false, true}) {
                        const bool in_checksum = at >= offsetof(FileHeader, metadata_xxh64) && at < offsetof(FileHeader, metadata_xxh64) + 8;
                        if (resealed && in_checksum) continue;  // resealing rewrites the damage away
                        if (!t.take()) continue;
                        QByteArray damaged = meta;
                        damaged[static_cast<qsizetype>(at)] = static_cast<char>(damaged[static_cast<qsizetype>(at)] ^ pattern);
                        if (resealed) {
                            if (const auto sum = seal(damaged, good))
                                std::memcpy(damaged.data() + offsetof(FileHeader, metadata_xxh64), &*sum, 8);
                        }
                        QVERIFY(copy.put(0, damaged.constData(), static_cast<size_t>(damaged.size())));
                        const Outcome o = load_and_run(copy.path(), pool_);
                        t.count(o.loaded);
                        const QString what = family + " " + type +
                                             QString(" byte %1 ^ 0x%2%3").arg(at).arg(pattern, 2, 16, QChar('0')).arg(resealed ? " (resealed)" : "");
                        if (!o.broken.empty()) t.fail(what, o.broken);
                        else if (!resealed && o.loaded) t.fail(what, "damaged metadata loaded without a checksum error");
                        else if (resealed && o.error.find("metadata checksum mismatch") != std::string::npos)
                            t.fail(what, "resealed metadata failed the checksum: " + o.error);
                    }
                }
            }
            QVERIFY(copy.put(0, meta.constData(), static_cast<size_t>(meta.size())));
        }
        {
            // Truncations from the longest down, each cutting the same copy further.
            WorkingCopy copy(dir_.filePath("truncated.bin"), good);
            QVERIFY(copy.ok());
            const std::set<uint64_t> cuts = bin_truncations(good);
            for (auto it = cuts.rbegin(); it != cuts.rend(); ++it) {
                if (!t.take()) continue;
                QVERIFY(copy.truncate(*it));
                const Outcome o = load_and_run(copy.path(), pool_);
                t.count(o.loaded);
                const QString what = family + " " + type + QString(" truncated to %1 bytes").arg(*it);
                if (!o.broken.empty()) t.fail(what, o.broken);
                else if (o.loaded) t.fail(what, "a truncated file loaded");
                else if (o.error.find("truncated") == std::string::npos) t.fail(what, "not reported as truncated: " + o.error);
            }
        }
        report(family + " " + type, t, timer);
    }

    void gguf_sweep() {
        QElapsedTimer timer;
        timer.start();
        const QByteArray good = read_all(reference("gguf/mixtral-f32.gguf"));
        const auto parsed = fuzz::parse_gguf_layout(reinterpret_cast<const uint8_t*>(good.constData()), static_cast<uint64_t>(good.size()));
        QVERIFY(parsed.has_value());
        const fuzz::GgufLayout& g = *parsed;
        // Successful conversions write 18 MB each: on tmpfs when there is one.
        const bool shm = QFileInfo("/dev/shm").isDir() && QFileInfo("/dev/shm").isWritable();
        QTemporaryDir out_tmp((shm ? QString("/dev/shm") : QDir::tempPath()) + "/colibri-sweep-XXXXXX");
        QVERIFY(out_tmp.isValid());
        const QString out_dir = out_tmp.path();

        // Structural bytes get 0xFF: the fixed header, each key/value's length, type and value (arrays: item
        // type, count, and the leading bytes of their first, last and every 4001st items), the first and last
        // character of each key, and every byte of the tensor infos. The low byte of each length, count, type
        // and tensor-info field also gets 0x01 (off by one).
        std::map<uint64_t, std::vector<uint8_t>> flips;
        std::set<uint64_t> cut_at = {0, 4, 8, 16, 24, g.infos_end, g.data_start, g.data_start + 1};
        auto span = [&](uint64_t from, uint64_t n) {
            for (uint64_t k = 0; k < n; ++k) flips[from + k] = {0xFF};
        };
        auto off_by_one = [&](uint64_t at) { flips[at] = {0xFF, 0x01}; };
        span(0, 24);
        for (uint64_t at : {4, 8, 16}) off_by_one(at);
        for (const fuzz::GgufKv& kv : g.kvs) {
            span(kv.begin, 8);
            span(kv.begin + 8, 1);
            span(kv.type_at - 1, 1);
            span(kv.type_at, 4);
            off_by_one(kv.begin);
            off_by_one(kv.type_at);
            for (uint64_t b : {kv.begin, kv.begin + 8, kv.type_at, kv.value_at, kv.end}) cut_at.insert(b), cut_at.insert(b + 1);
            if (kv.type != colibri::gguf::kArray) {
                span(kv.value_at, std::min<uint64_t>(kv.end - kv.value_at, 9));
                off_by_one(kv.value_at);
                continue;
            }
            span(kv.value_at, 12);
            off_by_one(kv.value_at);
            off_by_one(kv.value_at + 4);
            cut_at.insert(kv.value_at + 4);
            for (uint64_t i = 0; i < kv.items.size(); ++i) {
                if (i < 3 || i + 3 >= kv.items.size() || i % 4001 == 0) {
                    const uint64_t item_end = i + 1 < kv.items.size() ? kv.items[i + 1] : kv.end;
                    span(kv.items[i], std::min<uint64_t>(item_end - kv.items[i], 8));
                    off_by_one(kv.items[i]);
                    cut_at.insert(kv.items[i]);
                    cut_at.insert(kv.items[i] + 1);
                }
            }
        }
        span(g.kvs.back().end, g.infos_end - g.kvs.back().end);
        for (const fuzz::GgufTensorInfo& info : g.infos) {
            for (uint64_t b : info.fields) {
                cut_at.insert(b), cut_at.insert(b + 1);
                if (b < g.infos_end) off_by_one(b);
            }
        }
        for (uint64_t k = 0; k < 16; ++k) cut_at.insert(static_cast<uint64_t>(good.size()) * k / 16);

        Tally t;
        {
            WorkingCopy copy(dir_.filePath("flip.gguf"), good);
            QVERIFY(copy.ok());
            const Outcome baseline = convert_case(copy.path(), out_dir);
            QVERIFY2(baseline.loaded && baseline.broken.empty(), (baseline.error + baseline.broken).c_str());
            for (const auto& [at, patterns] : flips) {
                const char original = good[static_cast<qsizetype>(at)];
                for (const uint8_t pattern : patterns) {
                    if (!t.take()) continue;
                    const char damaged = static_cast<char>(original ^ pattern);
                    QVERIFY(copy.put(at, &damaged, 1));
                    const Outcome o = convert_case(copy.path(), out_dir);
                    t.count(o.loaded);
                    if (!o.broken.empty()) t.fail(QString("GGUF byte %1 ^ 0x%2").arg(at).arg(pattern, 2, 16, QChar('0')), o.broken);
                }
                QVERIFY(copy.put(at, &original, 1));
            }
        }
        {
            WorkingCopy copy(dir_.filePath("truncated.gguf"), good);
            QVERIFY(copy.ok());
            for (auto it = cut_at.rbegin(); it != cut_at.rend(); ++it) {
                if (*it >= static_cast<uint64_t>(good.size())) continue;
                if (!t.take()) continue;
                QVERIFY(copy.truncate(*it));
                const Outcome o = convert_case(copy.path(), out_dir);
                t.count(o.loaded);
                const QString what = QString("GGUF truncated to %1 bytes").arg(*it);
                if (!o.broken.empty()) t.fail(what, o.broken);
                else if (o.loaded) t.fail(what, "a truncated GGUF converted");
            }
        }
        report("mixtral-f32.gguf", t, timer);
    }

    void cleanupTestCase() { qInfo("corruption sweep: %d cases in %.1f s", total_cases_, total_time_.elapsed() / 1000.0); }
};

// QTEST_GUILESS_MAIN, with --stride N taken out of the arguments before QtTest sees them.
int main(int argc, char** argv) {
    std::vector<char*> args;
    for (int i = 0; i < argc; ++i) {
        if (std::strcmp(argv[i], "--stride") == 0) {
            char* end = nullptr;
            const unsigned long long n = i + 1 < argc ? std::strtoull(argv[i + 1], &end, 10) : 0;
            if (i + 1 >= argc || *argv[i + 1] == '\0' || *end != '\0' || n == 0) {
                std::fprintf(stderr, "test_corruption: --stride: needs a positive integer\n");
                return 2;
            }
            g_stride = n;
            ++i;
            continue;
        }
        args.push_back(argv[i]);
    }
    int n = static_cast<int>(args.size());
    args.push_back(nullptr);
    QCoreApplication app(n, args.data());
    TestCorruption tc;
    QTEST_SET_MAIN_SOURCE_PATH
    return QTest::qExec(&tc, n, args.data());
}
#include "test_corruption.moc"
