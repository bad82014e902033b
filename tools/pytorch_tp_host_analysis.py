#!/usr/bin/env python3
"""Reads what tests/gpu/pytorch_tp_host.py measured (issue 38) and prints the tables of docs/ACCURACY.md "The host of
DTensor TP steps": per configuration, every rank's unprofiled host time per layer (forward, backward, optimizer),
the synchronised step per layer against the mean and the slowest rank's host; from the profiled steps, the TP
all-reduces' GPU time, how long each rank's kernel waited for the other's, the ranks' launch skew, and the host's
time per top-level op class. No torch needed.
  tools/pytorch_tp_host_analysis.py docs/accuracy/pytorch-tp-host-2xH200/tp_host.jsonl [traces.tar]
"""
import collections, gzip, io, json, statistics, sys, tarfile

def classify(name):
    """The op class a top-level CPU op belongs to (forward op or autograd node of the backward); DTensor issues its
    collectives inside other ops (the TP modules' hooks redistribute), so they count as "other"."""
    n = name.lower()
    if any(k in n for k in ("attention", "sdpa")): return "attention"
    if any(k in n for k in ("aten::mm", "aten::linear", "aten::matmul", "mmbackward", "addmm")): return "gemm"
    return "other"

def host_table(rows):
    print("| config | tokens | rank 0 fwd/bwd/opt ms | rank 1 fwd/bwd/opt ms | mean host | max host | step | step/max |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    out = []
    for r in rows:
        sums = [sum(p[:3]) for p in r["per_layer_ms"]]
        step = statistics.mean(p[3] for p in r["per_layer_ms"])
        cells = [" / ".join(f"{x:.1f}" for x in p[:3]) for p in r["per_layer_ms"]]
        print(f"| {r['name']} | {r['micro_batch'] * r['seq']} | {cells[0]} | {cells[1]} | {statistics.mean(sums):.1f} |"
              f" {max(sums):.1f} | {step:.1f} | {step / max(sums):.2f} |")
        out.append((r, sums, step))
    return out

def load_trace(data):
    ev = json.loads(gzip.decompress(data))["traceEvents"]
    launch = {e["args"]["correlation"]: e["ts"] for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver")
              and "correlation" in e.get("args", {})}
    phases = sorted((e["ts"], e["ts"] + e["dur"], e["name"][6:]) for e in ev
                    if e.get("cat") == "user_annotation" and e["name"].startswith("phase_"))
    tp = sorted((e["ts"], e["dur"], launch.get(e["args"].get("correlation"))) for e in ev if e.get("cat") == "kernel"
                and e["args"].get("Collective name") == "allreduce" and e["args"].get("dtype") != "Float")
    kernels = sorted((e["ts"], e["ts"] + e["dur"]) for e in ev if e.get("cat") == "kernel")
    return ev, phases, tp, kernels

def busy_us(kernels, begin, end):
    total, last = 0.0, begin
    for s, e in kernels:
        s, e = max(s, last), min(e, end)
        if e > s: total, last = total + e - s, e
    return total

def top_level_ops(ev, phases):
    """Per op class, the count and host time of top-level CPU ops inside forward and backward (per thread)."""
    ops = sorted((e["ts"], e["ts"] + e["dur"], e["tid"], e["name"]) for e in ev if e.get("cat") == "cpu_op")
    spans = [(b, e) for b, e, name in phases if name in ("forward", "backward")]
    end_of = {}
    stats = collections.defaultdict(lambda: [0, 0.0])
    for b, e, tid, name in ops:
        if b < end_of.get(tid, -1) or not any(sb <= b < se for sb, se in spans):
            continue
        end_of[tid] = e
        s = stats[classify(name)]
        s[0] += 1
        s[1] += e - b
    return stats

def trace_table(rows, tar_path):
    tar = tarfile.open(tar_path)
    names = {m.name.split("/")[-1]: m for m in tar.getmembers() if m.isfile()}
    print("\n| config | step ms (profiled) | GPU busy ms r0/r1 | TP all-reduces | their GPU ms r0/r1 | waited ms r0/r1 |"
          " launch skew r1-r0 ms: median [min, max] | host per op us: gemm / attention / other |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        if r["tp"] == 1 or f"{r['name']}_rank0.json.gz" not in names: continue  # the repository keeps three
        t = [load_trace(tar.extractfile(names[f"{r['name']}_rank{k}.json.gz"]).read()) for k in (0, 1)]
        n = min(len(t[0][2]), len(t[1][2]))
        starts = [[k[0] for k in x[2][:n]] for x in t]
        waited = [sum(max(0.0, starts[1 - k][i] - starts[k][i]) for i in range(n)) / 1e3 for k in (0, 1)]
        gpu = [sum(k[1] for k in x[2][:n]) / 1e3 for x in t]
        skew = [(t[1][2][i][2] - t[0][2][i][2]) / 1e3 for i in range(n) if t[0][2][i][2] and t[1][2][i][2]]
        begin = min(x[1][0][0] for x in t)
        end = max(max(k[1] for k in x[3]) for x in t)
        busy = [busy_us(x[3], begin, end) / 1e3 for x in t]
        ops = [top_level_ops(x[0], x[1]) for x in t]
        per_op = " / ".join(f"{statistics.mean(o[c][1] / max(o[c][0], 1) for o in ops):.0f}"
                            for c in ("gemm", "attention", "other"))
        print(f"| {r['name']} | {(end - begin) / 1e3:.0f} | {busy[0]:.0f} / {busy[1]:.0f} | {n} | {gpu[0]:.1f} / {gpu[1]:.1f}"
              f" | {waited[0]:.1f} / {waited[1]:.1f} | {statistics.median(skew):+.2f} [{min(skew):+.2f}, {max(skew):+.2f}]"
              f" | {per_op} |")
        counts = {c: ops[0][c][0] for c in ("gemm", "attention", "other")}
        print(f"<!-- {r['name']} top-level op counts (rank 0, 2 steps x 6 layers + rest): {counts} -->")

E2 = 0.5641895835  # E[max of 2 standard normals] = 1/sqrt(pi)

def model_table(rows):
    """The lowering's TP host model (strategies/pytorch_fsdp2.hpp kTpHostByLocalWidth, kTpHostRankSpread): per local
    width (hidden / tp), the mean rank's host time per layer of each pass and the fixed part per step, averaged over
    the TP 2 configurations of that width; the spread of a rank's host time over the mean, sigma, from the two
    ranks' per-layer sums (E[max of 2] - mean = e_2 sigma); and the model's step per layer, mean x (1 + e_2 sigma),
    against the measured synchronised step, which neither was taken from."""
    tp2 = [r for r in rows if r["tp"] == 2]
    sigma = statistics.mean(max(sum(p[:3]) for p in r["per_layer_ms"]) / statistics.mean(sum(p[:3]) for p in
                            r["per_layer_ms"]) - 1 for r in tp2) / E2
    print(f"\nrank spread sigma = {sigma:.4f} (over {len(tp2)} configurations)")
    print("| local width | configurations | forward / backward / optimizer ms per layer | fixed ms per step |")
    print("| --- | --- | --- | --- |")
    for local in sorted({r["hidden"] // 2 for r in tp2}):
        group = [r for r in tp2 if r["hidden"] // 2 == local]
        per_layer = [statistics.mean(p[k] for r in group for p in r["per_layer_ms"]) for k in range(3)]
        two = statistics.mean(sum(m["2"][:3]) for r in group for m in r["median_ms"])
        fixed = max(0.0, two - 2 * sum(per_layer))
        print(f"| {local} | {', '.join(r['name'] for r in group)} | "
              + " / ".join(f"{x:.3f}" for x in per_layer) + f" | {fixed:.3f} |")
    print("\n| config | model step per layer ms | measured | error |")
    print("| --- | --- | --- | --- |")
    errors = []
    for r in tp2:
        model = statistics.mean(sum(p[:3]) for p in r["per_layer_ms"]) * (1 + E2 * sigma)
        step = statistics.mean(p[3] for p in r["per_layer_ms"])
        errors.append(model / step - 1)
        print(f"| {r['name']} | {model:.1f} | {step:.1f} | {100 * errors[-1]:+.1f}% |")
    print(f"mean |error| {100 * statistics.mean(abs(e) for e in errors):.1f}%, max {100 * max(abs(e) for e in errors):.1f}%")

def main():
    rows = [json.loads(l) for l in open(sys.argv[1])]
    host_table(rows)
    model_table(rows)
    if len(sys.argv) > 2:
        trace_table(rows, sys.argv[2])

if __name__ == "__main__":
    main()
