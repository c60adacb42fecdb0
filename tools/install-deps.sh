#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages Colibri builds and tests with. Run as root or with sudo available.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
packages=(
  build-essential cmake ninja-build pkg-config
  nlohmann-json3-dev libcli11-dev libcpp-httplib-dev libedit-dev libxxhash-dev libzstd-dev libpcre2-dev libutf8proc-dev libpfm4-dev
  qt6-base-dev qt6-charts-dev libqt6opengl6-dev xvfb openbox x11-utils
  clang libclang-rt-14-dev
  libsimde-dev libbenchmark-dev g++-aarch64-linux-gnu qemu-user
  libopenmpi-dev openmpi-bin  # optional: expert parallelism under mpirun (test_mpi_ranks)
  dpkg-dev appstream desktop-file-utils shared-mime-info
  curl
)
# Node.js runs the openai npm client against colibri serve (tests/server/openai); a Node.js installed some other
# way (with its own npm) is kept.
command -v node > /dev/null && command -v npm > /dev/null || packages+=(nodejs npm)
# Skip the network when everything is already there.
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
# The test oracle's npm packages, at the versions package-lock.json pins.
repo="$(cd "$(dirname "$0")/.." && pwd)"
# Only the tests need it: without the npm registry the build and the chat still work, and test_server_openai is
# skipped (a failure under CI=true).
if [ ! -d "$repo/tests/server/openai/node_modules/openai" ]; then
  npm ci --prefix "$repo/tests/server/openai" --no-audit --no-fund ||
    echo "install-deps: the openai npm package could not be installed; test_server_openai will not run" >&2
fi
