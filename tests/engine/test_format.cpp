// The .bin writer and reader: round trips, layout guarantees, checksums, atomic output, number formats.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <QDir>
#include <QTemporaryDir>
#include <QtTest>
#include <atomic>
#include <chrono>
#include <thread>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "engine/file/bin_writer.h"
#include "engine/file/mapped_file.h"
#include "engine/file/model_file.h"
#include "engine/core/thread_pool.h"
#include "kernels/canonical.h"
#include "kernels/half.h"
#include "kernels/matvec.h"
#include "tools/check.h"
#include "tools/quantize.h"

using namespace colibri;
using namespace colibri::format;

namespace {

HyperParams small_hparams() {
    HyperParams hp{};
    hp.vocab_size = 10;
    hp.hidden_size = 8;
    hp.n_layers = 1;
    hp.n_heads = 2;
    hp.n_kv_heads = 1;
    hp.head_dim = 4;
    hp.n_experts = 2;
    hp.n_experts_active = 1;
    hp.expert_ffn = 4;
    hp.max_position = 16;
    hp.rms_eps = 1e-5f;
    hp.rope_theta = 10000.0f;
    hp.bos_id = 1;
    hp.eos_id = 2;
    return hp;
}

std::vector<PlannedSection> small_plan() {
    std::vector<PlannedSection> plan;
    plan.push_back({SectionKind::ChatTemplate, kNone, kNone, {}, "{{ messages }}"});
    plan.push_back({SectionKind::Embedding, kNone, kNone, {{"embed", WeightType::F32, 2, 10, 8}}, {}});
    plan.push_back({SectionKind::Attention, 0, kNone, {{"layers.0.attn_norm", WeightType::F32, 1, 8, 1}}, {}});
    plan.push_back({SectionKind::Router, 0, kNone, {{"layers.0.router", WeightType::F32, 2, 2, 8}}, {}});
    for (uint32_t e = 0; e < 2; ++e)
        plan.push_back({SectionKind::Expert, 0, e,
                        {{tensor_names::expert(0, e, "gate"), WeightType::F16, 2, 4, 8},
                         {tensor_names::expert(0, e, "up"), WeightType::F16, 2, 4, 8},
                         {tensor_names::expert(0, e, "down"), WeightType::F16, 2, 8, 4}},
                        {}});
    plan.push_back({SectionKind::Output, kNone, kNone, {{"output_norm", WeightType::F32, 1, 8, 1}}, {}});
    return plan;
}

// Fills each tensor with bytes derived from its index so a round trip can be checked byte for byte.
std::vector<uint8_t> tensor_payload(size_t index, uint64_t bytes) {
    std::vector<uint8_t> v(bytes);
    for (uint64_t i = 0; i < bytes; ++i) v[i] = static_cast<uint8_t>((index * 131 + i * 7) & 0xFF);
    return v;
}

Status write_small(const std::string& path) {
    auto w = BinWriter::create(path, Family::Mixtral, small_hparams(), small_plan());
    if (!w) return w.status();
    for (size_t i = 0; w.value()->next_tensor(); ++i) {
        const auto data = tensor_payload(i, w.value()->next_tensor_bytes());
        COLIBRI_TRY(w.value()->write_tensor(data.data(), data.size()));
    }
    return w.value()->finish();
}

}  // namespace

