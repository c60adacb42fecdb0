#include "activation_buffer.h"

#include <sys/mman.h>

#include <cstdlib>

namespace colibri::activation_memory {

namespace {
bool use_huge(size_t bytes, bool huge_pages) { return huge_pages && bytes >= kHugePage; }
size_t round_up(size_t bytes) { return (bytes + kHugePage - 1) / kHugePage * kHugePage; }
}  // namespace

void* allocate(size_t bytes, bool huge_pages) {
    if (!use_huge(bytes, huge_pages)) return ::operator new(bytes);
    void* p = std::aligned_alloc(kHugePage, round_up(bytes));
    if (p == nullptr) throw std::bad_alloc();
    // Advice only: without THP support the buffer simply stays on small pages.
    madvise(p, round_up(bytes), MADV_HUGEPAGE);
    return p;
}

void release(void* p, size_t bytes, bool huge_pages) {
    if (p == nullptr) return;
    if (use_huge(bytes, huge_pages))
        std::free(p);
    else
        ::operator delete(p);
}

}  // namespace colibri::activation_memory
