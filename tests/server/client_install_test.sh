#!/usr/bin/env bash
# The local transport's client library as a user gets it: installed into a temporary prefix, found by pkg-config
# (colibri-client.pc), and a C program built against it that reports a missing server as an error.
set -euo pipefail
build="$1"
prefix="$(mktemp -d)"
# A failure says how much room the prefix's file system had: the install copies every binary of the build.
trap 'status=$?; [ $status -eq 0 ] || df -h "$prefix" >&2; rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" > /dev/null
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig:$prefix/lib/x86_64-linux-gnu/pkgconfig:$prefix/lib64/pkgconfig"
flags="$(pkg-config --cflags --libs colibri-client)"
test -f "$prefix/include/colibri/colibri_client.h"
cat > "$prefix/hello.c" <<'C'
#include <colibri_client.h>
#include <stdio.h>
int main(void) {
    char error[256];
    colibri_client* c = colibri_client_connect("/nonexistent/colibri.sock", error, sizeof error);
    if (c != NULL) return 1;
    printf("%s\n", error);
    return 0;
}
C
# A sanitized build installs an instrumented library: its user links the sanitizers' runtimes too.
sanitize=""
if grep -q '^COLIBRI_SANITIZE:BOOL=ON' "$build/CMakeCache.txt"; then sanitize="-fsanitize=address,undefined"; fi
# shellcheck disable=SC2086
cc -std=c11 $sanitize -o "$prefix/hello" "$prefix/hello.c" $flags -Wl,-rpath,"$prefix/lib"
out="$("$prefix/hello")"
echo "$out"
case "$out" in
  *"/nonexistent/colibri.sock"*) echo "ok: built with pkg-config colibri-client ($flags)";;
  *) echo "unexpected: $out"; exit 1;;
esac
