#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time; the fuzz_<target> ctest entries call it.
#   run_fuzzer.sh FUZZER SECONDS DICT SEEDS WORK
# The seeds are read, never written: new inputs go to WORK/corpus. A crash, a leak, a sanitizer report, an
# input slower than 30 s or a run past 2 GiB fails the test and leaves the input in WORK/artifacts;
# reproduce with `FUZZER WORK/artifacts/<file>`.
set -euo pipefail
fuzzer=$1 seconds=$2 dict=$3 seeds=$4 work=$5
if [[ ! -d "$seeds" ]] || [[ -z "$(find "$seeds" -type f -print -quit)" ]]; then
  echo "run_fuzzer.sh: no seeds in $seeds (the fuzz_seeds target makes them; re-run cmake if shared/reference appeared after configuring)" >&2
  exit 1
fi
rm -rf "$work"
mkdir -p "$work/corpus" "$work/artifacts"
# libFuzzer would cut inputs to 1 MiB; the whole-model seeds are larger.
max_len=$(find "$seeds" -type f -printf '%s\n' | sort -n | tail -1)
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
"$fuzzer" -max_total_time="$seconds" -max_len="${max_len:-4096}" -timeout=30 -rss_limit_mb=2048 -dict="$dict" \
  -artifact_prefix="$work/artifacts/" -print_final_stats=1 "$work/corpus" "$seeds"
