"""The demo model in PyTorch: Mixtral's architecture as transformers' modeling_mixtral computes it.

RMSNorm in float32, rotary embeddings rotating halves, grouped-query attention with a causal mask, a router
whose softmax over all experts is cut to the top-k and renormalised, SwiGLU experts (w1 gate, w3 up, w2 down),
tied input and output embeddings. The experts are stored stacked for fast training and exported one tensor per
expert under Mixtral's names, so transformers' MixtralForCausalLM loads the exported directory as it is.
"""
from __future__ import annotations

import json
import math
import struct
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class MoeConfig:
    vocab_size: int = 4096
    hidden_size: int = 256
    num_hidden_layers: int = 6
    num_attention_heads: int = 8
    num_key_value_heads: int = 4
    num_local_experts: int = 16
    num_experts_per_tok: int = 2
    intermediate_size: int = 128
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-5
    max_position_embeddings: int = 512
    bos_token_id: int = 4093
    eos_token_id: int = 4095
    pad_token_id: int = 4093

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def hf_config(self) -> dict:
        c = asdict(self)
        c.update({"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_act": "silu",
                  "attention_dropout": 0.0, "initializer_range": 0.02, "output_router_logits": False,
                  "router_aux_loss_coef": 0.02, "router_jitter_noise": 0.0, "sliding_window": None,
                  "tie_word_embeddings": True, "torch_dtype": "float16", "use_cache": True,
                  "transformers_version": "4.45.2"})
        return c


class RMSNorm(nn.Module):
    def __init__(self, n: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class Attention(nn.Module):
    def __init__(self, c: MoeConfig):
        super().__init__()
        self.c = c
        d = c.head_dim
        self.q_proj = nn.Linear(c.hidden_size, c.num_attention_heads * d, bias=False)
        self.k_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * d, bias=False)
        self.v_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * d, bias=False)
        self.o_proj = nn.Linear(c.num_attention_heads * d, c.hidden_size, bias=False)

    def forward(self, x, cos, sin, mask):
        c, (B, T, _) = self.c, x.shape
        d = c.head_dim
        q = self.q_proj(x).view(B, T, c.num_attention_heads, d).transpose(1, 2)
        k = self.k_proj(x).view(B, T, c.num_key_value_heads, d).transpose(1, 2)
        v = self.v_proj(x).view(B, T, c.num_key_value_heads, d).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        # Grouped-query attention without repeating keys: the query heads that share a KV head are stacked along
        # the rows of one product (head h uses KV head h // rep, as transformers' repeat_kv has it).
        kvh = c.num_key_value_heads
        rep = c.num_attention_heads // kvh
        q = q.reshape(B * kvh, rep * T, d)
        k = k.reshape(B * kvh, T, d)
        v = v.reshape(B * kvh, T, d)
        scores = torch.baddbmm(mask.repeat(rep, 1), q, k.transpose(1, 2), alpha=1.0 / math.sqrt(d))
        p = torch.softmax(scores, dim=-1)
        out = torch.bmm(p, v).view(B, kvh, rep, T, d).permute(0, 3, 1, 2, 4).reshape(B, T, -1)
        return self.o_proj(out)


class SparseMoe(nn.Module):
    def __init__(self, c: MoeConfig):
        super().__init__()
        self.c = c
        E, H, I = c.num_local_experts, c.hidden_size, c.intermediate_size
        self.gate = nn.Linear(H, E, bias=False)
        self.w1 = nn.Parameter(torch.empty(E, I, H))  # gate_proj of each expert
        self.w3 = nn.Parameter(torch.empty(E, I, H))  # up_proj
        self.w2 = nn.Parameter(torch.empty(E, H, I))  # down_proj

    def forward(self, x):
        B, T, H = x.shape
        h = x.reshape(-1, H)
        logits = self.gate(h)
        probs = torch.softmax(logits, dim=-1, dtype=torch.float32)
        weights, chosen = torch.topk(probs, self.c.num_experts_per_tok, dim=-1)
        weights = (weights / weights.sum(dim=-1, keepdim=True)).to(h.dtype)
        out = torch.zeros_like(h)
        for e in range(self.c.num_local_experts):
            token, slot = torch.where(chosen == e)
            if token.numel() == 0:
                continue
            xe = h[token]
            ye = (F.silu(xe @ self.w1[e].t()) * (xe @ self.w3[e].t())) @ self.w2[e].t()
            out.index_add_(0, token, ye * weights[token, slot, None])
        return out.view(B, T, H), logits, chosen


class DecoderLayer(nn.Module):
    def __init__(self, c: MoeConfig):
        super().__init__()
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.block_sparse_moe = SparseMoe(c)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        y, logits, chosen = self.block_sparse_moe(self.post_attention_layernorm(x))
        return x + y, logits, chosen


