#!/usr/bin/env python3
"""Issue 5's accuracy study: twin's predicted iteration time against twin execute's measured one, over a
spread of strategies of one scenario on one machine, and what recalibrating from half of the runs does to
the other half. The method and the formulas are in docs/ACCURACY.md.

Phases (all keep their state in the work folder, so a phase can resume where an earlier device call stopped):
  plan     simulate the search space, choose the strategies, pin each in its own scenario, estimate device time
  run      calibrate the machine (unless --profile or an earlier run gave a profile), plan, execute (GPUs)
  analyze  errors, per-op-kind errors, Kendall's tau-b, regret; recalibrate from half A, predict half B (no GPU)
Results: RESULTS/accuracy.json and RESULTS/accuracy.md; --pack FILE writes the work folder (without the
measured traces) as one tar.gz, rewritten after every run so that a command stopped at its limit still returns it.
Usage: accuracy_study.py --twin build-carry/twin --phase run --work out/accuracy --pack $OUT/accuracy-work.tar.gz
       accuracy_study.py --twin build/twin --phase analyze --work out/accuracy
       accuracy_study.py --self-test
"""
import argparse, csv, datetime, json, os, shutil, signal, socket, subprocess, sys, tarfile, time

from accuracy_stats import (TOP, SPREAD, aggregate_kinds, error_summary, features, kendall_tau_b,
                            prediction_summary, regret, relative_error, select, self_test, split_halves)

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SCENARIO = os.path.join(REPO, "scenarios", "accuracy-llama2-7b-4xH200.json")
STRATEGY_FIELDS = {"tensor_model_parallel_size": int, "pipeline_model_parallel_size": int,
                   "context_parallel_size": int, "expert_model_parallel_size": int, "data_parallel_size": int,
                   "virtual_pipeline_model_parallel_size": int, "sequence_parallel": lambda v: v == "true",
                   "micro_batch_size": int, "num_micro_batches": int, "zero_stage": int, "recompute": str,
                   "schedule": str}
STARTUP_S = 15.0            # per twin execute: 4 processes, CUDA, NCCL and CUPTI set-up, weights (estimate)
CALIBRATE_S = 45.0          # twin calibrate on 4 H200s took 44 s (2026-11-28, docs/PERFORMANCE.md "Issue 43"); one H200 about 95 s


# ---------------------------------------------------------------- running twin
def twin_env(twin):
    env = dict(os.environ)
    env.setdefault("NCCL_NVLS_ENABLE", "0")  # the user's value wins, as in twin's launcher
    lib = os.path.join(os.path.dirname(os.path.abspath(twin)), "lib")  # build-carry/lib: spdlog, fmt
    if os.path.isdir(lib):
        env["LD_LIBRARY_PATH"] = lib + os.pathsep + env.get("LD_LIBRARY_PATH", "")
    return env


def call(twin, args, log, timeout_s=600):
    """Runs twin in its own process group (the launcher's ranks included), which a timeout ends whole."""
    command = [twin] + args
    log.write(f"$ {' '.join(command)}\n")
    log.flush()
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=twin_env(twin), start_new_session=True)
    try:
        return process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.write(f"(stopped after {timeout_s} s)\n")
        return 124


def load(path):
    with open(path) as f:
        return json.load(f)


