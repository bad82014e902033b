#!/usr/bin/env bash
# Installs the Debian packages twin builds and tests with, where missing (idempotent, quick when present).
set -euo pipefail
packages=(cmake g++ make nlohmann-json3-dev libspdlog-dev libfmt-dev libboost-graph-dev libcli11-dev
          libgtest-dev libbenchmark-dev clang chromium libopenmpi-dev openmpi-bin zlib1g-dev pybind11-dev
          python3-dev python3-jsonschema)
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
