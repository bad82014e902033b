#!/usr/bin/env python3
"""Mutation campaign of issue 44's aims: mutate the shipped scenarios, run `twin simulate` on each and report what
breaks the project's rules.

Each mutant is a shipped scenario (scenarios/*.json) with 1 to 3 JSON-aware mutations: a number pushed to an extreme
or scaled, a value of another type, a key removed, an unknown key added, a list emptied or repeated, a string with
control bytes or an unknown name. Each runs as `twin simulate MUTANT --quiet --top 1 --jobs 1 --out DIR` under an
8 GiB address-space cap and a CPU-time limit (one job: its CPU seconds are its seconds on an idle machine, whatever
the load of a shared one). Findings, one JSON line each in WORK/findings.jsonl (with the mutant's text):
  crash        exit status above 2 (a signal, an abort, a sanitizer) or an empty error line
  bad_alloc    "bad_alloc" anywhere in the output
  slow         over --limit-s CPU seconds (killed at limit + 5 by RLIMIT_CPU; at 10x the limit in wall-clock time)
  no_path      an error about the mutant (names its file) whose message carries no JSON path (" at /") while the
               mutation touched a scenario key
  mfu          a ranking.csv MFU or HFU above 100%
  multiline    an error of more than one line
Usage: tools/mutate_scenarios.py --twin build-cpu/twin --count N --seed S --work DIR [--limit-s 60] [--deadline-s T]
--deadline-s stops after the mutant that ends past T wall-clock seconds (a campaign on a lent machine's cores,
tools/mutation_campaign.sh); the summary then says how many ran.
Prints a summary (counts per exit status and finding, the rate) at the end and every 500 mutants.
"""
import argparse
import copy
import csv
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXTREME_NUMBERS = [0, -1, 1, 2, 3, 7, 1023, 65536, 2**31, 2**31 - 1, 2**53, 2**63, 10**30, 1e308, -1e308, 0.5,
                   1e-9, -0.0, 1.5, 100, 4096, 1 << 24, (1 << 24) + 1]
STRINGS = ["", "\u0000", "a\nb", "\u001b[31mred", "x" * 5000, "builtin", "none", "H100-SXM-80GB", "llama2-7b",
           "1f1b", "full", "zzz-unknown", "A100-SXM-40GB", "mixtral-8x7b", "ring", "fused", "h100-x1"]
# "twin simulate: " starts the progress line (cli/search_progress.cpp: "N of M strategies searched ..." or "still
# working ..."), which --quiet prints once on a long search.
MESSAGE_PREFIXES = ("[error] ", "[warning] ", "[info] ", "twin simulate: ")
UNKNOWN_KEYS = ["zero_stagee", "extra", "num_layer", "tensor_parallel", "\u0007bell"]


def paths_of(value, prefix=()):
    """Every (path, value) in the document, containers included."""
    yield prefix, value
    if isinstance(value, dict):
        for key, item in value.items():
            yield from paths_of(item, prefix + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from paths_of(item, prefix + (index,))


def set_at(document, path, value):
    if not path:
        return value
    parent = document
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = value
    return document


def remove_at(document, path):
    parent = document
    for step in path[:-1]:
        parent = parent[step]
    del parent[path[-1]]


def mutate_once(document, rng):
    """One mutation; returns (document, description)."""
    candidates = list(paths_of(document))
    path, value = rng.choice(candidates[1:] or candidates)
    kind = rng.randrange(10)
    where = "/" + "/".join(str(step) for step in path)
    if isinstance(value, bool) or kind == 0:
        new = rng.choice([None, True, False, "true", [], {}, 1, "x"])
        return set_at(document, path, new), f"{where} -> {json.dumps(new)}"
    if isinstance(value, (int, float)) and kind < 6:
        if rng.random() < 0.5:
            new = rng.choice(EXTREME_NUMBERS)
        else:
            new = value * rng.choice([2, 4, 10, 64, 1000, 0.5, 0.1, -1])
            if isinstance(value, int) and float(new).is_integer():
                new = int(new)
        return set_at(document, path, new), f"{where} -> {new!r}"
    if isinstance(value, str) and kind < 6:
        new = rng.choice(STRINGS + [value + value, value.upper(), value[:-1]])
        return set_at(document, path, new), f"{where} -> {json.dumps(new)[:40]}"
    if isinstance(value, list) and kind < 6:
        choice = rng.randrange(3)
        if choice == 0:
            new = []
        elif choice == 1 and value:
            new = value + [copy.deepcopy(rng.choice(value))]
        else:
            new = list(reversed(value))
        return set_at(document, path, new), f"{where} -> list of {len(new)}"
    if isinstance(value, dict) and kind < 6:
        key = rng.choice(UNKNOWN_KEYS)
        value[key] = rng.choice([1, "x", None, {}])
        return document, f"{where}/{key} added"
    if path and kind < 9:
        remove_at(document, path)
        return document, f"{where} removed"
    new = rng.choice(EXTREME_NUMBERS + STRINGS[:4])
    return set_at(document, path, new), f"{where} -> {json.dumps(new)[:40]}"


def limits(cpu_s):
    def apply():
        cap = 8 << 30
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))
        os.nice(19)
    return apply


