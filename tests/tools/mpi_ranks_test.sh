#!/usr/bin/env bash
# Expert parallelism under mpirun (several processes on this machine): the logits and generated ids of 2, 3 and 4 ranks,
# round-robin and a placement written by `colibri placement` from a routing trace (the hottest expert replicated), are
# byte for byte one process's for a Mixtral and every MoE family of the reference set (each round-robin and from its
# own trace);
# generate and bench --json name the ranks and bench reports the exchange per token and MoE layer; a placement naming
# experts the model lacks is refused before any token with one line and a non-zero exit; a rank killed mid-run makes
# the other stop with one line within its --rank-timeout, never a hang. `colibri serve` under mpirun answers as one
# process does (two requests at once, lookup speculation, the trace extension), names the ranks and the placement in
# /v1/models and each rank's expert time and the bytes exchanged in the trace; SIGTERM to rank 0 stops every rank;
# a killed follower stops rank 0 with one line naming it, a killed rank 0 the followers, within the rank timeout.
# `colibri chat` under mpirun (stdin to rank 0, the other ranks following its session) writes one process's replies
# on 2 and 3 ranks, with lookup speculation too, and after sitting idle past its --rank-timeout; SIGTERM to rank 0
# ends every rank, a killed follower ends rank 0 with one line; `generate`'s streamed text is one process's; a C
# program on the C API (rank 0 drives, the other follows with colibri_session_follow) prints one process's ids and
# replies under mpirun -np 2, idle past its COLIBRI_RANK_TIMEOUT in between.
# Exit 77 (skipped) in a build without MPI.
# Usage: mpi_ranks_test.sh CLI MAKE_MODEL REFERENCE_DIR MPI_BUILT(ON|OFF) C_API_PROGRAM DEMO_MODEL
set -euo pipefail
cli="$1"
make_model="$2"
reference="$3"
c_api_program="$5"
demo="$6"
if [[ "$4" != ON ]]; then
  echo "skipped: this build has no MPI (libopenmpi-dev)"
  exit 77
fi
work="$(mktemp -d)"
# A server left running by a failed check goes with the test (its `timeout` passes the signal on).
trap 'kill $(jobs -p) 2> /dev/null || true; rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader OMPI_MCA_rmaps_base_oversubscribe=1
# Every mpirun is bounded: a hang fails the test instead of holding CI.
ranks() { local n="$1"; shift; timeout 120 mpirun --oversubscribe -np "$n" "$@"; }
check() { if ! "$@"; then echo "FAIL: $*" >&2; exit 1; fi; }

"$make_model" -o "$work/mixtral-hf" --family mixtral --vocab 300 --hidden 64 --layers 2 --heads 4 --kv-heads 2 --experts 8 \
  --top-k 2 --ffn 128 --seed 3 > /dev/null
"$cli" convert "$work/mixtral-hf" -o "$work/mixtral.bin" -q
# Every MoE family of the reference set (transformers' own modeling code made them).
families="qwen2_moe olmoe qwen3_moe gpt_oss deepseek_v3 glm4_moe minimax_m2 glm4_moe_lite qwen3_next qwen3_5_moe"
for family in $families; do
  "$cli" convert "$reference/hf/$family/model" -o "$work/$family.bin" --type q8_0 -q
done
tokens="1,17,42,99,5,25,3,77,8,14,64,12,30,2,9,11,40,7"

