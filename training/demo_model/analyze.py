#!/usr/bin/env python3
"""Measurements of the demo model for docs/DEMO_MODEL.md, all through the engine's CLI (never PyTorch).

    python3 training/demo_model/analyze.py --colibri build/bin/colibri --out /tmp/demo-analysis

1. Skills: `colibri eval` on the held-out dialogues for f32, q8_0 and q4_k conversions of the model.
2. Quantisation: `colibri compare` (teacher-forced top-1 agreement, KL) of q8_0 and q4_k against f32 over the
   held-out dialogues with the f32 model's own replies.
3. Routing specialisation: `colibri route` over the same dialogues; per layer, the mutual information between a
   token's class (digit, letter, punctuation, space, special) and the expert it is sent to, against a random
   model of the same shape (`colibri-make-model`, same tokenizer).
Only the standard library: runs wherever the CLI does.
"""
from __future__ import annotations

import argparse
import collections
import json
import math
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "resources" / "demo_model"
CLASSES = ["digit", "letter", "punctuation", "space", "special"]


def run(cmd: list[str]) -> str:
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"analyze: {' '.join(cmd[:3])}...: {r.stderr.strip()}")
    return r.stdout


def byte_decoder() -> dict[str, int]:
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def token_classes(tokenizer_dir: Path) -> dict[int, str]:
    """Each id's class from its text: special tokens, then digits, letters, whitespace, the rest punctuation."""
    tj = json.loads((tokenizer_dir / "tokenizer.json").read_text())
    dec = byte_decoder()
    out = {}
    for piece, i in tj["model"]["vocab"].items():
        text = bytes(dec[c] for c in piece).decode("utf-8", errors="replace")
        core = text.strip()
        if not core:
            out[i] = "space"
        elif any(c.isdigit() for c in core):
            out[i] = "digit"
        elif any(c.isalpha() for c in core):
            out[i] = "letter"
        else:
            out[i] = "punctuation"
    for t in tj["added_tokens"]:
        out[t["id"]] = "special"
    return out


def dialogues(eval_json: dict) -> list[str]:
    """The held-out conversations with the model's own replies, in the chat template's form."""
    return [f"<|im_start|>user\n{r['prompt']}<|im_end|>\n<|im_start|>assistant\n{r['reply']}<|im_end|>\n"
            for r in eval_json["replies"]]


def chunks(texts: list[str], max_chars: int = 800) -> list[str]:
    """Dialogues joined into runs of at most max_chars (at >= 2 characters a token, well inside the context)."""
    out, cur = [], ""
    for t in texts:
        if cur and len(cur) + len(t) > max_chars:
            out.append(cur)
            cur = ""
        cur += t
    return out + [cur] if cur else out


def mutual_information(pairs: list[tuple[str, int]]) -> tuple[float, float]:
    """I(class; expert) in bits and the same divided by H(class) (the share of the class's entropy explained)."""
    n = len(pairs)
    joint = collections.Counter(pairs)
    pc = collections.Counter(c for c, _ in pairs)
    pe = collections.Counter(e for _, e in pairs)
    mi = sum(k / n * math.log2((k / n) / ((pc[c] / n) * (pe[e] / n))) for (c, e), k in joint.items())
    hc = -sum(k / n * math.log2(k / n) for k in pc.values())
    return mi, mi / hc if hc > 0 else 0.0


