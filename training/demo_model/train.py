#!/usr/bin/env python3
"""Trains Colibri's demo model: corpus -> tokenizer -> a small Mixtral-style MoE -> a Hugging Face directory.

    nice python3 training/demo_model/train.py --work /tmp/demo-train        # about two hours on 2 cores
    python3 training/demo_model/train.py --work /tmp/demo-train --export-only   # re-export from the last checkpoint
    nice python3 training/demo_model/train.py --work /tmp/demo-tune --init-from resources/demo_model \
        --first-step 1250 --steps-short 100 --steps-long 0 --lr 4e-4 --warmup 10 --worked-from 0 --minus-share 0.65 \
        --data-seed 1918 --threads 2       # the shipped fine-tune of the exported model (docs/DEMO_MODEL.md)

A development tool (PyTorch from Debian's python3-torch), never a build or CI dependency: its output, the HF
directory, is committed under resources/demo_model/ and the build converts it. Every seed is fixed; training
resumes from WORK/checkpoint.pt when interrupted. docs/DEMO_MODEL.md describes the recipe and the results.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bpe  # noqa: E402
import corpus  # noqa: E402
import moe  # noqa: E402

SEED = 18


def render_chat(turns: list[tuple[str, str]]) -> list[tuple[str, bool]]:
    """The chat template's text as (segment, trained) pieces: user messages are context, not targets."""
    out = []
    for user, reply in turns:
        out.append(("<|im_start|>user\n", True))
        out.append((user, False))
        out.append(("<|im_end|>\n<|im_start|>assistant\n", True))
        out.append((reply + "<|im_end|>\n", True))
    return out


class Windows:
    """Training windows of length T+1 packed with whole documents separated by <|endoftext|>."""

    def __init__(self, source: corpus.DialogueSource, enc: bpe.Encoder, eot: int):
        self.source, self.enc, self.eot = source, enc, eot
        self.pending = None

    def _doc(self) -> tuple[list[int], list[int]]:
        d = self.source.document()
        segments = [(d["text"], True)] if "text" in d else render_chat(d["chat"])
        ids, mask = [], []
        for text, trained in segments:
            t = self.enc.encode(text)
            ids += t
            mask += [int(trained)] * len(t)
        return ids + [self.eot], mask + [1]

    def batch(self, B: int, T: int) -> tuple[torch.Tensor, torch.Tensor]:
        xs, ms = [], []
        for _ in range(B):
            ids, mask = [], []
            while True:
                doc = self.pending or self._doc()
                self.pending = None
                if len(doc[0]) > T + 1:
                    doc = (doc[0][:T + 1], doc[1][:T + 1])
                if len(ids) + len(doc[0]) > T + 1:
                    self.pending = doc
                    break
                ids += doc[0]
                mask += doc[1]
            pad = T + 1 - len(ids)
            xs.append(ids + [self.eot] * pad)
            ms.append(mask + [0] * pad)
        x = torch.tensor(xs, dtype=torch.long)
        m = torch.tensor(ms, dtype=torch.float32)
        return x, m


def lr_at(step: int, total: int, peak: float, warmup: int) -> float:
    if step < warmup:
        return peak * (step + 1) / warmup
    p = (step - warmup) / max(1, total - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, p))))


@torch.no_grad()
def greedy_reply(model: moe.MoeLM, enc: bpe.Encoder, prompt: str, max_new: int = 96) -> str:
    ids = enc.encode(f"<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n")
    end = enc.vocab["<|im_end|>"]
    out = []
    for _ in range(max_new):
        logits, _, _ = model(torch.tensor([ids + out]))
        nxt = int(logits[0, -1].argmax())
        if nxt == end:
            break
        out.append(nxt)
    return enc.decode(out)


