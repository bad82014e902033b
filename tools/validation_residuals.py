#!/usr/bin/env python3
"""Residual analysis of `twin validate --cross-validate`: every row's held-out error against its features.

    python3 tools/validation_residuals.py --twin build/twin --table tests/validation/published.json \
        --csv VAL/validation.csv --out DIR [--summarize]

For every feasible row, the strategy `twin validate` chose (validation.csv's `best`) is simulated alone with
`twin simulate --top 1`, and its trace's first stage is read: what share of the compute stream each kind of
kernel takes, how many kernels run per second, the mean FLOPs of a GEMM, the share of the step that is exposed
communication. Writes DIR/residuals.csv (one row per published row) and prints, per feature, the rows split at
its median with the mean held-out error on each side and the correlation (docs/VALIDATION.md, "What explains
the held-out error"). The features describe the predicted step, not the fitted factor: a feature that explains
the error is a candidate mechanism, to be tried and cross-validated, not a correction.
"""
import argparse
import concurrent.futures
import csv
import glob
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile

KINDS = {"gemm": "gemm", "moe_router": "gemm", "attention_forward": "attention",
         "attention_backward": "attention"}


def pinned(scenario, best):
    """The row's scenario with its search pinned to the strategy key `best` (ranking.csv's strategy column,
    e.g. tp2.pp4.cp1.ep1.dp8.vpp1.sp.mbs1.z0.rc-none.interleaved-1f1b)."""
    names = {"tp": "tensor_model_parallel_size", "pp": "pipeline_model_parallel_size",
             "cp": "context_parallel_size", "ep": "expert_model_parallel_size",
             "vpp": "virtual_pipeline_model_parallel_size", "mbs": "micro_batch_size", "z": "zero_stage"}
    if "strategy" in scenario:  # pinned by the row itself (recompute modules, layouts): kept, only the batch shrinks
        return {**scenario, "training": {**scenario["training"], "global_batch_size": few_micro_batches(best)}}
    search = dict(scenario.get("search", {}))
    # A pipeline layout's suffix ("layout-1-2x62-1") is the scenario's own: its search states the layout.
    parts = [part for part in best.split(".") if not part.startswith("layout-")]
    for part in parts[:-1]:
        match = re.fullmatch(r"([a-z]+)(\d+)", part)
        if match and match.group(1) in names:
            search[names[match.group(1)]] = [int(match.group(2))]
        elif part in ("sp", "nosp"):
            search["sequence_parallel"] = [part == "sp"]
        elif part.startswith("rc-"):
            search["recompute"] = [part[3:]]
    search["schedule"] = [parts[-1]]
    training = {**scenario["training"], "global_batch_size": few_micro_batches(best)}
    return {**scenario, "search": search, "training": training}


def few_micro_batches(best):
    """The features are those of a micro-batch's kernels: as many micro-batches as stages keep the replay small."""
    dp, pp, mbs = (int(re.search(rf"\.{k}(\d+)\.", "." + best).group(1)) for k in ("dp", "pp", "mbs"))
    return dp * mbs * pp


def step_features(trace_path):
    """Shares of the first stage's compute stream by kind, kernels and GEMM FLOPs (trace pid 0, tid 0)."""
    with open(trace_path) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    busy = {"gemm": 0.0, "attention": 0.0, "memory_bound": 0.0}
    kernels, gemm_flops, gemms = 0, 0.0, 0
    for e in events:
        if e.get("ph") != "X" or e.get("pid") != 0 or e.get("tid") != 0:
            continue
        kind = KINDS.get(e["args"].get("kind"), "memory_bound")
        busy[kind] += e["dur"]
        kernels += 1
        if kind == "gemm":
            gemm_flops += e["args"].get("flops", 0.0)
            gemms += 1
    total = sum(busy.values()) or 1
    return {"gemm_share": busy["gemm"] / total, "attention_share": busy["attention"] / total,
            "memory_bound_share": busy["memory_bound"] / total,
            "mean_gemm_gflop": gemm_flops / gemms / 1e9 if gemms else 0,
            "mean_kernel_us": total / kernels if kernels else 0}


def year(group):
    """The year a group's name carries: "...-2023", or a NeMo release "...-24.11"; 0 where it carries none."""
    found = re.search(r"20\d\d", group)
    if found:
        return int(found.group(0))
    release = re.search(r"-(\d\d)\.\d\d", group)  # "...-24.11", "megatron-bridge-25.11-h100-fp8"
    return 2000 + int(release.group(1)) if release else 0  # 0: none stated (MLPerf rounds)


def row_features(row, val):
    s = row["scenario"]
    m, tr = s["model"], s["training"]
    nodes = s["cluster"]["nodes"][0]
    gpus = sum(n["count"] * n["gpus_per_node"] for n in s["cluster"]["nodes"])
    key = val["best"].split(".")
    num = lambda prefix: next(int(k[len(prefix):]) for k in key if k.startswith(prefix) and k[len(prefix):].isdigit())
    gpu = nodes["gpu"]
    family = "hopper" if gpu.startswith("H") else "ampere" if gpu.startswith("A") else "other"
    # A model read from a Hugging Face config (model.hf_config) states no sizes here: 0.
    params_b = 12 * m.get("num_layers", 0) * m.get("hidden_size", 0) ** 2 / 1e9
    predicted = float(val["predicted_iteration_s"])
    return {"id": row["id"], "group": row["group"], "error": float(val["error"]), "gpus": gpus,
            "log2_gpus": math.log2(gpus), "family": family, "params_b": params_b, "hidden": m.get("hidden_size", 0),
            "seq": tr["seq_length"], "tp": num("tp"), "pp": num("pp"), "dp": num("dp"), "cp": num("cp"),
            "mbs": num("mbs"), "zero": num("z"), "precision": tr.get("precision", "bf16"),
            "framework": s.get("framework", {}).get("name", "megatron-core"),
            "year": year(row["group"]),
            "exposed_comm_share": float(val["exposed_communication_s"]) / predicted,
            "bubble_share": float(val["pipeline_bubble_s"]) / predicted}