class MoeLM(nn.Module):
    def __init__(self, c: MoeConfig):
        super().__init__()
        self.c = c
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(c) for _ in range(c.num_hidden_layers))
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        d = c.head_dim
        inv_freq = 1.0 / (c.rope_theta ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def init_weights(self, generator: torch.Generator) -> None:
        std = 0.02
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("layernorm.weight") or name == "norm.weight":
                    continue
                p.normal_(0.0, std, generator=generator)
                # Residual-branch outputs scaled down by depth (GPT-2's scheme) so the stream starts stable.
                if name.endswith("o_proj.weight") or name.endswith(".w2"):
                    p.mul_(1.0 / math.sqrt(2 * self.c.num_hidden_layers))

    def forward(self, ids):
        B, T = ids.shape
        pos = torch.arange(T, dtype=torch.float32)
        freqs = torch.outer(pos, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[None, None], emb.sin()[None, None]
        mask = torch.full((T, T), torch.finfo(torch.float32).min).triu(1)
        x = self.embed_tokens(ids)
        router_logits, chosen = [], []
        for layer in self.layers:
            x, logits, ch = layer(x, cos, sin, mask)
            router_logits.append(logits)
            chosen.append(ch)
        x = self.norm(x)
        return x @ self.embed_tokens.weight.t(), router_logits, chosen


def load_balancing_loss(router_logits: list[torch.Tensor], top_k: int, n_experts: int) -> torch.Tensor:
    """Switch Transformer's auxiliary loss as transformers computes it for Mixtral (all layers together)."""
    logits = torch.cat(router_logits, dim=0)
    probs = torch.softmax(logits, dim=-1)
    _, selected = torch.topk(probs, top_k, dim=-1)
    mask = F.one_hot(selected, n_experts).float()
    tokens_per_expert = mask.mean(dim=0)
    prob_per_expert = probs.mean(dim=0)
    return (tokens_per_expert * prob_per_expert.unsqueeze(0)).sum() * n_experts


# ------------------------------------------------------------------------------------------ export


def hf_state_dict(model: MoeLM) -> dict[str, torch.Tensor]:
    """Mixtral's tensor names; the tied lm_head is left out, as save_pretrained leaves it out."""
    out = {"model.embed_tokens.weight": model.embed_tokens.weight, "model.norm.weight": model.norm.weight}
    for l, layer in enumerate(model.layers):
        p = f"model.layers.{l}."
        out[p + "input_layernorm.weight"] = layer.input_layernorm.weight
        out[p + "post_attention_layernorm.weight"] = layer.post_attention_layernorm.weight
        for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
            out[p + f"self_attn.{n}.weight"] = getattr(layer.self_attn, n).weight
        moe = layer.block_sparse_moe
        out[p + "block_sparse_moe.gate.weight"] = moe.gate.weight
        for e in range(model.c.num_local_experts):
            for w in ("w1", "w2", "w3"):
                out[p + f"block_sparse_moe.experts.{e}.{w}.weight"] = getattr(moe, w)[e]
    return {k: v.detach().contiguous() for k, v in out.items()}


def load_hf_state_dict(model: MoeLM, tensors: dict[str, torch.Tensor]) -> None:
    with torch.no_grad():
        for name, p in model.named_parameters():
            pass
        own = hf_state_dict(model)
        for k in own:
            if k not in tensors:
                raise KeyError(f"missing tensor {k}")
        model.embed_tokens.weight.copy_(tensors["model.embed_tokens.weight"])
        model.norm.weight.copy_(tensors["model.norm.weight"])
        for l, layer in enumerate(model.layers):
            p = f"model.layers.{l}."
            layer.input_layernorm.weight.copy_(tensors[p + "input_layernorm.weight"])
            layer.post_attention_layernorm.weight.copy_(tensors[p + "post_attention_layernorm.weight"])
            for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
                getattr(layer.self_attn, n).weight.copy_(tensors[p + f"self_attn.{n}.weight"])
            moe = layer.block_sparse_moe
            moe.gate.weight.copy_(tensors[p + "block_sparse_moe.gate.weight"])
            for e in range(model.c.num_local_experts):
                for w in ("w1", "w2", "w3"):
                    getattr(moe, w)[e].copy_(tensors[p + f"block_sparse_moe.experts.{e}.{w}.weight"])


_DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}
_FROM = {v: k for k, v in _DTYPES.items()}


def save_safetensors(path: str, tensors: dict[str, torch.Tensor], metadata: dict | None = None) -> None:
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        raw = t.view(torch.uint8).numpy().tobytes() if t.dtype != torch.float32 else t.numpy().tobytes()
        header[name] = {"dtype": _DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * ((8 - len(head) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for b in blobs:
            f.write(b)


def load_safetensors(path: str) -> dict[str, torch.Tensor]:
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        t = torch.frombuffer(bytearray(data[a:b]), dtype=_FROM[info["dtype"]])
        out[name] = t.view(info["shape"]).clone()
    return out