def quick_eval(model, enc, tests: list[dict], per_skill: int = 20) -> dict[str, float]:
    model.eval()
    acc = {}
    for skill in ("arithmetic", "backwards", "compare", "weekday", "country"):
        chosen = [t for t in tests if t["skill"] == skill][:per_skill]
        ok = sum(corpus.check_reply(t, greedy_reply(model, enc, t["prompt"])) for t in chosen)
        acc[skill] = ok / max(1, len(chosen))
    model.train()
    return acc


def build_tokenizer(splits: corpus.Splits, out_dir: Path, max_len: int) -> bpe.Encoder:
    source = corpus.DialogueSource(splits, SEED + 1)
    texts = []
    for _ in range(60000):
        d = source.document()
        if "text" in d:
            texts.append(d["text"])
        else:
            for user, reply in d["chat"]:
                texts += ["user\n" + user, "assistant\n" + reply]
    texts += splits.fortunes + splits.words_train + [name for _, name in splits.countries]
    vocab, merges = bpe.train(texts, 4096)
    bpe.save(out_dir, vocab, merges, max_len)
    return bpe.load(out_dir)


def export(model: moe.MoeLM, enc: bpe.Encoder, work: Path, hf: Path) -> None:
    """config.json + model.safetensors (f16) + tokenizer; then reference outputs from the f16 weights."""
    c = model.c
    tensors = {k: v.to(torch.float16) for k, v in moe.hf_state_dict(model).items()}
    moe.save_safetensors(str(hf / "model.safetensors"), tensors, {"format": "pt"})
    (hf / "config.json").write_text(json.dumps(c.hf_config(), indent=2) + "\n")
    (hf / "generation_config.json").write_text(json.dumps(
        {"bos_token_id": c.bos_token_id, "eos_token_id": c.eos_token_id, "pad_token_id": c.pad_token_id,
         "do_sample": False, "transformers_version": "4.45.2"}, indent=2) + "\n")
    write_reference(c, enc, hf, work / "ref")


@torch.no_grad()
def write_reference(c: moe.MoeConfig, enc: bpe.Encoder, hf: Path, ref: Path) -> None:
    """The PyTorch forward pass on the exported (f16-rounded) weights in f32: the engine's parity target."""
    ref.mkdir(parents=True, exist_ok=True)
    model = moe.MoeLM(c)
    moe.load_hf_state_dict(model, {k: v.float() for k, v in moe.load_safetensors(str(hf / "model.safetensors")).items()})
    model.eval()
    text = ("<|im_start|>user\nWhat is 23 plus 45?<|im_end|>\n<|im_start|>assistant\n23 plus 45 is 68.<|im_end|>\n"
            "<|im_start|>user\nSpell garden backwards.<|im_end|>\n<|im_start|>assistant\n")
    ids = enc.encode(text)
    logits, router_logits, chosen = model(torch.tensor([ids]))
    (ref / "input_ids.json").write_text(json.dumps(ids) + "\n")
    logits[0].contiguous().numpy().astype("<f4").tofile(ref / "logits.f32")
    layers = []
    for l, rl in enumerate(router_logits):
        probs = torch.softmax(rl.float(), dim=-1)
        w, e = torch.topk(probs, c.num_experts_per_tok, dim=-1)
        w = w / w.sum(-1, keepdim=True)
        srt = torch.sort(probs, dim=-1, descending=True).values
        layers.append({"layer": l, "experts": e.tolist(), "weights": w.tolist(),
                       "margin": (srt[:, c.num_experts_per_tok - 1] - srt[:, c.num_experts_per_tok]).tolist()})
    (ref / "router.json").write_text(json.dumps({"layers": layers}) + "\n")
    new, seq = [], list(ids)
    for _ in range(16):
        lg, _, _ = model(torch.tensor([seq]))
        nxt = int(lg[0, -1].argmax())
        new.append(nxt)
        seq.append(nxt)
    (ref / "generate.json").write_text(json.dumps({"prompt_ids": ids, "new_ids": new}) + "\n")