# Per model: one process's logits and ids, then each case's ranks: "model ranks [trace]" (trace: a placement written
# by `colibri placement` from this model's routing trace, the hottest expert of each layer on every rank).
solo() {
  "$cli" logits -m "$work/$1.bin" --tokens "$tokens" --out "$work/solo.f32" -t 1 > /dev/null
  "$cli" generate -m "$work/$1.bin" --tokens "$tokens" -n 12 --greedy --json -t 1 > "$work/solo.json"
}
placement() {
  "$cli" route -m "$work/$1.bin" --tokens "$tokens" --json > "$work/trace.json"
  "$cli" placement -m "$work/$1.bin" --trace "$work/trace.json" --ranks "$2" --replicate 1 -o "$work/placement.json" > "$work/shares.txt"
  check grep -q "^rank $(($2 - 1)): .*% of the expert work (round-robin: .*%)$" "$work/shares.txt"
}
same_logits() {  # model ranks [placement args]
  local m="$1" n="$2"
  shift 2
  ranks "$n" "$cli" logits -m "$work/$m.bin" --tokens "$tokens" --out "$work/ranks.f32" -t 1 "$@" > /dev/null
  check cmp "$work/solo.f32" "$work/ranks.f32"
  rm -f "$work/ranks.f32"
  echo "ok: $m: $n ranks $* give one process's logits"
}
same_ids() {
  local m="$1" n="$2"
  shift 2
  ranks "$n" "$cli" generate -m "$work/$m.bin" --tokens "$tokens" -n 12 --greedy --json -t 1 "$@" > "$work/ranks.json"
  check test "$(wc -l < "$work/ranks.json")" -eq 1  # rank 0 alone prints
  check python3 - "$work/solo.json" "$work/ranks.json" "$n" <<'PY'
import json, sys
solo, ranks = (json.load(open(p)) for p in sys.argv[1:3])
assert solo["new_ids"] == ranks["new_ids"], (solo["new_ids"], ranks["new_ids"])
assert solo["ranks"] == 1 and ranks["ranks"] == int(sys.argv[3]), ranks["ranks"]
assert ranks["exchange"]["bytes_received"] > 0 and ranks["exchange"]["exchanges"] > 0
PY
  echo "ok: $m: $n ranks $* generate one process's ids"
}
solo mixtral
placement mixtral 3
same_logits mixtral 3 --placement "$work/placement.json"
same_ids mixtral 3 --placement "$work/placement.json"
same_logits mixtral 4
# Every reference family round-robin and from its own trace, the rank counts taking turns over 2, 3 (uneven) and 4
# (more processes than this machine's cores: oversubscribed).
i=0
for family in $families; do
  solo "$family"
  same_logits "$family" $((2 + i % 3))
  placement "$family" $((2 + (i + 1) % 3))
  same_logits "$family" $((2 + (i + 1) % 3)) --placement "$work/placement.json"
  i=$((i + 1))
done
same_ids qwen3_5_moe 3 --placement "$work/placement.json"  # the last family's: the hybrid, from its trace, 3 ranks

# bench --json under mpirun: the ranks and the exchange per token and MoE layer.
ranks 2 "$cli" bench -m "$work/mixtral.bin" -p 8 -n 8 -r 1 -t 1 --bandwidth-mib 8 --json > "$work/bench.json"
check python3 - "$work/bench.json" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))
assert b["ranks"] == 2
d = b["exchange"]["decode"]
# 2 ranks: each sends about half of a token's k=2 expert rows of 64 floats per layer.
assert 0 < d["bytes_sent_per_token_layer"] <= 2 * 64 * 4 and d["exchange_us_per_layer_step"] > 0, d
PY
echo "ok: bench --json names the ranks and the exchange per token and MoE layer"
# The cost model of docs/DISTRIBUTED.md reads that measurement: its bytes per token and layer are the model's
# top_k x hidden x 4 x (N-1)/N (8 decode tokens of a random model route unevenly: a wide tolerance).
cost_model="$(dirname "$0")/../../bench/scripts/ep_cost_model.py"
check python3 "$cost_model" --measured "$work/bench.json" --tolerance 0.6 > "$work/cost.txt"
check grep -q "2 ranks, hidden 64, top-2: received .* B per token and MoE layer (model: 256)" "$work/cost.txt"
check grep -q "^| kimi-k2 | 8 | .* | RDMA, 100 Gb/s (UCX) |" "$work/cost.txt"
echo "ok: the cost model agrees with the measured exchange"

# A placement naming experts the model lacks: one line, before any token, a non-zero exit.
echo '{"ranks": 2, "layers": {"0": [0,1,0,1,0,1,0,1,0]}}' > "$work/bad.json"
if ranks 2 "$cli" generate -m "$work/mixtral.bin" --tokens "$tokens" -n 4 --placement "$work/bad.json" > "$work/out.txt" 2> "$work/err.txt"; then
  echo "FAIL: a bad placement was accepted" >&2
  exit 1
fi
check test "$(grep -c '^colibri:' "$work/err.txt")" -eq 1
check grep -q "^colibri: generate: --placement $work/bad.json: layer 0 places 9 experts, the model has 8$" "$work/err.txt"
check test ! -s "$work/out.txt"
echo "ok: a bad placement is refused with one line"

