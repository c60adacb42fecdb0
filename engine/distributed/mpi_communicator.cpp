#include "engine/distributed/mpi_communicator.h"

#include <mpi.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <thread>
#include <vector>


namespace colibri {

bool mpi_built() { return true; }

namespace {

std::string mpi_error(int code) {
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
    return std::string(text, static_cast<size_t>(length));
}

class MpiCommunicator final : public Communicator {
public:
    // finalize: MPI_Init was this communicator's to call (a program that started MPI itself finalizes it).
    MpiCommunicator(MPI_Comm comm, bool finalize) : comm_(comm), finalize_(finalize) {
        int r = 0, n = 1;
        MPI_Comm_rank(comm_, &r);
        MPI_Comm_size(comm_, &n);
        rank_ = static_cast<uint32_t>(r);
        size_ = static_cast<uint32_t>(n);
        counts_.resize(size_);
        displs_.resize(size_);
    }
    ~MpiCommunicator() override {
        if (broken_) return;  // a dead peer would hold MPI_Finalize's fence forever
        MPI_Comm_free(&comm_);
        if (finalize_) MPI_Finalize();
    }
    uint32_t rank() const override { return rank_; }
    uint32_t size() const override { return size_; }
    bool broken() const override { return broken_; }

    Status allgatherv(std::span<const uint8_t> send, std::span<uint8_t> recv, std::span<const size_t> counts) override {
        if (broken_) return error("exchange: an earlier exchange with the other ranks failed");
        if (counts.size() != size_ || counts[rank_] != send.size() ||
            recv.size() != std::accumulate(counts.begin(), counts.end(), size_t(0)))
            return error("exchange: byte counts do not match the ranks");
        size_t at = 0;
        for (uint32_t r = 0; r < size_; ++r) {
            if (counts[r] > size_t(INT32_MAX) || at > size_t(INT32_MAX)) return error("exchange: more than 2 GiB in one exchange");
            counts_[r] = static_cast<int>(counts[r]);
            displs_[r] = static_cast<int>(at);
            at += counts[r];
        }
        MPI_Request request = MPI_REQUEST_NULL;
        int rc = MPI_Iallgatherv(send.data(), static_cast<int>(send.size()), MPI_BYTE, recv.data(), counts_.data(), displs_.data(),
                                 MPI_BYTE, comm_, &request);
        if (rc != MPI_SUCCESS) return fail("exchange: " + mpi_error(rc));
        return wait(request);
    }

    Status broadcast(std::vector<uint8_t>& bytes) override {
        if (broken_) return error("exchange: an earlier exchange with the other ranks failed");
        if (size_ == 1) return Status::ok();
        if (bytes.size() > size_t(INT32_MAX)) return error("broadcast: more than 2 GiB in one message");
        if (rank_ == 0) return send_to_all(bytes);
        return receive_from_first(bytes);
    }

private:
    static constexpr int kOpTag = 1, kAckTag = 2;  // the broadcast's point-to-point messages

