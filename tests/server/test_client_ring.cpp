// libcolibri_client against rings a server could not have written: its ring reader on its own (every forged
// record gives a reason, never a read outside the ring), and the whole client against a fake server that passes
// forged rings, unsealed memory, extra descriptors, says nothing, or goes away: each a clean error, in bounded
// time. Issue 31: a record at the ring's end that claimed the whole ring made the client hand 1 MB of its own
// memory to the token callback, then hang.
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <QElapsedTimer>
#include <QTemporaryDir>
#include <QtTest>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>

#include "colibri_client.h"
#include "colibri_ring_reader.h"
#include "server/fd_passing.h"
#include "server/local_ring.h"

using colibri::server::RingWriter;

namespace {

struct Reply {
    std::string text;
    size_t longest = 0;  // the longest text one callback was given
    int tokens = 0;
};

int collect(int32_t, const char* text, size_t length, float, void* user) {
    auto* r = static_cast<Reply*>(user);
    r->text.append(text, length);
    r->longest = std::max(r->longest, length);
    ++r->tokens;
    return 1;
}

int open_descriptors() {
    int n = 0;
    for (int fd = 0; fd < 1024; ++fd) n += ::fcntl(fd, F_GETFD) != -1;
    return n;
}

// One connection of the fake server: its ring, written by the server's own writer or by hand.
struct FakeConnection {
    int sock = -1;
    colibri_reply_segment* segment = nullptr;
    uint8_t* data = nullptr;
    uint32_t ring_bytes = 0;
    const colibri_client_page* page = nullptr;
    std::unique_ptr<RingWriter> writer;

    void token(const std::string& text) {
        const colibri_token_record t{7, NAN, static_cast<uint32_t>(text.size()), 0};
        writer->write(COLIBRI_RECORD_TOKEN, &t, sizeof t, text.data(), text.size());
    }
    void end() {
        const colibri_end_record e{1, 3, 0, 2, 0, 0, 0};
        writer->write(COLIBRI_RECORD_END, &e, sizeof e, nullptr, 0, true);
    }
    // Waits (at most 5 s) until the client has read everything written.
    void wait_read() const {
        for (int i = 0; i < 5000 && __atomic_load_n(&page->tail, __ATOMIC_ACQUIRE) != writer->head(); ++i) ::usleep(1000);
    }
    // Publishes any head, as a forging server would.
    void set_head(uint64_t head) {
        __atomic_store_n(&segment->head, head, __ATOMIC_RELEASE);
        __atomic_add_fetch(&segment->head_seq, 1, __ATOMIC_SEQ_CST);
        syscall(SYS_futex, &segment->head_seq, FUTEX_WAKE, 1, nullptr, nullptr, 0);
    }
};

// A server on a socket that answers one connection as colibri serve would (HELLO, then two sealed memfds),
// and after each request's 200 runs the test's script on the connection.
class FakeServer {
public:
    enum class Memory { Sealed, Unsealed, ThreeDescriptors };
    FakeServer(const QString& path, std::function<void(FakeConnection&)> script, Memory memory = Memory::Sealed, uint32_t ring_bytes = 4096)
        : path_(path.toStdString()), script_(std::move(script)), memory_(memory), ring_bytes_(ring_bytes) {
        listen_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path_.c_str());
        ::unlink(path_.c_str());
        ok_ = ::bind(listen_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 && ::listen(listen_, 4) == 0;
        thread_ = std::thread([this] { serve(); });
    }
    ~FakeServer() {
        ::shutdown(listen_, SHUT_RDWR);
        if (conn_sock_ >= 0) ::shutdown(conn_sock_, SHUT_RDWR);
        thread_.join();
        ::close(listen_);
        ::unlink(path_.c_str());
    }
    bool ok() const { return ok_; }

private:
    static bool read_exact(int fd, void* out, size_t n) {
        return n == 0 || ::recv(fd, out, n, MSG_WAITALL) == static_cast<ssize_t>(n);
    }
    static int memfd(size_t size, bool seal) {
        const int fd = ::memfd_create("fake", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        ::ftruncate(fd, static_cast<off_t>(size));
        if (seal) ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
        return fd;
    }
    void serve() {
        const int sock = ::accept4(listen_, nullptr, nullptr, SOCK_CLOEXEC);
        if (sock < 0) return;
        conn_sock_ = sock;
        colibri_local_request_header hello{};
        std::string key;
        if (!read_exact(sock, &hello, sizeof hello) || hello.length > 4096) return;
        key.resize(hello.length);
        read_exact(sock, key.data(), key.size());
        const size_t size = sizeof(colibri_reply_segment) + ring_bytes_;
        const int fds[3] = {memfd(size, memory_ != Memory::Unsealed), memfd(4096, memory_ != Memory::Unsealed), memfd(4096, true)};
        auto* reply = static_cast<uint8_t*>(::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0));
        auto* page = static_cast<colibri_client_page*>(::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fds[1], 0));
        FakeConnection c;
        c.sock = sock;
        c.segment = reinterpret_cast<colibri_reply_segment*>(reply);
        *c.segment = {COLIBRI_LOCAL_MAGIC, COLIBRI_LOCAL_VERSION, ring_bytes_, static_cast<uint32_t>(sizeof(colibri_reply_segment)), 0, 0, 0, {}};
        c.data = reply + sizeof(colibri_reply_segment);
        c.ring_bytes = ring_bytes_;
        c.page = page;
        c.writer = std::make_unique<RingWriter>(c.segment, c.data, ring_bytes_, page);
        const size_t n_fds = memory_ == Memory::ThreeDescriptors ? 3 : 2;
        const colibri_local_reply_header ok{COLIBRI_LOCAL_MAGIC, 200, 0, 0};
        colibri::server::send_with_fds(sock, &ok, sizeof ok, fds, n_fds);
        for (int fd : fds) ::close(fd);
        for (;;) {
            colibri_local_request_header h{};
            if (!read_exact(sock, &h, sizeof h)) break;
            if (h.kind == COLIBRI_LOCAL_CANCEL) continue;
            std::string body(h.length, '\0');
            if (!read_exact(sock, body.data(), body.size())) break;
            ::send(sock, &ok, sizeof ok, MSG_NOSIGNAL);
            script_(c);
            if (c.sock < 0) break;  // the script closed the connection
        }
        ::munmap(reply, size);
        ::munmap(page, 4096);
        ::close(sock);
        conn_sock_ = -1;
    }

