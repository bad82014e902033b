#!/usr/bin/env python3
"""Issue 38's single-GPU study: predicts each run of tests/gpu/pytorch_fsdp_train.py that
docs/accuracy/pytorch-fsdp2-1xH200/results.jsonl measured, blind (the built-in profile) and after folding one
run's profiler trace (twin calibrate --from-trace with that run's scenario), and prints the Markdown table of
docs/ACCURACY.md. Needs build-cpu/twin.  Usage: tools/pytorch_fsdp_study.py [--fold L4_mb1_none] [--twin PATH]
"""
import argparse, csv, json, os, subprocess, tarfile, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STUDY = os.path.join(ROOT, "docs/accuracy/pytorch-fsdp2-1xH200")

def predicted_s(twin, scenario, profile, out):
    subprocess.run([twin, "simulate", scenario, "--profile", profile, "--out", out, "--quiet"], check=True,
                   stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "ranking.csv")) as f:
        return float(next(csv.DictReader(f))["iteration_time_s"])

def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--fold", default="L4_mb1_none", help="the run whose trace is folded (a scenario's name)")
    p.add_argument("--twin", default=os.path.join(ROOT, "build-cpu/twin"))
    a = p.parse_args()
    measured = {}
    with open(os.path.join(STUDY, "results.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if r["sdpa"] == "cudnn" and not r["compile"]:
                measured[f"L{r['layers']}_mb{r['micro_batch']}_{r['checkpoint']}"] = r["median_step_s"]
    work = tempfile.mkdtemp(prefix="twin_pytorch_study_")
    with tarfile.open(os.path.join(STUDY, "traces.tar.gz")) as t:
        t.extractall(work, filter="data")
    layers, mb, ckpt = a.fold.split("_")
    trace = os.path.join(work, "traces", f"{layers}_{mb}_tp1_ckpt-{ckpt}_cudnn_rank0.json.gz")
    folded = os.path.join(work, "folded.json")
    started = time.perf_counter()
    subprocess.run([a.twin, "calibrate", "--from-trace", trace, "--scenario", os.path.join(STUDY, "scenarios", a.fold + ".json"),
                    "--profile", "builtin", "--out", folded], check=True, stdout=subprocess.DEVNULL)
    fold_s = time.perf_counter() - started
    print(f"folded {os.path.basename(trace)} in {fold_s:.2f} s\n")
    print("| run | measured ms | blind ms | error | folded ms | error |\n| --- | --- | --- | --- | --- | --- |")
    blind_errors, folded_errors = [], []
    for name in sorted(measured):
        scenario = os.path.join(STUDY, "scenarios", name + ".json")
        blind = predicted_s(a.twin, scenario, "builtin", os.path.join(work, "blind_" + name))
        after = predicted_s(a.twin, scenario, folded, os.path.join(work, "folded_" + name))
        m = measured[name]
        eb, ef = blind / m - 1, after / m - 1
        if name != a.fold:
            blind_errors.append(abs(eb)); folded_errors.append(abs(ef))
        print(f"| {name}{' (folded)' if name == a.fold else ''} | {m*1e3:.1f} | {blind*1e3:.1f} | {eb*100:+.1f}% "
              f"| {after*1e3:.1f} | {ef*100:+.1f}% |")
    n = len(blind_errors)
    print(f"\nover the {n} runs not folded: blind mean |error| {100*sum(blind_errors)/n:.1f}% (max {100*max(blind_errors):.1f}%), "
          f"folded {100*sum(folded_errors)/n:.1f}% (max {100*max(folded_errors):.1f}%)")

if __name__ == "__main__":
    main()
