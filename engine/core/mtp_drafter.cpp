#include "engine/core/mtp_drafter.h"

#include "engine/core/session.h"

namespace colibri {

bool MtpDrafter::available(const Session& session) { return session.mtp_enabled(); }

uint32_t MtpDrafter::propose(Session& session, std::span<const int32_t> history, std::span<int32_t> drafts) {
    status_ = Status::ok();
    if (history.empty()) return 0;
    auto r = session.mtp_draft(history.back(), drafts);
    if (!r) {
        status_ = r.status();
        return 0;
    }
    return r.value();
}

void MtpDrafter::on_verified(uint32_t proposed, uint32_t accepted) {
    proposed_ += proposed;
    accepted_ += accepted;
}

void MtpDrafter::reset() { proposed_ = accepted_ = 0; }

}  // namespace colibri
