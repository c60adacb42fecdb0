#!/usr/bin/env python3
"""Decode under a real memory limit: plain mmap, llama.cpp and colibri's expert cache (docs/PERFORMANCE.md).

usage: bench/scripts/bench_ram_budget.py COLIBRI LLAMA_BENCH MODEL.bin MODEL.gguf [--fractions 0.5,0.25]
                                 [--policies lru,lfru,pinned,lru+prefetch] [--prompt 16] [--decode 32] [--threads 2]
                                 [--headroom-mib 768] [--context 128] [--reps 1] [--skip mmap,llama,...]
                                 [--limit-gb 10] [--ranks 2] [--mpirun mpirun]

With `--skip llama` neither LLAMA_BENCH nor MODEL.gguf is used: any placeholder will do (`-`).

Every run happens inside a memory cgroup whose limit is FRACTION x the size of MODEL.bin, page cache included
(cgroup v1 `memory.limit_in_bytes` where /sys/fs/cgroup/memory is mounted, else v2 `memory.max`); needs root.
Before each run both model files are dropped from the page cache (posix_fadvise DONTNEED), so every
configuration starts cold. The configurations, for each fraction:

- colibri, plain mmap: `colibri generate -m MODEL.bin --tokens <prompt ids> -n DECODE+1 --greedy --json`;
- colibri's expert cache, per policy: the same with `--ram-budget (limit - headroom) --cache-policy P`
  (pinned learns its hot set from a routing trace of other tokens, `colibri route --json`, made once, unlimited;
  P+prefetch adds `--cache-prefetch`: the next MoE layer's experts predicted and read ahead);
- llama.cpp, mmap, asked not to repack (`-ot .*=CPU`; its repacked copy is anonymous memory the limit could not
  hold, and the kernel's OOM reports show anonymous memory at the limit with `-ot` too):
  `llama-bench -m MODEL.gguf -p 0 -n DECODE -r 1 --no-warmup -ot .*=CPU`.

With `--ranks N` (expert parallelism, docs/DISTRIBUTED.md), two more configurations per limit, each of N ranks under
`mpirun -np N` with one thread each (`--threads` / N), every rank in a memory cgroup of its own with the same limit:
- colibri N ranks, mmap: `mpirun -np N colibri generate ... -t THREADS/N`;
- colibri N ranks, expert cache: the same with `--ram-budget` (each rank's budget covers its own experts).
Their read bytes per token are rank 0's; their cgroup peak is the largest rank's. `--limit-gb X` replaces
`--fractions` by one absolute limit per process.

Reported per run: decode tokens/s (colibri's `timing.decode_tokens_per_s`, llama-bench's avg_ts), bytes read from
storage per decoded token (colibri: /proc/self/io read_bytes over the decode, `storage_read_bytes.decode`;
llama.cpp: its task I/O accounting from the moment it prints that the generation run starts to its exit,
ru_inblock), the cgroup's peak memory (page cache included) and the process's peak RSS, and for the cache its
hits and misses, and with prefetch the prediction's accuracy (of the experts a predicted layer used, the share
the prediction named). Random-weight hit rates are a lower bound only where the model routes near uniformly:
colibri-make-model's default weights route narrowly (a sequence's tokens choose alike), `--embedding-init 4`
spreads them (docs/PERFORMANCE.md, "Larger than RAM").
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

V1_ROOT = "/sys/fs/cgroup/memory"
V2_ROOT = "/sys/fs/cgroup"


class MemoryCgroup:
    """A memory cgroup of its own (v1 or v2) with a limit; children join it before they exec."""

    def __init__(self, name):
        self.v1 = os.path.isdir(V1_ROOT) and os.path.exists(os.path.join(V1_ROOT, "memory.limit_in_bytes"))
        root = V1_ROOT if self.v1 else V2_ROOT
        if not self.v1 and not os.path.exists(os.path.join(V2_ROOT, "cgroup.controllers")):
            sys.exit("bench_ram_budget: no memory cgroup controller is mounted (v1 /sys/fs/cgroup/memory or v2)")
        self.path = os.path.join(root, name)
        try:
            os.makedirs(self.path, exist_ok=True)
        except OSError as e:
            sys.exit(f"bench_ram_budget: cannot create the cgroup {self.path}: {e.strerror} (run as root)")

    def _write(self, leaf, value):
        with open(os.path.join(self.path, leaf), "w") as f:
            f.write(str(value))

    def _read(self, leaf):
        with open(os.path.join(self.path, leaf)) as f:
            return f.read().strip()

    def set_limit(self, limit):
        self._write("memory.limit_in_bytes" if self.v1 else "memory.max", limit)

    def reset_peak(self):
        try:
            # v1: any write resets the maximum. v2: writing to memory.peak resets it (Linux 6.12 and later); older
            # kernels refuse, and their peak is the maximum since the cgroup was made.
            self._write("memory.max_usage_in_bytes" if self.v1 else "memory.peak", 0 if self.v1 else "reset")
        except OSError:
            pass

    def peak(self):
        leaf = "memory.max_usage_in_bytes" if self.v1 else "memory.peak"
        try:
            return int(self._read(leaf))
        except (OSError, ValueError):
            return None

    def join(self):
        """In the child, before exec: move this process into the cgroup."""
        with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))

    def remove(self):
        try:
            os.rmdir(self.path)
        except OSError:
            pass


def drop_from_page_cache(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def task_read_bytes(pid):
    try:
        with open(f"/proc/{pid}/io") as f:
            for line in f:
                if line.startswith("read_bytes:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def run_in_cgroup(cmd, cgroup, mark=None):
    """Runs cmd inside the cgroup (None: where it is; the command joins its own). Returns (stdout, rusage, read_bytes when a stderr line containing `mark` was
    printed, or None). The child is reaped with wait4 so that its own rusage is read."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=cgroup.join if cgroup else None)
    marked = []
    err_tail = []

    def watch_stderr():
        for line in p.stderr:
            err_tail.append(line)
            del err_tail[:-20]
            if mark and mark in line and not marked:
                marked.append(task_read_bytes(p.pid))

    t = threading.Thread(target=watch_stderr)
    t.start()
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    t.join()
    p.returncode = os.waitstatus_to_exitcode(status)
    p.stdout.close()
    p.stderr.close()
    if p.returncode != 0:
        why = "killed by the cgroup's OOM killer?" if p.returncode == -9 else "".join(err_tail).strip()[-400:]
        return None, usage, None, f"exit {p.returncode}: {why}"
    return out, usage, (marked[0] if marked else None), None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("colibri")
    ap.add_argument("llama_bench")
    ap.add_argument("bin")
    ap.add_argument("gguf")
    ap.add_argument("--fractions", default="0.5,0.25")
    ap.add_argument("--policies", default="lru,lfru,pinned,lru+prefetch")
    ap.add_argument("--prompt", type=int, default=16)
    ap.add_argument("--decode", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--headroom-mib", type=int, default=768,
                    help="what the budgeted process needs besides weights (KV cache, activations, code)")
    ap.add_argument("--reps", type=int, default=1, help="runs of every configuration (interleaved); the table shows medians")
    ap.add_argument("--skip", default="", help="comma list of configurations to leave out: mmap, llama, lru, ...")
    ap.add_argument("--limit-gb", type=float, help="one limit per process in GB (10^9 bytes) instead of --fractions")
    ap.add_argument("--ranks", type=int, default=0, help="add N ranks under mpirun, one cgroup of the same limit each")
    ap.add_argument("--mpirun", default="mpirun")
    a = ap.parse_args()
    skip = set(filter(None, a.skip.split(",")))
    dropped = [a.bin] if "llama" in skip else [a.bin, a.gguf]

    size = os.path.getsize(a.bin)
    prompt_ids = ",".join(str(1 + (i * 7919) % 1000) for i in range(a.prompt))
    trace_ids = ",".join(str(1 + (i * 104729) % 5000) for i in range(64))
    trace_path = a.bin + ".hot-trace.json"
    if any(p.split("+")[0] == "pinned" for p in a.policies.split(",")) and not os.path.exists(trace_path):
        print(f"routing trace for the pinned hot set -> {trace_path}", file=sys.stderr, flush=True)
        with open(trace_path, "w") as f:
            subprocess.run([a.colibri, "route", "-m", a.bin, "-t", str(a.threads), "--tokens", trace_ids, "--json"],
                           stdout=f, check=True)

    rows = []
    cgroup = MemoryCgroup(f"colibri-bench-{os.getpid()}")
    rank_prefix = f"colibri-bench-{os.getpid()}-rank"  # rank r's cgroup is rank_prefix + r
    rank_cgroups = [MemoryCgroup(f"{rank_prefix}{r}") for r in range(a.ranks)]
    fractions = [a.limit_gb * 1e9 / size] if a.limit_gb else [float(x) for x in a.fractions.split(",")]
    try:
        for frac in fractions:
            limit = int(size * frac)
            budget = limit - (a.headroom_mib << 20)
            configs = [("colibri mmap", "mmap", [])]
            for pol in a.policies.split(","):
                base, _, mode = pol.partition("+")
                if mode not in ("", "prefetch"):
                    sys.exit(f"bench_ram_budget: unknown policy variant '{pol}' (POLICY or POLICY+prefetch)")
                extra = ["--ram-budget", str(budget), "--cache-policy", base]
                if base == "pinned":
                    extra += ["--hot-trace", trace_path]
                if mode == "prefetch":
                    extra += ["--cache-prefetch"]
                configs.append((f"colibri cache {pol}", pol, extra))
            configs.append(("llama.cpp mmap", "llama", None))
            if a.ranks:
                configs.append((f"colibri {a.ranks} ranks mmap", "ranks", ["--ranks"]))
                configs.append((f"colibri {a.ranks} ranks cache lru", "ranks+lru",
                                ["--ranks", "--ram-budget", str(budget), "--cache-policy", "lru"]))
            for rep, (label, key, extra) in ((r, c) for r in range(a.reps) for c in configs):
                if key in skip:
                    continue
                for f in dropped:
                    drop_from_page_cache(f)
                for cg in [cgroup] + rank_cgroups:
                    cg.set_limit(limit)
                    cg.reset_peak()
                print(f"{limit / 1e9:.2f} GB ({frac:.2f} x {size / 1e9:.1f} GB): {label}", file=sys.stderr, flush=True)
                start = time.monotonic()
                if extra is None:
                    cmd = [a.llama_bench, "-m", a.gguf, "-t", str(a.threads), "-p", "0", "-n", str(a.decode), "-r", "1",
                           "--no-warmup", "--progress", "-ot", ".*=CPU", "-o", "json"]
                    out, usage, read_at_gen, err = run_in_cgroup(cmd, cgroup, mark="generation run")
                    row = {"config": label, "fraction": frac, "limit": limit, "error": err}
                    if not err:
                        tps = json.loads(out)[0]["avg_ts"]
                        decode_read = usage.ru_inblock * 512 - read_at_gen if read_at_gen is not None else None
                        row.update(tokens_per_s=tps,
                                   read_per_token=decode_read / a.decode if decode_read is not None else None)
                else:
                    ranked = extra[:1] == ["--ranks"]
                    threads = max(1, a.threads // a.ranks) if ranked else a.threads
                    cmd = [a.colibri, "generate", "-m", a.bin, "-t", str(threads), "-c", str(a.context), "--tokens",
                           prompt_ids, "-n", str(a.decode + 1), "--greedy", "--json"] + (extra[1:] if ranked else extra)
                    if ranked:
                        # Each rank moves itself into its own cgroup before it execs colibri; mpirun stays outside.
                        join = f'echo $$ > {os.path.dirname(cgroup.path)}/{rank_prefix}$OMPI_COMM_WORLD_RANK/cgroup.procs && exec "$@"'
                        cmd = [a.mpirun, "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", str(a.ranks),
                               "sh", "-c", join, "sh"] + cmd
                        out, usage, _, err = run_in_cgroup(cmd, None)
                    else:
                        out, usage, _, err = run_in_cgroup(cmd, cgroup)
                    row = {"config": label, "fraction": frac, "limit": limit, "error": err}
                    if not err:
                        j = json.loads(out)
                        t = j["timing"]
                        r = j.get("storage_read_bytes", {}).get("decode")
                        row.update(tokens_per_s=t["decode_tokens_per_s"],
                                   read_per_token=r / t["decode_tokens"] if r is not None and t["decode_tokens"] else None,
                                   new_ids=j["new_ids"])
                        if "expert_cache" in j:
                            c = j["expert_cache"]
                            row.update(budget=c["ram_budget"], hits=c["hits"], misses=c["misses"],
                                       slots_per_layer=c["slots_per_layer"], direct_io=c["direct_io"],
                                       stall_s=c["stall_ns"] / 1e9, prefetched=c.get("prefetched", 0))
                            if c.get("predicted"):
                                row.update(prediction=c["predicted_right"] / c["predicted"])
                if extra is not None and extra[:1] == ["--ranks"]:
                    peaks = [cg.peak() for cg in rank_cgroups]
                    row.update(rank_cgroup_peaks=peaks)
                    cg_peak = max(p for p in peaks if p is not None) if any(p is not None for p in peaks) else None
                else:
                    cg_peak = cgroup.peak()
                row.update(wall_s=time.monotonic() - start, peak_rss=usage.ru_maxrss * 1024, cgroup_peak=cg_peak)
                print(json.dumps({k: v for k, v in row.items() if k != "new_ids"}), file=sys.stderr, flush=True)
                rows.append(row)
    finally:
        for cg in [cgroup] + rank_cgroups:
            cg.remove()

    # Every colibri configuration must have produced the same tokens (the budget changes where the bytes come
    # from, never the logits).
    ids = {json.dumps(r["new_ids"]) for r in rows if r.get("new_ids") is not None}
    same = "identical in every colibri run" if len(ids) <= 1 else "DIFFERENT between colibri runs"
    # Per (limit, configuration): the median of its runs (the first failure stands for the configuration).
    groups = {}
    for r in rows:
        groups.setdefault((r["fraction"], r["config"]), []).append(r)
    merged = []
    for runs in groups.values():
        failed = [r for r in runs if r["error"]]
        if failed:
            merged.append(failed[0])
            continue
        m = dict(runs[0])
        for key in ("tokens_per_s", "read_per_token", "hits", "misses", "prediction", "cgroup_peak", "peak_rss"):
            vals = [r[key] for r in runs if r.get(key) is not None]
            if vals:
                m[key] = statistics.median(vals)
        m["all_tokens_per_s"] = [r["tokens_per_s"] for r in runs]
        merged.append(m)
    mmap_tps = {r["fraction"]: r["tokens_per_s"] for r in merged if r["config"] == "colibri mmap" and not r["error"]}
    print(f"{a.bin}: {size / 1e9:.2f} GB, {a.threads} threads, decode {a.decode} tokens after a {a.prompt}-token prompt; "
          f"greedy tokens {same}")
    print()
    print(f"Medians of {a.reps} run(s) per configuration; every run's decode tok/s in the last column.")
    print()
    print("| limit | configuration | decode tok/s | vs colibri mmap | MB read per token | hit rate | prediction | "
          "slots per layer | cgroup peak GB | process peak RSS GB | runs tok/s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in merged:
        lim = f"{r['limit'] / 1e9:.2f} GB ({r['fraction']:.2f} × the file)"
        if r["error"]:
            print(f"| {lim} | {r['config']} | failed: {r['error']} | | | | | | | | |")
            continue
        base = mmap_tps.get(r["fraction"])
        ratio = f"{r['tokens_per_s'] / base:.2f}×" if base else "-"
        rd = f"{r['read_per_token'] / 1e6:.1f}" if r.get("read_per_token") is not None else "-"
        hr = f"{100 * r['hits'] / max(1, r['hits'] + r['misses']):.1f} %" if "hits" in r else "-"
        peak = f"{r['cgroup_peak'] / 1e9:.2f}" if r["cgroup_peak"] else "-"
        pred = f"{100 * r['prediction']:.1f} %" if "prediction" in r else "-"
        print(f"| {lim} | {r['config']} | {r['tokens_per_s']:.3f} | {ratio} | {rd} | {hr} | {pred} | "
              f"{r.get('slots_per_layer', '-')} | {peak} | {r['peak_rss'] / 1e9:.2f} | "
              f"{' '.join(f'{v:.2f}' for v in r['all_tokens_per_s'])} |")
    print(json.dumps(rows), file=sys.stderr)


if __name__ == "__main__":
    main()
