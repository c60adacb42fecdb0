#include "engine/core/activation_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <new>

#include "engine/file/mapped_file.h"

namespace colibri::activation_memory {

namespace {
bool use_huge(size_t bytes, bool huge_pages) { return huge_pages && bytes >= kHugePage; }
// Activations start on a cache line: the kernels' 512-bit loads of a vector (at multiples of 64 bytes from its
// start) then never straddle two lines. operator new's large blocks begin 16 bytes into a page, and on an
// Intel Xeon guest with AMX every such load was a split load: the f16 matmul ran x0.85 against aligned
// vectors (a single-core micro-benchmark, 2816x1024 against 16 vectors).
constexpr std::align_val_t kLine{64};
size_t round_up(size_t bytes) { return (bytes + kHugePage - 1) / kHugePage * kHugePage; }
}  // namespace

void* allocate(size_t bytes, bool huge_pages) {
    if (!use_huge(bytes, huge_pages)) return ::operator new(bytes, kLine);
    void* p = std::aligned_alloc(kHugePage, round_up(bytes));
    if (p == nullptr) throw std::bad_alloc();
    // Advice only: without THP support the buffer simply stays on small pages.
    madvise(p, round_up(bytes), MADV_HUGEPAGE);
    return p;
}

void* map_zeroed(size_t bytes, bool huge_pages) {
    if (!use_huge(bytes, huge_pages)) {
        void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) throw std::bad_alloc();
        return p;
    }
    const size_t span = round_up(bytes);
    void* p = map_anonymous_aligned(span, kHugePage, PROT_READ | PROT_WRITE, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    madvise(p, span, MADV_HUGEPAGE);  // advice only, as in allocate()
    return p;
}

void unmap_zeroed(void* p, size_t bytes, bool huge_pages) {
    munmap(p, use_huge(bytes, huge_pages) ? round_up(bytes) : bytes);  // what map_zeroed kept
}

bool populate(void* p, size_t bytes) {
    const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
    const uintptr_t begin = reinterpret_cast<uintptr_t>(p) / page * page;
    const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes + page - 1) / page * page;
#ifdef MADV_POPULATE_WRITE
    if (madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE) == 0) return true;
    if (errno != EINVAL) return false;  // ENOMEM and the like: touching the pages would only summon the OOM killer
#endif
    // Linux before 5.14: fault the pages in one by one, keeping whatever they hold.
    for (uintptr_t a = begin; a < end; a += page) {
        volatile unsigned char* b = reinterpret_cast<volatile unsigned char*>(a);
        *b = *b;
    }
    return true;
}

void release(void* p, size_t bytes, bool huge_pages) {
    if (p == nullptr) return;
    if (use_huge(bytes, huge_pages))
        std::free(p);
    else
        ::operator delete(p, kLine);
}

}  // namespace colibri::activation_memory