# A rank killed mid-run: the other stops with one line within its --rank-timeout (mpirun --enable-recovery keeps the
# survivor running, so the line is colibri's own, not mpirun's killing it).
# The hybrid (the slowest model here: 4096 tokens take about 1.2 s in one process) is killed as soon as rank 1 has
# mapped it; a pause before the kill let the mixtral finish its whole context first (0.4 s) on a quiet machine.
start=$(date +%s)
timeout 60 mpirun --oversubscribe --enable-recovery -np 2 "$cli" generate -m "$work/qwen3_next.bin" --tokens "$tokens" -n 100000 \
  -c 4096 --rank-timeout 2 -t 1 > "$work/out.txt" 2> "$work/err.txt" &
runner=$!
victim=""
for _ in $(seq 600); do  # up to 30 s: mpirun's start on a loaded 2-core machine took more than 10
  sleep 0.05
  launcher=$(ps -o pid= --ppid $runner | head -1 | tr -d ' ')
  [[ -n "$launcher" ]] || continue
  for pid in $(ps -o pid= --ppid "$launcher"); do
    if grep -qzx OMPI_COMM_WORLD_RANK=1 "/proc/$pid/environ" 2> /dev/null; then victim=$pid; fi
  done
  # Past MPI's start and into the model's loading: the model file is mapped.
  [[ -n "$victim" ]] && grep -q qwen3_next.bin "/proc/$victim/maps" 2> /dev/null && break
done
check test -n "$victim"
if ! kill -9 "$victim"; then
  echo "FAIL: rank 1 ended before it could be killed (the run was too short)" >&2
  exit 1
fi
wait $runner || true
elapsed=$(($(date +%s) - start))
check test "$elapsed" -lt 50
check grep -q "^colibri: generate: .*rank 0: another rank did not answer within 2 s (it stopped or died)$" "$work/err.txt"
check test "$(grep -c '^colibri:' "$work/err.txt")" -eq 1
echo "ok: a killed rank stops the other with one line in ${elapsed}s"

# colibri serve under mpirun: rank 0 serves HTTP, the other ranks follow every operation on its slots' sessions
# (engine/core/session_mirror.h). The same requests to one process, 2 and 3 ranks: a long streamed reply with a short one
# sent while it decodes (steps that evaluate both slots in one eval_batch; the client checks that some step sampled
# both), lookup speculation (checks and keep_verified) and the trace extension (each position's token and routing);
# /v1/models names the ranks and the placement, and each traced position each rank's expert time and the bytes exchanged.
cat > "$work/client.py" <<'PY'
# Usage: client.py PORT OUT RANKS: the replies (ids, dates and timings left out) into OUT.
import json, sys, threading, time, urllib.request
port, out_path, ranks = sys.argv[1], sys.argv[2], int(sys.argv[3])
base = "http://127.0.0.1:" + port

