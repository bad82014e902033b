"""The statistics of the accuracy study (tests/gpu/accuracy_study.py): relative errors, Kendall's tau-b with
ties, the regret of the predicted best, per-op-kind aggregation, the halves for held-out recalibration and
the deterministic choice of strategies; self_test() checks them against hand-computed values."""
import math

TOP, SPREAD = 4, 8          # the predicted top 4, then 8 ranks evenly spaced down to the last


# ---------------------------------------------------------------- statistics (checked by --self-test)
def relative_error(measured, predicted):
    """twin's convention everywhere (metrics.json, ops.csv): measured / predicted - 1."""
    return measured / predicted - 1


def kendall_tau_b(x, y):
    """Kendall's tau-b: (C - D) / sqrt((n0 - n1) (n0 - n2)), n0 = n(n-1)/2, n1 and n2 the pairs tied in x and
    in y (a pair tied in both counts in each). None when either side is all ties."""
    concordant = discordant = tied_x = tied_y = 0
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            dx, dy = (x[i] > x[j]) - (x[i] < x[j]), (y[i] > y[j]) - (y[i] < y[j])
            tied_x += dx == 0
            tied_y += dy == 0
            concordant += dx * dy > 0
            discordant += dx * dy < 0
    pairs = len(x) * (len(x) - 1) // 2
    denominator = math.sqrt((pairs - tied_x) * (pairs - tied_y))
    return (concordant - discordant) / denominator if denominator > 0 else None


def regret(predicted_ranks, measured_s):
    """How much slower the predicted best (the lowest predicted rank: twin's own tie order) runs than the
    measured best: measured[predicted best] / min(measured) - 1, with both indices."""
    best_predicted = min(range(len(measured_s)), key=lambda i: predicted_ranks[i])
    best_measured = min(range(len(measured_s)), key=lambda i: (measured_s[i], predicted_ranks[i]))
    return measured_s[best_predicted] / measured_s[best_measured] - 1, best_predicted, best_measured


def ranks_of(values):
    """1-based positions of values in ascending order (ties keep the order given)."""
    order = sorted(range(len(values)), key=lambda i: (values[i], i))
    ranks = [0] * len(values)
    for position, i in enumerate(order):
        ranks[i] = position + 1
    return ranks


def prediction_summary(predicted_s, measured_s):
    """How well predictions of runs did: their errors (error_summary), Kendall's tau-b against the measured
    times, and the regret of the predicted fastest."""
    return {"error": error_summary([relative_error(m, p) for m, p in zip(measured_s, predicted_s)]),
            "tau_b": kendall_tau_b(predicted_s, measured_s),
            "regret": regret(ranks_of(predicted_s), measured_s)[0]}


def error_summary(errors):
    """Mean and maximum absolute error, the signed mean, and the index of the largest."""
    if not errors:
        return None
    worst = max(range(len(errors)), key=lambda i: abs(errors[i]))
    return {"mean_abs": sum(abs(e) for e in errors) / len(errors), "max_abs": abs(errors[worst]),
            "mean_signed": sum(errors) / len(errors), "worst_index": worst, "count": len(errors)}


def aggregate_kinds(per_run_kinds):
    """Per op kind over every run: sums of predicted and measured op time (ns), error of the sums, and the
    range of the per-run errors. per_run_kinds: a list (one per run) of predicted_vs_measured "kinds" lists."""
    total = {}
    for kinds in per_run_kinds:
        for k in kinds:
            if not k["ops"]:
                continue
            t = total.setdefault(k["kind"], {"kind": k["kind"], "runs": 0, "ops": 0, "predicted_ns": 0,
                                             "measured_ns": 0, "run_errors": []})
            t["runs"] += 1
            t["ops"] += k["ops"]
            t["predicted_ns"] += k["predicted_ns"]
            t["measured_ns"] += k["measured_ns"]
            if k["predicted_ns"] > 0:
                t["run_errors"].append(relative_error(k["measured_ns"], k["predicted_ns"]))
    rows = []
    for t in total.values():
        t["error"] = relative_error(t["measured_ns"], t["predicted_ns"]) if t["predicted_ns"] > 0 else None
        t["contribution_ns"] = t["measured_ns"] - t["predicted_ns"]
        errors = t.pop("run_errors")
        t["run_error_min"], t["run_error_max"] = (min(errors), max(errors)) if errors else (None, None)
        rows.append(t)
    return sorted(rows, key=lambda t: (-abs(t["contribution_ns"]), t["kind"]))


