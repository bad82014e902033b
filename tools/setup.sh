#!/usr/bin/env bash
# The README's first command: install what is missing, build twin and its Python module, and simulate a shipped scenario
# with the built-in profile (no GPU, no calibration needed).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DTWIN_BUILD_TESTS=OFF > /dev/null
# twin, and the Python module (import twin, with PYTHONPATH=build/python: docs/PYTHON.md; pybind11-dev, python3-dev).
cmake --build build --target twin twin_python -j "$(nproc)"
build/twin simulate scenarios/llama2-7b-8xH100.json --out out/llama2-7b-8xH100
