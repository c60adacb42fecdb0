// What the CPU is and which instruction-set extensions it (and the OS) lets the kernels use.
#pragma once
#include <string>
#include <vector>

namespace colibri::kernels {

struct CpuFeatures {
    bool avx2 = false, fma = false, f16c = false;
    bool avx512f = false, avx512bw = false, avx512vl = false, avx512vnni = false, avx512bf16 = false;
    bool neon = false, fp16 = false, dotprod = false;
    bool amd = false;  // CPUID vendor "AuthenticAMD" (cache behaviour differs: q4_K's prefetch hint, kernels/avx512)
};

const CpuFeatures& cpu_features();                  // detected once
std::vector<std::string> cpu_feature_names();       // the ones present, lower case ("avx2", "avx512f", ...)
const std::string& cpu_model();                     // e.g. "Intel(R) Xeon(R) Processor"; never empty

}  // namespace colibri::kernels
