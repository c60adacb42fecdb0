// The server's side of one connection's reply ring (server/client/colibri_local_protocol.h). The head lives here
// and is only published to the reply segment; the client's page is read for its tail and its waiting flag and
// trusted in nothing: a tail that is not between head - ring and head reads as a full ring.
#pragma once
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "server/client/colibri_local_protocol.h"

namespace colibri::server {

class RingWriter {
public:
    // The last record of a request (END or an ERROR) is at most this long, and this much room (twice it: it
    // may need a PAD before it) is kept for it, so that a request always ends with one.
    static constexpr size_t kFinalRecordBytes = 1024;

    RingWriter(colibri_reply_segment* segment, uint8_t* data, uint32_t ring_bytes, const colibri_client_page* page)
        : segment_(segment), data_(data), size_(ring_bytes), page_(page) {}

    // Appends a record of header + a + b; false when the client left no room for it. `final` records may use
    // the room kept for them.
    bool write(uint16_t kind, const void* a, size_t na, const void* b = nullptr, size_t nb = 0, bool final = false) {
        const uint64_t len = (sizeof(colibri_record_header) + na + nb + 7) & ~uint64_t(7);
        if (len > (final ? kFinalRecordBytes : size_ / 2)) return false;
        const uint64_t tail = __atomic_load_n(&page_->tail, __ATOMIC_ACQUIRE);
        if (tail > head_ || head_ - tail > size_) return false;
        const uint64_t pos = head_ % size_;
        const uint64_t pad = pos + len > size_ ? size_ - pos : 0;
        const uint64_t kept = final ? 0 : 2 * kFinalRecordBytes;
        if (head_ - tail + pad + len + kept > size_) return false;
        uint64_t at = head_;
        if (pad) {
            const colibri_record_header h{static_cast<uint32_t>(pad), COLIBRI_RECORD_PAD, 0};
            std::memcpy(data_ + pos, &h, sizeof h);
            at += pad;
        }
        uint8_t* p = data_ + at % size_;
        const colibri_record_header h{static_cast<uint32_t>(len), kind, 0};
        std::memcpy(p, &h, sizeof h);
        if (na) std::memcpy(p + sizeof h, a, na);
        if (nb) std::memcpy(p + sizeof h + na, b, nb);
        head_ = at + len;
        __atomic_store_n(&segment_->head, head_, __ATOMIC_RELEASE);
        __atomic_add_fetch(&segment_->head_seq, 1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&page_->head_waiting, __ATOMIC_SEQ_CST))
            syscall(SYS_futex, &segment_->head_seq, FUTEX_WAKE, 1, nullptr, nullptr, 0);
        return true;
    }
    uint64_t head() const { return head_; }

private:
    colibri_reply_segment* segment_;
    uint8_t* data_;
    uint64_t size_;
    const colibri_client_page* page_;
    uint64_t head_ = 0;
};

}  // namespace colibri::server
