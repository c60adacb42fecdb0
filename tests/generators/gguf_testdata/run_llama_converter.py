#!/usr/bin/python3
"""Runs llama.cpp's own convert_hf_to_gguf.py unchanged, on Debian 12's Python packages.

usage: run_llama_converter.py LLAMA_CPP_DIR [--sentencepiece-vocab] -- CONVERTER_ARGS...

What this adds around the converter, and nothing else:
- `transformers` is the stand-in in ./standin (AutoConfig reads config.json; AutoTokenizer is a byte-level BPE).
- Debian's torch 1.13 predates the float8 dtypes that the converter names in a lookup table; they are aliased
  to torch.uint8 (the f32 checkpoints converted here contain no float8 tensor, so the alias is never used).
- --sentencepiece-vocab: the qwen2moe, qwen3moe, olmoe, gpt-oss, deepseek2, glm4moe and minimax-m2 converter classes normally
  write a byte-level vocabulary read through AutoTokenizer; with this flag they write the directory's
  tokenizer.model through the converter's own SentencePiece path (_set_vocab_sentencepiece, the one its llama and
  qwen2 classes use). Tensors and hyper-parameters are written exactly as without it.
"""
import runpy
import sys
from pathlib import Path

here = Path(__file__).resolve().parent
if len(sys.argv) < 3 or "--" not in sys.argv:
    sys.exit(__doc__)
llama_dir = Path(sys.argv[1]).resolve()
flags = sys.argv[2:sys.argv.index("--")]
converter_args = sys.argv[sys.argv.index("--") + 1:]

sys.path.insert(0, str(here / "standin"))
sys.path.insert(1, str(llama_dir))
sys.path.insert(2, str(llama_dir / "gguf-py"))

import torch  # noqa: E402

for name in ("float8_e4m3fn", "float8_e5m2"):
    if not hasattr(torch, name):
        setattr(torch, name, torch.uint8)

if "--sentencepiece-vocab" in flags:
    import conversion  # noqa: E402
    from conversion.deepseek import DeepseekV2Model  # noqa: E402
    from conversion.glm import Glm4MoeLiteModel, Glm4MoeModel  # noqa: E402
    from conversion.minimax import MiniMaxM2Model  # noqa: E402
    from conversion.gpt_oss import GptOssModel  # noqa: E402
    from conversion.olmo import OlmoeModel  # noqa: E402
    from conversion.qwen import Qwen2MoeModel  # noqa: E402

    # Qwen3MoeModel takes Qwen2MoeModel's set_vocab; deepseek_v3 is DeepseekV2Model; GLM-4.7-Flash's class is one of
    # DeepseekV2Model's with its own set_vocab.
    for cls in (Qwen2MoeModel, OlmoeModel, GptOssModel, DeepseekV2Model, Glm4MoeModel, Glm4MoeLiteModel, MiniMaxM2Model):
        cls.set_vocab = cls._set_vocab_sentencepiece

sys.argv = [str(llama_dir / "convert_hf_to_gguf.py")] + converter_args
runpy.run_path(str(llama_dir / "convert_hf_to_gguf.py"), run_name="__main__")
