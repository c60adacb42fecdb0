#include "kernels/registry.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "kernels/cpu_info.h"
#include "kernels/variants.h"

namespace colibri::kernels {
namespace {

struct VariantInfo {
    const char* name;
    const char* display;
};

constexpr VariantInfo kInfo[kVariantCount] = {
    {"scalar", "Scalar"},
    {"avx2", "AVX2"},
    {"avx512", "AVX-512"},
    {"neon", "NEON"},
    {"neon_translated", "NEON (translated)"},
};

const KernelSet* compiled_set(Variant v) {
    switch (v) {
        case Variant::Scalar: return &scalar_kernel_set();
#if defined(COLIBRI_KERNELS_HAVE_AVX2)
        case Variant::Avx2: return &avx2_kernel_set();
#endif
#if defined(COLIBRI_KERNELS_HAVE_AVX512)
        case Variant::Avx512: return &avx512_kernel_set();
#endif
#if defined(COLIBRI_KERNELS_HAVE_NEON)
        case Variant::Neon: return &neon_kernel_set();
#endif
#if defined(COLIBRI_KERNELS_HAVE_NEON_TRANSLATED)
        case Variant::NeonTranslated: return &neon_translated_kernel_set();
#endif
        default: return nullptr;
    }
}

bool cpu_runs(Variant v) {
    const CpuFeatures& f = cpu_features();
    const bool avx2 = f.avx2 && f.fma && f.f16c;
    switch (v) {
        case Variant::Scalar: return true;
        case Variant::Avx2: return avx2;
        case Variant::Avx512: return avx2 && f.avx512f && f.avx512bw && f.avx512vl;
        case Variant::Neon: return f.neon;
        case Variant::NeonTranslated: return avx2;  // SIMDe maps it onto SSE/AVX2 with FMA and F16C
    }
    return false;
}

// The active table. Entries are written whole under relaxed atomics: a kernel call racing a selection gets
// either variant, and both give the same bits.
struct Dispatch {
    std::atomic<Variant> variant[kOpCount][kWeightTypeCount];
    std::atomic<MatvecFn> matvec[kWeightTypeCount];
    std::atomic<MatmulFn> matmul[kWeightTypeCount];
    std::atomic<WeightedRowsFn> weighted_rows;  // follows the f32 matvec
    std::atomic<StreamSumFn> stream_sum;        // likewise

