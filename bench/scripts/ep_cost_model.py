#!/usr/bin/env python3
"""What expert parallelism costs on a network, from a model's shape and a loopback measurement (docs/DISTRIBUTED.md).

usage: bench/scripts/ep_cost_model.py [--measured BENCH.json ...] [--machines 4,8] [--memory-gbps 200]
                                      [--models deepseek-v3,kimi-k2] [--json]

--measured: `mpirun -np N colibri bench -m M --json` outputs (the rank count and model shape are read from them). Each
is checked against the model's own arithmetic: after every MoE layer each rank receives the rows of the experts the
other ranks computed, top_k x hidden x 4 bytes x (N-1)/N per token on average; the measured bytes received per token
and layer must agree within --tolerance (10 %), or the model below is not the one the engine runs and the script says so
(exit 1). The measured exchange time per layer step on loopback is printed beside the model's loopback prediction.

The decode of one token (batch 1) on each of N machines, in the model:
  weights read   = replicated (embeddings row, attention, norms, routers, shared experts, dense layers, lm head)
                   + the routed experts this machine computes: E[max over machines of experts hit] per MoE layer, from
                   uniform routing over experts dealt round-robin (a trace-based placement does no worse on average)
  compute time   = weights read / memory bandwidth (decode on CPUs is bandwidth-bound; --memory-gbps)
  exchange time  = per MoE layer: (N - 1) x latency (Open MPI's ring allgather for rows this size) + bytes received /
                   link bandwidth
The ranks wait for each other once per MoE layer, so a token costs compute + exchange: nothing overlaps, as in the
engine today.
"""
import argparse
import json
import random
import sys

# Published configs (config.json on the hub). Sizes in parameters; q4_K is 4.5 bits a weight.
MODELS = {
    "deepseek-v3": dict(hidden=7168, layers=61, dense_layers=3, experts=256, top_k=8, shared=1, moe_ffn=2048,
                        dense_ffn=18432, vocab=129280, heads=128, q_lora=1536, kv_lora=512, nope=128, rope=64, v=128),
    "kimi-k2": dict(hidden=7168, layers=61, dense_layers=1, experts=384, top_k=8, shared=1, moe_ffn=2048,
                    dense_ffn=18432, vocab=163840, heads=64, q_lora=1536, kv_lora=512, nope=128, rope=64, v=128),
}
BYTES_PER_WEIGHT = 4.5 / 8  # q4_K
NETWORKS = [  # name, link bandwidth (bytes/s), latency of one message between two machines (s)
    ("10 GbE (TCP)", 10e9 / 8, 30e-6),
    ("25 GbE (TCP)", 25e9 / 8, 20e-6),
    ("100 GbE (TCP)", 100e9 / 8, 15e-6),
    ("RDMA, 100 Gb/s (UCX)", 100e9 / 8, 3e-6),
]


def shape_parameters(m):
    h = m["hidden"]
    attention = (h * m["q_lora"] + m["q_lora"] * m["heads"] * (m["nope"] + m["rope"]) + h * (m["kv_lora"] + m["rope"])
                 + m["kv_lora"] * m["heads"] * (m["nope"] + m["v"]) + m["heads"] * m["v"] * h)
    expert = 3 * h * m["moe_ffn"]
    moe_layers = m["layers"] - m["dense_layers"]
    replicated = (m["layers"] * attention + m["dense_layers"] * 3 * h * m["dense_ffn"]
                  + moe_layers * (m["shared"] * expert + h * m["experts"]) + m["vocab"] * h)  # lm head; one embedding row
    return dict(expert=expert, moe_layers=moe_layers, replicated=replicated, routed=moe_layers * m["experts"] * expert)


def expected_max_experts(experts, top_k, machines, trials=20000):
    """E[max over machines of the routed experts it computes] for top_k distinct experts of `experts`, round-robin."""
    rng = random.Random(7)
    total = 0
    for _ in range(trials):
        hits = [0] * machines
        for e in rng.sample(range(experts), top_k):
            hits[e % machines] += 1
        total += max(hits)
    return total / trials


def predict(name, machines, memory_bps, network):
    m = MODELS[name]
    p = shape_parameters(m)
    busiest = expected_max_experts(m["experts"], m["top_k"], machines)
    weight_bytes = (p["replicated"] + p["moe_layers"] * busiest * p["expert"]) * BYTES_PER_WEIGHT
    compute_s = weight_bytes / memory_bps
    received = m["top_k"] * m["hidden"] * 4 * (machines - 1) / machines
    _, link_bps, latency = network
    exchange_s = p["moe_layers"] * ((machines - 1) * latency + received / link_bps)
    memory_gb = (p["replicated"] + p["routed"] / machines) * BYTES_PER_WEIGHT / 1e9
    return dict(model=name, machines=machines, network=network[0], memory_per_machine_gb=memory_gb,
                received_kb_per_layer=received / 1e3, compute_ms=compute_s * 1e3, exchange_ms=exchange_s * 1e3,
                tokens_per_s=1.0 / (compute_s + exchange_s), busiest_experts=busiest)


def check_measurement(path, tolerance):
    """The measured bytes per token and MoE layer against top_k x hidden x 4 x (N-1)/N; returns a line or raises."""
    with open(path) as f:
        j = json.load(f)
    ranks = j.get("ranks", 1)
    if ranks < 2 or "exchange" not in j:
        raise ValueError(f"{path}: not an expert-parallel bench (no ranks > 1 with an exchange)")
    x = j["exchange"]
    hidden, top_k = x["hidden"], x["experts_per_token"]
    expected = top_k * hidden * 4 * (ranks - 1) / ranks
    d = x["decode"]
    measured = d["bytes_received_per_token_layer"]
    if abs(measured - expected) > tolerance * expected:
        raise ValueError(f"{path}: {measured:.0f} bytes received per token and MoE layer, the model says {expected:.0f}")
    return (f"{path}: {ranks} ranks, hidden {hidden}, top-{top_k}: received {measured:.0f} B per token and MoE layer "
            f"(model: {expected:.0f}), exchange {d['exchange_us_per_layer_step']:.1f} us per layer step on loopback")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--measured", nargs="*", default=[])
    ap.add_argument("--tolerance", type=float, default=0.1,
                    help="how far the measured bytes may be from the model's mean (a short run's routing varies more)")
    ap.add_argument("--machines", default="4,8")
    ap.add_argument("--memory-gbps", type=float, default=200.0, help="each machine's memory bandwidth, GB/s")
    ap.add_argument("--models", default="deepseek-v3,kimi-k2")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    try:
        for path in a.measured:
            print(check_measurement(path, a.tolerance))
    except (ValueError, KeyError, OSError) as e:
        print(f"ep_cost_model: {e}", file=sys.stderr)
        return 1
    rows = []
    for name in a.models.split(","):
        if name not in MODELS:
            print(f"ep_cost_model: unknown model {name} ({', '.join(MODELS)})", file=sys.stderr)
            return 1
        for n in (int(x) for x in a.machines.split(",")):
            for net in NETWORKS:
                rows.append(predict(name, n, a.memory_gbps * 1e9, net))
    if a.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"| model | machines | GB each (q4_K) | network | KB in per layer | compute ms | exchange ms | tok/s |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['machines']} | {r['memory_per_machine_gb']:.0f} | {r['network']} | "
              f"{r['received_kb_per_layer']:.0f} | {r['compute_ms']:.1f} | {r['exchange_ms']:.1f} | {r['tokens_per_s']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
