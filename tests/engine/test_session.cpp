// Session state: truncating the KV cache and continuing equals evaluating afresh, bit for bit (the chat
// loop relies on this to reuse the cached prefix), and the observer sees every MoE layer of every token.
#include <QTemporaryDir>
#include <QtTest>

#include "../test_support.h"
#include "engine/model.h"
#include "engine/session.h"

using namespace colibri;
using namespace colibri::test;

struct Counter : TraceObserver {
    int routing = 0, timing = 0;
    void on_routing(const RoutingRecord& r) override {
        ++routing;
        QCOMPARE(r.experts.size(), size_t(2));
        QVERIFY(r.weights[0] >= r.weights[1]);
    }
    void on_layer_timing(const LayerTiming& t) override {
        ++timing;
        QVERIFY(t.attention_ns > 0);
    }
};

class TestSession : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    std::unique_ptr<Model> model_;
    std::vector<int32_t> ids_;

private slots:
    void initTestCase() {
        const QString path = dir_.filePath("olmoe.bin");
        QCOMPARE(run_cli({"convert", reference("hf/olmoe/model"), "-o", path, "-q"}).exit_code, 0);
        auto m = Model::load(path.toStdString());
        QVERIFY2(m.is_ok(), m.message().c_str());
        model_ = std::move(m.value());
        for (const auto& v : read_json(reference("hf/olmoe/ref/input_ids.json")).array()) ids_.push_back(v.toInt());
    }

    void truncate_and_continue_equals_fresh() {
        ThreadPool pool(2);
        Session fresh(*model_, pool), reused(*model_, pool);
        auto a = fresh.eval(std::span<const int32_t>(ids_));
        QVERIFY(a.is_ok());
        const std::vector<float> want(a->begin(), a->end());

        QVERIFY(reused.eval(std::span<const int32_t>(ids_.data(), 8)).is_ok());
        const std::vector<int32_t> detour{5, 6, 7};
        QVERIFY(reused.eval(std::span<const int32_t>(detour)).is_ok());
        QCOMPARE(reused.position(), 11u);
        reused.truncate(8);
        auto b = reused.eval(std::span<const int32_t>(ids_.data() + 8, ids_.size() - 8));
        QVERIFY(b.is_ok());
        QVERIFY(std::equal(b->begin(), b->end(), want.begin()));

        reused.reset();
        auto c = reused.eval(std::span<const int32_t>(ids_));
        QVERIFY(std::equal(c->begin(), c->end(), want.begin()));
    }

    void context_limit_is_an_error() {
        ThreadPool pool(1);
        Session s(*model_, pool, 4);
        QVERIFY(s.eval(std::span<const int32_t>(ids_.data(), 4)).is_ok());
        auto r = s.eval(ids_[4]);
        QVERIFY(!r.is_ok());
        QVERIFY(QString::fromStdString(r.message()).contains("context full"));
        QVERIFY(!s.eval(-1).is_ok());
    }

    void observer_sees_each_layer() {
        ThreadPool pool(1);
        Session s(*model_, pool);
        Counter counter;
        s.set_observer(&counter);
        QVERIFY(s.eval(std::span<const int32_t>(ids_.data(), 5)).is_ok());
        QCOMPARE(counter.routing, 5 * 2);
        QCOMPARE(counter.timing, 5 * 2);
    }
};

QTEST_GUILESS_MAIN(TestSession)
#include "test_session.moc"