    std::string path_;
    std::function<void(FakeConnection&)> script_;
    Memory memory_;
    uint32_t ring_bytes_;
    int listen_ = -1;
    std::atomic<int> conn_sock_{-1};
    bool ok_ = false;
    std::thread thread_;
};

// A ring of exactly ring_bytes on the heap, so that a read past it is a heap overflow AddressSanitizer reports.
struct HeapRing {
    explicit HeapRing(uint32_t bytes) : data(new uint8_t[bytes]()), bytes(bytes) {}
    std::unique_ptr<uint8_t[]> data;
    uint32_t bytes;
    void put(uint64_t pos, const void* p, size_t n) { std::memcpy(data.get() + pos, p, n); }
    void header(uint64_t pos, uint32_t length, uint16_t kind) {
        const colibri_record_header h{length, kind, 0};
        put(pos, &h, sizeof h);
    }
};

}  // namespace

class TestClientRing : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

    QString socket() const { return dir_.filePath("fake.sock"); }

    struct Outcome {
        int rc = -2;  // -2: the client did not connect (why in result.error)
        colibri_client_result result{};
        Reply reply;
        qint64 ms = 0;
    };
    // One chat request against a fake server that runs script after its 200; timeout_ms: the client's.
    Outcome run(std::function<void(FakeConnection&)> script, unsigned timeout_ms) {
        FakeServer server(socket(), std::move(script));
        Outcome o;
        if (!server.ok()) {
            std::snprintf(o.result.error, sizeof o.result.error, "the fake server cannot listen");
            return o;
        }
        char error[256] = {};
        colibri_client* c = colibri_client_connect_key(socket().toUtf8().constData(), nullptr, error, sizeof error);
        if (c == nullptr) {
            std::snprintf(o.result.error, sizeof o.result.error, "%s", error);
            return o;
        }
        colibri_client_set_timeout(c, timeout_ms);
        QElapsedTimer clock;
        clock.start();
        o.rc = colibri_client_request(c, "chat", "{}", collect, &o.reply, &o.result);
        o.ms = clock.elapsed();
        colibri_client_close(c);
        return o;
    }