def routing(colibri: str, model: Path, texts: list[str], classes: dict[int, str]) -> dict:
    """Per layer: MI of class vs top-1 expert, and each class's expert shares (top-1)."""
    per_layer: dict[int, list[tuple[str, int]]] = collections.defaultdict(list)
    for text in texts:
        route = json.loads(run([colibri, "route", "-m", str(model), "--prompt", text, "--json"]))
        ids = route["tokens"]  # route tokenizes the text itself and says which ids it routed
        for layer in route["layers"]:
            for tok, experts in zip(ids, layer["experts"]):
                per_layer[layer["layer"]].append((classes[tok], experts[0]))
    out = {"layers": []}
    for l in sorted(per_layer):
        mi, share = mutual_information(per_layer[l])
        by_class = {}
        for c in CLASSES:
            cnt = collections.Counter(e for cc, e in per_layer[l] if cc == c)
            total = sum(cnt.values())
            if total:
                by_class[c] = {"tokens": total, "top_experts": [[e, round(k / total, 3)] for e, k in cnt.most_common(3)]}
        out["layers"].append({"layer": l, "tokens": len(per_layer[l]), "mi_bits": mi, "mi_share": share,
                              "by_class": by_class})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--colibri", default=str(REPO / "build" / "bin" / "colibri"))
    ap.add_argument("--make-model", default=str(REPO / "build" / "bin" / "colibri-make-model"))
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    colibri = args.colibri
    heldout = DEMO / "heldout.jsonl"

    models = {}
    for t in ("f32", "q8_0", "q4_k"):
        models[t] = out / f"demo-{t}.bin"
        run([colibri, "convert", str(DEMO), "-o", str(models[t]), "--type", t, "-q"])
    report: dict = {"skills": {}, "quantisation": {}, "routing": {}}
    evals = {}
    for t, path in models.items():
        evals[t] = json.loads(run([colibri, "eval", "-m", str(path), "--dialogues", str(heldout), "--json"]))
        report["skills"][t] = evals[t]["skills"]
        (out / f"eval-{t}.json").write_text(json.dumps(evals[t], indent=1))

    texts = chunks(dialogues(evals["f32"]))
    for t in ("q8_0", "q4_k"):
        agree = positions = 0
        kl_sum = kl_max = 0.0
        for text in texts:
            c = json.loads(run([colibri, "compare", "-m", str(models[t]), "--baseline", str(models["f32"]),
                                "--prompt", text, "--json"]))
            agree += c["top1_agree"]
            positions += c["positions"]
            kl_sum += c["mean_kl"] * c["positions"]
            kl_max = max(kl_max, c["max_kl"])
        report["quantisation"][t] = {"positions": positions, "top1_agreement": agree / positions,
                                     "mean_kl": kl_sum / positions, "max_kl": kl_max,
                                     "bytes": models[t].stat().st_size}
    report["quantisation"]["f32_bytes"] = models["f32"].stat().st_size

    classes = token_classes(DEMO)
    random_dir = out / "random-hf"
    cfg = json.loads((DEMO / "config.json").read_text())
    run([args.make_model, "-o", str(random_dir), "--family", "mixtral", "--vocab", str(cfg["vocab_size"]),
         "--hidden", str(cfg["hidden_size"]), "--layers", str(cfg["num_hidden_layers"]),
         "--heads", str(cfg["num_attention_heads"]), "--kv-heads", str(cfg["num_key_value_heads"]),
         "--experts", str(cfg["num_local_experts"]), "--top-k", str(cfg["num_experts_per_tok"]),
         "--ffn", str(cfg["intermediate_size"]), "--tied", "--seed", "18", "--tokenizer", str(DEMO)])
    random_bin = out / "random.bin"
    run([colibri, "convert", str(random_dir), "-o", str(random_bin), "--type", "f32", "-q"])
    route_texts = texts
    report["routing"]["trained"] = routing(colibri, models["f32"], route_texts, classes)
    report["routing"]["random"] = routing(colibri, random_bin, route_texts, classes)
    (out / "report.json").write_text(json.dumps(report, indent=1))

    print("skill accuracy (held-out):")
    for t, skills in report["skills"].items():
        print(f"  {t:5s} " + "  ".join(f"{s['skill']} {100 * s['accuracy']:.1f}% (stopped {s['stopped']}/{s['cases']})"
                                       for s in skills))
    for t in ("q8_0", "q4_k"):
        q = report["quantisation"][t]
        print(f"{t}: top-1 agreement {100 * q['top1_agreement']:.2f}% over {q['positions']} positions, "
              f"mean KL {q['mean_kl']:.3g}, max KL {q['max_kl']:.3g}")
    print("routing: MI(token class; top-1 expert) per layer, bits (share of H(class)):")
    for kind in ("trained", "random"):
        print(f"  {kind:7s} " + "  ".join(f"L{r['layer']} {r['mi_bits']:.3f} ({100 * r['mi_share']:.0f}%)"
                                         for r in report["routing"][kind]["layers"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
