#!/usr/bin/env python3
"""What an NCCL kernel's measured time is made of, per collective (issue 37): waiting for the group's last rank
to arrive, and the transfer after it. Reads the run folders of an accuracy study (nccl_kernels.csv.gz written by
tests/gpu/nccl_kernels_extract.py on the device, ops.csv by twin execute); no GPU.

For every instance of a collective (iteration, op, group), on a host whose processes share CUPTI's clock:
  arrival skew  = last rank's kernel start - first rank's;
  wait of rank r = last start - r's start (r's kernel spins, counted in its kernel time, moving no data);
  transfer      = median end - last start (the collective itself, once everyone is there);
  segment       = last start - the median end of the group's previous collective (the work between them).
The group of an op follows from its role (ops.csv): tp_* ops run over the ranks that share cp, dp and pp;
grad_reduce and param_gather over those that share tp, cp and pp; an MoE layer's dispatch and combine all-to-alls
over the expert-parallel group, Megatron's blocks of expert_model_parallel_size consecutive data-parallel ranks
(the run's scenario.json strategy); other collectives (loss, grad_norm, pipeline p2p) are left out. Per run and role: mean kernel time, mean wait, mean transfer, the predicted time (ops.csv),
and the skew as a share of the segment (median, p90), which a rank-drift model needs.
Usage: nccl_arrival_skew.py [--json OUT] RUN_DIR...
"""
import argparse, collections, csv, gzip, json, os, statistics, sys

GROUP_AXES = {"tp": ("cp", "dp", "pp"), "dp": ("tp", "cp", "pp"), "ep": ("tp", "cp", "pp")}


def group_kind(role):
    if role.startswith("tp_"):
        return "tp"
    if role in ("grad_reduce", "param_gather"):
        return "dp"
    if role in ("dispatch", "combine"):
        return "ep"
    return None


def expert_parallel_size(run):
    path = os.path.join(run, "scenario.json")
    if not os.path.exists(path):
        return 1
    with open(path) as f:
        return int(json.load(f).get("strategy", {}).get("expert_model_parallel_size", 1))


def group_key(row, kind, ep):
    key = tuple(int(row[a]) for a in GROUP_AXES[kind])
    return key + (int(row["dp"]) // ep,) if kind == "ep" else key


def load_ops(run):
    """(rank_class, op index) -> (role, kind, predicted_duration_ns): ops.csv's op_id is the index in its class."""
    ops = {}
    with open(os.path.join(run, "ops.csv")) as f:
        for row in csv.DictReader(f):
            key = (int(row["rank_class"]), int(row["op_id"]))
            ops.setdefault(key, (row["role"], row["kind"], float(row["predicted_duration_ns"])))
    return ops


def instances(run, ops):
    """{(iteration, rank_class, op, group key): [(rank, start, end)]} for the TP and DP collectives."""
    found = collections.defaultdict(list)
    ep = expert_parallel_size(run)
    with gzip.open(os.path.join(run, "nccl_kernels.csv.gz"), "rt") as f:
        for row in csv.DictReader(f):
            if row["kind"] != "nccl" or int(row["iteration"]) < 0 or int(row["op"]) < 0:
                continue
            cls, op = int(row["rank_class"]), int(row["op"])
            info = ops.get((cls, op))
            kind = group_kind(info[0]) if info else None
            if kind is None:
                continue
            key = (int(row["iteration"]), cls, op, kind, group_key(row, kind, ep))
            found[key].append((int(row["rank"]), int(row["start_ns"]), int(row["end_ns"])))
    return found


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def merged_instances(run, ops):
    """{instance key: {rank: (start, end)}} for instances over at least two ranks: a collective split into several
    kernels on a rank (chunks) is one instance, from its first start to its last end."""
    merged = {}
    for key, records in instances(run, ops).items():
        by_rank = {}
        for rank, start, end in records:
            s, e = by_rank.get(rank, (start, end))
            by_rank[rank] = (min(s, start), max(e, end))
        if len(by_rank) >= 2:
            merged[key] = by_rank
    return merged


def analyse(run):
    ops = load_ops(run)
    merged = merged_instances(run, ops)
    previous_end = {}
    per_role = collections.defaultdict(lambda: collections.defaultdict(list))
    for key in sorted(merged, key=lambda k: (k[0], statistics.median(s for s, _ in merged[k].values()))):
        iteration, cls, op, kind, group = key
        by_rank = merged[key]
        starts = [s for s, _ in by_rank.values()]
        ends = [e for _, e in by_rank.values()]
        last, end = max(starts), statistics.median(ends)
        role, op_kind, predicted = ops[(cls, op)]
        stats = per_role[f"{op_kind}/{role}"]
        stats["kernel_ns"] += [e - s for s, e in by_rank.values()]
        stats["wait_ns"] += [last - s for s in starts]
        stats["transfer_ns"].append(end - last)
        stats["predicted_ns"].append(predicted)
        stats["skew_ns"].append(last - min(starts))
        group_id = (iteration, cls, kind, group)
        if group_id in previous_end and last > previous_end[group_id]:
            segment = last - previous_end[group_id]
            stats["segment_ns"].append(segment)
            stats["skew_share"].append((last - min(starts)) / segment)
        previous_end[group_id] = end
    summary = {}
    for role, s in sorted(per_role.items()):
        summary[role] = {"instances": len(s["transfer_ns"]),
                         "kernel_us": statistics.mean(s["kernel_ns"]) / 1e3,
                         "wait_us": statistics.mean(s["wait_ns"]) / 1e3,
                         "transfer_us": statistics.mean(s["transfer_ns"]) / 1e3,
                         "predicted_us": statistics.mean(s["predicted_ns"]) / 1e3,
                         "skew_us_median": percentile(s["skew_ns"], 0.5) / 1e3,
                         "segment_us_median": percentile(s["segment_ns"], 0.5) / 1e3,
                         "skew_share_median": percentile(s["skew_share"], 0.5),
                         "skew_share_p90": percentile(s["skew_share"], 0.9)}
    return summary


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--json")
    args = parser.parse_args()
    result = {}
    print("| run | op/role | instances | kernel us | wait us | transfer us | predicted us | transfer / predicted "
          "| skew us (median) | segment us (median) | skew / segment (median, p90) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for run in args.runs:
        if not os.path.exists(os.path.join(run, "nccl_kernels.csv.gz")):
            print(f"{run}: no nccl_kernels.csv.gz", file=sys.stderr)
            continue
        name = os.path.basename(os.path.normpath(run))
        result[name] = analyse(run)
        for role, r in result[name].items():
            print(f"| {name[:2]} | {role} | {r['instances']} | {r['kernel_us']:.0f} | {r['wait_us']:.0f} | "
                  f"{r['transfer_us']:.0f} | {r['predicted_us']:.0f} | {r['transfer_us'] / r['predicted_us']:.2f} | "
                  f"{r['skew_us_median']:.0f} | {r['segment_us_median']:.0f} | "
                  f"{100 * r['skew_share_median']:.1f}%, {100 * r['skew_share_p90']:.1f}% |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
