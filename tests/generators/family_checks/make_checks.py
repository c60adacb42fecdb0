#!/usr/bin/python3
"""Independent expected outputs for what the shared transformers references do not cover.

../shared/reference/hf covers qwen3_moe, gpt_oss, deepseek_v3 and glm4_moe with one configuration each. Real
checkpoints also use: DeepSeek YaRN with mscale / mscale_all_dim (V3, R1, Kimi-K2), DeepSeek-V2-Lite's MLA
without a low-rank q path, Qwen3's mlp_only_layers (dense layers among MoE ones), GLM-4.5's q/k norm and group-
limited routing with more than one group, and gpt-oss beyond the span its sliding layers' KV ring holds. For
each such case this script writes a small random Hugging Face
model (config.json in the hub's spelling, model.safetensors) and what a float64 numpy implementation of
transformers v5.2.0's modeling code computes on it (modeling_qwen3_moe.py, modeling_glm4_moe.py,
modeling_deepseek_v3.py and modeling_rope_utils.py's _compute_yarn_parameters, read, not imported: nothing here
uses transformers, torch or colibri): the logits at every position, each MoE layer's experts / weights / selection
scores per token, and greedy continuations.

It first runs the same implementation on the shared references of those families (../shared/reference/hf,
made by transformers itself) and stops unless it reproduces their logits, experts and weights.

Usage: /usr/bin/python3 tests/generators/family_checks/make_checks.py tests/data/families
Needs Debian's python3-numpy only. Deterministic (numpy's PCG64 with fixed seeds); the files it writes are
committed, so the tests need nothing but them.
"""
import json
import math
import os
import struct
import sys

import numpy as np


# ---------------------------------------------------------------------------------------------- safetensors
def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name], dtype=np.float32)
        b = a.tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


# ---------------------------------------------------------------------------------------------- building blocks
def rms_norm(x, w, eps):
    return w * (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps))