def split_halves(runs):
    """Runs ordered by predicted rank, alternately into half A (1st, 3rd, ...) and half B (2nd, 4th, ...)."""
    ordered = sorted(runs, key=lambda r: r["predicted_rank"])
    return ordered[0::2], ordered[1::2]


def features(row):
    """The values of the issue's dimensions a strategy shows (a PP schedule only where there is a pipeline)."""
    f = [f"DP {row['data_parallel_size']}", f"ZeRO {row['zero_stage']}", f"TP {row['tensor_model_parallel_size']}",
         f"PP {row['pipeline_model_parallel_size']}", f"micro-batch {row['micro_batch_size']}",
         f"recompute {row['recompute']}"]
    if int(row["pipeline_model_parallel_size"]) > 1:
        f.append(f"schedule {row['schedule']}")
    return f


def select(feasible):
    """Deterministic choice from the feasible rows in predicted order: the top TOP, SPREAD ranks evenly spaced
    from there to the last, then for every dimension value no chosen strategy shows, the best that shows it."""
    n, chosen = len(feasible), {}
    for i in range(min(TOP, n)):
        chosen[i] = f"predicted top {TOP}"
    for j in range(1, SPREAD + 1):
        i = round(TOP - 1 + j * (n - TOP) / SPREAD)
        chosen.setdefault(min(i, n - 1), "evenly spaced rank")
    wanted = sorted({v for row in feasible for v in features(row)})
    for value in wanted:
        if not any(value in features(feasible[i]) for i in chosen):
            chosen[next(i for i in range(n) if value in features(feasible[i]))] = f"best with {value}"
    return [(i, chosen[i]) for i in sorted(chosen)]


