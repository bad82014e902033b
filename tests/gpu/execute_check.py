#!/usr/bin/env python3
"""twin execute on GPUs: every strategy of a small Llama-shaped model against the single-GPU loss curve,
and the speed of a Llama-2-7B-shaped model (4 layers) on one GPU and scaled over 2 and 4.

Each case is a scenario with a pinned strategy: `twin simulate` writes its plan (best.json), `twin execute`
trains it and writes metrics.json. Results: $OUT/execute_check.md (tables) and $OUT/execute_check.json.
Usage: execute_check.py --twin build/twin [--out DIR] [--gpus N] [--only correctness|tied|qk-norm|speed|faults] [--iters N]
       [--speed-cases NAME,NAME] [--profile NAME|FILE (default h200-x4)] [--gpu H100-SXM-80GB (default H200-141GB)]
"""
import argparse, json, os, subprocess, sys, time

# The cases, and the names the family checks read as ec.NAME (tests/gpu/execute_cases.py).
from execute_cases import (BF16_STATE, CORRECTNESS, DETERMINISTIC_ATTENTION, LLAMA7B_4L,  # noqa: F401
                           QK_NORM, QK_NORM_SMALL, RESIDUAL_FUSION, SMALL, SPEED, TIED, TIED_SMALL)

PROFILE = "h200-x4"  # --profile: a shipped profile's name or a profile file
GPU = "H200-141GB"   # --gpu: the scenario's GPU (the profile must describe it)


def scenario(name, model, gpus, seq, global_batch, micro_batch, fields, training=None):
    strategy = {"tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1, "micro_batch_size": micro_batch,
                "zero_stage": 0, "recompute": "none", "schedule": "1f1b", "sequence_parallel": False}
    fields = dict(fields)
    framework = fields.pop("framework", None)  # the scenario's framework section, not a strategy field
    strategy.update(fields)
    doc = {"name": name, "model": model,
           "training": {"seq_length": seq, "global_batch_size": global_batch, **(training or {})},
           "cluster": {"nodes": [{"count": 1, "gpu": GPU, "gpus_per_node": gpus,
                                  "intra_node": {"kind": "nvlink", "bandwidth_GBps": 450}}]},
           "strategy": strategy, "profile": PROFILE}
    if framework:
        doc["framework"] = framework
    return doc


def family_check_arguments(doc, stem, gpus=1):
    """The command line the family checks share (--twin, --out, --gpus, --iters, --tolerance, --profile, --gpu, --only):
    the parsed arguments, with this module's GPU and PROFILE set from them, the output folder made, and the log
    (OUT/STEM.log) open."""
    global GPU, PROFILE
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--twin", required=True)
    parser.add_argument("--out", default=os.environ.get("OUT", "out") + "/" + stem)
    parser.add_argument("--gpus", type=int, default=gpus)
    parser.add_argument("--iters", type=int, default=12)
    parser.add_argument("--tolerance", type=float, default=0.02)
    parser.add_argument("--profile", default=PROFILE)
    parser.add_argument("--gpu", default=GPU)
    parser.add_argument("--only", default="", help="comma-separated case names to run (default: every case)")
    args = parser.parse_args()
    GPU = args.gpu
    PROFILE = os.path.abspath(args.profile) if os.path.exists(args.profile) else args.profile
    os.makedirs(args.out, exist_ok=True)
    return args, open(os.path.join(args.out, stem + ".log"), "w")


def selected(args, name):
    """Whether case `name` runs under --only (every case without it)."""
    return not args.only or name in args.only.split(",")


def run_logged(command, log):
    """Runs `command`, its output (stdout and stderr) appended to `log`."""
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    log.write(f"$ {' '.join(command)}\n{result.stdout}\n")
    log.flush()
    return result


