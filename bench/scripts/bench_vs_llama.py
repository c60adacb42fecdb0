#!/usr/bin/env python3
"""colibri bench vs llama-bench on the benchmark model (docs/PERFORMANCE.md), side by side in one session.

usage: bench/scripts/bench_vs_llama.py COLIBRI LLAMA_BENCH MODEL_DIR [--ik-bench IK_LLAMA_BENCH] [--threads 2]
                              [--rounds 2] [--reps 5] [--depth 0] [--types f16,q8_0,q4_k] [--ttft N]

MODEL_DIR holds bench-<type>.bin and bench-<type>.gguf (bench/scripts/make-bench-models.sh). For every type the two
programs run alternately, `rounds` times each (with --ik-bench, ik_llama.cpp's llama-bench as well, twice: `-fmoe 1`
and `-fmoe 1 -rtr 1`, its fused MoE with and without its run-time repacking into row-interleaved blocks), with -p 128 -n 128 -d DEPTH and `reps` repetitions per run (both
time the prompt and the decode from a context of DEPTH tokens, llama-bench's -d; 0 = an empty context; ik_llama.cpp's llama-bench has no -d: its decode at a depth is
`-gp DEPTH,N`, and its prompt is timed from an empty context); every
repetition's tokens/s is kept (llama-bench's samples_ts, colibri's "samples") and the table shows medians over
all of them; a second table has each one's best repetition. The roofline uses colibri's bandwidth measurement of the same run and colibri's count of
bytes per decoded token (the GGUF files hold the same tensors in the same types). colibri's fraction of the
roofline is the median over all its decode repetitions of each one against the bandwidth measured either side
of it (`colibri bench`'s roofline_fraction_samples); llama.cpp's, which has no bandwidth pass beside its
repetitions, is its median decode against the median of colibri's runs' bandwidth, and the third table gives
colibri's by the same pooled method for comparison.

Every run's peak resident set (the child's ru_maxrss) is kept: the last table gives each program's largest, over
the --ttft starts when there are any (`colibri bench` also holds its bandwidth probe's buffer). With
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


PROGRAMS_HELP = "llama.cpp, and with --ik-bench ik_llama.cpp -fmoe and ik_llama.cpp -fmoe -rtr"


def other_programs(a):
    """The llama-bench runs compared with colibri: (name, command before the per-type arguments, takes -d)."""
    progs = [("llama.cpp", [a.llama_bench], True)]
    if a.ik_bench:
        progs.append(("ik_llama.cpp -fmoe", [a.ik_bench, "-fmoe", "1"], False))
        progs.append(("ik_llama.cpp -fmoe -rtr", [a.ik_bench, "-fmoe", "1", "-rtr", "1"], False))
    return progs


def llama_bench_cmd(prog, gguf, a):
    name, base, has_depth = prog
    cmd = base + ["-m", gguf, "-t", str(a.threads), "-r", str(a.reps), "-o", "json"]
    if has_depth:
        return cmd + ["-p", str(a.prompt), "-n", str(a.decode), "-d", str(a.depth)]
    if a.depth == 0:
        return cmd + ["-p", str(a.prompt), "-n", str(a.decode)]
    return cmd + ["-p", str(a.prompt), "-n", "0", "-gp", f"{a.depth},{a.decode}"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("colibri")
    ap.add_argument("llama_bench")
    ap.add_argument("model_dir")
    ap.add_argument("--ik-bench", default="", help="ik_llama.cpp's llama-bench: also run it with -fmoe, and -fmoe -rtr")
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
    progs = other_programs(a)
    names = [p[0] for p in progs]

    rows = []
    for t in a.types.split(","):
        binf, gguf = f"{a.model_dir}/bench-{t}.bin", f"{a.model_dir}/bench-{t}.gguf"
        s = {"c_pp": [], "c_tg": [], "bw": [], "c_frac": [], "c_pair": [], "bytes": None, "c_rss": [], "c_ttft": [],
             "c_rss_start": []}
        o = {n: {"pp": [], "tg": [], "rss": [], "ttft": [], "rss_start": []} for n in names}
        for r in range(a.rounds):
            ccmd = [a.colibri, "bench", "-m", binf, "-t", str(a.threads), "-p", str(a.prompt), "-n", str(a.decode),
                    "--depth", str(a.depth), "--reps", str(a.reps), "--json"]
            runs = [(p[0], llama_bench_cmd(p, gguf, a)) for p in progs] + [("colibri", ccmd)]
            # Rotate the order every round, so drift in the machine's load hits every program alike.
            k = r % len(runs)
            for name, cmd in runs[k:] + runs[:k]:
                print(" ".join(cmd), file=sys.stderr, flush=True)
                if a.prewarm:
                    prewarm(binf if name == "colibri" else gguf)
                if name != "colibri":
                    for test in run_json(cmd, o[name]["rss"]):
                        # A decode test generates (n_gen > 0; -gp's also has its depth in n_prompt); a prompt test not.
                        o[name]["tg" if test["n_gen"] > 0 else "pp"] += test["samples_ts"]
                else:
                    j = run_json(cmd, s["c_rss"])
                    for key, field in (("c_pp", "prompt_tokens_per_s"), ("c_tg", "decode_tokens_per_s")):
                        s[key] += j[field]["samples"]
                    s["bw"].append(j["bandwidth_gb_per_s"]["median"])
                    s["c_frac"].append(j["roofline_fraction"])  # the run's own: the median of its repetitions
                    s["c_pair"] += j["roofline_fraction_samples"]  # each repetition against the passes beside it
                    s["bytes"] = j["bytes_per_token"]
        ids = ",".join(str(1 + (i * 7919) % 1000) for i in range(a.prompt))
        for r in range(a.ttft):
            runs = [(p[0], p[1] + ["-m", gguf, "-t", str(a.threads), "-p", "0", "-n", "0", "-pg", f"{a.prompt},1",
                                   "-r", "1", "--no-warmup", "-o", "json"]) for p in progs]
            runs.append(("colibri", [a.colibri, "generate", "-m", binf, "-t", str(a.threads), "--tokens", ids, "-n", "1"]))
            k = r % len(runs)
            for name, cmd in runs[k:] + runs[:k]:
                print(" ".join(c if len(c) < 100 else "<ids>" for c in cmd), file=sys.stderr, flush=True)
                if a.prewarm:
                    prewarm(binf if name == "colibri" else gguf)
                _, wall, peak = run_measured(cmd)
                (s["c_ttft"] if name == "colibri" else o[name]["ttft"]).append(wall)
                (s["c_rss_start"] if name == "colibri" else o[name]["rss_start"]).append(peak)
        med = {k: statistics.median(v) for k, v in s.items() if isinstance(v, list) and v}
        best = {k: max(v) for k, v in s.items() if isinstance(v, list) and v}
        omed = {n: {k: statistics.median(v) for k, v in d.items() if v} for n, d in o.items()}
        obest = {n: {k: max(v) for k, v in d.items() if v} for n, d in o.items()}
        roof = med["bw"] * 1e9 / s["bytes"]
        rows.append((t, med, roof, s, best, omed, obest, o))

    def ratio(x, y):
        return f"{x / y:.2f}x" if y else "-"

    def speed_table(title, c_key, o_key):
        """colibri's medians beside each program's, and colibri's ratio over each."""
        print(title)
        print("| type | colibri | " + " | ".join(names) + " | " + " | ".join(f"vs {n}" for n in names) + " |")
        print("|---|---|" + "---|" * (2 * len(names)))
        for t, m, _, _, _, om, _, _ in rows:
            print(f"| {t} | {m[c_key]:.2f} | " + " | ".join(f"{om[n][o_key]:.2f}" for n in names) + " | " +
                  " | ".join(ratio(m[c_key], om[n][o_key]) for n in names) + " |")

    depth = f" at depth {a.depth}" if a.depth else ""
    speed_table(f"Decode{depth}, tokens/s (medians over every repetition; the ratio is colibri's over each program's):",
                "c_tg", "tg")
    print()
    no_depth = " (ik_llama.cpp's from an empty context: its llama-bench has no -d)" if a.ik_bench and a.depth else ""
    speed_table(f"Prompt, tokens/s{no_depth}:", "c_pp", "pp")
    # The roofline: colibri's bandwidth measurement of the same run over colibri's bytes per decoded token (the GGUF
    # files hold the same tensors in the same types); the other programs' fraction is their median decode against it.
    print()
    print("| type | MB/token | bandwidth GB/s | roofline tok/s | colibri % roofline | " +
          " | ".join(f"{n} % roofline" for n in names) + " |")
    print("|---|---|---|---|---|" + "---|" * len(names))
    for t, m, roof, s, _, om, _, _ in rows:
        print(f"| {t} | {s['bytes'] / 1e6:.1f} | {m['bw']:.2f} | {roof:.1f} | {100 * m['c_pair']:.1f}% | " +
              " | ".join(f"{100 * om[n]['tg'] / roof:.1f}%" for n in names) + " |")
    # The best repetition of each: on a shared machine, the closest to what an idle one would give.
    print()
    print("Best repetition, decode / prompt tokens/s:")
    print("| type | colibri | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    for t, _, _, _, b, _, ob, _ in rows:
        print(f"| {t} | {b['c_tg']:.2f} / {b['c_pp']:.2f} | " +
              " | ".join(f"{ob[n]['tg']:.2f} / {ob[n]['pp']:.2f}" for n in names) + " |")
    # Each colibri run on its own (the fraction `colibri bench` reports: the median of its repetitions, each
    # against the bandwidth measured either side of it): shows a run that fell into a slow stretch of the host.
    # The last column pools first, as the other programs' fraction must: all decode samples' median against the
    # median of the runs' bandwidths.
    print()
    print("| type | colibri runs: bandwidth GB/s | colibri runs: % roofline | colibri % roofline, pooled |")
    print("|---|---|---|---|")
    for t, m, roof, s, _, _, _, _ in rows:
        print(f"| {t} | {' / '.join(f'{b:.1f}' for b in s['bw'])} | {' / '.join(f'{100 * f:.1f}%' for f in s['c_frac'])} | "
              f"{100 * m['c_tg'] / roof:.1f}% |")
    # Peak RSS of the runs as a user starts them (--ttft) where there are any: `colibri bench` also holds its
    # bandwidth probe's buffer, which says nothing about what running the model takes.
    starts = a.ttft > 0
    print()
    print("Peak RSS GB (largest " + ("start to the first token" if starts else "benchmark run") + ")" +
          (" and first token s (median of --ttft starts)" if starts else "") + ":")
    print("| type | colibri | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    for t, m, _, s, b, om, ob, _ in rows:
        def cell(rss, ttft):
            return f"{rss / 1e9:.2f} GB" + (f", {ttft:.2f} s" if starts else "")
        c_key, o_key = ("c_rss_start", "rss_start") if starts else ("c_rss", "rss")
        print(f"| {t} | {cell(b[c_key], m.get('c_ttft'))} | " +
              " | ".join(cell(ob[n][o_key], om[n].get("ttft")) for n in names) + " |")
    print(json.dumps({t: {"colibri": s, **o} for t, _, _, s, _, _, _, o in rows}), file=sys.stderr)


if __name__ == "__main__":
    main()
