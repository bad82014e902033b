#!/usr/bin/env python3
"""Issue 38's studies of tests/gpu/pytorch_fsdp_train.py: predicts each measured run blind (the built-in profile)
and after folding one run's profiler trace (twin calibrate --from-trace with that run's scenario), and prints the
Markdown tables of docs/ACCURACY.md. Needs build-cpu/twin.
  tools/pytorch_fsdp_study.py --study 1xH200     # one H200, folds L4_mb1_none
  tools/pytorch_fsdp_study.py --study 4xH200     # four H200s, folds w4_mb1_tp1_ckpt-none (its four ranks' traces)
--twin-before PATH also predicts with another build (main before this lowering), the new framework keys removed.
"""
import argparse, csv, itertools, json, os, subprocess, tarfile, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STUDIES = {  # folder, the run folded, the trace of it inside traces.tar(.gz)
    "1xH200": ("docs/accuracy/pytorch-fsdp2-1xH200", "L4_mb1_none", "traces/L4_mb1_tp1_ckpt-none_cudnn_rank0.json.gz"),
    "4xH200": ("docs/accuracy/pytorch-fsdp2-4xH200", "w4_mb1_tp1_ckpt-none", "profile"),
}
NEW_FRAMEWORK_KEYS = ("compile", "reshard_after_forward", "reduce_dtype")

def scenario_name(study, r):
    if study == "1xH200":
        return f"L{r['layers']}_mb{r['micro_batch']}_{r['checkpoint']}" + ("_compile" if r["compile"] else "")
    return f"w{r['world']}_mb{r['micro_batch']}_tp{r['tp']}_ckpt-{r['checkpoint']}" + ("_compile" if r["compile"] else "")

def predicted_s(twin, scenario, profile, out):
    subprocess.run([twin, "simulate", scenario, "--profile", profile, "--out", out, "--quiet"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # stderr: the framework warning, blind
    with open(os.path.join(out, "ranking.csv")) as f:
        return float(next(csv.DictReader(f))["iteration_time_s"])

def without_new_keys(scenario, work):
    with open(scenario) as f:
        doc = json.load(f)
    for key in NEW_FRAMEWORK_KEYS:
        doc["framework"].pop(key, None)
    path = os.path.join(work, "before_" + os.path.basename(scenario))
    with open(path, "w") as f:
        json.dump(doc, f)
    return path

def kendall_tau(a, b):
    pairs = list(itertools.combinations(range(len(a)), 2))
    s = sum((1 if (a[i] - a[j]) * (b[i] - b[j]) > 0 else -1) for i, j in pairs if a[i] != a[j] and b[i] != b[j])
    return s / len(pairs)

def summary(label, names, measured, predicted, per_gpu_tokens):
    """Mean and max |error| of step time, and over throughput per GPU Kendall's tau and the regret of the
    predicted best (measured throughput of the best lost by running the predicted best instead)."""
    errors = [abs(predicted[n] / measured[n] - 1) for n in names]
    true_tp = [per_gpu_tokens[n] / measured[n] for n in names]
    pred_tp = [per_gpu_tokens[n] / predicted[n] for n in names]
    pick = max(range(len(names)), key=lambda i: pred_tp[i])
    regret = 1 - true_tp[pick] / max(true_tp)
    return (f"{label}: mean |error| {100 * sum(errors) / len(errors):.1f}%, max {100 * max(errors):.1f}%, "
            f"Kendall tau {kendall_tau(true_tp, pred_tp):.3f}, regret {100 * regret:.1f}% (over {len(names)} runs)")

def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--study", choices=sorted(STUDIES), default="1xH200")
    p.add_argument("--twin", default=os.path.join(ROOT, "build-cpu/twin"))
    p.add_argument("--twin-before", default=None, help="another build to compare (the new framework keys removed)")
    a = p.parse_args()
    folder, fold, trace_in_tar = STUDIES[a.study]
    study = os.path.join(ROOT, folder)
    measured, per_gpu_tokens = {}, {}
    with open(os.path.join(study, "results.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if r["sdpa"] != "cudnn":
                continue
            name = scenario_name(a.study, r)
            measured[name] = r["median_step_s"]
            per_gpu_tokens[name] = r["micro_batch"] * r["seq"] / r["tp"]
    work = tempfile.mkdtemp(prefix="twin_pytorch_study_")
    tar = next(os.path.join(study, t) for t in ("traces.tar.gz", "traces.tar") if os.path.exists(os.path.join(study, t)))
    with tarfile.open(tar) as t:
        t.extractall(work, filter="data")
    def fold_with(twin, out, scenario):
        started = time.perf_counter()
        subprocess.run([twin, "calibrate", "--from-trace", os.path.join(work, trace_in_tar), "--scenario", scenario,
                        "--profile", "builtin", "--out", out], check=True, stdout=subprocess.DEVNULL)
        print(f"{twin}: folded {trace_in_tar} in {time.perf_counter() - started:.2f} s")
        return out
    fold_scenario = os.path.join(study, "scenarios", fold + ".json")
    columns = [("blind", a.twin, "builtin"), ("folded", a.twin, fold_with(a.twin, os.path.join(work, "folded.json"), fold_scenario))]
    if a.twin_before:
        before = fold_with(a.twin_before, os.path.join(work, "folded_before.json"), without_new_keys(fold_scenario, work))
        columns = [("blind before", a.twin_before, "builtin"), ("folded before", a.twin_before, before)] + columns
    print()
    print("| run | measured ms | " + " | ".join(f"{c} ms | error" for c, _, _ in columns) + " |")
    print("| --- | --- |" + " --- | --- |" * len(columns))
    predicted = {c: {} for c, _, _ in columns}
    for name in sorted(measured):
        scenario = os.path.join(study, "scenarios", name + ".json")
        cells = []
        for c, twin, profile in columns:
            path = without_new_keys(scenario, work) if twin == a.twin_before else scenario
            t = predicted_s(twin, path, profile, os.path.join(work, c.replace(" ", "_") + "_" + name))
            predicted[c][name] = t
            cells.append(f"{t * 1e3:.1f} | {100 * (t / measured[name] - 1):+.1f}%")
        print(f"| {name}{' (folded)' if name == fold else ''} | {measured[name] * 1e3:.1f} | " + " | ".join(cells) + " |")
    held_out = [n for n in sorted(measured) if n != fold]
    print()
    for c, _, _ in columns:
        print(summary(c, held_out, measured, predicted[c], per_gpu_tokens))
    if a.study == "4xH200":  # FSDP alone and with DTensor TP, whose steps the host bounds
        for label, keep in (("TP 1", lambda n: "_tp1_" in n), ("TP > 1", lambda n: "_tp1_" not in n)):
            subset = [n for n in held_out if keep(n)]
            for c, _, _ in columns:
                print(summary(f"{c}, {label}", subset, measured, predicted[c], per_gpu_tokens))

if __name__ == "__main__":
    main()
