#!/usr/bin/env bash
# check_engine_includes.sh on small made-up engine trees: it passes a clean one and fails, naming the include, on
# each kind of violation (upward, sideways, a circle, Qt, another part of the tree, a relative path, a file
# outside the wings).
# Usage: check_engine_includes_selftest.sh PATH_TO_check_engine_includes.sh
set -euo pipefail
check=${1:?usage: check_engine_includes_selftest.sh CHECK_SCRIPT}
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT

# A clean tree: every wing, each include one way.
clean() {
  local t=$1
  mkdir -p "$t"/{base,file,text,cache,core,include/colibri}
  printf '#pragma once\n' > "$t/base/status.h"
  printf '#pragma once\n#include "engine/base/status.h"\n#include "kernels/types.h"\n' > "$t/file/format.h"
  printf '#include "engine/file/format.h"\n#include <cstdint>\n' > "$t/file/format.cpp"
  printf '#pragma once\n#include "engine/base/status.h"\n' > "$t/text/tokenizer.h"
  printf '#pragma once\n#include "engine/file/format.h"\n' > "$t/cache/expert_cache.h"
  printf '#pragma once\n#include "engine/cache/expert_cache.h"\n#include "engine/text/tokenizer.h"\n' > "$t/core/model.h"
  printf '#include "engine/core/model.h"\n  #  include "engine/core/model.h"\n' > "$t/core/model.cpp"
  printf '#pragma once\n' > "$t/include/colibri/colibri.h"
  printf '#include "colibri/colibri.h"\n#include "engine/core/model.h"\n' > "$t/core/c_api.cpp"
}

expect_pass() {
  local out
  if ! out=$("$check" "$root/$1" 2>&1); then
    echo "FAIL: $1 should pass:"; echo "$out"; exit 1
  fi
  echo "ok: $1 passes"
}

# expect_fail CASE TEXT...: the check fails and its report contains every TEXT.
expect_fail() {
  local out name=$1
  shift
  if out=$("$check" "$root/$name" 2>&1); then
    echo "FAIL: $name should fail:"; echo "$out"; exit 1
  fi
  for text in "$@"; do
    if [[ $out != *"$text"* ]]; then
      echo "FAIL: $name: the report does not say '$text':"; echo "$out"; exit 1
    fi
  done
  echo "ok: $name fails: $(echo "$out" | head -1)"
}

clean "$root/clean"
expect_pass clean

clean "$root/upward"
printf '#include "engine/core/model.h"\n' >> "$root/upward/cache/expert_cache.h"
expect_fail upward 'cache/expert_cache.h:3: cache includes "engine/core/model.h" (core)'

clean "$root/sideways"
printf '#include "engine/file/format.h"\n' >> "$root/sideways/text/tokenizer.h"
expect_fail sideways 'text/tokenizer.h:3: text includes "engine/file/format.h" (file)'

clean "$root/base_up"
printf '#include "engine/text/tokenizer.h"\n' >> "$root/base_up/base/status.h"
expect_fail base_up 'base/status.h:2: base includes'

clean "$root/circle"
printf '#pragma once\n#include "engine/file/format.h"\n' > "$root/circle/file/schema.h"
printf '#include "engine/file/schema.h"\n' >> "$root/circle/file/format.cpp"
expect_fail circle 'a circle of includes: ' 'file/format' 'file/schema'

clean "$root/qt"
printf '#include <QString>\n' >> "$root/qt/core/model.cpp"
expect_fail qt 'core/model.cpp:3: includes Qt (QString)'

clean "$root/tools"
printf '#include "tools/bench.h"\n' >> "$root/tools/core/model.cpp"
expect_fail tools '"tools/bench.h" is not an engine/ or kernels/ path'

clean "$root/relative"
printf '#include "status.h"\n' >> "$root/relative/file/format.cpp"
expect_fail relative 'file/format.cpp:3: "status.h" is not an engine/ or kernels/ path'

clean "$root/outside"
printf '#pragma once\n' > "$root/outside/loose.h"
expect_fail outside 'loose.h: not in a wing'

clean "$root/api"
printf '#include "colibri/colibri.h"\n' >> "$root/api/text/tokenizer.h"
expect_fail api 'text includes "colibri/colibri.h" (include)'
