#!/usr/bin/env bash
# Writes the benchmark model of docs/PERFORMANCE.md: one deterministic random Mixtral-shaped MoE
# (colibri-make-model --preset bench) in Hugging Face format, converted by colibri to .bin in f16, q8_0 and
# q4_k, and, when a llama.cpp tree is given, by llama.cpp's own tools to GGUF from the same weights: f16
# (convert_hf_to_gguf.py), Q8_0 and a pure Q4_K (llama-quantize --pure: every tensor Q4_K, as colibri's q4_k;
# the embedding stays Q4_K too) plus the usual Q4_K_M.
#
# usage: bench/scripts/make-bench-models.sh BUILD_DIR OUT_DIR [LLAMA_CPP_DIR LLAMA_QUANTIZE]
#   BUILD_DIR       colibri build tree (bin/colibri, bin/colibri-make-model)
#   OUT_DIR         where hf/, bench-*.bin and bench-*.gguf go (about 9 GB in all)
#   LLAMA_CPP_DIR   a llama.cpp source tree (convert_hf_to_gguf.py, gguf-py)
#   LLAMA_QUANTIZE  llama-quantize built from it
# The GGUF side needs /usr/bin/python3 with Debian's python3-numpy, python3-sentencepiece, python3-torch,
# python3-regex, python3-yaml and python3-tqdm (the converter runs unchanged with stand-ins, tests/generators/gguf_testdata).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build="$(cd "$1" && pwd)"
out="$2"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

if [ ! -f "$out/hf/model.safetensors" ]; then
  "$build/bin/colibri-make-model" --preset bench -o "$out/hf"
fi
for type in f16 q8_0 q4_k; do
  [ -f "$out/bench-$type.bin" ] || "$build/bin/colibri" convert "$out/hf" -o "$out/bench-$type.bin" --type "$type"
done

[ $# -ge 4 ] || { echo "wrote $out (no llama.cpp given: no GGUF files)"; exit 0; }
llama="$(cd "$3" && pwd)"
quantize="$4"
py=/usr/bin/python3
# llama.cpp's converter needs a vocabulary: the small SentencePiece model of tests/generators/gguf_testdata, padded by
# the converter to the model's 32000 ids. It goes into a side directory so the .bin files above do not
# depend on it.
gguf_src="$out/hf-gguf"
mkdir -p "$gguf_src"
if [ ! -f "$gguf_src/tokenizer.model" ]; then
  "$py" "$repo/tests/generators/gguf_testdata/make_sentencepiece.py" "$out/spm" "$repo/tests/data/tokenizer/qwen3_parity.json"
  cp "$out/spm/tokenizer.model" "$gguf_src/"
fi
for f in config.json generation_config.json model.safetensors; do ln -sf "$out/hf/$f" "$gguf_src/$f"; done
[ -f "$out/bench-f16.gguf" ] ||
  "$py" "$repo/tests/generators/gguf_testdata/run_llama_converter.py" "$llama" -- "$gguf_src" --outtype f16 --outfile "$out/bench-f16.gguf"
[ -f "$out/bench-q8_0.gguf" ] || "$quantize" "$out/bench-f16.gguf" "$out/bench-q8_0.gguf" Q8_0
[ -f "$out/bench-q4_k.gguf" ] || "$quantize" --pure "$out/bench-f16.gguf" "$out/bench-q4_k.gguf" Q4_K
[ -f "$out/bench-q4_k_m.gguf" ] || "$quantize" "$out/bench-f16.gguf" "$out/bench-q4_k_m.gguf" Q4_K_M
echo "wrote $out"
