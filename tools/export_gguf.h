// .bin → GGUF, so that llama.cpp runs exactly the weights a .bin holds (benchmarks on the same bytes, and a way
// out for users): every tensor in its own type (q4_K's nibbles back in ggml's order; the other block types are
// ggml's already), routed experts stacked as llama.cpp keeps them, llama's q/k rows re-permuted, the
// hyper-parameters under llama.cpp's keys for the family (tools/gguf_names.h has the tensor names). The file has
// no vocabulary (tokenizer.ggml.model "none" with <arch>.vocab_size): llama.cpp loads it for benchmarks and
// token ids; `colibri convert` imports it back to the same tensors. With placeholder_vocab it has a stand-in
// vocabulary instead (a BPE of pieces "<ID>", no real merges), for llama.cpp programs that print the tokens they
// make, such as llama-server, driven with token ids (tools/programs/serve_bench.cpp).
#pragma once
#include <string>

#include "engine/base/status.h"

namespace colibri::tools {

// Writes `bin_path` (a .bin) as a GGUF file at out_path; nothing is left there on failure.
Status export_gguf(const std::string& bin_path, const std::string& out_path, bool placeholder_vocab = false);

}  // namespace colibri::tools