private slots:
    // What the server's writer writes, the reader reads back: many requests through a 4 KiB ring, so that
    // records wrap around its end behind PAD records.
    void the_reader_reads_what_the_writer_wrote() {
        std::vector<uint8_t> data(4096);
        colibri_reply_segment segment{};
        colibri_client_page page{};
        RingWriter writer(&segment, data.data(), 4096, &page);
        colibri_ring_reader reader{data.data(), 4096, 0};
        int pads = 0;
        for (int request = 0; request < 50; ++request) {
            std::string sent, read;
            for (int i = 0; i < 20; ++i) {
                const std::string text = std::string(static_cast<size_t>((request * 7 + i) % 29), 'a' + static_cast<char>(i));
                const colibri_token_record t{i, 0.0f, static_cast<uint32_t>(text.size()), static_cast<uint32_t>(i)};
                QVERIFY(writer.write(COLIBRI_RECORD_TOKEN, &t, sizeof t, text.data(), text.size()));
                sent += text;
            }
            const colibri_end_record e{2, 1, 0, 20, 0, 0, 0};
            QVERIFY(writer.write(COLIBRI_RECORD_END, &e, sizeof e, nullptr, 0, true));
            pads += writer.head() / 4096 != reader.tail / 4096;
            for (;;) {
                colibri_ring_record rec;
                const char* why = nullptr;
                const int got = colibri_ring_next(&reader, segment.head, &rec, &why);
                QVERIFY2(got != COLIBRI_RING_DAMAGED, why);
                QVERIFY(got != COLIBRI_RING_EMPTY);
                if (got == COLIBRI_RING_END) break;
                read.append(rec.text, rec.token.text_length);
            }
            page.tail = reader.tail;
            QCOMPARE(read, sent);
        }
        QVERIFY(pads > 5);
    }

    // Each forged ring is refused with a reason, the tail left where it was; nothing outside the ring is read
    // (the ring is a heap buffer of exactly its size: AddressSanitizer would report a read past it).
    void the_reader_refuses_forged_records() {
        struct Case {
            const char* name;
            std::function<void(HeapRing&)> forge;
            uint64_t tail, head;
        };
        const uint32_t size = 4096;
        const std::vector<Case> cases = {
            {"issue 31: a record at the end that claims the whole ring", [&](HeapRing& r) { r.header(size - 8, size, COLIBRI_RECORD_TOKEN); }, size - 8,
             size - 8 + size},
            {"a record past the ring's end", [&](HeapRing& r) { r.header(size - 32, 64, COLIBRI_RECORD_TOKEN); }, size - 32, size + 64},
            {"a record past the head", [](HeapRing& r) { r.header(0, 64, COLIBRI_RECORD_TOKEN); }, 0, 32},
            {"a token's text past its record",
             [](HeapRing& r) {
                 r.header(0, 32, COLIBRI_RECORD_TOKEN);
                 const colibri_token_record t{1, 0, 1000000, 0};
                 r.put(8, &t, sizeof t);
             },
             0, 32},
            {"an error's text past its record",
             [](HeapRing& r) {
                 r.header(0, 24, COLIBRI_RECORD_ERROR);
                 const colibri_error_record e{500, 4096};
                 r.put(8, &e, sizeof e);
             },
             0, 24},
            {"a token record too short for its fields", [](HeapRing& r) { r.header(0, 16, COLIBRI_RECORD_TOKEN); }, 0, 16},
            {"an end record too short", [](HeapRing& r) { r.header(0, 16, COLIBRI_RECORD_END); }, 0, 16},
            {"a zero length", [](HeapRing& r) { r.header(0, 0, COLIBRI_RECORD_TOKEN); }, 0, 64},
            {"a length off the 8-byte grid", [](HeapRing& r) { r.header(0, 28, COLIBRI_RECORD_TOKEN); }, 0, 64},
            {"a pad record that does not reach the end", [](HeapRing& r) { r.header(0, 64, COLIBRI_RECORD_PAD); }, 0, 128},
            {"an unknown kind", [](HeapRing& r) { r.header(0, 32, 99); }, 0, 32},
            {"a head behind the tail", [](HeapRing&) {}, 64, 32},
            {"a head more than a ring ahead", [](HeapRing&) {}, 0, 8192 + 8},
            {"a tail off the 8-byte grid", [](HeapRing&) {}, 3, 64},
        };
        for (const Case& c : cases) {
            HeapRing ring(size);
            c.forge(ring);
            colibri_ring_reader reader{ring.data.get(), size, c.tail};
            colibri_ring_record rec;
            const char* why = nullptr;
            QVERIFY2(colibri_ring_next(&reader, c.head, &rec, &why) == COLIBRI_RING_DAMAGED, c.name);
            QVERIFY2(why != nullptr && *why, c.name);
            QVERIFY2(reader.tail == c.tail, c.name);
        }
    }

    void a_valid_reply_through_a_fake_server() {
        const Outcome o = run(
            [](FakeConnection& c) {
                c.token("Hello");
                c.token(" world");
                c.end();
            },
            5000);
        QVERIFY2(o.rc == 0, o.result.error);
        QCOMPARE(o.reply.text, std::string("Hello world"));
        QCOMPARE(std::string(o.result.finish_reason), std::string("stop"));
    }

    // Issue 31's forged record, through the whole client: an error, not 1 MB of memory and a hang.
    void a_forged_record_is_a_clean_error() {
        const Outcome o = run(
            [](FakeConnection& c) {
                c.token("ok");
                const uint64_t pos = c.ring_bytes - 8;
                // Bring the head to 8 bytes before the ring's end with records the client reads, then forge.
                while (c.writer->head() % c.ring_bytes != pos) {
                    const uint64_t left = pos - c.writer->head() % c.ring_bytes;
                    const colibri_token_record t{1, 0, 0, 0};
                    const std::string text(left >= 64 ? 16 : static_cast<size_t>(left - 24), 'z');
                    if (!c.writer->write(COLIBRI_RECORD_TOKEN, &t, sizeof t, text.data(), text.size())) c.wait_read();
                }
                c.wait_read();
                const colibri_record_header h{c.ring_bytes, COLIBRI_RECORD_TOKEN, 0};
                std::memcpy(c.data + pos, &h, sizeof h);
                const colibri_token_record t{1, 0, 1000000, 0};
                std::memcpy(c.data, &t, sizeof t);  // what follows the header, were the ring to go on
                c.set_head(c.writer->head() + c.ring_bytes);
            },
            5000);
        QCOMPARE(o.rc, -1);
        QCOMPARE(o.result.status, 502);
        QVERIFY2(QString(o.result.error).contains("damaged reply from the server: a record past the ring's end"), o.result.error);
        QVERIFY2(o.reply.longest < 4096, qPrintable(QString::number(o.reply.longest)));
        QVERIFY2(o.ms < 4000, qPrintable(QString::number(o.ms)));
    }

    void a_head_that_goes_back_is_a_clean_error() {
        const Outcome o = run(
            [](FakeConnection& c) {
                c.token("one");
                c.token("two");
                c.wait_read();
                c.set_head(8);
            },
            5000);
        QCOMPARE(o.rc, -1);
        QCOMPARE(o.result.status, 502);
        QVERIFY2(QString(o.result.error).contains("head went back"), o.result.error);
    }

    // A server that says nothing more: the client waits for its timeout, not forever.
    void a_silent_server_is_a_bounded_wait() {
        const Outcome o = run([](FakeConnection& c) { c.token("only"); }, 300);
        QCOMPARE(o.rc, -1);
        QCOMPARE(o.result.status, 503);
        QVERIFY2(QString(o.result.error).contains("timeout"), o.result.error);
        QVERIFY2(o.ms >= 300 && o.ms < 3000, qPrintable(QString::number(o.ms)));
        QCOMPARE(o.reply.text, std::string("only"));
    }

    void a_server_that_goes_away_is_a_clean_error() {
        const Outcome o = run(
            [](FakeConnection& c) {
                c.token("bye");
                ::shutdown(c.sock, SHUT_RDWR);
                c.sock = -1;
            },
            60000);
        QCOMPARE(o.rc, -1);
        QCOMPARE(o.result.status, 503);
        QVERIFY2(QString(o.result.error).contains("went away"), o.result.error);
        QVERIFY2(o.ms < 5000, qPrintable(QString::number(o.ms)));
    }

    // Memory that could shrink under the reader (a SIGBUS) is refused; so are descriptors beyond the two, which
    // are closed, not leaked.
    void memory_that_could_shrink_is_refused() {
        FakeServer server(socket(), [](FakeConnection&) {}, FakeServer::Memory::Unsealed);
        char error[256] = {};
        QVERIFY(colibri_client_connect_key(socket().toUtf8().constData(), nullptr, error, sizeof error) == nullptr);
        QVERIFY2(QString(error).contains("not sealed"), error);
    }

    void extra_descriptors_are_closed() {
        const int before = open_descriptors();
        {
            FakeServer server(socket(), [](FakeConnection&) {}, FakeServer::Memory::ThreeDescriptors);
            char error[256] = {};
            QVERIFY(colibri_client_connect_key(socket().toUtf8().constData(), nullptr, error, sizeof error) == nullptr);
            QVERIFY2(QString(error).contains("no shared memory"), error);
        }
        QCOMPARE(open_descriptors(), before);
    }
};

QTEST_GUILESS_MAIN(TestClientRing)
#include "test_client_ring.moc"