def self_test():
    """The statistics against hand-computed values (pairs counted by hand in the comments)."""
    checks = []

    def close(name, got, expected):
        ok = got is expected if expected is None else got is not None and abs(got - expected) < 1e-12
        checks.append(ok)
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {got} (expected {expected})")

    close("tau-b identical order", kendall_tau_b([1, 2, 3, 4], [10, 20, 30, 40]), 1.0)
    close("tau-b reversed order", kendall_tau_b([1, 2, 3, 4], [4, 3, 2, 1]), -1.0)
    close("tau-b one swap of 3: C 2, D 1 of 3 pairs", kendall_tau_b([1, 2, 3], [1, 3, 2]), 1 / 3)
    close("tau-b 5 items: C 7, D 3", kendall_tau_b([1, 2, 3, 4, 5], [3, 1, 2, 5, 4]), 0.4)
    # x ties pair (1,2), y ties pair (2,3), the other 4 concordant: 4 / sqrt((6-1)(6-1))
    close("tau-b ties on each side", kendall_tau_b([1, 2, 2, 3], [1, 2, 3, 3]), 0.8)
    # (0,1) tied in both: counts in n1 and n2; (0,2), (1,2) concordant: 2 / sqrt((3-1)(3-1))
    close("tau-b a pair tied on both sides", kendall_tau_b([1, 1, 2], [5, 5, 6]), 1.0)
    # 2 x-ties, 2 y-ties, C 1, D 1
    close("tau-b 2x2 grid", kendall_tau_b([1, 1, 2, 2], [1, 2, 1, 2]), 0.0)
    # n0 6, n1 3 (x 1,1,1), n2 0; C 3, D 0: 3 / sqrt(3 * 6)
    close("tau-b three tied in x", kendall_tau_b([1, 1, 1, 2], [1, 2, 3, 4]), 3 / math.sqrt(18))
    close("tau-b all tied", kendall_tau_b([1, 1, 1], [1, 2, 3]), None)
    close("regret: predicted best measured 1.05, best 1.00",
          regret([1, 2, 3], [1.05, 1.00, 1.30])[0], 0.05 / 1.00)
    close("regret: predicted best is the measured best", regret([2, 1, 3], [1.2, 1.1, 1.3])[0], 0.0)
    close("regret: the lowest predicted rank is the predicted best", regret([5, 3, 9], [1.0, 1.5, 1.2])[0], 0.5)
    close("ranks of [3, 1, 2, 1]: ties keep their order", float(ranks_of([3, 1, 2, 1]) == [4, 1, 3, 2]), 1.0)
    close("relative error: 66.195 measured, 76.213 predicted", relative_error(66.195, 76.213), 66.195 / 76.213 - 1)
    summary = error_summary([-0.02, 0.01, 0.05])
    close("mean absolute error", summary["mean_abs"], 0.08 / 3)
    close("maximum absolute error", summary["max_abs"], 0.05)
    close("mean signed error", summary["mean_signed"], 0.04 / 3)
    close("largest error index", summary["worst_index"], 2)
    close("largest error of a negative one", error_summary([0.01, -0.04, 0.03])["max_abs"], 0.04)
    kinds = aggregate_kinds([
        [{"kind": "gemm", "ops": 2, "predicted_ns": 100, "measured_ns": 90},
         {"kind": "norm_forward", "ops": 1, "predicted_ns": 10, "measured_ns": 20}],
        [{"kind": "gemm", "ops": 3, "predicted_ns": 300, "measured_ns": 330},
         {"kind": "attention_forward", "ops": 0, "predicted_ns": 0, "measured_ns": 0}]])
    gemm = kinds[0]
    close("kinds: largest contribution first (gemm +20 ns before norm +10 ns)", float(gemm["kind"] == "gemm"), 1.0)
    close("kinds: gemm error of the sums (420 / 400 - 1)", gemm["error"], 0.05)
    close("kinds: gemm ops over runs", gemm["ops"], 5)
    close("kinds: gemm per-run error range low", gemm["run_error_min"], -0.1)
    close("kinds: gemm per-run error range high", gemm["run_error_max"], 0.1)
    close("kinds: norm_forward error", kinds[1]["error"], 1.0)
    close("kinds: a kind with no measured op is left out", float(len(kinds)), 2.0)
    a, b = split_halves([{"predicted_rank": r} for r in (20, 1, 12, 4, 9)])
    close("halves: A holds predicted ranks 1, 9, 20", float([r["predicted_rank"] for r in a] == [1, 9, 20]), 1.0)
    close("halves: B holds predicted ranks 4, 12", float([r["predicted_rank"] for r in b] == [4, 12]), 1.0)
    rows = [{"data_parallel_size": dp, "zero_stage": z, "tensor_model_parallel_size": 4 // dp,
             "pipeline_model_parallel_size": 1, "micro_batch_size": 1, "recompute": "none", "schedule": "1f1b"}
            for dp in (4, 2, 1) for z in (0, 1, 2, 3)] + [
            {"data_parallel_size": 1, "zero_stage": 0, "tensor_model_parallel_size": 1,
             "pipeline_model_parallel_size": 4, "micro_batch_size": 2, "recompute": r, "schedule": s}
            for r in ("full", "selective") for s in ("gpipe", "1f1b")]
    chosen = select(rows)  # 16 rows: top 0-3, spread over 4..15, then the values not yet covered
    picked = [i for i, _ in chosen]
    close("select: the top 4 and the last are chosen", float(picked[:4] == [0, 1, 2, 3] and picked[-1] == 15), 1.0)
    close("select: every dimension value is covered",
          float(all(any(v in features(rows[i]) for i in picked) for row in rows for v in features(row))), 1.0)
    close("select: the same choice twice", float(select(rows) == chosen), 1.0)
    print(f"self-test: {sum(checks)}/{len(checks)} passed")
    return 0 if all(checks) else 1


