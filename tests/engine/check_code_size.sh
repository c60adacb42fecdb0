#!/usr/bin/env bash
# The size bounds of the house plan (issue 32): no engine function over MAX_FUNCTION lines, no source file in the
# tree over MAX_FILE lines, app/colibri_main.cpp under 200. A function starts at a line indented 0 or 4 spaces that is not a namespace, class or
# control statement, has a '(' and whose signature (within 6 lines) ends in '{'; it ends at the first '}' at the
# same indentation. Usage: check_code_size.sh SOURCE_DIR [MAX_FUNCTION=100] [MAX_FILE=1500]
set -euo pipefail
src=$1; max_function=${2:-100}; max_file=${3:-1500}
problems=0
while IFS= read -r -d '' f; do
  out=$(awk -v limit="$max_function" -v file="${f#$src/}" '
    { line[NR] = $0 }
    END {
      i = 1
      while (i <= NR) {
        l = line[i]
        if (match(l, /^(    )?[A-Za-z_~]/) && index(l, "(") > 0 &&
            l !~ /^(    )?(namespace|struct|class|enum|union|extern|template|public|private|protected|case|default|return|if|for|while|switch|else|do)([^A-Za-z0-9_]|$)/) {
          indent = (substr(l, 1, 4) == "    ") ? "    " : ""
          j = i
          while (j <= NR && j - i < 6 && line[j] !~ /\{[ \t]*$/ && line[j] !~ /;[ \t]*$/) j++
          if (j <= NR && line[j] ~ /\{[ \t]*$/ && line[j] !~ /= *\{[ \t]*$/) {
            k = j + 1
            while (k <= NR && index(line[k], indent "}") != 1) k++
            if (k - i + 1 > limit) { sub(/^ +/, "", l); printf "%s:%d: a function of %d lines: %s\n", file, i, k - i + 1, substr(l, 1, 100) }
            i = k + 1
            continue
          }
        }
        i++
      }
    }' "$f")
  if [ -n "$out" ]; then echo "$out"; problems=$((problems + $(echo "$out" | wc -l))); fi
done < <(find "$src/engine" -name '*.cpp' -print0 -o -name '*.h' -print0 | sort -z)
while IFS= read -r -d '' f; do
  n=$(wc -l < "$f")
  if [ "$n" -gt "$max_file" ]; then echo "${f#$src/}: $n lines (at most $max_file)"; problems=$((problems + 1)); fi
done < <(find "$src" \( -path "$src/build*" -o -path "$src/.git" -o -path "$src/tests/data" \) -prune -o \
           \( -name '*.cpp' -o -name '*.h' -o -name '*.c' \) -print0 | sort -z)
# The command line's entry point only dispatches: each subcommand is a file under app/commands/.
main_lines=$(wc -l < "$src/app/colibri_main.cpp")
if [ "$main_lines" -ge 200 ]; then echo "app/colibri_main.cpp: $main_lines lines (under 200)"; problems=$((problems + 1)); fi
if [ "$problems" -gt 0 ]; then echo "colibri: code size: $problems problem(s) above"; exit 1; fi
echo "ok: no engine function over $max_function lines, no source file over $max_file lines, colibri_main.cpp $main_lines lines"