def with_absolute_paths(row, table_folder):
    """The row with its model's Hugging Face config path (relative to the table, as twin reads it) made absolute,
    so that its scenario simulates from a temporary folder."""
    model = row["scenario"].get("model", {})
    if "hf_config" in model and not os.path.isabs(model["hf_config"]):
        model = {**model, "hf_config": os.path.normpath(os.path.join(table_folder, model["hf_config"]))}
        row = {**row, "scenario": {**row["scenario"], "model": model}}
    return row


def simulated_features(twin, row, val):
    """The row's features, with those of its chosen strategy's trace; None when it cannot be simulated alone."""
    features = row_features(row, val)
    with tempfile.TemporaryDirectory() as tmp:
        scenario = os.path.join(tmp, "scenario.json")
        with open(scenario, "w") as f:
            json.dump(pinned(row["scenario"], val["best"]), f)
        run = subprocess.run([twin, "simulate", scenario, "--out", tmp, "--top", "1", "--quiet", "--jobs", "1"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        traces = glob.glob(os.path.join(tmp, "traces", "top1_*.json"))
        if run.returncode != 0 or not traces:
            print(f"{row['id']}: left out: {run.stderr.strip()}", file=sys.stderr)
            return None
        features.update(step_features(traces[0]))
    return features


def numeric(text):
    try:
        return float(text)
    except ValueError:
        return text


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--twin", required=True)
    parser.add_argument("--table", required=True)
    parser.add_argument("--csv", required=True, help="validation.csv of `twin validate --cross-validate`")
    parser.add_argument("--out", required=True)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--summarize", action="store_true", help="only summarize DIR/residuals.csv of a former run")
    args = parser.parse_args()
    if args.summarize:
        with open(os.path.join(args.out, "residuals.csv")) as f:
            summarize([{k: numeric(v) for k, v in r.items()} for r in csv.DictReader(f)])
        return
    rows = {r["id"]: with_absolute_paths(r, os.path.dirname(os.path.abspath(args.table)))
            for r in json.load(open(args.table))["rows"]}
    os.makedirs(args.out, exist_ok=True)
    with open(args.csv) as f:
        feasible = [v for v in csv.DictReader(f) if v["predicted_iteration_s"] and not v["infeasible_reason"]]
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        out = [r for r in pool.map(lambda v: simulated_features(args.twin, rows[v["id"]], v), feasible) if r]
    with open(os.path.join(args.out, "residuals.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(out[0]))
        writer.writeheader()
        writer.writerows(out)
    summarize(out)


FEATURES = ["log2_gpus", "params_b", "hidden", "seq", "tp", "pp", "log2_dp", "mbs", "gemm_share", "attention_share",
            "memory_bound_share", "mean_gemm_gflop", "mean_kernel_us", "exposed_comm_share", "bubble_share"]


def within_group(out, key):
    """`key` less its group's mean: what varies inside a group, where framework and year are fixed."""
    means = {g: statistics.fmean(r[key] for r in out if r["group"] == g) for g in {r["group"] for r in out}}
    return [r[key] - means[r["group"]] for r in out]


def correlation(xs, ys):
    return statistics.correlation(xs, ys) if len(set(xs)) > 1 else float("nan")


def summarize(out):
    for r in out:
        r["log2_dp"] = math.log2(r["dp"])
    errors = [r["error"] for r in out]
    mean = lambda xs: statistics.fmean(xs) * 100 if xs else float("nan")
    print("| feature | at or below the median: rows, mean error | above: rows, mean error | r | r within groups |")
    print("| --- | --- | --- | --- | --- |")
    for feature in FEATURES:
        values = [r[feature] for r in out]
        median = statistics.median(values)
        low = [e for v, e in zip(values, errors) if v <= median]
        high = [e for v, e in zip(values, errors) if v > median]
        print(f"| {feature} (median {median:.3g}) | {len(low)}, {mean(low):+.1f}% | {len(high)}, {mean(high):+.1f}% "
              f"| {correlation(values, errors):+.2f} "
              f"| {correlation(within_group(out, feature), within_group(out, 'error')):+.2f} |")
    print()
    data_parallel_series(out)


def data_parallel_series(out):
    """Rows of one group, model and layout that differ only in data-parallel size: the slope of their error
    against log2 of it (points per doubling), data-parallel state sharded (ZeRO 2-3, FSDP) or not."""
    series = {}
    for r in out:
        series.setdefault((r["group"], round(r["params_b"], 1), r["zero"], r["tp"], r["pp"]), []).append(r)
    print("| data parallelism | series | rows | negative slopes | median slope (points per doubling) |")
    print("| --- | --- | --- | --- | --- |")
    for sharded in (False, True):
        slopes, rows = [], 0
        for key, members in sorted(series.items()):
            if (key[2] >= 2) != sharded or len({m["dp"] for m in members}) < 2:
                continue
            slopes.append(statistics.linear_regression([m["log2_dp"] for m in members],
                                                       [100 * m["error"] for m in members]).slope)
            rows += len(members)
        if slopes:
            print(f"| {'sharded (ZeRO 2-3, FSDP)' if sharded else 'replicated'} | {len(slopes)} | {rows} "
                  f"| {sum(s < 0 for s in slopes)} | {statistics.median(slopes):+.2f} |")


if __name__ == "__main__":
    main()