def silu(x):
    return x / (1.0 + np.exp(-x))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def softmax(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def swiglu(x, gate, up, down):
    return (silu(x @ gate.T) * (x @ up.T)) @ down.T


def rope_parameters(cfg):
    """Either spelling read as transformers' standardize_rope_params does: theta, type and the YaRN keys."""
    if cfg.get("rope_parameters") is not None:
        return dict(cfg["rope_parameters"])
    p = dict(cfg.get("rope_scaling") or {})
    p.setdefault("rope_type", p.get("type", "default"))
    p.setdefault("rope_theta", cfg.get("rope_theta", 10000.0))
    if cfg.get("partial_rotary_factor") is not None:
        p["partial_rotary_factor"] = cfg["partial_rotary_factor"]
    if p["rope_type"] == "yarn":
        p.setdefault("original_max_position_embeddings", cfg["max_position_embeddings"])
    return p


def get_mscale(scale, mscale=1.0):
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def inv_freq_and_factor(cfg, dim):
    """compute_default_rope_parameters / _compute_yarn_parameters, in float64."""
    p = rope_parameters(cfg)
    base = p["rope_theta"]
    pos_freqs = base ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    if p["rope_type"] == "default":
        return 1.0 / pos_freqs, 1.0
    assert p["rope_type"] == "yarn"
    factor = p["factor"]
    mscale, mscale_all = p.get("mscale"), p.get("mscale_all_dim")
    if p.get("attention_factor") is not None:
        attention = p["attention_factor"]
    elif mscale and mscale_all:
        attention = get_mscale(factor, mscale) / get_mscale(factor, mscale_all)
    else:
        attention = get_mscale(factor)
    beta_fast, beta_slow = p.get("beta_fast") or 32, p.get("beta_slow") or 1
    orig = p["original_max_position_embeddings"]

    def correction_dim(rot):
        return (dim * math.log(orig / (rot * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if p.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0, 1)
    extrapolation = 1 - ramp
    inv = (1.0 / (factor * pos_freqs)) * (1 - extrapolation) + (1.0 / pos_freqs) * extrapolation
    return inv, attention


def cos_sin(cfg, dim, positions):
    inv, attention = inv_freq_and_factor(cfg, dim)
    freqs = np.outer(positions, inv)
    emb = np.concatenate([freqs, freqs], axis=-1)
    return np.cos(emb) * attention, np.sin(emb) * attention


def rotate_half(x):
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], axis=-1)


def causal_attention(q, k, v, scale):
    """q [h, t, d], k/v [h, t, d]: eager attention with a causal mask."""
    t = q.shape[1]
    s = (q @ np.swapaxes(k, 1, 2)) * scale
    s = s + np.triu(np.full((t, t), -np.inf), 1)
    return softmax(s) @ v


def partial_rope_attention(model, pre, q, k, v, rot):
    """q [heads, t, hd], k / v [kv_heads, t, hd]: RoPE on halves of the first `rot` dims, GQA, o_proj (GLM-4.5, MiniMax-M2)."""
    nh, t, hd = q.shape
    cos, sin = cos_sin(model.cfg, rot, np.arange(t))
    q = np.concatenate([q[..., :rot] * cos + rotate_half(q[..., :rot]) * sin, q[..., rot:]], axis=-1)
    k = np.concatenate([k[..., :rot] * cos + rotate_half(k[..., :rot]) * sin, k[..., rot:]], axis=-1)
    rep = nh // k.shape[0]
    o = causal_attention(q, np.repeat(k, rep, axis=0), np.repeat(v, rep, axis=0), hd ** -0.5)
    return o.transpose(1, 0, 2).reshape(t, nh * hd) @ model.w(pre + "o_proj.weight").T


# ---------------------------------------------------------------------------------------------- routers
def route_softmax(logits, k, norm):
    p = softmax(logits)
    idx = np.argsort(-p, kind="stable")[:k]
    w = p[idx]
    if norm:
        w = w / w.sum()
    return idx, w, p[idx]


def route_sigmoid(logits, bias, k, n_group, topk_group, norm, scaling, eps=1e-20):
    s = sigmoid(logits)
    choice = s + bias
    n = len(logits)
    if n_group > 1:
        g = choice.reshape(n_group, n // n_group)
        group_scores = np.sort(g, axis=1)[:, ::-1][:, :2].sum(axis=1)
        keep = np.argsort(-group_scores, kind="stable")[:topk_group]
        mask = np.zeros(n_group, dtype=bool)
        mask[keep] = True
        masked = np.where(np.repeat(mask, n // n_group), choice, 0.0)
    else:
        masked = choice
    idx = np.argsort(-masked, kind="stable")[:k]
    w = s[idx]
    if norm:
        w = w / (w.sum() + eps)
    w = w * scaling
    order = sorted(range(k), key=lambda j: (-w[j], idx[j]))  # descending weight, ties by id
    idx, w = idx[order], w[order]
    return idx, w, masked[idx]


# ---------------------------------------------------------------------------------------------- the models
class Model:
    def __init__(self, cfg, W):
        self.cfg, self.W = cfg, W

    def w(self, name):
        return self.W[name]

    def forward(self, ids):
        cfg = self.cfg
        x = self.w("model.embed_tokens.weight")[ids]
        routes = []
        for l in range(cfg["num_hidden_layers"]):
            pre = f"model.layers.{l}."
            h = rms_norm(x, self.w(pre + "input_layernorm.weight"), cfg["rms_norm_eps"])
            x = x + self.attention(l, h)
            h = rms_norm(x, self.w(pre + "post_attention_layernorm.weight"), cfg["rms_norm_eps"])
            out, route = self.mlp(l, h)
            if route is not None:
                routes.append(route)
            x = x + out
        x = rms_norm(x, self.w("model.norm.weight"), cfg["rms_norm_eps"])
        return x @ self.w("lm_head.weight").T, routes

    def dense(self, pre, h):
        return swiglu(h, self.w(pre + "gate_proj.weight"), self.w(pre + "up_proj.weight"), self.w(pre + "down_proj.weight"))

    def experts(self, pre, h, chosen):
        out = np.zeros_like(h)
        for t in range(h.shape[0]):
            for e, wt in zip(*chosen[t][:2]):
                out[t] += wt * self.dense(pre + f"experts.{e}.", h[t:t + 1])[0]
        return out


class Qwen3Moe(Model):
    def attention(self, l, h):
        cfg, pre = self.cfg, f"model.layers.{l}.self_attn."
        nh, nkv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
        t = h.shape[0]
        q = (h @ self.w(pre + "q_proj.weight").T).reshape(t, nh, hd)
        k = (h @ self.w(pre + "k_proj.weight").T).reshape(t, nkv, hd)
        v = (h @ self.w(pre + "v_proj.weight").T).reshape(t, nkv, hd)
        q = rms_norm(q, self.w(pre + "q_norm.weight"), cfg["rms_norm_eps"]).transpose(1, 0, 2)
        k = rms_norm(k, self.w(pre + "k_norm.weight"), cfg["rms_norm_eps"]).transpose(1, 0, 2)
        v = v.transpose(1, 0, 2)
        cos, sin = cos_sin(cfg, hd, np.arange(t))
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        rep = nh // nkv
        o = causal_attention(q, np.repeat(k, rep, axis=0), np.repeat(v, rep, axis=0), hd ** -0.5)
        return o.transpose(1, 0, 2).reshape(t, nh * hd) @ self.w(pre + "o_proj.weight").T

    def mlp(self, l, h):
        cfg, pre = self.cfg, f"model.layers.{l}.mlp."
        moe = l not in cfg["mlp_only_layers"] and (l + 1) % cfg["decoder_sparse_step"] == 0
        if not moe:
            return self.dense(pre, h), None
        logits = h @ self.w(pre + "gate.weight").T
        chosen = [route_softmax(logits[t], cfg["num_experts_per_tok"], cfg["norm_topk_prob"]) for t in range(h.shape[0])]
        return self.experts(pre, h, chosen), (l, chosen)


class SigmoidMoe(Model):
    """The MoE block deepseek_v3 and glm4_moe share (DeepseekV3MoE / Glm4MoeMoE)."""

    def mlp(self, l, h):
        cfg, pre = self.cfg, f"model.layers.{l}.mlp."
        if l < cfg["first_k_dense_replace"]:
            return self.dense(pre, h), None
        return self.moe(l, h)

    def moe(self, l, h):
        cfg, pre = self.cfg, f"model.layers.{l}.mlp."
        logits = h @ self.w(pre + "gate.weight").T
        bias = self.w(pre + "gate.e_score_correction_bias")
        chosen = [route_sigmoid(logits[t], bias, cfg["num_experts_per_tok"], cfg["n_group"], cfg["topk_group"],
                                cfg["norm_topk_prob"], cfg["routed_scaling_factor"]) for t in range(h.shape[0])]
        return self.experts(pre, h, chosen) + self.dense(pre + "shared_experts.", h), (l, chosen)


class Glm4Moe(SigmoidMoe):
    def attention(self, l, h):
        cfg, pre = self.cfg, f"model.layers.{l}.self_attn."
        nh, nkv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
        t = h.shape[0]
        q = (h @ self.w(pre + "q_proj.weight").T + self.w(pre + "q_proj.bias")).reshape(t, nh, hd)
        k = (h @ self.w(pre + "k_proj.weight").T + self.w(pre + "k_proj.bias")).reshape(t, nkv, hd)
        v = (h @ self.w(pre + "v_proj.weight").T + self.w(pre + "v_proj.bias")).reshape(t, nkv, hd)
        if cfg["use_qk_norm"]:
            q = rms_norm(q, self.w(pre + "q_norm.weight"), cfg["rms_norm_eps"])
            k = rms_norm(k, self.w(pre + "k_norm.weight"), cfg["rms_norm_eps"])
        q, k, v = q.transpose(1, 0, 2), k.transpose(1, 0, 2), v.transpose(1, 0, 2)
        return partial_rope_attention(self, pre, q, k, v, int(hd * cfg["partial_rotary_factor"]))


class DeepseekV3(SigmoidMoe):
    def attention(self, l, h):
        cfg, pre = self.cfg, f"model.layers.{l}.self_attn."
        nh, nope, rope, vd = cfg["num_attention_heads"], cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
        lora = cfg["kv_lora_rank"]
        qk = nope + rope
        t = h.shape[0]
        if cfg.get("q_lora_rank") is None:
            q = h @ self.w(pre + "q_proj.weight").T
        else:
            qa = rms_norm(h @ self.w(pre + "q_a_proj.weight").T, self.w(pre + "q_a_layernorm.weight"), 1e-6)
            q = qa @ self.w(pre + "q_b_proj.weight").T
        q = q.reshape(t, nh, qk).transpose(1, 0, 2)
        q_pass, q_rot = q[..., :nope], q[..., nope:]
        ckv = h @ self.w(pre + "kv_a_proj_with_mqa.weight").T
        k_pass, k_rot = ckv[:, :lora], ckv[:, lora:]
        kv = rms_norm(k_pass, self.w(pre + "kv_a_layernorm.weight"), 1e-6) @ self.w(pre + "kv_b_proj.weight").T
        kv = kv.reshape(t, nh, nope + vd).transpose(1, 0, 2)
        k_pass, v = kv[..., :nope], kv[..., nope:]
        k_rot = k_rot.reshape(1, t, rope)
        cos, sin = cos_sin(cfg, rope, np.arange(t))
        if cfg.get("rope_interleave", True):  # adjacent pairs de-interleaved into halves, then rotate_half
            q_rot = q_rot.reshape(nh, t, rope // 2, 2).swapaxes(-1, -2).reshape(nh, t, rope)
            k_rot = k_rot.reshape(1, t, rope // 2, 2).swapaxes(-1, -2).reshape(1, t, rope)
        q_rot = q_rot * cos + rotate_half(q_rot) * sin
        k_rot = k_rot * cos + rotate_half(k_rot) * sin
        q = np.concatenate([q_pass, q_rot], axis=-1)
        k = np.concatenate([k_pass, np.repeat(k_rot, nh, axis=0)], axis=-1)
        scale = qk ** -0.5
        p = rope_parameters(cfg)
        if p["rope_type"] != "default" and p.get("mscale_all_dim"):
            m = get_mscale(p["factor"], p["mscale_all_dim"])
            scale = scale * m * m
        o = causal_attention(q, k, v, scale)
        return o.transpose(1, 0, 2).reshape(t, nh * vd) @ self.w(pre + "o_proj.weight").T


class Glm4MoeLite(DeepseekV3):
    """modeling_glm4_moe_lite.py: DeepSeek-V3's attention, GLM-4.5's MoE; dense layers from mlp_layer_types only (by
    default layer 0: transformers 5.2 does not read first_k_dense_replace)."""

    def mlp(self, l, h):
        cfg = self.cfg
        types = cfg.get("mlp_layer_types") or ["dense"] + ["sparse"] * (cfg["num_hidden_layers"] - 1)
        if types[l] == "dense":
            return self.dense(f"model.layers.{l}.mlp.", h), None
        return self.moe(l, h)


class MiniMaxM2(Model):
    """modeling_minimax_m2.py: q_norm / k_norm over the whole projection before the head split, partial RoPE on
    halves (rotary_dim of the hub config, which transformers 5.2 reads as rope_parameters' partial_rotary_factor),
    sigmoid routing with the correction bias for selection, renormalised without an epsilon, no shared expert."""

    def attention(self, l, h):
        cfg, pre = self.cfg, f"model.layers.{l}.self_attn."
        nh, nkv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
        t = h.shape[0]
        q = rms_norm(h @ self.w(pre + "q_proj.weight").T, self.w(pre + "q_norm.weight"), cfg["rms_norm_eps"])
        k = rms_norm(h @ self.w(pre + "k_proj.weight").T, self.w(pre + "k_norm.weight"), cfg["rms_norm_eps"])
        v = h @ self.w(pre + "v_proj.weight").T
        q, k, v = (a.reshape(t, n, hd).transpose(1, 0, 2) for a, n in ((q, nh), (k, nkv), (v, nkv)))
        rot = cfg["rotary_dim"] if "rotary_dim" in cfg else int(hd * rope_parameters(cfg).get("partial_rotary_factor", 1.0))
        return partial_rope_attention(self, pre, q, k, v, rot)

    def mlp(self, l, h):
        cfg, pre = self.cfg, f"model.layers.{l}.block_sparse_moe."
        logits = h @ self.w(pre + "gate.weight").T
        bias = self.w(pre + "e_score_correction_bias")
        chosen = [route_sigmoid(logits[t], bias, cfg["num_experts_per_tok"], 1, 1, True, 1.0, eps=0.0) for t in range(h.shape[0])]
        out = np.zeros_like(h)
        for t in range(h.shape[0]):
            for e, wt in zip(*chosen[t][:2]):
                x = pre + f"experts.{e}."
                out[t] += wt * swiglu(h[t:t + 1], self.w(x + "w1.weight"), self.w(x + "w3.weight"), self.w(x + "w2.weight"))[0]
        return out, (l, chosen)


class GptOss(Model):
    """modeling_gpt_oss.py: sinks, sliding layers, YaRN on halves, router bias with a softmax over the selected
    logits, stacked experts with interleaved gate/up, biases and the clamped activation."""

    def attention(self, l, h):
        cfg, pre = self.cfg, f"model.layers.{l}.self_attn."
        nh, nkv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
        t = h.shape[0]
        q = (h @ self.w(pre + "q_proj.weight").T + self.w(pre + "q_proj.bias")).reshape(t, nh, hd).transpose(1, 0, 2)
        k = (h @ self.w(pre + "k_proj.weight").T + self.w(pre + "k_proj.bias")).reshape(t, nkv, hd).transpose(1, 0, 2)
        v = (h @ self.w(pre + "v_proj.weight").T + self.w(pre + "v_proj.bias")).reshape(t, nkv, hd).transpose(1, 0, 2)
        cos, sin = cos_sin(cfg, hd, np.arange(t))
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        rep = nh // nkv
        k, v = np.repeat(k, rep, axis=0), np.repeat(v, rep, axis=0)
        s = (q @ np.swapaxes(k, 1, 2)) * hd ** -0.5
        i, j = np.arange(t)[:, None], np.arange(t)[None, :]
        allowed = j <= i
        if cfg["layer_types"][l] == "sliding_attention":
            allowed &= j > i - cfg["sliding_window"]
        s = np.where(allowed, s, -np.inf)
        sinks = np.broadcast_to(self.w(pre + "sinks")[:, None, None], (nh, t, 1))
        p = softmax(np.concatenate([s, sinks], axis=-1))[..., :-1]
        return (p @ v).transpose(1, 0, 2).reshape(t, nh * hd) @ self.w(pre + "o_proj.weight").T + self.w(pre + "o_proj.bias")

    def mlp(self, l, h):
        cfg, pre = self.cfg, f"model.layers.{l}.mlp."
        logits = h @ self.w(pre + "router.weight").T + self.w(pre + "router.bias")
        k, limit = cfg["num_experts_per_tok"], cfg["swiglu_limit"]
        gate_up, gate_up_b = self.w(pre + "experts.gate_up_proj"), self.w(pre + "experts.gate_up_proj_bias")
        down, down_b = self.w(pre + "experts.down_proj"), self.w(pre + "experts.down_proj_bias")
        out, chosen = np.zeros_like(h), []
        for t in range(h.shape[0]):
            idx = np.argsort(-logits[t], kind="stable")[:k]
            w = softmax(logits[t][idx])
            chosen.append((idx, w, logits[t][idx]))
            for e, wt in zip(idx, w):
                gu = h[t] @ gate_up[e] + gate_up_b[e]
                g, u = np.minimum(gu[::2], limit), np.clip(gu[1::2], -limit, limit)
                out[t] += wt * (((u + 1) * g * sigmoid(g * 1.702)) @ down[e] + down_b[e])
        return out, (l, chosen)


# ---------------------------------------------------------------------------------------------- random weights
def init_weights(cfg, family, rng):
    H, V = cfg["hidden_size"], cfg["vocab_size"]
    W = {}

    def normal(*shape):
        return rng.normal(0.0, 0.1, size=shape)

    def norm_weight(n):  # 1 + 0.1·N, as the shared references do, so that norms matter
        return 1.0 + 0.1 * rng.normal(size=n)

    def ffn(pre, inter):
        W[pre + "gate_proj.weight"], W[pre + "up_proj.weight"], W[pre + "down_proj.weight"] = normal(inter, H), normal(inter, H), normal(H, inter)

    W["model.embed_tokens.weight"] = normal(V, H)
    W["lm_head.weight"] = normal(V, H)
    W["model.norm.weight"] = norm_weight(H)
    for l in range(cfg["num_hidden_layers"]):
        pre = f"model.layers.{l}."
        W[pre + "input_layernorm.weight"] = norm_weight(H)
        W[pre + "post_attention_layernorm.weight"] = norm_weight(H)
        a = pre + "self_attn."
        nh = cfg["num_attention_heads"]
        if family == "gpt_oss":
            hd, nkv, E, F = cfg["head_dim"], cfg["num_key_value_heads"], cfg["num_local_experts"], cfg["intermediate_size"]
            for name, rows in (("q", nh * hd), ("k", nkv * hd), ("v", nkv * hd)):
                W[a + name + "_proj.weight"], W[a + name + "_proj.bias"] = normal(rows, H), 0.05 * rng.normal(size=rows)
            W[a + "o_proj.weight"], W[a + "o_proj.bias"] = normal(H, nh * hd), 0.05 * rng.normal(size=H)
            W[a + "sinks"] = 0.05 * rng.normal(size=nh)
            m = pre + "mlp."
            W[m + "router.weight"], W[m + "router.bias"] = normal(E, H), 0.05 * rng.normal(size=E)
            W[m + "experts.gate_up_proj"], W[m + "experts.gate_up_proj_bias"] = normal(E, H, 2 * F), 0.05 * rng.normal(size=(E, 2 * F))
            W[m + "experts.down_proj"], W[m + "experts.down_proj_bias"] = normal(E, F, H), 0.05 * rng.normal(size=(E, H))
            continue
        if family == "minimax_m2":
            hd, nkv, E, F = cfg["head_dim"], cfg["num_key_value_heads"], cfg["num_local_experts"], cfg["intermediate_size"]
            W[a + "q_proj.weight"], W[a + "k_proj.weight"] = normal(nh * hd, H), normal(nkv * hd, H)
            W[a + "v_proj.weight"], W[a + "o_proj.weight"] = normal(nkv * hd, H), normal(H, nh * hd)
            W[a + "q_norm.weight"], W[a + "k_norm.weight"] = norm_weight(nh * hd), norm_weight(nkv * hd)
            m = pre + "block_sparse_moe."
            W[m + "gate.weight"], W[m + "e_score_correction_bias"] = normal(E, H), 0.05 * rng.normal(size=E)
            for e in range(E):
                W[m + f"experts.{e}.w1.weight"], W[m + f"experts.{e}.w3.weight"] = normal(F, H), normal(F, H)
                W[m + f"experts.{e}.w2.weight"] = normal(H, F)
            continue
        if family in ("deepseek_v3", "glm4_moe_lite"):
            nope, rope, vd, lora = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"], cfg["kv_lora_rank"]
            if cfg.get("q_lora_rank") is None:
                W[a + "q_proj.weight"] = normal(nh * (nope + rope), H)
            else:
                W[a + "q_a_proj.weight"] = normal(cfg["q_lora_rank"], H)
                W[a + "q_a_layernorm.weight"] = norm_weight(cfg["q_lora_rank"])
                W[a + "q_b_proj.weight"] = normal(nh * (nope + rope), cfg["q_lora_rank"])
            W[a + "kv_a_proj_with_mqa.weight"] = normal(lora + rope, H)
            W[a + "kv_a_layernorm.weight"] = norm_weight(lora)
            W[a + "kv_b_proj.weight"] = normal(nh * (nope + vd), lora)
            W[a + "o_proj.weight"] = normal(H, nh * vd)
        else:
            hd, nkv = cfg["head_dim"], cfg["num_key_value_heads"]
            W[a + "q_proj.weight"], W[a + "k_proj.weight"] = normal(nh * hd, H), normal(nkv * hd, H)
            W[a + "v_proj.weight"], W[a + "o_proj.weight"] = normal(nkv * hd, H), normal(H, nh * hd)
            if family == "glm4_moe":
                W[a + "q_proj.bias"], W[a + "k_proj.bias"], W[a + "v_proj.bias"] = 0.05 * rng.normal(size=nh * hd), 0.05 * rng.normal(size=nkv * hd), 0.05 * rng.normal(size=nkv * hd)
            if family == "qwen3_moe" or cfg.get("use_qk_norm"):
                W[a + "q_norm.weight"], W[a + "k_norm.weight"] = norm_weight(hd), norm_weight(hd)
        m = pre + "mlp."
        if family == "qwen3_moe":
            moe = l not in cfg["mlp_only_layers"] and (l + 1) % cfg["decoder_sparse_step"] == 0
            n_exp = cfg["num_experts"]
        elif family == "glm4_moe_lite":
            moe = (cfg.get("mlp_layer_types") or ["dense"] + ["sparse"] * (cfg["num_hidden_layers"] - 1))[l] == "sparse"
            n_exp = cfg["n_routed_experts"]
        else:
            moe = l >= cfg["first_k_dense_replace"]
            n_exp = cfg["n_routed_experts"]
        if not moe:
            ffn(m, cfg["intermediate_size"])
            continue
        W[m + "gate.weight"] = normal(n_exp, H)
        for e in range(n_exp):
            ffn(m + f"experts.{e}.", cfg["moe_intermediate_size"])
        if family != "qwen3_moe":
            W[m + "gate.e_score_correction_bias"] = 0.05 * rng.normal(size=n_exp)
            ffn(m + "shared_experts.", cfg["moe_intermediate_size"] * cfg["n_shared_experts"])
    return {k: v.astype(np.float32) for k, v in W.items()}


# ---------------------------------------------------------------------------------------------- cases
BASE = {"hidden_size": 64, "vocab_size": 256, "rms_norm_eps": 1e-6, "bos_token_id": 1, "eos_token_id": 2,
        "tie_word_embeddings": False, "max_position_embeddings": 4096}

CASES = {
    # gpt-oss over 140 positions with a window of 8: the sliding layers' KV ring (window + a chunk of 64, whole
    # blocks: 128 slots) wraps; YaRN with truncate (the shared reference has it off).
    "gpt_oss_long_window": ("gpt_oss", GptOss, dict(
        BASE, model_type="gpt_oss", architectures=["GptOssForCausalLM"], num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, num_local_experts=8, num_experts_per_tok=2, experts_per_token=2,
        intermediate_size=32, layer_types=["sliding_attention", "full_attention"], sliding_window=8, swiglu_limit=7.0,
        attention_bias=True, rms_norm_eps=1e-5, max_position_embeddings=131072, rope_theta=150000.0,
        rope_scaling={"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096, "beta_fast": 32.0,
                      "beta_slow": 1.0, "truncate": True}, positions=140)),
    # Qwen3-MoE with a dense layer among MoE ones (mlp_only_layers), weights not renormalised.
    "qwen3_moe_mlp_only": ("qwen3_moe", Qwen3Moe, dict(
        BASE, model_type="qwen3_moe", architectures=["Qwen3MoeForCausalLM"], num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, head_dim=32, num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
        intermediate_size=96, decoder_sparse_step=1, mlp_only_layers=[1], norm_topk_prob=False, rope_theta=1000000.0,
        rope_scaling=None)),
    # GLM-4.5 with use_qk_norm, two expert groups of which one is kept, partial rotary, q/k/v biases.
    "glm4_moe_qk_norm_groups": ("glm4_moe", Glm4Moe, dict(
        BASE, model_type="glm4_moe", architectures=["Glm4MoeForCausalLM"], num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, partial_rotary_factor=0.5, attention_bias=True, use_qk_norm=True,
        n_routed_experts=16, num_experts_per_tok=4, n_group=2, topk_group=1, n_shared_experts=1, moe_intermediate_size=32,
        intermediate_size=96, first_k_dense_replace=1, norm_topk_prob=True, routed_scaling_factor=1.8,
        rope_theta=1000000.0, rope_scaling=None)),
    # DeepSeek-V3 / R1's YaRN (factor 40, mscale = mscale_all_dim = 1: the softmax scale grows by mscale²) with
    # the low-rank q path and 8 groups of which 4 are kept.
    "deepseek_v3_yarn": ("deepseek_v3", DeepseekV3, dict(
        BASE, model_type="deepseek_v3", architectures=["DeepseekV3ForCausalLM"], num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=4, q_lora_rank=48, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
        head_dim=8, n_routed_experts=16, num_experts_per_tok=4, n_group=8, topk_group=4, n_shared_experts=1,
        moe_intermediate_size=32, intermediate_size=96, first_k_dense_replace=1, norm_topk_prob=True,
        routed_scaling_factor=2.5, rope_interleave=True, rope_theta=10000.0, max_position_embeddings=163840,
        rope_scaling={"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096, "beta_fast": 32,
                      "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0})),
    # DeepSeek-V2-Lite's shape of MLA: no q LoRA (one q projection); its YaRN (mscale = mscale_all_dim = 0.707).
    "deepseek_v2lite_no_q_lora": ("deepseek_v3", DeepseekV3, dict(
        BASE, model_type="deepseek_v3", architectures=["DeepseekV3ForCausalLM"], num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=4, q_lora_rank=None, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
        head_dim=8, n_routed_experts=16, num_experts_per_tok=4, n_group=1, topk_group=1, n_shared_experts=2,
        moe_intermediate_size=32, intermediate_size=96, first_k_dense_replace=1, norm_topk_prob=False,
        routed_scaling_factor=1.0, rope_interleave=True, rope_theta=10000.0, max_position_embeddings=163840,
        rope_scaling={"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096, "beta_fast": 32,
                      "beta_slow": 1, "mscale": 0.707, "mscale_all_dim": 0.707})),
    # Kimi-K2's YaRN numbers with mscale != mscale_all_dim, so that the cos/sin attention factor is not 1.
    "deepseek_v3_yarn_attention_factor": ("deepseek_v3", DeepseekV3, dict(
        BASE, model_type="deepseek_v3", architectures=["DeepseekV3ForCausalLM"], num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=4, q_lora_rank=48, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
        head_dim=8, n_routed_experts=16, num_experts_per_tok=4, n_group=1, topk_group=1, n_shared_experts=1,
        moe_intermediate_size=32, intermediate_size=96, first_k_dense_replace=1, norm_topk_prob=True,
        routed_scaling_factor=2.827, rope_interleave=True, rope_theta=50000.0, max_position_embeddings=131072,
        rope_scaling={"type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096, "beta_fast": 1.0,
                      "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 0.5})),
    # MiniMax-M2 (hub spelling: rotary_dim, remote-code switches) over 150 positions, three prompt chunks: 8 q / 2 KV
    # heads, q/k norms over the whole 128- / 32-wide projections, 32 experts top-8 as in the real model (256 top-8).
    "minimax_m2_long": ("minimax_m2", MiniMaxM2, dict(
        BASE, model_type="minimax_m2", architectures=["MiniMaxM2ForCausalLM"], num_hidden_layers=2, num_attention_heads=8,
        num_key_value_heads=2, head_dim=16, rotary_dim=8, num_local_experts=32, num_experts_per_tok=8, intermediate_size=16,
        attn_type_list=[1, 1], use_qk_norm=True, qk_norm_type="per_layer", scoring_func="sigmoid", use_routing_bias=True,
        shared_intermediate_size=0, rope_theta=5000000.0, rope_scaling=None, max_position_embeddings=196608, positions=140)),
    # GLM-4.7-Flash in transformers 5's spelling (rope_parameters, mlp_layer_types with a dense layer between MoE
    # ones) over 150 positions, weights not renormalised (1.8·σ), rms eps 1e-5 beside MLA's own 1e-6.
    "glm4_moe_lite_long": ("glm4_moe_lite", Glm4MoeLite, dict(
        BASE, model_type="glm4_moe_lite", architectures=["Glm4MoeLiteForCausalLM"], num_hidden_layers=4,
        mlp_layer_types=["dense", "sparse", "dense", "sparse"], num_attention_heads=4, num_key_value_heads=4,
        q_lora_rank=48, kv_lora_rank=32, qk_nope_head_dim=24, qk_rope_head_dim=8, v_head_dim=32, head_dim=8,
        n_routed_experts=16, num_experts_per_tok=4, n_group=1, topk_group=1, n_shared_experts=1, moe_intermediate_size=32,
        intermediate_size=96, norm_topk_prob=False, routed_scaling_factor=1.8, rope_interleave=True, rms_norm_eps=1e-5,
        rope_parameters={"rope_theta": 1000000.0, "rope_type": "default"}, max_position_embeddings=202752, positions=150)),
    # Kimi-K2's layout scaled down in width only: DeepSeek-V3 with 384 experts top-8, 64 heads, one group
    # (n_group = topk_group = 1), routed_scaling_factor 2.827, one shared expert, a dense first layer and Kimi-K2's
    # YaRN (factor 32, beta 1 / 1, mscale = mscale_all_dim = 1, theta 50000), over 80 positions (two chunks).
    "kimi_k2_shape": ("deepseek_v3", DeepseekV3, dict(
        BASE, model_type="deepseek_v3", architectures=["DeepseekV3ForCausalLM"], hidden_size=32, num_hidden_layers=2,
        num_attention_heads=64, num_key_value_heads=64, q_lora_rank=48, kv_lora_rank=32, qk_nope_head_dim=16,
        qk_rope_head_dim=8, v_head_dim=16, head_dim=8, n_routed_experts=384, num_experts_per_tok=8, n_group=1,
        topk_group=1, n_shared_experts=1, moe_intermediate_size=16, intermediate_size=64, first_k_dense_replace=1,
        norm_topk_prob=True, routed_scaling_factor=2.827, rope_interleave=True, rope_theta=50000.0,
        max_position_embeddings=131072, topk_method="noaux_tc", scoring_func="sigmoid",
        rope_scaling={"type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096, "beta_fast": 1.0,
                      "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0}, positions=80)),
}


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        assert t["dtype"] == "F32"
        a, b = t["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype="<f4").reshape(t["shape"]).astype(np.float64)
    return out


def validate(reference_dir):
    """This implementation against the shared transformers references of the same families (their hub configs)."""
    ok = True
    for family, cls in (("qwen3_moe", Qwen3Moe), ("glm4_moe", Glm4Moe), ("deepseek_v3", DeepseekV3), ("gpt_oss", GptOss),
                        ("minimax_m2", MiniMaxM2), ("glm4_moe_lite", Glm4MoeLite)):
        d = os.path.join(reference_dir, family)
        cfg = json.load(open(os.path.join(d, "model", "config.hub_style.json")))
        cfg.setdefault("mlp_only_layers", [])
        cfg.setdefault("decoder_sparse_step", 1)
        cfg.setdefault("use_qk_norm", False)
        model = cls(cfg, read_safetensors(os.path.join(d, "model", "model.safetensors")))
        ids = json.load(open(os.path.join(d, "ref", "input_ids.json")))
        logits, routes = model.forward(np.array(ids))
        want = np.fromfile(os.path.join(d, "ref", "logits.f32"), dtype="<f4").reshape(logits.shape)
        ref = json.load(open(os.path.join(d, "ref", "router.json")))["layers"]
        same = all([list(map(int, c[0])) for c in chosen] == r["experts"] for (l, chosen), r in zip(routes, ref))
        dw = max(abs(float(w) - rw) for (l, chosen), r in zip(routes, ref) for c, rws in zip(chosen, r["weights"])
                 for w, rw in zip(c[1], rws))
        diff = float(np.max(np.abs(logits - want)))
        print("%s: max |dlogit| %.3g, experts %s, max |dweight| %.3g" % (family, diff, "identical" if same else "DIFFER", dw))
        ok &= diff < 1e-4 and same and dw < 1e-5
    return ok


def main(out_dir):
    # Seeds by position: the first cases in name order, the later ones after them, so that adding a case changes no file.
    later = ["minimax_m2_long", "glm4_moe_lite_long", "kimi_k2_shape"]
    names = sorted(n for n in CASES if n not in later) + later
    for seed, name in enumerate(names):
        family, cls, cfg = CASES[name]
        rng = np.random.default_rng(1000 + seed)
        W = init_weights(cfg, family, rng)
        d = os.path.join(out_dir, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f, indent=1)
        write_safetensors(os.path.join(d, "model.safetensors"), W)
        model = cls(cfg, {k: v.astype(np.float64) for k, v in W.items()})
        ids = [1] + [int(i) for i in rng.integers(3, cfg["vocab_size"], size=cfg.get("positions", 12) - 1)]
        logits, routes = model.forward(np.array(ids))
        logits.astype("<f4").tofile(os.path.join(d, "logits.f32"))
        # Greedy continuation without a cache: the whole sequence again for every new token.
        seq, greedy_margin = list(ids), float("inf")
        for _ in range(8):
            last = model.forward(np.array(seq))[0][-1]
            top = np.sort(last)[-2:]
            greedy_margin = min(greedy_margin, float(top[1] - top[0]))
            seq.append(int(np.argmax(last)))
        if greedy_margin < 1e-3:
            sys.exit("%s: a greedy step has a top-1 margin of %.3g, too close to call" % (name, greedy_margin))
        layers = [{"layer": l, "experts": [[int(e) for e in c[0]] for c in chosen],
                   "weights": [[float(w) for w in c[1]] for c in chosen],
                   "selection_scores": [[float(s) for s in c[2]] for c in chosen]} for l, chosen in routes]
        top2 = np.sort(logits, axis=-1)[:, -2:]
        with open(os.path.join(d, "expected.json"), "w") as f:
            json.dump({"family": family, "input_ids": ids, "new_ids": seq[len(ids):], "layers": layers,
                       "min_top1_margin": float(np.min(top2[:, 1] - top2[:, 0])), "min_greedy_margin": greedy_margin,
                       "made_by": "tests/generators/family_checks/make_checks.py (float64 numpy from transformers v5.2.0's modeling code)"},
                      f, indent=1)
        print(name, "written; min top-1 margin %.3g" % float(np.min(top2[:, 1] - top2[:, 0])))


if __name__ == "__main__":
    # First the implementation against transformers' own outputs on the shared references; only then the data.
    here = os.path.dirname(os.path.abspath(__file__))
    if not validate(os.path.join(here, "..", "..", "..", "..", "shared", "reference", "hf")):
        sys.exit("the numpy implementation does not reproduce the transformers references")
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/data/families")