    // Rank 0: the bytes to each rank, and each rank's acknowledgement back; a rank whose acknowledgement did not come
    // within the wait limit is named.
    Status send_to_all(const std::vector<uint8_t>& bytes) {
        requests_.assign(2 * size_t(size_ - 1), MPI_REQUEST_NULL);
        acks_.assign(size_, 0);
        for (uint32_t r = 1; r < size_; ++r) {
            MPI_Request* pair = &requests_[2 * size_t(r - 1)];
            int rc = MPI_Irecv(&acks_[r], 1, MPI_BYTE, int(r), kAckTag, comm_, pair + 1);
            if (rc == MPI_SUCCESS) rc = MPI_Isend(bytes.data(), int(bytes.size()), MPI_BYTE, int(r), kOpTag, comm_, pair);
            if (rc != MPI_SUCCESS) return fail("broadcast: " + mpi_error(rc));
        }
        if (Status s = poll([&](int& done) { return test_all(done); }); !s) {
            if (!timed_out_) return s;  // an MPI error, not a silent rank
            std::vector<uint32_t> lost;
            for (uint32_t r = 1; r < size_; ++r)
                if (requests_[2 * size_t(r - 1)] != MPI_REQUEST_NULL || requests_[2 * size_t(r - 1) + 1] != MPI_REQUEST_NULL) lost.push_back(r);
            return peer_lost(lost);
        }
        return Status::ok();
    }
    // Every other rank: rank 0's next message (whatever its size), then the acknowledgement.
    Status receive_from_first(std::vector<uint8_t>& bytes) {
        MPI_Status status;
        COLIBRI_TRY(poll([&](int& done) { return MPI_Iprobe(0, kOpTag, comm_, &done, &status); }));
        int count = 0;
        MPI_Get_count(&status, MPI_BYTE, &count);
        bytes.resize(size_t(std::max(count, 0)));
        if (const int rc = MPI_Recv(bytes.data(), count, MPI_BYTE, 0, kOpTag, comm_, MPI_STATUS_IGNORE); rc != MPI_SUCCESS)
            return fail("broadcast: " + mpi_error(rc));
        MPI_Request request = MPI_REQUEST_NULL;
        if (const int rc = MPI_Isend(&ack_, 1, MPI_BYTE, 0, kAckTag, comm_, &request); rc != MPI_SUCCESS) return fail("broadcast: " + mpi_error(rc));
        return wait(request);
    }
    int test_all(int& done) {
        done = 1;
        for (MPI_Request& r : requests_) {
            if (r == MPI_REQUEST_NULL) continue;
            int one = 0;
            if (const int rc = MPI_Test(&r, &one, MPI_STATUS_IGNORE); rc != MPI_SUCCESS) return rc;
            done = done && one;
        }
        return MPI_SUCCESS;
    }
    Status wait(MPI_Request& request) {
        return poll([&](int& done) { return MPI_Test(&request, &done, MPI_STATUS_IGNORE); });
    }
    // Calls `test` (an MPI call that sets its flag when done) until done or the wait limit: spinning briefly
    // (decode's exchanges are short), then yielding the core and sleeping, so that ranks sharing cores (mpirun
    // --oversubscribe) still make progress.
    template <typename Test>
    Status poll(Test test) {
        using Clock = std::chrono::steady_clock;
        const Clock::time_point deadline = Clock::now() + wait_limit_;
        for (uint32_t polls = 0;; ++polls) {
            int done = 0;
            const int rc = test(done);
            if (rc != MPI_SUCCESS) return fail("exchange with the other ranks failed: " + mpi_error(rc));
            if (done) return Status::ok();
            if (polls < 64) continue;
            if (polls < 4096) {
                std::this_thread::yield();
                continue;
            }
            if (Clock::now() >= deadline) {
                broken_ = timed_out_ = true;
                return peer_lost();
            }
            std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
    }
    Status fail(const std::string& why) {
        broken_ = true;
        return error(why);
    }
    MPI_Comm comm_;
    bool finalize_;
    uint32_t rank_ = 0, size_ = 1;
    bool broken_ = false, timed_out_ = false;
    std::vector<int> counts_, displs_;
    std::vector<MPI_Request> requests_;  // rank 0's broadcast: per other rank its send, then its acknowledgement
    std::vector<uint8_t> acks_;
    uint8_t ack_ = 1;
};

}  // namespace

Result<std::unique_ptr<Communicator>> make_mpi_communicator() {
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    // MPI starts once per process: a model across ranks closed (the C API) has finalized it for good.
    if (finalized) return error("MPI was finalized in this process (a model opened across ranks was closed): open one for the process's life");
    // Serialized: the server's engine thread and a session's heartbeat, not only the main thread, call MPI (one thread
    // at a time).
    int provided = 0;
    if (!initialized) {
        if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) return error("MPI_Init failed");
    } else {
        MPI_Query_thread(&provided);
    }
    if (provided < MPI_THREAD_SERIALIZED) return error("this MPI library does not let threads take turns calling it (MPI_THREAD_SERIALIZED)");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm comm = MPI_COMM_NULL;
    if (const int rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm); rc != MPI_SUCCESS) return error("MPI_Comm_dup: " + mpi_error(rc));
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    return std::unique_ptr<Communicator>(std::make_unique<MpiCommunicator>(comm, !initialized));
}

}  // namespace colibri
