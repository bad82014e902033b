#!/usr/bin/env python3
"""Keeps, from each run folder's measured/rank<r>.json (twin execute's CUPTI kernels joined to ops), the NCCL
kernels and every rank's per-iteration span, as one small gzipped CSV per run: nccl_kernels.csv.gz. The whole
measured/ folder of a four-GPU run is tens of MB; the collectives' start and end on every rank are what the
arrival-skew analysis (tests/gpu/nccl_arrival_skew.py) needs, and CUPTI's timestamps of the processes of one host
share one clock, so starts compare across ranks.
Rows: kind 'nccl' (rank, rank_class, tp, cp, dp, pp, iteration, op, stream, start_ns, end_ns, kernel) or kind
'iteration' (the same, op -1, the rank's first kernel start and last kernel end of that iteration).
Usage: nccl_kernels_extract.py RUN_DIR...
"""
import csv, glob, gzip, json, os, sys

COLUMNS = ["kind", "rank", "rank_class", "tp", "cp", "dp", "pp", "iteration", "op", "stream", "start_ns", "end_ns",
           "kernel"]


def rows_of(path):
    with open(path) as f:
        d = json.load(f)
    c, names, k = d["coordinates"], d["kernel_names"], d["kernels"]
    base = [d["rank"], d["rank_class"], c["tp"], c["cp"], c["dp"], c["pp"]]
    spans = {}
    for i in range(len(k["name"])):
        it, start, end = k["iteration"][i], k["start_ns"][i], k["end_ns"][i]
        if it >= 0:
            first, last = spans.get(it, (start, end))
            spans[it] = (min(first, start), max(last, end))
        name = names[k["name"][i]]
        if "nccl" in name.lower():
            yield ["nccl"] + base + [it, k["op"][i], k["stream"][i], start, end, name[:60]]
    for it, (first, last) in sorted(spans.items()):
        yield ["iteration"] + base + [it, -1, -1, first, last, ""]


def main():
    for run in sys.argv[1:]:
        files = sorted(glob.glob(os.path.join(run, "measured", "rank*.json")))
        if not files:
            print(f"{run}: no measured/rank*.json", file=sys.stderr)
            continue
        out = os.path.join(run, "nccl_kernels.csv.gz")
        with gzip.open(out + ".tmp", "wt", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(COLUMNS)
            for path in files:
                writer.writerows(rows_of(path))
        os.replace(out + ".tmp", out)
        print(f"{out}: {os.path.getsize(out)} bytes from {len(files)} rank files")


if __name__ == "__main__":
    main()
