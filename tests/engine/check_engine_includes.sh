#!/usr/bin/env bash
# The engine's wings depend one way: core -> cache, distributed, file, text -> base, and the cache reads the file wing
# (docs/ARCHITECTURE.md, "engine/"). This reads every #include of ENGINE_DIR and fails, naming each one, on an
# include that runs upward or sideways between wings, leaves the engine for another part of the tree (only
# "engine/..." and "kernels/..." paths; no Qt), or closes a circle between two files (a header and its source
# count as one file).
# Usage: check_engine_includes.sh ENGINE_DIR
set -euo pipefail
engine=${1:?usage: check_engine_includes.sh ENGINE_DIR}
cd "$engine"

# Which wings each wing may include; include/ is the public C header (colibri/colibri.h), which only core implements.
declare -A may_include=(
  [base]="base"
  [file]="file base"
  [text]="text base"
  [cache]="cache file base"
  [distributed]="distributed base"
  [core]="core cache distributed file text base include"
  [include]="include"
)

problems=0
problem() {
  echo "$1"
  problems=$((problems + 1))
}

edges=$(mktemp)
trap 'rm -f "$edges"' EXIT

while IFS= read -r -d '' path; do
  file=${path#./}
  wing=${file%%/*}
  if [[ $file != */* || -z ${may_include[$wing]+x} ]]; then
    problem "$file: not in a wing (base, file, text, cache, distributed, core, include)"
    continue
  fi
  module=${file%.*}
  while IFS= read -r line; do
    number=${line%%:*}
    text=${line#*:}
    if [[ $text =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]*\<(Q[A-Za-z]*|Qt[A-Za-z]*/) ]]; then
      problem "$file:$number: includes Qt (${BASH_REMATCH[1]}): the engine has no Qt dependency"
      continue
    fi
    [[ $text =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]*\"([^\"]+)\" ]] || continue
    target=${BASH_REMATCH[1]}
    case $target in
      kernels/*) continue ;;
      colibri/colibri.h) target_file=include/colibri/colibri.h ;;
      engine/*) target_file=${target#engine/} ;;
      *)
        problem "$file:$number: \"$target\" is not an engine/ or kernels/ path"
        continue
        ;;
    esac
    target_wing=${target_file%%/*}
    if [[ " ${may_include[$wing]} " != *" $target_wing "* ]]; then
      problem "$file:$number: $wing includes \"$target\" ($target_wing): $wing may include only ${may_include[$wing]}"
      continue
    fi
    target_module=${target_file%.*}
    [[ $target_module != "$module" ]] && echo "$module $target_module" >> "$edges"
  done < <(grep -n '^[[:space:]]*#[[:space:]]*include' "$file" || true)
done < <(find . -type f \( -name '*.h' -o -name '*.cpp' -o -name '*.c' \) -print0 | sort -z)

# tsort names the files of a circle on stderr and exits non-zero.
if ! loop=$(tsort "$edges" 2>&1 >/dev/null); then
  problem "a circle of includes: $(echo "$loop" | grep -v 'input contains a loop' | sed 's/^tsort: //' | awk '!seen[$0]++' | tr '\n' ' ')"
fi

if ((problems > 0)); then
  echo "colibri: engine includes: $problems problem(s) above"
  exit 1
fi
echo "ok: engine/ includes run one way (core -> cache, distributed, file, text -> base; cache -> file), without a circle"