def plot(log_path: Path, png: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = [json.loads(l) for l in log_path.read_text().splitlines() if l.strip()]
    steps = [r["step"] for r in rows if "loss" in r]
    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    ax[0].plot(steps, [r["loss"] for r in rows if "loss" in r], lw=0.8, label="cross-entropy (trained tokens)")
    ax[0].plot(steps, [r["aux"] for r in rows if "loss" in r], lw=0.8, label="load-balancing loss")
    for r in rows:  # where a fine-tune of the exported model began
        if "fine_tune_from" in r:
            for a in ax:
                a.axvline(r["first_step"], color="grey", ls="--", lw=0.8)
            ax[0].annotate("fine-tune", (r["first_step"], 7), xytext=(-58, 0), textcoords="offset points", color="grey")
    ax[0].set_xlabel("step")
    ax[0].set_ylabel("loss")
    ax[0].set_yscale("log")
    ax[0].grid(alpha=0.3)
    ax[0].legend()
    evals = [r for r in rows if "eval" in r]
    for skill in ("arithmetic", "backwards", "compare", "weekday", "country"):
        ax[1].plot([r["step"] for r in evals], [r["eval"][skill] for r in evals], marker="o", ms=3, label=skill)
    ax[1].set_xlabel("step")
    ax[1].set_ylabel("held-out accuracy (PyTorch, 20 per skill)")
    ax[1].set_ylim(-0.02, 1.02)
    ax[1].grid(alpha=0.3)
    ax[1].legend()
    fig.suptitle("Colibri demo model: training")
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", required=True, type=Path)
    ap.add_argument("--steps-short", type=int, default=2000, help="steps on 256-token windows, batch 32")
    ap.add_argument("--steps-long", type=int, default=250, help="then steps on 512-token windows, batch 16")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--worked-from", type=int, default=800,
                    help="from this step on, arithmetic replies are worked digit by digit (corpus.arith_worked_answer)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--init-from", type=Path,
                    help="fine-tune: start from this exported Hugging Face directory (its weights and tokenizer) "
                         "instead of a fresh initialisation, with the current self-description (corpus.ABOUT)")
    ap.add_argument("--first-step", type=int, default=0, help="fine-tune: the number of the step it continues after")
    ap.add_argument("--warmup", type=int, default=100, help="learning-rate warm-up steps")
    ap.add_argument("--data-seed", type=int, default=SEED, help="seed of the training data stream")
    ap.add_argument("--minus-share", type=float, help="share of subtractions among the sums (default: as drawn, half)")
    ap.add_argument("--export-only", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    work: Path = args.work
    hf = work / "hf"
    hf.mkdir(parents=True, exist_ok=True)

    splits = corpus.make_splits()
    tests = corpus.heldout_tests(splits)
    (work / "heldout.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tests))
    (work / "sources.json").write_text(json.dumps(corpus.SOURCES, indent=2) + "\n")
    if args.init_from and not (hf / "tokenizer.json").exists():
        for name in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(args.init_from / name, hf / name)
    if not (hf / "tokenizer.json").exists():
        t0 = time.time()
        enc = build_tokenizer(splits, hf, 512)
        print(f"tokenizer: {len(enc.vocab)} pieces in {time.time() - t0:.0f} s", flush=True)
    enc = bpe.load(hf)
    cfg = moe.MoeConfig(vocab_size=len(enc.vocab), num_hidden_layers=4, num_local_experts=16, intermediate_size=192,
                        bos_token_id=enc.vocab["<|endoftext|>"], eos_token_id=enc.vocab["<|im_end|>"],
                        pad_token_id=enc.vocab["<|endoftext|>"])
    torch.manual_seed(SEED)
    model = moe.MoeLM(cfg)
    model.init_weights(torch.Generator().manual_seed(SEED))
    if args.init_from:
        moe.load_hf_state_dict(model, {k: v.float() for k, v in moe.load_safetensors(str(args.init_from / "model.safetensors")).items()})
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    source = corpus.DialogueSource(splits, args.data_seed)
    # The first run trained the self-description of its time; a fine-tune teaches the current one.
    source.about = corpus.ABOUT if args.init_from else corpus.ABOUT_FIRST_RUN
    source.minus_share = args.minus_share
    windows = Windows(source, enc, enc.vocab["<|endoftext|>"])
    first = args.first_step
    total = first + args.steps_short + args.steps_long
    step, elapsed, cpu = first, 0.0, 0.0
    ckpt = work / "checkpoint.pt"
    log_path = work / "train_log.jsonl"
    if ckpt.exists():
        state = torch.load(ckpt)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        source.rng.setstate(state["source_rng"])
        windows.pending = state["pending"]
        torch.set_rng_state(state["torch_rng"])
        step, elapsed, cpu = state["step"], state["elapsed"], state["cpu"]
        print(f"resumed at step {step}", flush=True)
        if log_path.exists():
            # Rows written after the checkpoint are redone by this run; drop them so every step is logged once.
            kept = [r for r in log_path.read_text().splitlines() if r and json.loads(r).get("step", 0) <= step]
            log_path.write_text("".join(r + "\n" for r in kept))
        with open(log_path, "a") as log:
            # A resumed run may change the schedule (steps); the log says where and to what.
            log.write(json.dumps({"resumed_at": step, "steps_short": args.steps_short, "steps_long": args.steps_long,
                                  "threads": args.threads, "worked_from": args.worked_from}) + "\n")
    else:
        if log_path.exists():
            log_path.unlink()
        if args.init_from:
            with open(log_path, "a") as log:
                log.write(json.dumps({"fine_tune_from": str(args.init_from), "first_step": first,
                                      "steps": args.steps_short + args.steps_long, "lr": args.lr, "warmup": args.warmup,
                                      "data_seed": args.data_seed, "minus_share": args.minus_share,
                                      "threads": args.threads}) + "\n")

    def save_checkpoint():
        tmp = work / "checkpoint.pt.tmp"
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "source_rng": source.rng.getstate(),
                    "pending": windows.pending, "torch_rng": torch.get_rng_state(), "step": step,
                    "elapsed": elapsed, "cpu": cpu}, tmp)
        os.replace(tmp, ckpt)

    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params / 1e6:.2f} M parameters, {total} steps", flush=True)
    model.train()
    with open(log_path, "a") as log:
        while step < total and not args.export_only:
            t0, c0 = time.time(), time.process_time()
            B, T = (32, 256) if step < first + args.steps_short else (16, 512)
            source.worked_arithmetic = step >= args.worked_from
            x, m = windows.batch(B, T)
            lr = lr_at(step - first, total - first, args.lr, args.warmup)
            for g in opt.param_groups:
                g["lr"] = lr
            logits, router_logits, _ = model(x[:, :-1])
            ce = F.cross_entropy(logits.reshape(-1, cfg.vocab_size), x[:, 1:].reshape(-1), reduction="none")
            mask = m[:, 1:].reshape(-1)
            loss_ce = (ce * mask).sum() / mask.sum()
            aux = moe.load_balancing_loss(router_logits, cfg.num_experts_per_tok, cfg.num_local_experts)
            loss = loss_ce + 0.02 * aux
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            elapsed += time.time() - t0
            cpu += time.process_time() - c0
            row = {"step": step, "loss": round(loss_ce.item(), 5), "aux": round(aux.item(), 5), "lr": lr,
                   "tokens": int(mask.sum().item()), "T": T, "elapsed_s": round(elapsed, 1), "cpu_s": round(cpu, 1)}
            if step % 250 == 0 or step == total:
                row["eval"] = quick_eval(model, enc, tests)
            if step % 50 == 0 or step == total:
                save_checkpoint()
            log.write(json.dumps(row) + "\n")
            log.flush()
            if step % 25 == 0 or "eval" in row:
                print(json.dumps(row), flush=True)
    save_checkpoint()
    export(model, enc, work, hf)
    plot(log_path, work / "training.png")
    print(f"exported {hf} after {step} steps, {elapsed / 60:.1f} min wall, {cpu / 60:.1f} min CPU", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