class TestFormat : public QObject {
    Q_OBJECT
private slots:
    void round_trip() {
        QTemporaryDir dir;
        const std::string path = dir.filePath("m.bin").toStdString();
        const Status s = write_small(path);
        QVERIFY2(s.is_ok(), s.message().c_str());
        auto f = ModelFile::open(path);
        QVERIFY2(f.is_ok(), f.message().c_str());
        const ModelFile& m = *f.value();
        QCOMPARE(m.family(), Family::Mixtral);
        QCOMPARE(m.hparams().hidden_size, 8u);
        QCOMPARE(m.hparams().eos_id, 2);
        QCOMPARE(m.section_text(SectionKind::ChatTemplate), std::string_view("{{ messages }}"));
        QCOMPARE(m.tensors().size(), size_t(10));
        QCOMPARE(m.size() % kSectionAlignment, uint64_t(0));
        for (size_t i = 0; i < m.tensors().size(); ++i) {
            const TensorView& t = m.tensors()[i];
            QCOMPARE(t.offset % kTensorAlignment, uint64_t(0));
            const auto want = tensor_payload(i, t.size);
            QVERIFY2(std::memcmp(t.data, want.data(), t.size) == 0, t.name.c_str());
        }
        for (uint32_t i = 0; i < m.sections().size(); ++i) {
            QCOMPARE(m.sections()[i].offset % kSectionAlignment, uint64_t(0));
            QVERIFY2(m.verify_section(i), m.section_label(i).c_str());
        }
        // Expert table: one entry per expert, each its own run of pages.
        QCOMPARE(m.experts().size(), size_t(2));
        QCOMPARE(m.layers().size(), size_t(1));
        QCOMPARE(m.layers()[0].is_moe, 1u);
        QCOMPARE(m.layers()[0].router_offset, m.find_tensor("layers.0.router")->offset);
        for (const ExpertEntry& e : m.experts()) {
            QCOMPARE(e.offset % kSectionAlignment, uint64_t(0));
            QCOMPARE(e.offset, m.find_tensor(tensor_names::expert(0, e.expert, "gate"))->offset);
            QCOMPARE(e.weight_type, static_cast<uint32_t>(WeightType::F16));
        }
        const tools::CheckReport report = tools::check_model(path);
        // The toy model has no attention projections: the check says it is too small for its hyper-parameters,
        // and nothing else is wrong with it.
        QCOMPARE(report.problems.size(), size_t(1));
        QVERIFY2(QString::fromStdString(report.problems[0]).startsWith("hyper-parameters: 1 layers of 2 experts need at least"),
                 report.problems[0].c_str());
        for (const tools::SectionCheck& c : report.sections) QVERIFY(c.checksum_ok && c.aligned);
    }

    // A committed model file is not left in the page cache by the writer (its small-write pages would be mapped
    // 4 KiB at a time; read back it comes in large folios): mincore sees none of its pages resident.
    void committed_file_leaves_the_page_cache() {
        QTemporaryDir dir;
        const std::string path = dir.filePath("m.bin").toStdString();
        QVERIFY(write_small(path).is_ok());
        const int fd = ::open(path.c_str(), O_RDONLY);
        QVERIFY(fd >= 0);
        struct stat st {};
        QVERIFY(fstat(fd, &st) == 0 && st.st_size > 0);
        void* p = mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
        ::close(fd);
        QVERIFY(p != MAP_FAILED);
        const size_t page = size_t(sysconf(_SC_PAGESIZE)), pages = (size_t(st.st_size) + page - 1) / page;
        std::vector<unsigned char> resident(pages);
        QCOMPARE(mincore(p, size_t(st.st_size), resident.data()), 0);
        munmap(p, size_t(st.st_size));
        QCOMPARE(size_t(std::count_if(resident.begin(), resident.end(), [](unsigned char r) { return r & 1; })), size_t(0));
    }

