#!/usr/bin/env python3
"""colibri bench vs llama-bench on the benchmark model (docs/PERFORMANCE.md), side by side in one session.

usage: tools/bench_vs_llama.py COLIBRI LLAMA_BENCH MODEL_DIR [--threads 2] [--rounds 2] [--reps 5] [--depth 0]
                              [--types f16,q8_0,q4_k]

MODEL_DIR holds bench-<type>.bin and bench-<type>.gguf (tools/make-bench-models.sh). For every type the two
programs run alternately, `rounds` times each, with -p 128 -n 128 -d DEPTH and `reps` repetitions per run (both
time the prompt and the decode from a context of DEPTH tokens, llama-bench's -d; 0 = an empty context); every
repetition's tokens/s is kept (llama-bench's samples_ts, colibri's "samples") and the table shows medians over
all of them; a second table has each one's best repetition. The roofline uses colibri's bandwidth measurement of the same run and colibri's count of
bytes per decoded token (the GGUF files hold the same tensors in the same types). colibri's fraction of the
roofline is the median over all its decode repetitions of each one against the bandwidth measured either side
of it (`colibri bench`'s roofline_fraction_samples); llama.cpp's, which has no bandwidth pass beside its
repetitions, is its median decode against the median of colibri's runs' bandwidth, and the third table gives
colibri's by the same pooled method for comparison.
"""
import argparse
import json
import statistics
import subprocess
import sys


def run_json(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("colibri")
    ap.add_argument("llama_bench")
    ap.add_argument("model_dir")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--decode", type=int, default=128)
    ap.add_argument("--depth", type=int, default=0)
    ap.add_argument("--types", default="f16,q8_0,q4_k")
    a = ap.parse_args()

    rows = []
    for t in a.types.split(","):
        binf, gguf = f"{a.model_dir}/bench-{t}.bin", f"{a.model_dir}/bench-{t}.gguf"
        s = {"c_pp": [], "c_tg": [], "l_pp": [], "l_tg": [], "bw": [], "c_frac": [], "c_pair": [], "bytes": None}
        for r in range(a.rounds):
            lcmd = [a.llama_bench, "-m", gguf, "-t", str(a.threads), "-p", str(a.prompt), "-n", str(a.decode),
                    "-d", str(a.depth), "-r", str(a.reps), "-o", "json"]
            ccmd = [a.colibri, "bench", "-m", binf, "-t", str(a.threads), "-p", str(a.prompt), "-n", str(a.decode),
                    "--depth", str(a.depth), "--reps", str(a.reps), "--json"]
            # Alternate which one goes first, so drift in the machine's load hits both alike.
            for cmd in ([lcmd, ccmd] if r % 2 == 0 else [ccmd, lcmd]):
                print(" ".join(cmd), file=sys.stderr, flush=True)
                j = run_json(cmd)
                if cmd is lcmd:
                    for test in j:
                        key = "l_pp" if test["n_prompt"] > 0 else "l_tg"
                        s[key] += test["samples_ts"]
                else:
                    for key, field in (("c_pp", "prompt_tokens_per_s"), ("c_tg", "decode_tokens_per_s")):
                        s[key] += j[field]["samples"]
                    s["bw"].append(j["bandwidth_gb_per_s"]["median"])
                    s["c_frac"].append(j["roofline_fraction"])  # the run's own: the median of its repetitions
                    s["c_pair"] += j["roofline_fraction_samples"]  # each repetition against the passes beside it
                    s["bytes"] = j["bytes_per_token"]
        med = {k: statistics.median(v) for k, v in s.items() if isinstance(v, list)}
        best = {k: max(v) for k, v in s.items() if isinstance(v, list)}
        roof = med["bw"] * 1e9 / s["bytes"]
        rows.append((t, med, roof, s, best))

    print(f"| type | colibri decode tok/s | llama.cpp decode tok/s | decode ratio | colibri prompt tok/s | "
          f"llama.cpp prompt tok/s | prompt ratio | MB/token | bandwidth GB/s | roofline tok/s | colibri % roofline | "
          f"llama.cpp % roofline |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for t, m, roof, s, _ in rows:
        print(f"| {t} | {m['c_tg']:.2f} | {m['l_tg']:.2f} | {m['c_tg'] / m['l_tg']:.2f}x | {m['c_pp']:.2f} | "
              f"{m['l_pp']:.2f} | {m['c_pp'] / m['l_pp']:.2f}x | {s['bytes'] / 1e6:.1f} | {m['bw']:.2f} | {roof:.1f} | "
              f"{100 * m['c_pair']:.1f}% | {100 * m['l_tg'] / roof:.1f}% |")
    # The best repetition of each: on a shared machine, the closest to what an idle one would give.
    print()
    print("| type | best colibri decode | best llama.cpp decode | ratio | best colibri prompt | best llama.cpp prompt | ratio |")
    print("|---|---|---|---|---|---|---|")
    for t, _, _, _, b in rows:
        print(f"| {t} | {b['c_tg']:.2f} | {b['l_tg']:.2f} | {b['c_tg'] / b['l_tg']:.2f}x | {b['c_pp']:.2f} | {b['l_pp']:.2f} | "
              f"{b['c_pp'] / b['l_pp']:.2f}x |")
    # Each colibri run on its own (the fraction `colibri bench` reports: the median of its repetitions, each
    # against the bandwidth measured either side of it): shows a run that fell into a slow stretch of the host.
    # The last column pools first, as llama.cpp's fraction must: all decode samples' median against the median
    # of the runs' bandwidths.
    print()
    print("| type | colibri runs: bandwidth GB/s | colibri runs: % roofline | colibri % roofline, pooled |")
    print("|---|---|---|---|")
    for t, m, roof, s, _ in rows:
        print(f"| {t} | {' / '.join(f'{b:.1f}' for b in s['bw'])} | {' / '.join(f'{100 * f:.1f}%' for f in s['c_frac'])} | "
              f"{100 * m['c_tg'] / roof:.1f}% |")
    print(json.dumps({t: {k: v for k, v in s.items()} for t, _, _, s, _ in rows}), file=sys.stderr)


if __name__ == "__main__":
    main()
