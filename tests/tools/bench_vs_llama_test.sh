#!/bin/bash
# bench/scripts/bench_vs_llama.py against stand-in llama-bench programs (the real llama.cpp and ik_llama.cpp are
# built outside the repository): every program runs every round, ik_llama.cpp twice (-fmoe, -fmoe -rtr) and at a
# depth through -gp (it has no -d), llama.cpp with -d; the tables put each program's medians in its own column.
# usage: bench_vs_llama_test.sh SCRIPT COLIBRI MAKE_MODEL
set -euo pipefail
script=$1 colibri=$2 make_model=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/fake-bench" <<'PY'
#!/usr/bin/env python3
# Answers as llama-bench -o json does; logs its arguments; speeds that tell the programs apart.
import json, os, sys
a = sys.argv[1:]
ik = os.path.basename(sys.argv[0]).startswith("ik")
with open(os.environ["FAKE_BENCH_LOG"], "a") as log:
    log.write(os.path.basename(sys.argv[0]) + " " + " ".join(a) + "\n")
if ik and "-d" in a:
    sys.exit("error: unknown argument: -d")
def val(flag):
    return a[a.index(flag) + 1] if flag in a else None
reps = int(val("-r") or 1)
speed = 30.0 if not ik else (60.0 if val("-rtr") == "1" else 40.0)
tests = []
if int(val("-p") or 0):
    tests.append({"n_prompt": int(val("-p")), "n_gen": 0, "samples_ts": [2 * speed] * reps})
if int(val("-n") or 0):
    tests.append({"n_prompt": 0, "n_gen": int(val("-n")), "samples_ts": [speed] * reps})
for flag in ("-gp", "-pg"):
    if val(flag):
        d, g = map(int, val(flag).split(","))
        tests.append({"n_prompt": d, "n_gen": g, "samples_ts": [speed / 2] * reps})
print(json.dumps(tests))
PY
chmod +x "$dir/fake-bench"
ln -s fake-bench "$dir/llama-bench"
ln -s fake-bench "$dir/ik-llama-bench"
export FAKE_BENCH_LOG="$dir/log"
"$make_model" --family mixtral --hidden 64 --layers 2 --experts 4 --top-k 2 --vocab 1024 -o "$dir/hf" > /dev/null
"$colibri" convert "$dir/hf" -o "$dir/bench-f16.bin" --type f16 -q
: > "$dir/bench-f16.gguf"
python3 "$script" "$colibri" "$dir/llama-bench" "$dir" --ik-bench "$dir/ik-llama-bench" --types f16 --rounds 2 --reps 2 \
    --prompt 16 --decode 8 --depth 32 --ttft 1 > "$dir/out" 2> "$dir/err"
cat "$dir/out"
fail() { echo "FAIL: $*"; exit 1; }
grep -q '| f16 | [0-9.]* | 30.00 | 20.00 | 30.00 |' "$dir/out" || fail "decode medians at depth (llama.cpp -d 30, ik -gp 20, ik -rtr -gp 30)"
grep -q '| f16 | [0-9.]* | 60.00 | 80.00 | 120.00 |' "$dir/out" || fail "prompt medians"
[ "$(grep -c '^llama-bench .* -d 32' "$dir/log")" = 2 ] || fail "llama.cpp runs with -d, once per round"
[ "$(grep -c '^ik-llama-bench -fmoe 1 -m .* -gp 32,8' "$dir/log")" = 2 ] || fail "ik_llama.cpp -fmoe at a depth through -gp"
[ "$(grep -c '^ik-llama-bench -fmoe 1 -rtr 1 -m .* -gp 32,8' "$dir/log")" = 2 ] || fail "ik_llama.cpp -fmoe -rtr"
[ "$(grep -c -- '-pg 16,1' "$dir/log")" = 3 ] || fail "every program timed to the first token"
grep -q 'Peak RSS GB (largest start to the first token)' "$dir/out" || fail "peak RSS from the starts"
echo PASS