    void damaged_section_is_named() {
        QTemporaryDir dir;
        const QString path = dir.filePath("m.bin");
        QVERIFY(write_small(path.toStdString()).is_ok());
        uint64_t expert1_offset = 0;
        {
            auto f = ModelFile::open(path.toStdString());
            QVERIFY(f.is_ok());
            expert1_offset = f.value()->experts()[1].offset;
        }
        QFile file(path);
        QVERIFY(file.open(QIODevice::ReadWrite));
        file.seek(static_cast<qint64>(expert1_offset + 5));
        char c;
        file.getChar(&c);
        file.seek(static_cast<qint64>(expert1_offset + 5));
        file.putChar(static_cast<char>(c ^ 0x40));
        file.close();
        auto f = ModelFile::open(path.toStdString());
        QVERIFY(f.is_ok());  // weight sections are hashed on demand, not at open
        int bad = 0;
        for (uint32_t i = 0; i < f.value()->sections().size(); ++i) {
            if (!f.value()->verify_section(i)) {
                ++bad;
                QCOMPARE(QString::fromStdString(f.value()->section_label(i)), QString("#6 expert L0 E1"));
            }
        }
        QCOMPARE(bad, 1);
        const tools::CheckReport report = tools::check_model(path.toStdString());
        QVERIFY(!report.valid);
        QVERIFY(std::any_of(report.problems.begin(), report.problems.end(), [](const std::string& p) {
            return p.rfind("layer 0 expert 1 (gate up down): xxh64 mismatch in bytes 0x", 0) == 0;
        }));
        QCOMPARE(report.sections.at(6).checksum, tools::ChecksumState::Mismatch);
    }

    void abandoned_writer_leaves_nothing() {
        QTemporaryDir dir;
        const std::string path = dir.filePath("m.bin").toStdString();
        {
            auto w = BinWriter::create(path, Family::Mixtral, small_hparams(), small_plan());
            QVERIFY(w.is_ok());
            const auto data = tensor_payload(0, w.value()->next_tensor_bytes());
            QVERIFY(w.value()->write_tensor(data.data(), data.size()).is_ok());
            QVERIFY(!w.value()->write_tensor(data.data(), data.size() + 1).is_ok());  // wrong size refused
            QVERIFY(!w.value()->finish().is_ok());  // incomplete
        }
        QCOMPARE(QDir(dir.path()).entryList(QDir::Files | QDir::Hidden).size(), 0);
    }

    // Files of 2 MiB and more are mapped at a 2 MiB boundary (so the kernel can map whole 2 MiB folios), smaller
    // ones anywhere; either way the bytes are the file's, up to its last one, and a missing file is an error.
    void mapped_files_are_huge_page_aligned() {
        QTemporaryDir dir;
        for (const size_t size : {size_t(5000), (size_t(3) << 20) + 123}) {
            const QString path = dir.filePath(QString("f%1").arg(size));
            QByteArray bytes(qsizetype(size), 0);
            for (size_t i = 0; i < size; ++i) bytes[qsizetype(i)] = char((i * 131) >> 3);
            QFile f(path);
            QVERIFY(f.open(QIODevice::WriteOnly));
            QCOMPARE(f.write(bytes), qint64(size));
            f.close();
            auto m = MappedFile::open(path.toStdString());
            QVERIFY2(m.is_ok(), m.message().c_str());
            QCOMPARE(m->size(), uint64_t(size));
            QVERIFY(std::memcmp(m->data(), bytes.constData(), size) == 0);
            if (size >= (size_t(2) << 20)) {
                QCOMPARE(reinterpret_cast<uintptr_t>(m->data()) % (uintptr_t(2) << 20), uintptr_t(0));
                // The mapping carries the huge-page advice: "hg" among its VmFlags in /proc/self/smaps.
                QFile smaps("/proc/self/smaps");
                QVERIFY(smaps.open(QIODevice::ReadOnly));
                const QByteArray start = QByteArray::number(qulonglong(reinterpret_cast<uintptr_t>(m->data())), 16) + "-";
                bool in_mapping = false, advised = false, found = false;
                for (const QByteArray& line : smaps.readAll().split('\n')) {
                    if (line.isEmpty()) continue;
                    if (!line.split(' ').first().endsWith(':')) in_mapping = line.startsWith(start);  // a mapping's first line
                    if (in_mapping && line.startsWith("VmFlags:")) found = true, advised = line.split(' ').contains("hg");
                }
                QVERIFY2(found, "mapping not in /proc/self/smaps");
                QVERIFY2(advised, "no MADV_HUGEPAGE on the mapping");
            }
            MappedFile moved = std::move(m.value());  // the mapping moves with the object and is unmapped once
            QCOMPARE(moved.data()[size - 1], uint8_t(bytes[qsizetype(size - 1)]));
        }
        QVERIFY(!MappedFile::open(dir.filePath("missing").toStdString()).is_ok());
    }

