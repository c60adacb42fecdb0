#!/bin/sh
# Configures and builds the kernels and test_kernels for aarch64 in <build dir> and runs the test under
# qemu-aarch64, so the native NEON variant is checked against scalar. Exits 77 (ctest: skipped) when the
# cross compiler or qemu is missing.
#   run_cross_kernels.sh <cmake> <generator> <source dir> <build dir>
set -eu
cmake=$1 generator=$2 src=$3 build=$4
for tool in aarch64-linux-gnu-g++ qemu-aarch64; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "skipped: $tool not installed (tools/install-deps.sh installs g++-aarch64-linux-gnu and qemu-user)"
    exit 77
  fi
done
"$cmake" -S "$src/tests/kernels/cross" -B "$build" -G "$generator" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE="$src/cmake/aarch64-linux-gnu.cmake" >"$build.configure.log" 2>&1 ||
  { cat "$build.configure.log"; exit 1; }
"$cmake" --build "$build" -j2
exec qemu-aarch64 -L /usr/aarch64-linux-gnu "$build/test_kernels"
