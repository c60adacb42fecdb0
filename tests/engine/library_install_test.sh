#!/usr/bin/env bash
# libcolibri as a user gets it: installed into a temporary prefix, found by pkg-config (colibri.pc), and a C program
# built against the installed files alone. It opens a model (the file wing), uses a RAM budget (the cache wing),
# tokenizes and detokenizes (the text wing) and generates (the core), so the one installed library carries every
# wing of the engine.
# Usage: library_install_test.sh BUILD_DIR MODEL.bin
set -euo pipefail
build="$1"
model="$2"
prefix="$(mktemp -d)"
# A failure says how much room the prefix's file system had: the install copies every binary of the build.
trap 'status=$?; [ $status -eq 0 ] || df -h "$prefix" >&2; rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" > /dev/null
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig:$prefix/lib/x86_64-linux-gnu/pkgconfig:$prefix/lib64/pkgconfig"
test -f "$prefix/include/colibri/colibri.h"
# libcolibri is static by default: its users link what it links (Libs.private).
flags="$(pkg-config --cflags --libs --static colibri)"
cat > "$prefix/hello.c" <<'C'
#include <colibri/colibri.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char** argv) {
    if (argc != 2) return 2;
    if (colibri_model_open("/nonexistent/model.bin") != NULL) return 1;
    printf("missing model: %s\n", colibri_last_error());
    colibri_model_options options = colibri_model_options_defaults();
    options.ram_budget = (uint64_t)1 << 30;
    colibri_model* model = colibri_model_open_with(argv[1], &options);
    if (model == NULL) { printf("open: %s\n", colibri_last_error()); return 1; }
    int32_t prompt[64];
    const int32_t n = colibri_tokenize(model, "Once upon a time", 1, prompt, 64);
    if (n <= 0 || n > 64) { printf("tokenize: %s\n", colibri_last_error()); return 1; }
    colibri_session* session = colibri_session_new(model, 1, 128);
    colibri_sampler_params greedy = colibri_sampler_defaults();
    greedy.greedy = 1;
    int32_t reply[8];
    const int32_t got = colibri_generate(session, prompt, (size_t)n, 8, &greedy, reply, 8, NULL, NULL);
    if (got <= 0) { printf("generate: %s\n", colibri_last_error()); return 1; }
    char text[512];
    if (colibri_detokenize(model, reply, (size_t)got, text, sizeof text) < 0) return 1;
    colibri_cache_stats stats;
    if (colibri_model_cache_stats(model, &stats) != 0) return 1;
    printf("%s: %d prompt tokens, %d generated (%llu expert reads): %s\n", colibri_model_family(model), n, got,
           (unsigned long long)stats.misses, text);
    colibri_session_free(session);
    colibri_model_close(model);
    return 0;
}
C
# A sanitized build installs an instrumented library: its user links the sanitizers' runtimes too.
sanitize=""
if grep -q '^COLIBRI_SANITIZE:BOOL=ON' "$build/CMakeCache.txt"; then sanitize="-fsanitize=address,undefined"; fi
# shellcheck disable=SC2086
cc -std=c11 $sanitize -o "$prefix/hello" "$prefix/hello.c" $flags -lm -Wl,-rpath,"$prefix/lib"
"$prefix/hello" "$model"
echo "ok: built with pkg-config colibri ($flags)"
