#include "engine/core/mtp_drafter.h"

#include <algorithm>

#include "engine/core/session.h"

namespace colibri {

MtpDrafter::MtpDrafter(DraftPacing pacing) : pacing_(pacing) {}

bool MtpDrafter::available(const Session& session) { return session.mtp_enabled(); }

uint32_t MtpDrafter::propose(Session& session, std::span<const int32_t> history, std::span<int32_t> drafts) {
    status_ = Status::ok();
    if (history.empty()) return 0;
    const uint32_t length = pacing_.next();
    if (length == 0) return 0;  // resting: the head's own rows still follow every eval
    auto r = session.mtp_draft(history.back(), drafts.first(std::min<size_t>(drafts.size(), length)));
    if (!r) {
        status_ = r.status();
        return 0;
    }
    return r.value();
}

void MtpDrafter::on_verified(uint32_t proposed, uint32_t accepted) {
    proposed_ += proposed;
    accepted_ += accepted;
    pacing_.on_verified(proposed, accepted);
}

void MtpDrafter::reset() {
    proposed_ = accepted_ = 0;
    pacing_.reset();
}

}  // namespace colibri