    void f16_round_trips_every_value() {
        for (uint32_t h = 0; h < 65536; ++h) {
            const uint16_t bits = static_cast<uint16_t>(h);
            const bool nan = (bits & 0x7C00) == 0x7C00 && (bits & 0x3FF) != 0;
            const float f = kernels::f16_to_f32(bits);
            if (nan) {
                QVERIFY(std::isnan(f));
                continue;
            }
            QCOMPARE(kernels::f32_to_f16(f), bits);
        }
        QCOMPARE(kernels::f16_to_f32(0x3C00), 1.0f);
        QCOMPARE(kernels::f16_to_f32(0x0001), std::ldexp(1.0f, -24));
        QCOMPARE(kernels::f32_to_f16(65520.0f), uint16_t(0x7C00));     // rounds up to infinity
        QCOMPARE(kernels::f32_to_f16(1.0f + std::ldexp(1.0f, -11)), uint16_t(0x3C00));  // tie to even
        QCOMPARE(kernels::f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), uint16_t(0x3C02));
        QCOMPARE(kernels::f32_to_f16(std::ldexp(1.0f, -25)), uint16_t(0));  // half the smallest subnormal: even
    }

    void bf16_rounding() {
        QCOMPARE(kernels::f32_to_bf16(1.0f), uint16_t(0x3F80));
        QCOMPARE(kernels::bf16_to_f32(0x3F80), 1.0f);
        QCOMPARE(kernels::f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), uint16_t(0x3F80));  // tie to even
        QCOMPARE(kernels::f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), uint16_t(0x3F82));
        QVERIFY(std::isnan(kernels::bf16_to_f32(kernels::f32_to_bf16(std::nanf("")))));
    }

    void matvec_matches_double_reference() {
        const size_t rows = 7, cols = 37;  // odd sizes exercise the tails
        std::vector<float> w(rows * cols), x(cols), y(rows);
        for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(float(i)) * 0.5f;
        for (size_t i = 0; i < cols; ++i) x[i] = std::cos(float(i));
        kernels::matvec_rows(WeightType::F32, w.data(), cols, x.data(), y.data(), 0, rows);
        for (size_t r = 0; r < rows; ++r) {
            double ref = 0;
            for (size_t c = 0; c < cols; ++c) ref += double(w[r * cols + c]) * x[c];
            QVERIFY(std::fabs(ref - y[r]) < 1e-5);
        }
        std::vector<uint16_t> h(w.size());
        for (size_t i = 0; i < w.size(); ++i) h[i] = kernels::f32_to_f16(w[i]);
        std::vector<float> yh(rows);
        kernels::matvec_rows(WeightType::F16, h.data(), cols, x.data(), yh.data(), 0, rows);
        for (size_t r = 0; r < rows; ++r) QVERIFY(std::fabs(yh[r] - y[r]) < 1e-2);
    }

    // q8_0 blocks (f16 scale + 32 int8): the kernel equals the dot product of the dequantised row with the
    // activations as the kernel quantises them (d_x·q per block of 32, kernels/canonical.h), and is within the
    // activation rounding (Σ|w|·d_x/2) of the dot product with x itself.
    void q8_0_matvec_matches_dequantised() {
        const size_t rows = 3, cols = 64;
        std::vector<uint8_t> w(kernels::row_bytes(WeightType::Q8_0, cols) * rows);
        QCOMPARE(w.size(), size_t(3 * 2 * 34));
        for (size_t b = 0; b < rows * cols / 32; ++b) {
            const uint16_t scale = kernels::f32_to_f16(0.01f * float(b + 1));
            std::memcpy(w.data() + b * 34, &scale, 2);
            for (int i = 0; i < 32; ++i) w[b * 34 + 2 + i] = static_cast<uint8_t>(static_cast<int8_t>((int(b) * 37 + i * 11) % 255 - 127));
        }
        std::vector<float> x(cols), y(rows), row(cols);
        for (size_t i = 0; i < cols; ++i) x[i] = std::cos(float(i) * 0.3f);
        kernels::matvec_rows(WeightType::Q8_0, w.data(), cols, x.data(), y.data(), 0, rows);
        std::vector<float> xq(cols), dx(cols);
        kernels::canonical::dequantize_activations(x.data(), cols, xq.data(), dx.data());
        for (size_t r = 0; r < rows; ++r) {
            kernels::dequantize_row(WeightType::Q8_0, w.data(), cols, r, row.data());
            double ref = 0, ref_x = 0, act = 0;
            for (size_t c = 0; c < cols; ++c) {
                ref += double(row[c]) * xq[c];
                ref_x += double(row[c]) * x[c];
                act += std::fabs(double(row[c])) * 0.5001 * dx[c];
            }
            QVERIFY(std::fabs(ref - y[r]) < 1e-5);
            QVERIFY(std::fabs(ref_x - y[r]) < act + 1e-5);
        }
        const int8_t first = static_cast<int8_t>(w[2]);
        kernels::dequantize_row(WeightType::Q8_0, w.data(), cols, 0, row.data());
        QCOMPARE(row[0], kernels::f16_to_f32(kernels::f32_to_f16(0.01f)) * float(first));
    }

    // Quantising then dequantising loses at most half a quantisation step per value; the largest magnitude of a
    // block maps to ±127; an all-zero block stays zero.
    void q8_0_quantize_round_trip() {
        std::vector<float> x(96);
        for (size_t i = 0; i < 64; ++i) x[i] = std::sin(float(i) * 1.7f) * (i < 32 ? 0.01f : 300.0f);
        std::vector<uint8_t> q(3 * 34);
        tools::quantize_row(WeightType::Q8_0, x.data(), x.size(), q.data());
        std::vector<float> back(96);
        kernels::dequantize_row(WeightType::Q8_0, q.data(), 96, 0, back.data());
        for (size_t b = 0; b < 3; ++b) {
            uint16_t d_bits;
            std::memcpy(&d_bits, q.data() + b * 34, 2);
            const float d = kernels::f16_to_f32(d_bits);
            float amax = 0;
            int qmax = 0;
            for (int i = 0; i < 32; ++i) {
                amax = std::max(amax, std::fabs(x[b * 32 + i]));
                qmax = std::max(qmax, std::abs(int(static_cast<int8_t>(q[b * 34 + 2 + i]))));
                QVERIFY(std::fabs(back[b * 32 + i] - x[b * 32 + i]) <= 0.5f * d * 1.0001f + 1e-12f);
            }
            if (b < 2) {
                // The scale search never does worse than ggml's plain max|x|/127 rounding.
                const float d_plain = kernels::f16_to_f32(kernels::f32_to_f16(amax / 127.0f));
                double err = 0, err_plain = 0;
                for (int i = 0; i < 32; ++i) {
                    const float v = x[b * 32 + i];
                    err += double(back[b * 32 + i] - v) * (back[b * 32 + i] - v);
                    const float p = d_plain * std::nearbyint(v / d_plain);
                    err_plain += double(p - v) * (p - v);
                }
                QVERIFY(err <= err_plain);
                QVERIFY(d >= amax / 127.0f * 0.999f && d <= amax / 118.0f);
                QVERIFY(qmax >= 118);
            } else {
                QCOMPARE(d, 0.0f);
                QCOMPARE(qmax, 0);
            }
        }
    }

    void thread_pool_covers_each_index_once() {
        for (unsigned threads : {1u, 2u, 3u}) {
            ThreadPool pool(threads);
            for (size_t n : {size_t(1), size_t(2), size_t(7), size_t(1000)}) {
                std::vector<int> hits(n, 0);
                pool.parallel_for(n, 1, [&](size_t b, size_t e) {
                    for (size_t i = b; i < e; ++i) ++hits[i];
                });
                for (int h : hits) QCOMPARE(h, 1);
            }
        }
    }

    // Back-to-back jobs of changing sizes (as decode issues them): every index exactly once per job, and no
    // job seeing another's ranges.
    void thread_pool_back_to_back_jobs() {
        // spin 0: every hand-off sleeps and wakes; 1 µs: polling gives way to sleeping all the time (where a
        // lost wake-up would hang); 300 µs: the default, threads poll between jobs.
        for (const auto spin : {std::chrono::microseconds(0), std::chrono::microseconds(1), std::chrono::microseconds(300)})
        for (unsigned threads : {2u, 3u, 4u}) {
            ThreadPool pool(threads, spin);
            std::vector<std::atomic<int>> hits(4096);
            for (int job = 0; job < 3000; ++job) {
                const size_t n = 1 + (size_t(job) * 2654435761u) % hits.size();
                for (size_t i = 0; i < n; ++i) hits[i].store(0, std::memory_order_relaxed);
                pool.parallel_for(n, 1 + job % 64, [&](size_t b, size_t e) {
                    for (size_t i = b; i < e; ++i) hits[i].fetch_add(1, std::memory_order_relaxed);
                });
                for (size_t i = 0; i < n; ++i)
                    if (hits[i].load(std::memory_order_relaxed) != 1) QFAIL(qPrintable(QString("job %1 index %2").arg(job).arg(i)));
            }
        }
        // After a pause (workers asleep) a new job still wakes them.
        ThreadPool pool(2, std::chrono::microseconds(300));
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        std::atomic<size_t> covered{0};
        pool.parallel_for(100, 1, [&](size_t b, size_t e) { covered += e - b; });
        QCOMPARE(covered.load(), size_t(100));
    }

    // Balanced jobs on pools of up to and beyond the job line's inline bounds (4 parts), mixed with small jobs
    // that leave some workers out: one range per part and every index exactly once per job.
    void thread_pool_balanced_jobs_of_many_parts() {
        for (unsigned threads : {3u, 4u, 6u}) {
            ThreadPool pool(threads);
            const size_t n = ThreadPool::kBalancedMinItems + 123;
            std::vector<std::atomic<int>> hits(n);
            for (int job = 0; job < 40; ++job) {
                if (job % 3 == 2) {  // a small job: fewer parts than threads
                    std::atomic<size_t> covered{0};
                    pool.parallel_for(10, 4, [&](size_t b, size_t e) { covered += e - b; }, ThreadPool::Split::Balanced);
                    QCOMPARE(covered.load(), size_t(10));
                    continue;
                }
                for (auto& h : hits) h.store(0, std::memory_order_relaxed);
                std::atomic<size_t> ranges{0};
                std::atomic<uint64_t> sink{0};
                pool.parallel_for(n, 1, [&](size_t b, size_t e) {
                    ++ranges;
                    uint64_t acc = 0;
                    for (size_t i = b; i < e; ++i) {
                        for (int r = 0; r < 4 + int(b % 7); ++r) acc = acc * 6364136223846793005u + i;  // uneven
                        hits[i].fetch_add(1, std::memory_order_relaxed);
                    }
                    sink += acc;
                }, ThreadPool::Split::Balanced);
                QCOMPARE(ranges.load(), size_t(threads));
                for (size_t i = 0; i < n; ++i)
                    if (hits[i].load(std::memory_order_relaxed) != 1)
                        QFAIL(qPrintable(QString("threads %1 job %2 index %3").arg(threads).arg(job).arg(i)));
            }
            double total = 0.0;
            for (unsigned k = 0; k < threads; ++k) total += pool.balanced_share(k);
            QVERIFY(std::abs(total - 1.0) < 1e-9);
        }
    }

    // Split::Balanced: every index exactly once whatever the split, and the ranges follow the threads' speeds.
    // The calling thread (part 0) is made six times slower per item than the worker; after a few jobs it is
    // given well under half of the items (a seventh would be fair; a measurement counts at most 1:4). Equal jobs
    // meanwhile stay equal.
    void thread_pool_balanced_split_follows_speed() {
        ThreadPool pool(2);
        QCOMPARE(pool.balanced_share(0), 0.5);
        const auto caller = std::this_thread::get_id();
        const size_t n = ThreadPool::kBalancedMinItems;
        std::vector<std::atomic<int>> hits(n);
        std::atomic<uint64_t> sink{0};
        for (int job = 0; job < 30; ++job) {
            for (auto& h : hits) h.store(0, std::memory_order_relaxed);
            size_t first_end = 0;
            pool.parallel_for(n, 1, [&](size_t b, size_t e) {
                const int reps = std::this_thread::get_id() == caller ? 60 : 10;
                if (b == 0) first_end = e;
                uint64_t acc = 0;
                for (size_t i = b; i < e; ++i) {
                    for (int r = 0; r < reps; ++r) acc = acc * 6364136223846793005u + i;
                    hits[i].fetch_add(1, std::memory_order_relaxed);
                }
                sink += acc;
            }, ThreadPool::Split::Balanced);
            for (size_t i = 0; i < n; ++i)
                if (hits[i].load(std::memory_order_relaxed) != 1) QFAIL(qPrintable(QString("job %1 index %2").arg(job).arg(i)));
            QVERIFY(first_end > 0 && first_end < n);
        }
        QVERIFY2(pool.balanced_share(0) < 0.4, qPrintable(QString::number(pool.balanced_share(0))));
        size_t equal_end = 0;
        pool.parallel_for(n, 1, [&](size_t b, size_t e) { if (b == 0) equal_end = e; });
        QCOMPARE(equal_end, n / 2);

        // COLIBRI_BALANCE=0: balanced jobs keep equal ranges however slow a part is.
        const QByteArray saved = qgetenv("COLIBRI_BALANCE");
        qputenv("COLIBRI_BALANCE", "0");
        ThreadPool fixed(2);
        if (saved.isNull()) qunsetenv("COLIBRI_BALANCE");
        else qputenv("COLIBRI_BALANCE", saved);
        for (int job = 0; job < 10; ++job) {
            size_t first_end = 0;
            fixed.parallel_for(n, 1, [&](size_t b, size_t e) {
                if (b == 0) first_end = e;
                uint64_t acc = 0;
                if (std::this_thread::get_id() == caller)
                    for (size_t i = b; i < e; ++i) acc = acc * 6364136223846793005u + i;
                sink += acc;
            }, ThreadPool::Split::Balanced);
            QCOMPARE(first_end, n / 2);
        }
        QCOMPARE(fixed.balanced_share(0), 0.5);
    }

    void thread_pool_spin_time_from_environment() {
        const QByteArray saved = qgetenv("COLIBRI_SPIN_US");
        qunsetenv("COLIBRI_SPIN_US");
        QCOMPARE(ThreadPool::default_spin_time().count(), 300);
        qputenv("COLIBRI_SPIN_US", "0");
        QCOMPARE(ThreadPool::default_spin_time().count(), 0);
        qputenv("COLIBRI_SPIN_US", "50");
        QCOMPARE(ThreadPool::default_spin_time().count(), 50);
        qputenv("COLIBRI_SPIN_US", "fast");  // not a number: the default
        QCOMPARE(ThreadPool::default_spin_time().count(), 300);
        qputenv("COLIBRI_SPIN_US", "-5");
        QCOMPARE(ThreadPool::default_spin_time().count(), 300);
        // More threads than cores never poll (a polling thread would take a working one's core).
        const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
        QCOMPARE(ThreadPool(cores + 1, std::chrono::microseconds(300)).spin_time().count(), 0);
        QCOMPARE(ThreadPool(1, std::chrono::microseconds(300)).spin_time().count(), 300);
        if (saved.isNull()) qunsetenv("COLIBRI_SPIN_US");
        else qputenv("COLIBRI_SPIN_US", saved);
    }
};

QTEST_GUILESS_MAIN(TestFormat)
#include "test_format.moc"