def post(body):
    request = urllib.request.Request(base + "/v1/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    return urllib.request.urlopen(request, timeout=60)

def metrics():
    # A reply ends before its last step is counted: read them once no slot is active.
    for _ in range(100):
        m = {}
        for line in urllib.request.urlopen(base + "/metrics", timeout=10).read().decode().splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                m[name.split("{")[0]] = m.get(name.split("{")[0], 0) + float(value)
        if m["colibri_active_slots"] == 0:
            return m
        time.sleep(0.05)
    raise AssertionError("a slot stays active")

# /v1/models names the ranks and, across ranks, the placement: round-robin, expert e of every MoE layer on rank e % N.
meta = json.load(urllib.request.urlopen(base + "/v1/models", timeout=10))["data"][0]["meta"]
assert meta["ranks"] == ranks, meta
if ranks == 1:
    assert "placement" not in meta, meta
else:
    layers = meta["placement"]["layers"]
    assert meta["placement"]["ranks"] == ranks and sorted(map(int, layers)) == meta["moe_layers"], meta["placement"]
    assert all(holders == [e % ranks for e in range(meta["experts"])] for holders in layers.values()), layers

def check_ranks(position):
    # Across ranks each traced position has per MoE layer every rank's expert time and the bytes exchanged; a
    # generated position (a step of one token) sent rank 0's experts' rows and received the others'.
    if ranks == 1:
        assert "ranks" not in position, position
        return
    assert [r["layer"] for r in position["ranks"]] == [r["layer"] for r in position["routing"]], position
    for r, routing in zip(position["ranks"], position["routing"]):
        assert len(r["experts_ns"]) == ranks and r["bytes"] == r["bytes_sent"] + r["bytes_received"], r
        if position["generated"]:
            mine = sum(1 for e in routing["experts"] if e % ranks == 0) * meta["hidden_size"] * 4
            assert r["bytes_sent"] == mine and r["bytes"] == len(routing["experts"]) * meta["hidden_size"] * 4, (r, routing)
            assert min(r["experts_ns"]) > 0 and r["exchange_ns"] > 0, r
    position.pop("ranks")

def clean(reply):
    for key in ("id", "created", "timings"):
        reply.pop(key, None)
    for position in reply.get("colibri", {}).get("trace", []):
        position.pop("timings")
        check_ranks(position)
    return reply

greedy = {"model": "mixtral", "temperature": 0, "logprobs": 1, "ignore_eos": True}
out = {}
decoding = threading.Event()
def long_reply():
    chunks = []
    for line in post({**greedy, "prompt": [1, 17, 42, 99, 5, 25, 3, 77], "max_tokens": 900, "stream": True}):
        if line.startswith(b"data: {"):
            chunks.append(json.loads(line[6:]))
            decoding.set()
    out["long"] = {"logprobs": [x for c in chunks for ch in c["choices"] if ch["logprobs"] for x in ch["logprobs"]["token_logprobs"]],
                   "finish": [ch["finish_reason"] for c in chunks for ch in c["choices"] if ch["finish_reason"]]}
    decoding.set()
reader = threading.Thread(target=long_reply)
reader.start()
assert decoding.wait(60)
out["short"] = clean(json.load(post({**greedy, "prompt": [8, 14, 64, 12, 30, 2, 9, 11, 40, 7], "max_tokens": 40})))
reader.join()
m = metrics()
assert m["colibri_ranks"] == ranks, m["colibri_ranks"]
# Each step samples at most one token per slot: more tokens than steps means some step ran both slots.
assert m["colibri_generated_tokens_total"] > m["colibri_engine_steps_total"], (m["colibri_generated_tokens_total"], m["colibri_engine_steps_total"])
assert len(out["long"]["logprobs"]) == 900 and out["short"]["usage"]["completion_tokens"] == 40
out["lookup"] = clean(json.load(post({**greedy, "prompt": [5, 6, 7, 8] * 4, "max_tokens": 48, "speculate": "lookup"})))
s = metrics()
out["speculation"] = {k: s[k] - m[k] for k in ("colibri_speculative_drafted_total", "colibri_speculative_accepted_total")}
assert out["speculation"]["colibri_speculative_drafted_total"] > 0, out["speculation"]
out["trace"] = clean(json.load(post({**greedy, "prompt": [3, 1, 4, 1, 5, 9, 2, 6], "max_tokens": 8, "colibri": {"trace": True}})))
json.dump(out, open(out_path, "w"), sort_keys=True)
PY
descendants() { local p; for p in $(ps -o pid= --ppid "$1"); do echo "$p"; descendants "$p"; done; }
rank_pid() {  # RUNNER RANK: the colibri process of that rank under RUNNER (one process: RANK "")
  local p
  for p in $(descendants "$1"); do
    [[ "$(cat "/proc/$p/comm" 2> /dev/null)" == colibri ]] || continue
    if [[ -z "$2" ]] || grep -qzx "OMPI_COMM_WORLD_RANK=$2" "/proc/$p/environ" 2> /dev/null; then echo "$p"; return; fi
  done
}
listening_port() {  # LOG: the port rank 0 listens on, once it says so (empty after 30 s)
  local port=""
  for _ in $(seq 300); do
    port=$(sed -n 's|^colibri serve: .*listening on http://127\.0\.0\.1:\([0-9]*\)$|\1|p' "$1" 2> /dev/null)
    [[ -n "$port" ]] && break
    sleep 0.1
  done
  echo "$port"
}
serve_args=(serve -m "$work/mixtral.bin" --port 0 -t 1 -c 1024 --slots 2 -q)
serve() {  # N (1: one process): the client's replies into serve-N.json, then SIGTERM to rank 0 stops every rank
  local n="$1" runner port root rc=0 start elapsed
  rm -f "$work/serve.log"  # not the last run's line
  if [[ "$n" == 1 ]]; then
    timeout 60 "$cli" "${serve_args[@]}" 2> "$work/serve.log" &
  else
    timeout 60 mpirun --oversubscribe -np "$n" "$cli" "${serve_args[@]}" --rank-timeout 20 2> "$work/serve.log" &
  fi
  runner=$!
  port=$(listening_port "$work/serve.log")
  check test -n "$port"
  if [[ "$n" != 1 ]]; then check grep -q "experts over $n ranks, listening" "$work/serve.log"; fi
  check python3 "$work/client.py" "$port" "$work/serve-$n.json" "$n"
  root=$(rank_pid "$runner" "$([[ "$n" == 1 ]] || echo 0)")
  check test -n "$root"
  start=$(date +%s)
  kill -TERM "$root"
  wait "$runner" || rc=$?
  elapsed=$(($(date +%s) - start))
  check test "$rc" -eq 0
  check test "$elapsed" -lt 15
  check grep -q "^colibri serve: stopped$" "$work/serve.log"
  check test "$(grep -c '^colibri:' "$work/serve.log")" -eq 0
}
serve 1
for n in 2 3; do
  serve "$n"
  check cmp "$work/serve-1.json" "$work/serve-$n.json"
  echo "ok: serve: $n ranks answer as one process does (/v1/models names the placement, the trace each rank's timings); SIGTERM to rank 0 stopped every rank"
done

# A rank killed (kill -9) while the server waits for requests: with a follower gone rank 0 stops serving and exits 1
# with one line naming it; with rank 0 gone the follower exits 1 with one line; each within its --rank-timeout (and
# rank 0's heartbeat). mpirun --enable-recovery keeps the survivor running, so that the line is colibri's; each rank's
# exit status is written beside the log.
export COLIBRI_TEST_EXIT="$work/exit"
killed() {  # RANK LINE: kill RANK; the survivor's one line
  local victim rc start elapsed runner
  rm -f "$work"/exit.* "$work/serve.log"
  timeout 60 mpirun --oversubscribe --enable-recovery -np 2 bash -c '"$0" "$@"; echo $? > "$COLIBRI_TEST_EXIT.$OMPI_COMM_WORLD_RANK"' \
    "$cli" "${serve_args[@]}" --rank-timeout 2 2> "$work/serve.log" &
  runner=$!
  check test -n "$(listening_port "$work/serve.log")"
  victim=$(rank_pid "$runner" "$1")
  check test -n "$victim"
  start=$(date +%s)
  kill -9 "$victim"
  wait "$runner" || true
  elapsed=$(($(date +%s) - start))
  check test "$elapsed" -lt 15
  check test "$(cat "$work/exit.$((1 - $1))")" -eq 1
  check grep -qx "$2" "$work/serve.log"
  check test "$(grep -c '^colibri:' "$work/serve.log")" -eq 1
  echo "ok: serve: rank $1 killed: the other rank exits 1 with one line in ${elapsed}s"
}
killed 1 "colibri: serve: rank 0: rank 1 did not answer within 2 s (it stopped or died)"
killed 0 "colibri: serve: rank 1: another rank did not answer within 2 s (it stopped or died)"

# colibri chat under mpirun: stdin reaches rank 0, which chats; the other ranks follow its session (every operation
# told before it is done: engine/core/session_mirror.h). Three turns and a /reset on the demo model, greedy: the
# replies on stdout are one process's byte for byte, on 2 and 3 ranks, and with lookup speculation (its checks and
# the rows they keep are told too).
printf 'What is 23 plus 45?\nWho are you?\n/reset\nWhat is 71 minus 28?\n' > "$work/chat.txt"
chat_args=(chat -m "$demo" --greedy -t 1)
"$cli" "${chat_args[@]}" < "$work/chat.txt" > "$work/chat-1.out" 2> "$work/chat-1.err"
check test "$(grep -c 'tokens/s; prompt' "$work/chat-1.err")" -eq 3
check grep -q "So 23 plus 45 is 68.$" "$work/chat-1.out"
for n in 2 3; do
  ranks "$n" "$cli" "${chat_args[@]}" < "$work/chat.txt" > "$work/chat-$n.out" 2> "$work/chat-$n.err"
  check cmp "$work/chat-1.out" "$work/chat-$n.out"
  check test "$(grep -c 'tokens/s; prompt' "$work/chat-$n.err")" -eq 3
  check test "$(grep -c '^colibri:' "$work/chat-$n.err")" -eq 0
  echo "ok: chat: $n ranks reply as one process does"
done
ranks 2 "$cli" "${chat_args[@]}" --speculate lookup < "$work/chat.txt" > "$work/chat-lookup.out" 2> "$work/chat-lookup.err"
check cmp "$work/chat-1.out" "$work/chat-lookup.out"
check grep -q "^\[speculation (lookup): [1-9][0-9]* drafted" "$work/chat-lookup.err"  # checks were told
echo "ok: chat: 2 ranks with lookup speculation reply as one process does"
# Idle for three times the --rank-timeout between two messages: rank 0's heartbeat keeps the follower waiting.
(head -2 "$work/chat.txt"; sleep 3; tail -2 "$work/chat.txt") | ranks 2 "$cli" "${chat_args[@]}" --rank-timeout 1 > "$work/chat-idle.out" 2> "$work/chat-idle.err"
check cmp "$work/chat-1.out" "$work/chat-idle.out"
check test "$(grep -c '^colibri:' "$work/chat-idle.err")" -eq 0
echo "ok: chat: idle past --rank-timeout, 2 ranks still reply as one process does"
# Rank 0 waiting for input: SIGTERM to it ends every rank (exit 0); a killed follower ends rank 0 with one line and
# exit 1 within its --rank-timeout. Each rank's exit status is written beside the log (mpirun --enable-recovery keeps
# the survivor running).
chat_ended() {  # VICTIM_RANK SIGNAL SURVIVOR_EXIT [LINE]
  local runner victim start elapsed survivor=$((1 - $1)) i
  rm -f "$work"/exit.* "$work/chat.err" "$work/chat.fifo"
  mkfifo "$work/chat.fifo"
  timeout 60 mpirun --oversubscribe --enable-recovery -np 2 \
    bash -c '"$0" "$@"; echo $? > "$COLIBRI_TEST_EXIT.$OMPI_COMM_WORLD_RANK"' "$cli" "${chat_args[@]}" --rank-timeout 2 \
    < "$work/chat.fifo" > /dev/null 2> "$work/chat.err" &
  runner=$!
  exec 3> "$work/chat.fifo"  # the input stays open: rank 0 waits for the next message
  head -1 "$work/chat.txt" >&3
  for i in $(seq 300); do grep -q 'tokens/s; prompt' "$work/chat.err" 2> /dev/null && break; sleep 0.1; done
  check grep -q 'tokens/s; prompt' "$work/chat.err"
  victim=$(rank_pid "$runner" "$1")
  check test -n "$victim"
  start=$(date +%s)
  kill "-$2" "$victim"
  for i in $(seq 150); do [[ -s "$work/exit.$survivor" ]] && break; sleep 0.1; done
  elapsed=$(($(date +%s) - start))
  check test -s "$work/exit.$survivor"
  check test "$elapsed" -lt 10
  check test "$(cat "$work/exit.$survivor")" -eq "$3"
  if [[ -n "${4:-}" ]]; then
    check grep -qx "$4" "$work/chat.err"
    check test "$(grep -c '^colibri:' "$work/chat.err")" -eq 1
  else
    check test "$(cat "$work/exit.$1")" -eq 0
    check test "$(grep -c '^colibri:' "$work/chat.err")" -eq 0
  fi
  exec 3>&-
  wait "$runner" || true
  echo "ok: chat: $2 to rank $1: rank $survivor exits $3 in ${elapsed}s"
}
chat_ended 0 TERM 0
chat_ended 1 KILL 1 "colibri: chat: rank 0: rank 1 did not answer within 2 s (it stopped or died)"

# generate streams its text as it comes: rank 0's is one process's.
"$cli" generate -m "$demo" --prompt "Once upon a time" -n 24 --greedy -t 1 > "$work/generate-1.txt"
ranks 2 "$cli" generate -m "$demo" --prompt "Once upon a time" -n 24 --greedy -t 1 > "$work/generate-2.txt"
check test -s "$work/generate-1.txt"
check cmp "$work/generate-1.txt" "$work/generate-2.txt"
echo "ok: generate: 2 ranks stream one process's text"

# The C API: a program opened under mpirun joins the ranks (colibri_model_open); rank 0 generates and chats, pausing
# twice its COLIBRI_RANK_TIMEOUT in between (the session's heartbeat), the other rank follows (colibri_session_follow).
"$c_api_program" "$demo" > "$work/c-api-1.out" 2> "$work/c-api-1.err"
check grep -q "^rank 0 of 1$" "$work/c-api-1.err"
check grep -q "^ids: [0-9]" "$work/c-api-1.out"
check grep -q "So 23 plus 45 is 68.$" "$work/c-api-1.out"
COLIBRI_RANK_TIMEOUT=1 ranks 2 "$c_api_program" "$demo" 2 > "$work/c-api-2.out" 2> "$work/c-api-2.err"
check cmp "$work/c-api-1.out" "$work/c-api-2.out"
check grep -q "^rank 0 of 2$" "$work/c-api-2.err"
check grep -q "^rank 1 of 2$" "$work/c-api-2.err"
echo "ok: C API: 2 ranks give one process's ids and replies"
