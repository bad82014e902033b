#!/usr/bin/env bash
# Issue 44's mutation campaign spread over a machine's cores: PROCESSES copies of tools/mutate_scenarios.py, seeds
# SEED .. SEED+PROCESSES-1, each with COUNT mutants or until DEADLINE_S wall-clock seconds, then one summary line
# (mutants, exit statuses and findings summed) and every finding in WORK/findings.jsonl.
# Usage: tools/mutation_campaign.sh TWIN WORK PROCESSES COUNT SEED DEADLINE_S
set -euo pipefail
twin=$(realpath "$1"); work=$2; processes=$3; count=$4; seed=$5; deadline_s=$6
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$work"
for ((p = 0; p < processes; p++)); do
  mkdir -p "$work/p$p"
  python3 "$root/tools/mutate_scenarios.py" --twin "$twin" --count "$count" --seed $((seed + p)) \
    --work "$work/p$p" --deadline-s "$deadline_s" > "$work/p$p/summary.jsonl" 2>&1 &
done
wait
cat "$work"/p*/findings.jsonl > "$work/findings.jsonl" 2>/dev/null || true
python3 - "$work" "$processes" <<'PY'
import json, sys
from pathlib import Path
work, processes = Path(sys.argv[1]), int(sys.argv[2])
total = {"processes": processes, "mutants": 0, "exit": {}, "findings": {}, "slowest_cpu_s": 0.0, "slowest": ""}
for p in range(processes):
    lines = [l for l in (work / f"p{p}" / "summary.jsonl").read_text().splitlines() if l.startswith("{")]
    if not lines:
        print(f"process {p} printed no summary", file=sys.stderr)
        continue
    last = json.loads(lines[-1])
    total["mutants"] += last["mutants"]
    for key in ("exit", "findings"):
        for name, n in last[key].items():
            total[key][name] = total[key].get(name, 0) + n
    if last["slowest_cpu_s"] > total["slowest_cpu_s"]:
        total["slowest_cpu_s"], total["slowest"] = last["slowest_cpu_s"], last["slowest"]
print(json.dumps(total))
PY
