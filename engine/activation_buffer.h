// Storage for a Session's activations and KV cache. With huge pages on, every allocation of 2 MiB or more is
// 2 MiB-aligned and madvise(MADV_HUGEPAGE)d, so the kernel can back it with transparent huge pages (fewer TLB
// misses when attention sweeps the KV cache); smaller ones, and all of them with huge pages off, come from
// operator new. The choice is made once, when the buffer is created.
#pragma once
#include <cstddef>
#include <new>
#include <vector>

namespace colibri {

namespace activation_memory {
inline constexpr size_t kHugePage = size_t(2) << 20;
void* allocate(size_t bytes, bool huge_pages);
void release(void* p, size_t bytes, bool huge_pages);
}  // namespace activation_memory

template <typename T>
class ActivationAllocator {
public:
    using value_type = T;
    explicit ActivationAllocator(bool huge_pages = false) noexcept : huge_pages_(huge_pages) {}
    template <typename U>
    ActivationAllocator(const ActivationAllocator<U>& o) noexcept : huge_pages_(o.huge_pages()) {}

    T* allocate(size_t n) { return static_cast<T*>(activation_memory::allocate(n * sizeof(T), huge_pages_)); }
    void deallocate(T* p, size_t n) noexcept { activation_memory::release(p, n * sizeof(T), huge_pages_); }
    bool huge_pages() const noexcept { return huge_pages_; }
    template <typename U>
    bool operator==(const ActivationAllocator<U>& o) const noexcept { return huge_pages_ == o.huge_pages(); }

private:
    bool huge_pages_;
};

template <typename T>
using ActivationBuffer = std::vector<T, ActivationAllocator<T>>;

}  // namespace colibri
