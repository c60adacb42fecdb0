// The safetensors reader on headers a hostile or careless writer makes: 100,000 entries parse in linear time (the
// ctest TIMEOUT of this suite is the bound: the quadratic parser took over 15 minutes for them), a name given twice
// is still refused, and a NUL byte inside the header or the shard index is an error, not the end of the text.
#include <QTemporaryDir>
#include <QtTest>
#include <cstring>
#include <string>

#include "../test_support.h"
#include "tools/safetensors.h"

using namespace colibri;
using namespace colibri::test;

namespace {

// A safetensors file whose header is `header` (padded with spaces to 8 bytes) followed by `data_bytes` zero bytes.
QByteArray safetensors_bytes(const std::string& header, uint64_t data_bytes) {
    std::string text = header;
    text.append((8 - text.size() % 8) % 8, ' ');
    const uint64_t len = text.size();
    QByteArray out(reinterpret_cast<const char*>(&len), 8);
    out.append(text.data(), static_cast<qsizetype>(text.size()));
    out.append(QByteArray(static_cast<qsizetype>(data_bytes), '\0'));
    return out;
}

// One f32 scalar-vector entry at 4·i.
std::string entry(const std::string& name, uint64_t i) {
    return "\"" + name + "\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[" + std::to_string(4 * i) + "," +
           std::to_string(4 * i + 4) + "]}";
}

}  // namespace

class TestSafetensors : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

    QString write(const QString& name, const QByteArray& bytes) { return write_all(dir_.filePath(name), bytes); }

private slots:
    void initTestCase() { QVERIFY(dir_.isValid()); }

    // 100,000 tensors (a 6 MB header): the whole header is read once, in time linear in its size. Before, the
    // parser's callback rescanned the whole object at the end of every entry.
    void hundred_thousand_entries() {
        constexpr uint64_t n = 100000;
        std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
        header.reserve(n * 80);
        for (uint64_t i = 0; i < n; ++i) header += "," + entry("model.layers." + std::to_string(i) + ".weight", i);
        header += "}";
        const QString path = write("many.safetensors", safetensors_bytes(header, 4 * n));
        auto f = tools::SafetensorsFile::open(path.toStdString());
        QVERIFY2(f, f ? "" : f.message().c_str());
        QCOMPARE(f.value()->tensors().size(), size_t(n));
        const tools::SourceTensor& last = f.value()->tensors().at("model.layers.99999.weight");
        QCOMPARE(last.size, uint64_t(4));
        QCOMPARE(last.shape, std::vector<uint64_t>{1});
    }

    // A name given twice says two things about one tensor: refused, at the top level as before, and inside an
    // entry too (nlohmann keeps the last value silently).
    void repeated_names_are_refused_data() {
        QTest::addColumn<QString>("header");
        QTest::addColumn<QString>("must_mention");
        const std::string a = entry("a", 0), b = entry("b", 1);
        QTest::newRow("tensor twice") << QString::fromStdString("{" + a + "," + b + "," + entry("a", 1) + "}") << "tensor 'a' twice";
        QTest::newRow("tensor twice, far apart") << QString::fromStdString("{" + a + "," + b + "," + entry("c", 2) + "," + entry("a", 0) + "}")
                                                  << "tensor 'a' twice";
        QTest::newRow("metadata twice") << QString::fromStdString("{\"__metadata__\":{},\"__metadata__\":{}," + a + "}") << "'__metadata__' twice";
        QTest::newRow("field twice in an entry")
            << QString::fromStdString("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"data_offsets\":[4,8]}}")
            << "'data_offsets' twice";
        QTest::newRow("metadata key twice") << QString::fromStdString("{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}," + a + "}") << "'k' twice";
    }
    void repeated_names_are_refused() {
        QFETCH(QString, header);
        QFETCH(QString, must_mention);
        const QString path = write("dup.safetensors", safetensors_bytes(header.toStdString(), 16));
        auto f = tools::SafetensorsFile::open(path.toStdString());
        QVERIFY(!f);
        QVERIFY2(QString::fromStdString(f.message()).contains(must_mention), f.message().c_str());
        QVERIFY(f.message().find('\n') == std::string::npos);
    }

    // The same names in different objects are fine: only a repeat inside one object is refused.
    void same_key_in_different_entries_is_fine() {
        const QString path = write("ok.safetensors", safetensors_bytes("{" + entry("a", 0) + "," + entry("b", 1) + "}", 8));
        auto f = tools::SafetensorsFile::open(path.toStdString());
        QVERIFY2(f, f ? "" : f.message().c_str());
        QCOMPARE(f.value()->tensors().size(), size_t(2));
    }

    // nlohmann's lexer ends the input at a NUL byte: `{...}\0{...}` parsed as its first half, the rest dropped.
    void nul_in_the_header_is_refused() {
        const std::string good = "{" + entry("a", 0) + "}";
        for (const std::string& header : {good + std::string(1, '\0') + "{\"b\":1}", good + std::string(8, '\0'),
                                          "{" + entry("a", 0) + "," + std::string(1, '\0') + entry("b", 1) + "}"}) {
            const QString path = write("nul.safetensors", safetensors_bytes(header, 8));
            auto f = tools::SafetensorsFile::open(path.toStdString());
            QVERIFY(!f);
            QVERIFY2(f.message().find("NUL byte") != std::string::npos, f.message().c_str());
        }
    }

    void nul_in_the_index_is_refused() {
        const QString d = dir_.filePath("sharded");
        QVERIFY(QDir().mkpath(d));
        write("sharded/shard-1.safetensors", safetensors_bytes("{" + entry("a", 0) + "}", 4));
        write("sharded/shard-2.safetensors", safetensors_bytes("{" + entry("b", 0) + "}", 4));
        // Without the NUL both shards are read; with it, the second half of weight_map would have been dropped.
        const QByteArray index = "{\"weight_map\":{\"a\":\"shard-1.safetensors\"";
        const QByteArray rest = ",\"b\":\"shard-2.safetensors\"}}";
        write("sharded/model.safetensors.index.json", index + "}}");
        auto whole = tools::SafetensorsSet::open_dir(d.toStdString());
        QVERIFY2(whole, whole ? "" : whole.message().c_str());
        QCOMPARE(whole->size(), size_t(1));
        write("sharded/model.safetensors.index.json", index + "}}" + QByteArray(1, '\0') + rest);
        auto cut = tools::SafetensorsSet::open_dir(d.toStdString());
        QVERIFY(!cut);
        QVERIFY2(cut.message().find("NUL byte") != std::string::npos, cut.message().c_str());
        // A shard name with an escaped NUL would have opened the file named by its first half.
        write("sharded/model.safetensors.index.json", "{\"weight_map\":{\"a\":\"shard-1.safetensors\\u0000.evil\"}}");
        auto named = tools::SafetensorsSet::open_dir(d.toStdString());
        QVERIFY(!named);
        QVERIFY2(named.message().find("is not a file name") != std::string::npos, named.message().c_str());
        QVERIFY(named.message().find('\n') == std::string::npos);
    }
};

QTEST_GUILESS_MAIN(TestSafetensors)
#include "test_safetensors.moc"
