#!/usr/bin/env bash
# Installs the Debian packages twin needs, where missing (idempotent, quick when present): what building and running
# twin needs (tools/setup.sh), and with --tests also what the test suites need (tools/test.sh): GoogleTest, Google
# Benchmark, clang (the fuzz targets), Chromium (the report's browser tests), python3-jsonschema (the schema test).
set -euo pipefail
packages=(cmake g++ make nlohmann-json3-dev libspdlog-dev libfmt-dev libboost-graph-dev libcli11-dev
          libopenmpi-dev openmpi-bin zlib1g-dev pybind11-dev python3-dev)
if [ "${1:-}" = "--tests" ]; then
  packages+=(libgtest-dev libbenchmark-dev clang chromium python3-jsonschema)
elif [ $# -gt 0 ]; then
  echo "usage: tools/deps.sh [--tests]" >&2
  exit 2
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
