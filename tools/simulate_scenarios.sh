#!/usr/bin/env bash
# Simulates every shipped scenario (scenarios/*.json) with the twin binary given, each into OUT/<scenario>/, so that
# two builds' rankings can be compared byte for byte (issue 42: making an op's meaning explicit must leave every
# ranking.csv, best.json and trace as it was):
#   bash tools/simulate_scenarios.sh build-before/twin /tmp/before
#   bash tools/simulate_scenarios.sh build-cpu/twin /tmp/after
#   diff -r -x report.html /tmp/before /tmp/after && echo identical
# report.html is left out of the comparison: it names the run's time. Extra arguments go to twin simulate.
set -euo pipefail
twin=$(realpath "$1")
out=$2
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
for scenario in "$root"/scenarios/*.json; do
  name=$(basename "$scenario" .json)
  start=$(date +%s.%N)
  (cd "$root/scenarios" && "$twin" simulate "$scenario" --out "$out/$name" --quiet "$@") >"$out/$name.log" 2>&1 ||
    echo "$name: twin simulate failed (exit $?), see $out/$name.log"
  printf '%-45s %6.1f s\n' "$name" "$(echo "$(date +%s.%N) - $start" | bc)"
done