def max_percent(ranking):
    """The largest MFU or HFU in a ranking.csv (its columns `mfu` and `hfu` are fractions), in percent, or None."""
    if not ranking.exists():
        return None
    best = None
    with open(ranking, newline="") as f:
        for row in csv.DictReader(f):
            for key in ("mfu", "hfu"):
                try:
                    percent = float(row.get(key) or "") * 100
                except ValueError:
                    continue
                best = percent if best is None else max(best, percent)
    return best


def run_one(twin, mutant, out_dir, limit_s):
    """(exit status or "timeout", output, CPU seconds of the run)."""
    shutil.rmtree(out_dir, ignore_errors=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        done = subprocess.run([twin, "simulate", str(mutant), "--quiet", "--top", "1", "--jobs", "1", "--out",
                               str(out_dir)], capture_output=True, timeout=10 * limit_s,
                              preexec_fn=limits(int(limit_s) + 5))
        status, output = done.returncode, (done.stdout + done.stderr).decode("utf-8", "replace")
    except subprocess.TimeoutExpired as expired:
        status, output = "timeout", ((expired.stdout or b"") + (expired.stderr or b"")).decode("utf-8", "replace")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return status, output, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def findings_of(status, output, seconds, mutant, touched_key, ranking, limit_s):
    found = []
    errors = [line for line in output.splitlines() if line.startswith("[error]")]
    if status == "timeout" or seconds > limit_s or status == -24:  # -24: SIGXCPU, past the CPU limit
        found.append("slow")
    killed_for_time = "slow" in found and status == -9  # RLIMIT_CPU's hard limit kills with SIGKILL
    if status != "timeout" and not killed_for_time and (status not in (-24, 0, 1, 2) or
                                                        (status == 1 and not output.strip())):
        found.append("crash")
    if "bad_alloc" in output:
        found.append("bad_alloc")
    root_key = "missing required key" in errors[0] if errors else False  # the document's root: no path to name
    if status == 1 and errors and mutant.name in errors[0] and touched_key and " at /" not in errors[0] \
            and not root_key:
        found.append("no_path")
    # Warnings and the --quiet progress line may come before the error; any other line is part of a broken message.
    stray = [line for line in output.splitlines() if not line.startswith(MESSAGE_PREFIXES)]
    if status == 1 and (len(errors) != 1 or stray):
        found.append("multiline")
    percent = max_percent(ranking) if status in (0, 1) else None
    if percent is not None and percent > 100:
        found.append("mfu")
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--twin", required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--seed", type=int, default=44)
    parser.add_argument("--work", required=True)
    parser.add_argument("--limit-s", type=float, default=60)
    parser.add_argument("--deadline-s", type=float, default=float("inf"))
    args = parser.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    for extra in (ROOT / "scenarios").glob("*.csv"):  # histograms the scenarios name, beside the mutants
        shutil.copy(extra, work / extra.name)
    bases = sorted((ROOT / "scenarios").glob("*.json"))
    documents = {base.name: json.loads(base.read_text()) for base in bases}
    rng = random.Random(args.seed)
    statuses, counts = {}, {}
    slowest = (0.0, "")
    findings = open(work / "findings.jsonl", "a")
    started = time.monotonic()
    for index in range(args.count):
        while True:  # JSON has no infinity: a mutant with a number scaled past 1e308 is drawn again
            base = rng.choice(bases)
            document = copy.deepcopy(documents[base.name])
            described = []
            for _ in range(rng.choice([1, 1, 2, 3])):
                document, description = mutate_once(document, rng)
                described.append(description)
            try:
                text = json.dumps(document, ensure_ascii=rng.random() < 0.5, allow_nan=False)
                break
            except ValueError:
                continue
        mutant = work / f"mutant_{index % 4}.json"
        mutant.write_text(text)
        status, output, seconds = run_one(args.twin, mutant, work / "out", args.limit_s)
        touched_key = any(not d.startswith("/ ") for d in described)
        found = findings_of(status, output, seconds, mutant, touched_key, work / "out" / "ranking.csv", args.limit_s)
        statuses[str(status)] = statuses.get(str(status), 0) + 1
        slowest = max(slowest, (seconds, f"{base.name} {described}"))
        for name in found:
            counts[name] = counts.get(name, 0) + 1
        if found:
            findings.write(json.dumps({"index": index, "base": base.name, "mutations": described, "found": found,
                                       "status": status, "seconds": round(seconds, 2), "output": output[-2000:],
                                       "mutant": text[:20000]}) + "\n")
            findings.flush()
        elapsed = time.monotonic() - started
        last = index + 1 == args.count or elapsed > args.deadline_s
        if (index + 1) % 100 == 0 or last:
            print(json.dumps({"mutants": index + 1, "seed": args.seed, "wall_s": round(elapsed),
                              "per_s": round((index + 1) / elapsed, 2), "exit": statuses, "findings": counts,
                              "slowest_cpu_s": round(slowest[0], 1), "slowest": slowest[1][:300]}), flush=True)
        if last:
            break
    return 0


if __name__ == "__main__":
    sys.exit(main())