    void set(Op op, size_t type, Variant v) {
        const KernelSet* s = compiled_set(v);
        variant[size_t(op)][type].store(v, std::memory_order_relaxed);
        if (op == Op::Matvec) matvec[type].store(s->matvec[type], std::memory_order_relaxed);
        else matmul[type].store(s->matmul[type], std::memory_order_relaxed);
        if (op == Op::Matvec && type == size_t(WeightType::F32)) {
            weighted_rows.store(s->weighted_rows, std::memory_order_relaxed);
            stream_sum.store(s->stream_sum, std::memory_order_relaxed);
        }
    }
    void set_all(Variant v) {
        for (size_t op = 0; op < kOpCount; ++op) {
            for (size_t t = 0; t < kWeightTypeCount; ++t) set(Op(op), t, v);
        }
    }
};

// COLIBRI_KERNEL onto `table`: true when unset or applied, false with `error` for a name this build or CPU
// cannot run.
bool apply_kernel_environment_to(Dispatch* table, std::string* error) {
    const char* env = std::getenv("COLIBRI_KERNEL");
    if (env == nullptr || *env == '\0') return true;
    Variant v;
    if (!variant_from_name(env, &v)) {
        *error = std::string("COLIBRI_KERNEL: unknown kernel variant '") + env +
                 "' (scalar, avx2, avx512, neon, neon_translated)";
        return false;
    }
    if (!variant_supported(v)) {
        *error = std::string("COLIBRI_KERNEL: ") + env +
                 (variant_compiled(v) ? " is not supported by this CPU" : " is not built into this binary");
        return false;
    }
    table->set_all(v);
    return true;
}

Dispatch& table() {
    static Dispatch* d = [] {
        auto* t = new Dispatch;  // never destroyed: kernels may run during static destruction
        t->set_all(best_variant());
        return t;
    }();
    return *d;
}

// COLIBRI_KERNEL is applied once, by the first kernel call or by apply_kernel_environment, whichever comes
// first; the first kernel call can only print what is wrong with it.
std::once_flag environment_once;

Dispatch& dispatch() {
    std::call_once(environment_once, [] {
        std::string error;
        if (!apply_kernel_environment_to(&table(), &error)) std::fprintf(stderr, "colibri: %s\n", error.c_str());
    });
    return table();
}

}  // namespace

const char* variant_name(Variant v) { return kInfo[size_t(v)].name; }
const char* variant_display_name(Variant v) { return kInfo[size_t(v)].display; }

bool variant_from_name(std::string_view name, Variant* out) {
    for (size_t i = 0; i < kVariantCount; ++i) {
        if (name == kInfo[i].name) {
            *out = Variant(i);
            return true;
        }
    }
    return false;
}

const char* op_name(Op op) { return op == Op::Matvec ? "matvec" : "matmul"; }

const char* weight_type_label(WeightType type) { return weight_type_info(type).label; }

bool op_from_name(std::string_view name, Op* out) {
    if (name == "matvec") *out = Op::Matvec;
    else if (name == "matmul") *out = Op::Matmul;
    else return false;
    return true;
}

bool variant_compiled(Variant v) { return compiled_set(v) != nullptr; }
bool variant_supported(Variant v) { return variant_compiled(v) && cpu_runs(v); }

std::vector<Variant> supported_variants() {
    std::vector<Variant> out;
    for (size_t i = 0; i < kVariantCount; ++i) {
        if (variant_supported(Variant(i))) out.push_back(Variant(i));
    }
    return out;
}

Variant best_variant() {
    for (Variant v : {Variant::Avx512, Variant::Avx2, Variant::Neon}) {
        if (variant_supported(v)) return v;
    }
    return Variant::Scalar;
}

const KernelSet* kernel_set(Variant v) { return variant_supported(v) ? compiled_set(v) : nullptr; }

const KernelSet* avx512_no_vnni_kernel_set_for_tests() {
#if defined(COLIBRI_KERNELS_HAVE_AVX512)
    if (variant_supported(Variant::Avx512)) return &avx512_no_vnni_kernel_set();
#endif
    return nullptr;
}

const KernelSet* avx512_other_prefetch_kernel_set_for_tests() {
#if defined(COLIBRI_KERNELS_HAVE_AVX512)
    if (variant_supported(Variant::Avx512)) return &avx512_other_prefetch_kernel_set();
#endif
    return nullptr;
}

bool select_variant(Variant v) {
    if (!variant_supported(v)) return false;
    dispatch().set_all(v);
    return true;
}

bool select_variant(Op op, WeightType type, Variant v) {
    if (!variant_supported(v) || size_t(type) >= kWeightTypeCount) return false;
    dispatch().set(op, size_t(type), v);
    return true;
}

Variant selected_variant(Op op, WeightType type) {
    return dispatch().variant[size_t(op)][size_t(type)].load(std::memory_order_relaxed);
}

void select_best() { dispatch().set_all(best_variant()); }

bool kernel_environment_set() {
    const char* env = std::getenv("COLIBRI_KERNEL");
    return env != nullptr && *env != '\0';
}

bool apply_kernel_environment(std::string* error) {
    bool ok = true, applied_now = false;
    std::call_once(environment_once, [&] {
        applied_now = true;
        ok = apply_kernel_environment_to(&table(), error);
    });
    return applied_now ? ok : apply_kernel_environment_to(&table(), error);
}

MatvecFn active_matvec(WeightType type) {
    return dispatch().matvec[size_t(type)].load(std::memory_order_relaxed);
}

MatmulFn active_matmul(WeightType type) {
    return dispatch().matmul[size_t(type)].load(std::memory_order_relaxed);
}

WeightedRowsFn active_weighted_rows() { return dispatch().weighted_rows.load(std::memory_order_relaxed); }
StreamSumFn active_stream_sum() { return dispatch().stream_sum.load(std::memory_order_relaxed); }

}  // namespace colibri::kernels
