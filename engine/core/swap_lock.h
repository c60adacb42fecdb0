// Readers-writer lock between sessions evaluating tokens (shared) and expert hot-swap (exclusive), fair to
// the writer: a swap waiting at the turnstile stops new tokens from starting, so a session generating
// without pause cannot starve it (glibc's rwlock prefers readers). Readers pay one uncontended mutex per token.
#pragma once
#include <mutex>
#include <shared_mutex>

namespace colibri {

class SwapLock {
public:
    void lock_shared() {
        std::lock_guard pass(turnstile_);
        rw_.lock_shared();
    }
    void unlock_shared() { rw_.unlock_shared(); }
    void lock() {
        turnstile_.lock();
        rw_.lock();
    }
    void unlock() {
        rw_.unlock();
        turnstile_.unlock();
    }

private:
    std::mutex turnstile_;
    std::shared_mutex rw_;
};

}  // namespace colibri