def save(path, document):
    with open(path + ".tmp", "w") as f:
        json.dump(document, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(path + ".tmp", path)


def profile_argument(work, profile):
    """A profile file inside the work folder travels with it (relative name); anything else is a shipped name."""
    return os.path.join(work, profile) if os.path.exists(os.path.join(work, profile)) else profile


def machine():
    try:
        query = subprocess.run(["nvidia-smi", "--query-gpu=index,name,uuid,driver_version,memory.total",
                                "--format=csv,noheader"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        gpus = query.stdout.strip().splitlines() if query.returncode == 0 else []
    except OSError:  # no driver here
        gpus = []
    return {"host": socket.gethostname(), "gpus": gpus,
            "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}


class ClockSampler:
    """The SM clock, power and utilisation of every GPU every 100 ms while a run lasts (nvidia-smi, read only):
    the clock a training step holds under its power limit, which calibration's GEMM timings do not see
    (docs/PROFILES.md, "The clock of a training step"). Samples of a busy GPU (utilisation >= 90%) count."""
    QUERY = "index,clocks.sm,power.draw,utilization.gpu"

    def __init__(self, path):
        self.path, self.process = path, None

    def __enter__(self):
        try:
            self.file = open(self.path, "w")
            self.process = subprocess.Popen(["nvidia-smi", f"--query-gpu={self.QUERY}", "--format=csv,noheader,nounits",
                                             "-lms", "100"], stdout=self.file, stderr=subprocess.DEVNULL)
        except OSError:  # no driver here
            self.process = None
        return self

    def __exit__(self, *exc):
        if self.process:
            self.process.terminate()
            self.process.wait()
        self.file.close()

    def summary(self):
        """Median SM clock (MHz) and power (W) over the busy samples of every GPU, and their count."""
        clocks, powers = [], []
        with open(self.path) as f:
            for line in f:
                fields = [x.strip() for x in line.split(",")]
                try:
                    clock, power, utilisation = float(fields[1]), float(fields[2]), float(fields[3])
                except (IndexError, ValueError):
                    continue
                if utilisation >= 90:
                    clocks.append(clock)
                    powers.append(power)
        median = lambda v: sorted(v)[len(v) // 2] if v else None
        return {"sm_clock_MHz_median": median(clocks), "power_W_median": median(powers), "busy_samples": len(clocks)}


def plan(args, log):
    """Step 2: the search under the study's profile, the choice, one pinned scenario and plan per choice."""
    study_path = os.path.join(args.work, "study.json")
    if os.path.exists(study_path):
        return load(study_path)
    profile = profile_argument(args.work, args.profile_used)
    search_dir = os.path.join(args.work, "search")
    if call(args.twin, ["simulate", args.scenario, "--profile", profile, "--out", search_dir, "--quiet", "--top", "0"], log):
        sys.exit(f"twin simulate {args.scenario} failed: see {log.name}")
    with open(os.path.join(search_dir, "ranking.csv")) as f:
        candidates = list(csv.DictReader(f))
    feasible = [r for r in candidates if r["feasible"] == "true"]
    base = load(args.scenario)
    base.pop("search")
    strategies = []
    for index, why in select(feasible):
        row = feasible[index]
        name = f"{len(strategies):02d}-{row['strategy']}"
        folder = os.path.join(args.work, "runs", name)
        os.makedirs(folder, exist_ok=True)
        doc = dict(base, name=f"{base['name']}: {row['strategy']}",
                   strategy={k: convert(row[k]) for k, convert in STRATEGY_FIELDS.items()})
        save(os.path.join(folder, "scenario.json"), doc)
        if call(args.twin, ["simulate", os.path.join(folder, "scenario.json"), "--profile", profile, "--out", folder,
                            "--quiet", "--top", "0"], log):
            sys.exit(f"twin simulate of the pinned {name} failed: see {log.name}")
        with open(os.path.join(folder, "ranking.csv")) as pinned:
            executable = next(csv.DictReader(pinned)).get("executable", "yes")
        if executable not in ("yes", ""):
            # The executor's plan check refuses it (issue 42 item 4): running it would spend a start-up to learn so.
            print(f"{name}: left out, twin execute would refuse it ({executable})", file=log, flush=True)
            shutil.rmtree(folder)
            continue
        predicted_s = load(os.path.join(folder, "best.json"))["predicted"]["iteration_time_s"]
        strategies.append({"name": name, "key": row["strategy"], "predicted_rank": int(row["place"]), "why": why,
                           "predicted_s": predicted_s, "search_predicted_s": float(row["iteration_time_s"]),
                           "features": features(row), "peak_memory_GiB": float(row["peak_memory_GiB"]),
                           "estimate_s": STARTUP_S + args.iters * predicted_s})
    covered = sorted({v for s in strategies for v in s["features"]})
    study = {"scenario": os.path.relpath(args.scenario, REPO), "profile": args.profile_used, "iters": args.iters,
             "warmup": args.warmup, "feasible": len(feasible), "candidates": len(candidates), "strategies": strategies,
             "covered": covered,
             "device_estimate_s": round(sum(s["estimate_s"] for s in strategies), 1)}
    save(study_path, study)
    return study


def executed(folder):
    """The exit status of the run's twin execute; None where it has not run to an end."""
    path = os.path.join(folder, "execution.json")
    return load(path)["rc"] if os.path.exists(path) else None


def pack(work, destination):
    if not destination:
        return
    skipped = {"traces", "measured", "report.html", "execution_report.html"}
    with tarfile.open(destination + ".tmp", "w:gz") as tar:
        tar.add(work, arcname=os.path.basename(os.path.normpath(work)),
                filter=lambda info: None if os.path.basename(info.name) in skipped else info)
    os.replace(destination + ".tmp", destination)


def run_phase(args, log, started):
    """Steps 1 and 3: calibrate once, then execute each planned strategy not yet measured, within the budget."""
    if args.profile_used == "profile.json" and not os.path.exists(os.path.join(args.work, "profile.json")):
        command = ["calibrate", "--out", os.path.join(args.work, "profile.json")]
        if args.calibrate_scenario_shapes:
            command += ["--scenario", args.scenario]
        if call(args.twin, command, log, timeout_s=args.budget_s):
            sys.exit(f"twin calibrate failed: see {log.name}")
        pack(args.work, args.pack)
    study = plan(args, log)
    for s in study["strategies"][:args.only]:
        folder = os.path.join(args.work, "runs", s["name"])
        if executed(folder) is not None and (executed(folder) == 0 or not args.retry_failed):
            continue
        elapsed = time.time() - started
        if elapsed + (3.0 if args.untraced_step else 1.5) * s["estimate_s"] > args.budget_s:
            left = [x for x in study["strategies"][:args.only]
                    if executed(os.path.join(args.work, "runs", x["name"])) is None]
            print(f"budget: {elapsed:.0f} s spent of {args.budget_s} s; {len(left)} runs left for the next call")
            return
        run_started, this_machine = time.time(), machine()
        with ClockSampler(os.path.join(folder, "gpu_clocks_study.csv")) as clocks:
            rc = call(args.twin, ["execute", "--plan", os.path.join(folder, "best.json"), "--run", folder, "--iters",
                                  str(study["iters"]), "--warmup", str(study["warmup"]), "--nccl-timeout", "60"],
                      log, timeout_s=max(60, int(args.budget_s - (time.time() - started))))
        if rc == 0 and args.untraced_step:
            # The step as training runs it: CUPTI's records of every kernel and API call cost the host several us a
            # call, which a plan of many small kernels issued after a host wait pays in full (a Qwen3-30B-A3B-shaped
            # plan on one H200: 0.345 s traced, 0.256 s not; docs/ACCURACY.md). ops.csv keeps the traced run.
            rc = call(args.twin, ["execute", "--plan", os.path.join(folder, "best.json"), "--run",
                                  os.path.join(folder, "untraced"), "--iters", str(study["iters"]), "--warmup",
                                  str(study["warmup"]), "--nccl-timeout", "60", "--no-trace"],
                      log, timeout_s=max(60, int(args.budget_s - (time.time() - started))))
        record = dict(this_machine, rc=rc, wall_s=round(time.time() - run_started, 1), iters=study["iters"],
                      warmup=study["warmup"], untraced_step=args.untraced_step, **clocks.summary())
        save(os.path.join(folder, "execution.json"), record)
        print(f"{s['name']}: exit {rc}, {record['wall_s']} s (estimated {s['estimate_s']:.0f} s)", flush=True)
        pack(args.work, args.pack)


# ---------------------------------------------------------------- step 4 and 5
def measured_runs(args, study):
    runs = []
    for s in study["strategies"][:args.only]:
        folder = os.path.join(args.work, "runs", s["name"])
        if executed(folder) != 0:
            continue
        untraced = os.path.join(folder, "untraced", "metrics.json")
        metrics = load(untraced if os.path.exists(untraced) else os.path.join(folder, "metrics.json"))
        best = load(os.path.join(folder, "best.json"))
        comparison = os.path.join(folder, "predicted_vs_measured.json")
        span = load(comparison) if os.path.exists(comparison) else metrics.get("kernel_span") or {}
        steps = sorted(step["iteration_s"] for step in metrics["steps"] if step["measured"])
        predicted_ns, measured_s = best["predicted"]["iteration_ns"], metrics["measured"]["iteration_s"]
        kernel_ns = span.get("measured_iteration_ns")
        runs.append(dict(s, folder=folder, predicted_ns=predicted_ns, measured_s=measured_s,
                         error=relative_error(measured_s, predicted_ns / 1e9), measured_steps=len(steps),
                         spread=(steps[-1] - steps[0]) / measured_s, kernel_s=kernel_ns / 1e9 if kernel_ns else None,
                         kernel_error=relative_error(kernel_ns, predicted_ns) if kernel_ns else None,
                         peak_GiB=max(r["peak_memory_GiB"] for r in metrics["ranks"]),
                         predicted_peak_GiB=max(r["predicted_peak_memory_GiB"] for r in metrics["ranks"]),
                         kinds=span.get("kinds", []), machine=load(os.path.join(folder, "execution.json"))))
    return runs


class StepFailed(Exception):
    pass


def predict(args, scenario, profile, out, log):
    if call(args.twin, ["simulate", scenario, "--profile", profile, "--out", out, "--quiet", "--top", "0"], log):
        raise StepFailed(f"twin simulate {scenario} --profile {profile} failed: see {log.name}")
    return load(os.path.join(out, "best.json"))["predicted"]["iteration_ns"]


def fold(args, run_folders, before, folder, log):
    """A fresh `folder` holding profile.json: `before` with every run of run_folders folded in, in order."""
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    after = os.path.join(folder, "profile.json")
    for i, run in enumerate(run_folders):
        source = ["--profile", before, "--out", after] if i == 0 else ["--profile", after]
        if call(args.twin, ["calibrate", "--from-trace", run] + source, log):
            raise StepFailed(f"twin calibrate --from-trace {run} failed: see {log.name}")
    return after


def recalibration(args, study, runs, log):
    """Step 5: half A folded one run after another into a copy of the profile; both halves predicted again
    with the study's profile (before: this twin, as the after) and with the folded one (after)."""
    half_a, half_b = split_halves(runs)
    if not half_a or not half_b:
        return None
    folder = os.path.join(args.work, "recalibration")
    before = profile_argument(args.work, study["profile"])
    after = fold(args, [r["folder"] for r in half_a], before, folder, log)
    rows = []
    for half, members in (("A", half_a), ("B", half_b)):
        for r in members:
            scenario = os.path.join(r["folder"], "scenario.json")
            ns = {when: predict(args, scenario, profile, os.path.join(folder, when, r["name"]), log)
                  for when, profile in (("before", before), ("after", after))}
            row = {"name": r["name"], "key": r["key"], "half": half, "measured_s": r["measured_s"],
                   "kernel_s": r["kernel_s"], "reproduces_plan": ns["before"] == r["predicted_ns"]}
            for when in ("before", "after"):
                row[f"predicted_{when}_s"] = ns[when] / 1e9
                row[f"error_{when}"] = relative_error(r["measured_s"], ns[when] / 1e9)
                row[f"kernel_error_{when}"] = relative_error(r["kernel_s"], ns[when] / 1e9) if r["kernel_s"] else None
            rows.append(row)
    held_out = [r for r in rows if r["half"] == "B"]
    # Every run re-simulated by this twin with the study's profile: the plan-time predictions above come
    # from the twin that planned, which may be older than the one analysing.
    resimulated = prediction_summary([r["predicted_before_s"] for r in rows], [r["measured_s"] for r in rows])
    summary = {}
    for when in ("before", "after"):
        for measure in ("error", "kernel_error"):
            errors = [r[f"{measure}_{when}"] for r in held_out if r[f"{measure}_{when}"] is not None]
            summary[f"{measure}_{when}"] = error_summary(errors)
        summary[f"tau_b_{when}"] = kendall_tau_b([r[f"predicted_{when}_s"] for r in held_out],
                                                 [r["measured_s"] for r in held_out])
    summary["held_out_error_fell"] = summary["error_after"]["mean_abs"] < summary["error_before"]["mean_abs"]
    return {"folded": [r["name"] for r in half_a], "predicted": [r["name"] for r in half_b], "runs": rows,
            "held_out": summary, "resimulated": resimulated}


def prior_recalibration(args, study, runs, log):
    """Every executed run of earlier studies (--prior WORK ...) folded into a copy of this study's profile, then
    every run of this study predicted again: what the twin learnt from some runs does for the next."""
    prior_runs = [os.path.join(work, "runs", name) for work in args.prior
                  for name in sorted(os.listdir(os.path.join(work, "runs")))
                  if executed(os.path.join(work, "runs", name)) == 0]
    if not prior_runs:
        return {"failed": f"{' '.join(args.prior)}: no executed run"}
    folder = os.path.join(args.work, "prior-recalibration")
    before = profile_argument(args.work, study["profile"])
    after = fold(args, prior_runs, before, folder, log)
    rows = []
    for r in runs:
        scenario = os.path.join(r["folder"], "scenario.json")
        ns = {when: predict(args, scenario, profile, os.path.join(folder, when, r["name"]), log)
              for when, profile in (("before", before), ("after", after))}
        rows.append({"name": r["name"], "key": r["key"], "measured_s": r["measured_s"],
                     "predicted_before_s": ns["before"] / 1e9, "predicted_after_s": ns["after"] / 1e9,
                     "error_before": relative_error(r["measured_s"], ns["before"] / 1e9),
                     "error_after": relative_error(r["measured_s"], ns["after"] / 1e9)})
    summary = {}
    for when in ("before", "after"):
        measures = prediction_summary([row[f"predicted_{when}_s"] for row in rows], [row["measured_s"] for row in rows])
        summary.update({f"{measure}_{when}": value for measure, value in measures.items()})
    return {"prior": [os.path.relpath(work, REPO) for work in args.prior], "folded": [os.path.basename(r) for r in prior_runs],
            "runs": rows, "summary": summary}


def analyze(args, study, log):
    runs = measured_runs(args, study)
    if len(runs) < 2:
        sys.exit(f"{len(runs)} executed runs in {args.work}: nothing to compare")
    errors = error_summary([r["error"] for r in runs])
    kernel = error_summary([r["kernel_error"] for r in runs if r["kernel_error"] is not None])
    tau = kendall_tau_b([r["predicted_ns"] for r in runs], [r["measured_s"] for r in runs])
    value, best_predicted, best_measured = regret([r["predicted_rank"] for r in runs], [r["measured_s"] for r in runs])
    order = sorted(range(len(runs)), key=lambda i: (runs[i]["measured_s"], runs[i]["predicted_rank"]))
    for position, i in enumerate(order):
        runs[i]["measured_position"] = position + 1
    profile = os.path.join(args.work, "profile.json")
    provenance = {k: v for k, v in load(profile).get("provenance", {}).items()
                  if k in ("date_utc", "gpu", "gpu_count", "hosts", "versions", "calibration_seconds", "command")} \
        if os.path.exists(profile) else {"shipped": study["profile"]}
    machines = sorted({json.dumps({k: r["machine"][k] for k in ("host", "gpus")}, sort_keys=True) for r in runs})
    result = {
        "scenario": study["scenario"], "profile": study["profile"], "calibration": provenance,
        "machines": [json.loads(m) for m in machines],
        "executed_utc": sorted(r["machine"]["date_utc"] for r in runs)[::len(runs) - 1],
        "iters": study["iters"], "warmup": study["warmup"], "feasible": study["feasible"],
        "candidates": study["candidates"], "planned": len(study["strategies"]), "executed": len(runs),
        "not_executed": [s["name"] for s in study["strategies"] if s["name"] not in {r["name"] for r in runs}],
        "iteration_error": errors, "kernel_span_error": kernel, "kendall_tau_b": tau, "regret": value,
        "predicted_best": runs[best_predicted]["name"], "measured_best": runs[best_measured]["name"],
        "kinds": aggregate_kinds([r["kinds"] for r in runs]),
        "runs": [{k: v for k, v in r.items() if k not in ("kinds", "folder")} for r in runs],
        "recalibration": None}
    try:
        result["recalibration"] = recalibration(args, study, runs, log)
    except StepFailed as failure:  # steps 1-4 still stand
        result["recalibration"] = {"failed": str(failure)}
    if args.prior:
        try:
            result["prior_recalibration"] = prior_recalibration(args, study, runs, log)
        except StepFailed as failure:
            result["prior_recalibration"] = {"failed": str(failure)}
    result["aims"] = {"mean_abs_error<=2%": errors["mean_abs"] <= 0.02, "max_abs_error<=5%": errors["max_abs"] <= 0.05,
                      "regret<=2%": value <= 0.02, "kendall_tau_b>=0.9": tau is not None and tau >= 0.9,
                      "held_out_error_fell": bool(result["recalibration"] and "held_out" in result["recalibration"]
                                                  and result["recalibration"]["held_out"]["held_out_error_fell"])}
    return result


def pct(value, signed=True):
    return "n/a" if value is None else (f"{100 * value:+.2f}%" if signed else f"{100 * value:.2f}%")


def markdown(result):
    e, k = result["iteration_error"], result["kernel_span_error"]
    lines = [f"Scenario `{result['scenario']}`, profile `{result['profile']}` (calibrated "
             f"{result['calibration'].get('date_utc', 'n/a')}); executed {' to '.join(result['executed_utc'])} on "
             + "; ".join(f"{m['host']} ({len(m['gpus'])} GPUs: {m['gpus'][0] if m['gpus'] else '?'})"
                         for m in result["machines"]) +
             f". {result['executed']} of {result['planned']} planned strategies executed ({result['feasible']} "
             f"feasible of {result['candidates']} candidates), {result['iters']} iterations, the first "
             f"{result['warmup']} left out; error = measured / predicted - 1.", "",
             "| measure | value | aim | met |", "|---|---|---|---|",
             f"| mean absolute error, iteration (step time) | {pct(e['mean_abs'], False)} | <= 2% | "
             f"{'yes' if result['aims']['mean_abs_error<=2%'] else 'no'} |",
             f"| maximum absolute error, iteration | {pct(e['max_abs'], False)} "
             f"({result['runs'][e['worst_index']]['key']}) | <= 5% | {'yes' if result['aims']['max_abs_error<=5%'] else 'no'} |",
             f"| mean signed error, iteration | {pct(e['mean_signed'])} | | |",
             f"| mean / max absolute error, kernel span | {pct(k['mean_abs'], False) if k else 'n/a'} / "
             f"{pct(k['max_abs'], False) if k else 'n/a'} | | |",
             f"| Kendall's tau-b, predicted vs measured | {fmt_tau(result['kendall_tau_b'])} "
             f"| >= 0.9 | {'yes' if result['aims']['kendall_tau_b>=0.9'] else 'no'} |",
             f"| regret of the predicted best ({result['predicted_best']}; measured best {result['measured_best']}) | "
             f"{pct(result['regret'], False)} | <= 2% | {'yes' if result['aims']['regret<=2%'] else 'no'} |", "",
             "| # | strategy | why chosen | predicted rank | measured position | predicted s | measured s | spread | "
             "error | kernel span s | kernel error | peak GiB (predicted) |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["runs"]:
        lines.append(f"| {r['name'][:2]} | `{r['key']}` | {r['why']} | {r['predicted_rank']} | {r['measured_position']} | "
                     f"{r['predicted_ns'] / 1e9:.4f} | {r['measured_s']:.4f} | {pct(r['spread'], False)} | "
                     f"{pct(r['error'])} | {'n/a' if r['kernel_s'] is None else round(r['kernel_s'], 4)} | "
                     f"{pct(r['kernel_error'])} | {r['peak_GiB']:.1f} ({r['predicted_peak_GiB']:.1f}) |")
    lines += ["", "Per op kind, summed over every rank of every run (kernel time of the ops):", "",
              "| kind | runs | ops | predicted ms | measured ms | error | measured - predicted ms | per-run error range |",
              "|---|---|---|---|---|---|---|---|"]
    for t in result["kinds"]:
        lines.append(f"| {t['kind']} | {t['runs']} | {t['ops']} | {t['predicted_ns'] / 1e6:.2f} | "
                     f"{t['measured_ns'] / 1e6:.2f} | {pct(t['error'])} | {t['contribution_ns'] / 1e6:+.2f} | "
                     f"{pct(t['run_error_min'])} to {pct(t['run_error_max'])} |")
    rec = result["recalibration"]
    if rec and "failed" in rec:
        lines += ["", f"Recalibration: **failed**: {rec['failed']}"]
    elif rec:
        h = rec["held_out"]
        lines += ["", f"Recalibration: half A ({len(rec['folded'])} runs, predicted ranks 1st, 3rd, ...) folded one "
                  f"after another into a copy of the profile (`twin calibrate --from-trace`); half B predicted again:", "",
                  "| run | half | measured s | predicted before s | error before | predicted after s | error after | "
                  "kernel error before | kernel error after |", "|---|---|---|---|---|---|---|---|---|"]
        for r in rec["runs"]:
            lines.append(f"| `{r['key']}` | {r['half']} | {r['measured_s']:.4f} | {r['predicted_before_s']:.4f} | "
                         f"{pct(r['error_before'])} | {r['predicted_after_s']:.4f} | {pct(r['error_after'])} | "
                         f"{pct(r['kernel_error_before'])} | {pct(r['kernel_error_after'])} |")
        lines += ["", "| held out (half B) | before | after |", "|---|---|---|",
                  f"| mean / max absolute error, iteration | {pct(h['error_before']['mean_abs'], False)} / "
                  f"{pct(h['error_before']['max_abs'], False)} | {pct(h['error_after']['mean_abs'], False)} / "
                  f"{pct(h['error_after']['max_abs'], False)} |",
                  f"| mean / max absolute error, kernel span | "
                  + (f"{pct(h['kernel_error_before']['mean_abs'], False)} / {pct(h['kernel_error_before']['max_abs'], False)} | "
                     f"{pct(h['kernel_error_after']['mean_abs'], False)} / {pct(h['kernel_error_after']['max_abs'], False)} |"
                     if h["kernel_error_before"] else "n/a | n/a |"),
                  f"| Kendall's tau-b within half B | {fmt_tau(h['tau_b_before'])} | {fmt_tau(h['tau_b_after'])} |",
                  "", f"Held-out error fell: **{'yes' if h['held_out_error_fell'] else 'no'}**."]
        if not all(r["reproduces_plan"] for r in rec["runs"]):
            x = rec["resimulated"]
            lines += ["", "This twin does not reproduce every plan's prediction (before != best.json): the binary that "
                      "planned and the one that analysed differ. Every run re-simulated by this one, with the study's "
                      "profile and nothing folded in:", "", "| measure | value |", "|---|---|",
                      f"| mean / max absolute error, iteration | {pct(x['error']['mean_abs'], False)} / "
                      f"{pct(x['error']['max_abs'], False)} |",
                      f"| mean signed error | {pct(x['error']['mean_signed'])} |",
                      f"| Kendall's tau-b | {fmt_tau(x['tau_b'])} |",
                      f"| regret of the predicted best | {pct(x['regret'], False)} |"]
    prior = result.get("prior_recalibration")
    if prior and "failed" in prior:
        lines += ["", f"Learning from earlier studies: **failed**: {prior['failed']}"]
    elif prior:
        m = prior["summary"]
        lines += ["", f"Learning from earlier studies: the {len(prior['folded'])} runs of "
                  f"{', '.join(f'`{w}`' for w in prior['prior'])} folded one "
                  "after another into a copy of the profile; every run of this study predicted again:", "",
                  "| run | measured s | predicted before s | error before | predicted after s | error after |",
                  "|---|---|---|---|---|---|"]
        for r in prior["runs"]:
            lines.append(f"| `{r['key']}` | {r['measured_s']:.4f} | {r['predicted_before_s']:.4f} | "
                         f"{pct(r['error_before'])} | {r['predicted_after_s']:.4f} | {pct(r['error_after'])} |")
        lines += ["", "| this study, predicted | before | after |", "|---|---|---|",
                  f"| mean / max absolute error | {pct(m['error_before']['mean_abs'], False)} / "
                  f"{pct(m['error_before']['max_abs'], False)} | {pct(m['error_after']['mean_abs'], False)} / "
                  f"{pct(m['error_after']['max_abs'], False)} |",
                  f"| Kendall's tau-b | {fmt_tau(m['tau_b_before'])} | {fmt_tau(m['tau_b_after'])} |",
                  f"| regret of the predicted best | {pct(m['regret_before'], False)} | {pct(m['regret_after'], False)} |"]
    return "\n".join(lines) + "\n"


def fmt_tau(value):
    return "n/a" if value is None else f"{value:.3f}"


# ---------------------------------------------------------------- self-test and command line
def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--twin", help="the twin binary (a CUDA build for --phase run)")
    parser.add_argument("--phase", choices=["plan", "run", "analyze", "all"], default="all")
    parser.add_argument("--scenario", default=SCENARIO)
    parser.add_argument("--work", default="out/accuracy", help="the study's state: profile, plans, runs")
    parser.add_argument("--results", default=os.environ.get("OUT"), help="where accuracy.json/.md go (default "
                        "$OUT, else the work folder)")
    parser.add_argument("--profile", help="use this profile (file or shipped name) instead of calibrating")
    parser.add_argument("--calibrate-scenario-shapes", action="store_true",
                        help="twin calibrate --scenario: also the exact GEMM shapes of the feasible candidates")
    parser.add_argument("--iters", type=int, default=13)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--budget-s", type=int, default=510, help="start no run that would end after this (run phase)")
    parser.add_argument("--only", type=int, help="execute and analyse only the first N planned strategies (smoke)")
    parser.add_argument("--retry-failed", action="store_true")
    parser.add_argument("--traced-step", dest="untraced_step", action="store_false",
                        help="take the measured step from the traced run (before 2026-11-30 14:00 UTC every study did); "
                             "by default each plan runs a second time with --no-trace and its step is the measured one")
    parser.add_argument("--pack", help="write the work folder (no traces) to this tar.gz after every step")
    parser.add_argument("--prior", nargs="+", metavar="WORK", help="analyze: also fold every executed run of these "
                        "earlier studies' work folders into the profile and predict this study again")
    parser.add_argument("--self-test", action="store_true", help="check the statistics on the CPU and exit")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    if not args.twin:
        parser.error("--twin is required")
    started = time.time()
    os.makedirs(args.work, exist_ok=True)
    study_path = os.path.join(args.work, "study.json")
    planned = load(study_path)["profile"] if os.path.exists(study_path) else None
    if args.profile and os.path.isfile(args.profile):
        shutil.copyfile(args.profile, os.path.join(args.work, "profile.json"))
        args.profile = "profile.json"
    if planned and args.profile and args.profile != planned:
        sys.exit(f"{study_path} was planned with profile {planned}, not {args.profile}: use another --work")
    args.profile_used = planned or args.profile or "profile.json"
    if args.phase == "plan" and not os.path.exists(profile_argument(args.work, args.profile_used)) \
            and args.profile_used == "profile.json":
        sys.exit("--phase plan needs --profile (calibrating needs GPUs: --phase run)")
    log = open(os.path.join(args.work, f"{args.phase}.log"), "a")
    if args.phase in ("run", "all"):
        run_phase(args, log, started)
    study = plan(args, log)
    if args.phase == "plan":
        for s in study["strategies"]:
            print(f"{s['name']}  rank {s['predicted_rank']:3d}  {s['predicted_s']:.4f} s  {s['why']}")
        print(f"{len(study['strategies'])} of {study['feasible']} feasible ({study['candidates']} candidates); "
              f"device estimate {study['device_estimate_s']:.0f} s for the runs (+ about {CALIBRATE_S:.0f} s to "
              f"calibrate); covered: {', '.join(study['covered'])}")
        return 0
    if args.phase == "run":
        return 0
    result = analyze(args, study, log)
    results = args.results or args.work
    os.makedirs(results, exist_ok=True)
    save(os.path.join(results, "accuracy.json"), result)
    with open(os.path.join(results, "accuracy.md"), "w") as f:
        f.write(markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