def write_results(out, stem, lines, report):
    """The tables as OUT/STEM.md, the numbers as OUT/STEM.json, the tables printed."""
    with open(os.path.join(out, stem + ".md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(out, stem + ".json"), "w") as f:
        json.dump(report, f, indent=1)
    print("\n".join(lines))


def curve_differences(losses, baseline):
    """The largest relative difference of a loss curve from the baseline's: over the first half of the steps and
    over all of them."""
    half = len(losses) // 2
    first_half = max(abs(a - b) / b for a, b in zip(losses[:half], baseline[:half]))
    return first_half, max(abs(a - b) / b for a, b in zip(losses, baseline))


def second_half_mean_difference(losses, baseline):
    """The relative difference of the mean loss over the second half of the steps. Where curves part step by step
    (a routing decision flipped by a last bit), one step's spike in either curve says nothing; whether training went
    the same way does."""
    half = len(losses) // 2
    ours, theirs = losses[half:], baseline[half:len(losses)]
    return abs(sum(ours) / len(ours) - sum(theirs) / len(theirs)) / (sum(theirs) / len(theirs))


def run_case(twin, out, name, doc, iters, warmup, log, execute_args=()):
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "scenario.json")
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    return simulate_and_execute(twin, folder, path, iters, warmup, log, execute_args=execute_args)


def simulate_and_execute(twin, folder, scenario, iters, warmup, log, simulate_args=(), execute_args=()):
    """`twin simulate` of `scenario` into `folder`, then `twin execute` of its best.json there: metrics.json (with
    the wall time), or None with the failing command logged."""
    os.makedirs(folder, exist_ok=True)
    started = time.time()
    steps = [[twin, "simulate", scenario, "--out", folder, "--quiet", "--top", "0", *simulate_args],
             [twin, "execute", "--plan", os.path.join(folder, "best.json"), "--run", folder,
              "--iters", str(iters), "--warmup", str(warmup), *execute_args]]
    for command in steps:
        result = run_logged(command, log)
        if result.returncode != 0:
            print(f"  {folder}: FAILED ({' '.join(command[:2])}): {result.stdout.strip().splitlines()[-1:]}")
            return None
    with open(os.path.join(folder, "metrics.json")) as f:
        metrics = json.load(f)
    metrics["wall_s"] = time.time() - started
    return metrics


def dense_curve_check(losses, baseline, tolerance):
    """A dense model against its single-GPU curve: a split changes only the order of sums, so the whole curve is
    held step by step, and it must fall: (first-half difference, whole-curve difference, ok)."""
    first_half, whole = curve_differences(losses, baseline)
    return first_half, whole, whole <= tolerance and losses[-1] < 0.8 * losses[0]


def curve_row(name, cells, losses, baseline, tolerance):
    """A family check's loss-curve case against its baseline (dense_curve_check): the table row | name | cells... |
    loss step 1 | loss last | max relative difference (first half / all steps) | result |, the numbers the report
    keeps, and ok."""
    first_half, whole, ok = dense_curve_check(losses, baseline, tolerance)
    row = "| " + " | ".join([name, *cells, f"{losses[0]:.4f}", f"{losses[-1]:.4f}", f"{first_half:.2e} / {whole:.2e}",
                             "pass" if ok else "FAIL"]) + " |"
    return row, {"losses": losses, "max_relative_difference": whole, "max_relative_difference_first_half": first_half,
                 "ok": ok}, ok


# The header of the family checks' speed tables (speed_row writes their rows).
SPEED_TABLE = ["| case | GPUs | iteration s | MFU | predicted s | error | peak GiB | predicted GiB | "
               "fold: error before / after | result |", "|---|---|---|---|---|---|---|---|---|---|"]


def fold_text(folded, effect):
    """The fold's effect as a table cell: the error before / after, or whether it ran."""
    before, after = effect.get("error_before"), effect.get("error_after")
    return (f"{100 * before:+.1f}% / {100 * after:+.1f}%" if before is not None and after is not None
            else "folded" if folded else "fold FAILED")


def speed_row(name, gpus, metrics, fold, ok):
    """A row of the family checks' speed tables: | case | GPUs | iteration s | MFU | predicted s | error | peak GiB |
    predicted GiB | fold | result |, the peaks the largest over the ranks."""
    m, p = metrics["measured"], metrics["predicted"]
    peak = max(r["peak_memory_GiB"] for r in metrics["ranks"])
    predicted_peak = max(r["predicted_peak_memory_GiB"] for r in metrics["ranks"])
    return (f"| {name} | {gpus} | {m['iteration_s']:.4f} | {100 * m['mfu']:.1f}% | {p['iteration_time_s']:.4f} | "
            f"{100 * (m['iteration_s'] / p['iteration_time_s'] - 1):+.1f}% | {peak:.1f} | {predicted_peak:.1f} | "
            f"{fold} | {'pass' if ok else 'FAIL'} |")


def fold_and_report(twin, folder, log, profile=None):
    """`twin calibrate --from-trace` (the plan's profile, or `profile`) and `twin report` on a run folder: whether
    both ran, and the fold's effect (profile.changes.json)."""
    fold = run_logged([twin, "calibrate", "--from-trace", folder, *(["--profile", profile] if profile else [])], log)
    shown = run_logged([twin, "report", folder], log)
    changes = os.path.join(folder, "profile.changes.json")
    effect = {}
    if os.path.exists(changes):
        with open(changes) as f:
            effect = json.load(f).get("effect", {})
    return fold.returncode == 0, shown.returncode == 0, effect


def speed_case(twin, out, name, gpus, doc, iters, warmup, log):
    """A plan run for speed: `doc` simulated and run, its run folder folded and reported; (table row, the numbers
    for the report or None, ok). ok: it ran, folded, reported, and its loss fell."""
    metrics = run_case(twin, out, name, doc, iters, warmup, log)
    if metrics is None:
        return f"| {name} | {gpus} | FAILED | | | | | | | |", None, False
    folded, reported, effect = fold_and_report(twin, os.path.join(out, name), log)
    ok = folded and reported and metrics["steps"][-1]["loss"] < metrics["steps"][0]["loss"]
    return (speed_row(name, gpus, metrics, fold_text(folded, effect), ok),
            {"gpus": gpus, "metrics": metrics, "fold_effect": effect, "ok": ok}, ok)


def zero_peaks(lines, results):
    """Each ZeRO stage's peak beside the memory model's (DP 2 at micro-batch 2): ZeRO-2 keeps only its gradient shard
    between reductions and ZeRO-3 its weight shard between gathers, so their peaks fall below ZeRO-1's."""
    cases = [name for name in ("dp2", "dp2-zero1", "dp2-zero2", "dp2-zero3") if name in results]
    if not cases:
        return
    lines.extend(["", "| case | peak GiB | predicted GiB | peak / predicted |", "|---|---|---|---|"])
    for name in cases:
        measured, predicted = results[name]["peak_memory_GiB"], results[name]["predicted_peak_memory_GiB"]
        lines.append(f"| {name} | {measured:.3f} | {predicted:.3f} | {measured / predicted:.3f} |")


def main():
    global PROFILE, GPU
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--twin", required=True)
    parser.add_argument("--out", default=os.environ.get("OUT", "out") + "/execute")
    parser.add_argument("--gpus", type=int, default=4)
    parser.add_argument("--only", choices=["correctness", "tied", "qk-norm", "speed", "faults"])
    parser.add_argument("--speed-cases", help="only these speed cases (names, comma-separated)")
    parser.add_argument("--iters", type=int, default=12)
    parser.add_argument("--tolerance", type=float, default=0.02,
                        help="largest relative loss difference from the single-GPU curve (bf16)")
    parser.add_argument("--profile", default=PROFILE,
                        help="the profile the plans are predicted with (a shipped name or a file)")
    parser.add_argument("--gpu", default=GPU, help="the scenarios' GPU, e.g. H100-SXM-80GB")
    args = parser.parse_args()
    GPU = args.gpu
    PROFILE = os.path.abspath(args.profile) if os.path.exists(args.profile) else args.profile
    os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, "execute_check.log"), "w")
    report = {"correctness": {}, "speed": {}}
    lines, failed = [], False

    def correctness(title, model, cases):  # each case's loss curve against the first case's
        nonlocal failed
        lines.extend([title, "", "| case | GPUs | loss step 1 | loss last | max relative difference | result |",
                      "|---|---|---|---|---|---|"])
        baseline = None
        for name, gpus, fields, *rest in cases:
            if gpus > args.gpus:
                continue
            training, execute_args = (rest + [None])[0], (rest[1] if len(rest) > 1 else ())
            doc = scenario(name, model, gpus, 1024, 8, 2, fields, training)
            metrics = run_case(args.twin, args.out, name, doc, args.iters, 2, log, execute_args)
            if metrics is None:
                failed = True
                lines.append(f"| {name} | {gpus} | | | | FAILED to run |")
                continue
            losses = [s["loss"] for s in metrics["steps"]]
            if baseline is None:
                baseline = losses
            diff = curve_differences(losses, baseline)[1]
            ok = diff <= args.tolerance and losses[-1] < 0.8 * losses[0]
            failed |= not ok
            report["correctness"][name] = {"gpus": gpus, "losses": losses, "max_relative_difference": diff, "ok": ok,
                                           "grad_norms": [s.get("grad_norm") for s in metrics["steps"]],
                                           "peak_memory_GiB": max(r["peak_memory_GiB"] for r in metrics["ranks"]),
                                           "predicted_peak_memory_GiB":
                                               max(r["predicted_peak_memory_GiB"] for r in metrics["ranks"])}
            lines.append(f"| {name} | {gpus} | {losses[0]:.4f} | {losses[-1]:.4f} | {diff:.2e} | {'pass' if ok else 'FAIL'} |")
            print(lines[-1], flush=True)

    if args.only in (None, "correctness"):
        correctness("## Loss against the single-GPU run (small Llama-shaped model: 4 layers, hidden 1024, GQA 16/4, "
                    "vocab 8192, seq 1024, global batch 8)", SMALL, CORRECTNESS)
    zero_peaks(lines, report["correctness"])
    if args.only in (None, "correctness", "tied"):
        correctness("\n## Tied embeddings: loss against the single-GPU run of the same model", TIED_SMALL, TIED)
    if args.only in (None, "correctness", "qk-norm"):
        correctness("\n## QK-norm (Qwen3's, over each head): loss against the single-GPU run of the same model",
                    QK_NORM_SMALL, QK_NORM)

    if args.only in (None, "speed"):
        lines += ["", "## Speed (Llama-2-7B widths, 4 layers, seq 4096; bf16 params/activations, fp32 master weights "
                  "and AdamW moments unless the case says bf16 moments or bf16 state: no master, bf16 moments)", "",
                  "| case | GPUs | micro-batch | global batch | iteration s | tokens/s | MFU | predicted s | error | peak GiB |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for name, gpus, mbs, batch, fields, *rest in SPEED:
            if gpus > args.gpus or (args.speed_cases and name not in args.speed_cases.split(",")):
                continue
            training, execute_args = (rest + [None])[0], (rest[1] if len(rest) > 1 else ())
            doc = scenario(name, LLAMA7B_4L, gpus, 4096, batch, mbs, fields, training)
            metrics = run_case(args.twin, args.out, name, doc, args.iters, 3, log, execute_args)
            if metrics is None:
                failed = True
                lines.append(f"| {name} | {gpus} | {mbs} | {batch} | FAILED | | | | | |")
                continue
            m, p = metrics["measured"], metrics["predicted"]
            peak = max(r["peak_memory_GiB"] for r in metrics["ranks"])
            report["speed"][name] = metrics
            lines.append(f"| {name} | {gpus} | {mbs} | {batch} | {m['iteration_s']:.4f} | {m['tokens_per_s']:.0f} | "
                         f"{100 * m['mfu']:.1f}% | {p['iteration_time_s']:.4f} | "
                         f"{100 * (m['iteration_s'] / p['iteration_time_s'] - 1):+.1f}% | {peak:.1f} |")
            print(lines[-1], flush=True)

    if args.only in (None, "faults"):
        # A stuck kernel needs one GPU; a stuck NCCL peer needs two (NCCL runs no two ranks on one GPU).
        gpus = min(2, args.gpus)
        lines += ["", f"## Faults ({'DP 2' if gpus == 2 else 'one GPU'} on the small model; TWIN_FAULT_INJECT, "
                  "--nccl-timeout 20)", "",
                  "| fault | exit | seconds | message | stray processes | result |", "|---|---|---|---|---|---|"]
        folder = os.path.join(args.out, "faults")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, "scenario.json")
        with open(path, "w") as f:
            json.dump(scenario("faults", SMALL, gpus, 1024, 8, 2, {}), f)
        subprocess.run([args.twin, "simulate", path, "--out", folder, "--quiet", "--top", "0"], check=True,
                       stdout=subprocess.DEVNULL)
        # hang: rank 1 stops before a collective, rank 0 must time out naming itself and the stuck op;
        # stall: a kernel of the last rank never finishes, its own watchdog must fire while the host waits;
        # oom: names the rank, the op and the bytes.
        faults = ([("hang:1:2", "did not finish within 20 s")] if gpus == 2 else []) + \
                 [(f"stall:{gpus - 1}:2", "did not finish within 20 s"), ("oom:0:1", "out of memory")]
        for fault, expected in faults:
            started = time.time()
            # Output to a file, so that what a stuck run printed is there even when it has to be killed.
            fault_log = os.path.join(folder, f"{fault.replace(':', '-')}.log")
            command = [args.twin, "execute", "--plan", os.path.join(folder, "best.json"), "--run", folder, "--iters",
                       "5", "--warmup", "1", "--nccl-timeout", "20"]
            with open(fault_log, "w") as out:
                process = subprocess.Popen(command, env=dict(os.environ, TWIN_FAULT_INJECT=fault), stdout=out,
                                           stderr=subprocess.STDOUT, start_new_session=True)
                try:
                    returncode = process.wait(timeout=180)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, 9)
                    returncode = process.wait()
                    out.write("\n(killed by execute_check.py after 180 s)\n")
            seconds = time.time() - started
            with open(fault_log) as f:
                output = f.read()
            log.write(f"$ TWIN_FAULT_INJECT={fault} twin execute ...\n{output}\n")
            message = next((l for l in output.splitlines() if expected in l), "")
            time.sleep(2)
            stray = subprocess.run(["pgrep", "-f", "twin execute"], stdout=subprocess.PIPE, text=True).stdout.split()
            ok = returncode != 0 and bool(message) and "rank" in message and not stray and seconds < 120
            failed |= not ok
            lines.append(f"| {fault} | {returncode} | {seconds:.0f} | {message.strip()[:160]} | {len(stray)} | "
                         f"{'pass' if ok else 'FAIL'} |")
            print(lines[-1], flush=True)

    write_results(args.out, "execute_check", lines, report)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
