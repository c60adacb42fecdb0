// Storage for a Session's activations and KV cache. With huge pages on, every allocation of 2 MiB or more is
// 2 MiB-aligned and madvise(MADV_HUGEPAGE)d, so the kernel can back it with transparent huge pages (fewer TLB
// misses when attention sweeps the KV cache); smaller ones, and all of them with huge pages off, come from
// operator new, 64-byte aligned. The choice is made once, when the buffer is created. The KV cache is a
// ZeroPageBuffer: zero pages mapped on demand rather than written up front.
#pragma once
#include <cstddef>
#include <new>
#include <vector>

namespace colibri {

namespace activation_memory {
inline constexpr size_t kHugePage = size_t(2) << 20;
void* allocate(size_t bytes, bool huge_pages);
void release(void* p, size_t bytes, bool huge_pages);
// Anonymous pages that the kernel zero-fills on first touch (2 MiB-aligned and madvise(MADV_HUGEPAGE)d with
// huge pages on); throws std::bad_alloc when the mapping fails. bytes > 0.
void* map_zeroed(size_t bytes, bool huge_pages);
void unmap_zeroed(void* p, size_t bytes, bool huge_pages);  // as mapped
// Makes the pages of [p, p + bytes) resident and writable in one call (MADV_POPULATE_WRITE; where the kernel
// lacks it, a read and write back of one byte per page), leaving their contents as they are. false: the
// system has no memory for them.
bool populate(void* p, size_t bytes);
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

// n zeros of T that cost nothing until touched: the pages come from the kernel on first write (a read of an
// untouched page maps the shared zero page). For the KV cache, which is sized for the whole context but filled
// a position at a time: a std::vector would write every byte at construction, page-faulting the whole cache in
// up front (0.2 s of a 4096-position session's start on the bench model, and the cache's full size in resident
// memory from the first token; for a model of 32 layers and 8 KV heads of 128, a whole gigabyte).
template <typename T>
class ZeroPageBuffer {
public:
    ZeroPageBuffer() = default;
    ZeroPageBuffer(size_t n, bool huge_pages)
        : data_(n ? static_cast<T*>(activation_memory::map_zeroed(n * sizeof(T), huge_pages)) : nullptr),
          size_(n),
          huge_pages_(huge_pages) {}
    ~ZeroPageBuffer() { reset(); }
    ZeroPageBuffer(ZeroPageBuffer&& o) noexcept : data_(o.data_), size_(o.size_), huge_pages_(o.huge_pages_) {
        o.data_ = nullptr, o.size_ = 0;
    }
    ZeroPageBuffer& operator=(ZeroPageBuffer&& o) noexcept {
        if (this != &o) {
            reset();
            data_ = o.data_, size_ = o.size_, huge_pages_ = o.huge_pages_;
            o.data_ = nullptr, o.size_ = 0;
        }
        return *this;
    }
    ZeroPageBuffer(const ZeroPageBuffer&) = delete;
    ZeroPageBuffer& operator=(const ZeroPageBuffer&) = delete;

    T* data() { return data_; }
    const T* data() const { return data_; }
    size_t size() const { return size_; }
    // Elements [first, first + count) resident now rather than page by page as they are first written;
    // false when the system has no memory for them.
    [[nodiscard]] bool populate(size_t first, size_t count) {
        return count == 0 || activation_memory::populate(data_ + first, count * sizeof(T));
    }

private:
    void reset() {
        if (data_ != nullptr) activation_memory::unmap_zeroed(data_, size_ * sizeof(T), huge_pages_);
        data_ = nullptr, size_ = 0;
    }
    T* data_ = nullptr;
    size_t size_ = 0;
    bool huge_pages_ = false;
};

}  // namespace colibri
