#include "kernels/cpu_info.h"

#include <cstring>
#include <fstream>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace colibri::kernels {
namespace {

CpuFeatures detect() {
    CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
    // libgcc's checks include the OS's XSAVE state (XGETBV), not only the CPUID bits.
    __builtin_cpu_init();
    f.avx2 = __builtin_cpu_supports("avx2");
    f.fma = __builtin_cpu_supports("fma");
    f.avx512f = __builtin_cpu_supports("avx512f");
    f.avx512bw = __builtin_cpu_supports("avx512bw");
    f.avx512vl = __builtin_cpu_supports("avx512vl");
    f.avx512vnni = __builtin_cpu_supports("avx512vnni");
    f.avx512bf16 = __builtin_cpu_supports("avx512bf16");
    unsigned a, b, c, d;
    if (__get_cpuid(1, &a, &b, &c, &d)) f.f16c = (c & bit_F16C) != 0 && f.avx2;  // F16C needs the AVX state
    f.amd = __builtin_cpu_is("amd");
#elif defined(__aarch64__)
    f.neon = true;  // Advanced SIMD is mandatory in AArch64
#if defined(__linux__)
    const unsigned long hw = getauxval(AT_HWCAP);
    f.fp16 = (hw & HWCAP_FPHP) && (hw & HWCAP_ASIMDHP);
    f.dotprod = (hw & HWCAP_ASIMDDP) != 0;
#endif
#endif
    return f;
}

std::string detect_model() {
#if defined(__x86_64__) || defined(__i386__)
    unsigned regs[12] = {};
    unsigned max_ext = __get_cpuid_max(0x80000000, nullptr);
    if (max_ext >= 0x80000004) {
        for (unsigned i = 0; i < 3; ++i) __get_cpuid(0x80000002 + i, &regs[4 * i], &regs[4 * i + 1], &regs[4 * i + 2], &regs[4 * i + 3]);
        char brand[49] = {};
        std::memcpy(brand, regs, 48);
        std::string s(brand);
        const size_t b = s.find_first_not_of(' '), e = s.find_last_not_of(' ');
        if (b != std::string::npos) return s.substr(b, e - b + 1);
    }
#endif
    // Elsewhere (aarch64 has no brand string): /proc/cpuinfo's model name, or its implementer and part.
    std::ifstream in("/proc/cpuinfo");
    std::string line, implementer, part;
    auto value = [](const std::string& l) {
        const size_t colon = l.find(':');
        return colon == std::string::npos ? std::string() : l.substr(l.find_first_not_of(" \t", colon + 1));
    };
    while (std::getline(in, line)) {
        if (line.rfind("model name", 0) == 0) return value(line);
        if (line.rfind("CPU implementer", 0) == 0) implementer = value(line);
        if (line.rfind("CPU part", 0) == 0) part = value(line);
    }
    if (!implementer.empty()) return "implementer " + implementer + " part " + part;
#if defined(__aarch64__)
    return "aarch64";
#else
    return "unknown";
#endif
}

}  // namespace

const CpuFeatures& cpu_features() {
    static const CpuFeatures features = detect();
    return features;
}

std::vector<std::string> cpu_feature_names() {
    const CpuFeatures& f = cpu_features();
    std::vector<std::string> names;
    const std::pair<bool, const char*> all[] = {
        {f.avx2, "avx2"},         {f.fma, "fma"},           {f.f16c, "f16c"},
        {f.avx512f, "avx512f"},   {f.avx512bw, "avx512bw"}, {f.avx512vl, "avx512vl"},
        {f.avx512vnni, "avx512vnni"}, {f.avx512bf16, "avx512bf16"}, {f.neon, "neon"},
        {f.fp16, "fp16"},         {f.dotprod, "dotprod"},
    };
    for (const auto& [present, name] : all) {
        if (present) names.emplace_back(name);
    }
    return names;
}

const std::string& cpu_model() {
    static const std::string model = detect_model();
    return model;
}

}  // namespace colibri::kernels
