#!/usr/bin/env python3
"""colibri bench vs llama-bench on the benchmark model (docs/PERFORMANCE.md), side by side in one session.

usage: bench/scripts/bench_vs_llama.py COLIBRI LLAMA_BENCH MODEL_DIR [--threads 2] [--rounds 2] [--reps 5] [--depth 0]
                              [--types f16,q8_0,q4_k] [--ttft N]

MODEL_DIR holds bench-<type>.bin and bench-<type>.gguf (bench/scripts/make-bench-models.sh). For every type the two
programs run alternately, `rounds` times each, with -p 128 -n 128 -d DEPTH and `reps` repetitions per run (both
time the prompt and the decode from a context of DEPTH tokens, llama-bench's -d; 0 = an empty context); every
repetition's tokens/s is kept (llama-bench's samples_ts, colibri's "samples") and the table shows medians over
all of them; a second table has each one's best repetition. The roofline uses colibri's bandwidth measurement of the same run and colibri's count of
bytes per decoded token (the GGUF files hold the same tensors in the same types). colibri's fraction of the
roofline is the median over all its decode repetitions of each one against the bandwidth measured either side
of it (`colibri bench`'s roofline_fraction_samples); llama.cpp's, which has no bandwidth pass beside its
repetitions, is its median decode against the median of colibri's runs' bandwidth, and the third table gives
colibri's by the same pooled method for comparison.

Every run's peak resident set (the child's ru_maxrss) is kept: the last table gives each program's largest. With
--ttft N both also run N times (alternately) as a user would start them, and the table gives the median wall
time from process start to the first generated token of a prompt of --prompt random ids, with the file in the
page cache (loading, llama.cpp's repacking of weights, the prompt, one decode step):
`colibri generate -m X.bin -t T --tokens <ids> -n 1` and `llama-bench -m X.gguf -t T -p 0 -n 0 -pg P,1 -r 1
--no-warmup`. For a model larger than the page cache can hold twice (the real-size presets), name one type per
call, and --prewarm: each program's file is then read into the page cache before each of its runs, untimed,
so neither is timed reading the disk after the other's run has evicted its file.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def run_measured(cmd):
    """Runs cmd to completion; returns (stdout, wall seconds, peak RSS in bytes) of that one child.

    The child is reaped with os.wait4 rather than Popen.wait so that its own rusage (ru_maxrss, KiB on Linux) is
    read, not the maximum over every child this script has had."""
    start = time.monotonic()
    with tempfile.TemporaryFile(mode="w+") as err:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
        out = p.stdout.read()
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.monotonic() - start
        p.returncode = os.waitstatus_to_exitcode(status)
        p.stdout.close()
        if p.returncode != 0:
            err.seek(0)
            sys.exit(f"bench_vs_llama: {' '.join(cmd)} failed ({p.returncode}): {err.read().strip()[-500:]}")
    return out, wall, usage.ru_maxrss * 1024


def prewarm(path):
    """Reads the file through once so that it is in the page cache before a run (see --prewarm)."""
    with open(path, "rb", buffering=0) as f:
        while f.read(64 << 20):
            pass


def run_json(cmd, rss=None):
    out, _, peak = run_measured(cmd)
    if rss is not None:
        rss.append(peak)
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
    ap.add_argument("--ttft", type=int, default=0, help="also time N starts to the first token each")
    ap.add_argument("--prewarm", action="store_true",
                    help="read each program's file into the page cache before each of its runs (untimed)")
    a = ap.parse_args()

    rows = []
    for t in a.types.split(","):
        binf, gguf = f"{a.model_dir}/bench-{t}.bin", f"{a.model_dir}/bench-{t}.gguf"
        s = {"c_pp": [], "c_tg": [], "l_pp": [], "l_tg": [], "bw": [], "c_frac": [], "c_pair": [], "bytes": None,
             "c_rss": [], "l_rss": [], "c_ttft": [], "l_ttft": []}
        for r in range(a.rounds):
            lcmd = [a.llama_bench, "-m", gguf, "-t", str(a.threads), "-p", str(a.prompt), "-n", str(a.decode),
                    "-d", str(a.depth), "-r", str(a.reps), "-o", "json"]
            ccmd = [a.colibri, "bench", "-m", binf, "-t", str(a.threads), "-p", str(a.prompt), "-n", str(a.decode),
                    "--depth", str(a.depth), "--reps", str(a.reps), "--json"]
            # Alternate which one goes first, so drift in the machine's load hits both alike.
            for cmd in ([lcmd, ccmd] if r % 2 == 0 else [ccmd, lcmd]):
                print(" ".join(cmd), file=sys.stderr, flush=True)
                if a.prewarm:
                    prewarm(gguf if cmd is lcmd else binf)
                j = run_json(cmd, s["l_rss"] if cmd is lcmd else s["c_rss"])
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
        ids = ",".join(str(1 + (i * 7919) % 1000) for i in range(a.prompt))
        for r in range(a.ttft):
            lcmd = [a.llama_bench, "-m", gguf, "-t", str(a.threads), "-p", "0", "-n", "0", "-pg", f"{a.prompt},1",
                    "-r", "1", "--no-warmup", "-o", "json"]
            ccmd = [a.colibri, "generate", "-m", binf, "-t", str(a.threads), "--tokens", ids, "-n", "1"]
            for cmd in ([lcmd, ccmd] if r % 2 == 0 else [ccmd, lcmd]):
                print(" ".join(c if len(c) < 100 else "<ids>" for c in cmd), file=sys.stderr, flush=True)
                if a.prewarm:
                    prewarm(gguf if cmd is lcmd else binf)
                _, wall, peak = run_measured(cmd)
                s["l_ttft" if cmd is lcmd else "c_ttft"].append(wall)
                s["l_rss" if cmd is lcmd else "c_rss"].append(peak)
        med = {k: statistics.median(v) for k, v in s.items() if isinstance(v, list) and v}
        best = {k: max(v) for k, v in s.items() if isinstance(v, list) and v}
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
    print()
    print("| type | colibri peak RSS GB | llama.cpp peak RSS GB | colibri first token s | llama.cpp first token s |")
    print("|---|---|---|---|---|")
    for t, m, _, s, b in rows:
        ttft = (f"{m['c_ttft']:.2f} | {m['l_ttft']:.2f}" if s["c_ttft"] else "- | -")
        print(f"| {t} | {b['c_rss'] / 1e9:.2f} | {b['l_rss'] / 1e9:.2f} | {ttft} |")
    print(json.dumps({t: {k: v for k, v in s.items()} for t, _, _, s, _ in rows}), file=sys.stderr)


if __name__ == "__main__":
    main()
