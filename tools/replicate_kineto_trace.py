#!/usr/bin/env python3
"""A large PyTorch profiler trace made from a real one, for timing `twin calibrate --from-trace`: the source's
profiled steps repeated (timestamps shifted by the source's span, External ids and correlations offset so each
copy's launches stay its own) until STEPS steps, written as RANKS gzipped files (distributedInfo.rank set).
The numbers of a fold of it mean nothing beyond its time; the source's are the measured ones.

Usage: tools/replicate_kineto_trace.py SOURCE.json.gz OUT_DIR [--ranks 8] [--steps 20]
"""
import argparse, copy, gzip, json, os

def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("source"); p.add_argument("out")
    p.add_argument("--ranks", type=int, default=8); p.add_argument("--steps", type=int, default=20)
    a = p.parse_args()
    with gzip.open(a.source, "rt") as f:
        trace = json.load(f)
    events = [e for e in trace["traceEvents"] if e.get("ph") != "M"]
    meta = [e for e in trace["traceEvents"] if e.get("ph") == "M"]
    steps = sum(1 for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#"))
    timed = [e for e in events if "ts" in e]
    start = min(e["ts"] for e in timed)
    span = max(e["ts"] + e.get("dur", 0) for e in timed) - start
    ids = [e["args"][k] for e in events for k in ("External id", "correlation") if isinstance(e.get("args", {}).get(k), int)]
    id_span = max(ids) + 1 if ids else 1
    copies = -(-a.steps // steps)
    os.makedirs(a.out, exist_ok=True)
    for rank in range(a.ranks):
        out = []
        for c in range(copies):
            for e in events:
                e = copy.copy(e)
                if "ts" in e: e["ts"] = e["ts"] + c * span
                if "id" in e and isinstance(e["id"], int): e["id"] += c * id_span
                if "args" in e:
                    e["args"] = dict(e["args"])
                    for k in ("External id", "correlation"):
                        if isinstance(e["args"].get(k), int): e["args"][k] += c * id_span
                if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#"):
                    e["name"] = "ProfilerStep#%d" % (int(e["name"][13:]) + c * steps)
                out.append(e)
        doc = dict(trace)
        doc["traceEvents"] = meta + out
        doc["distributedInfo"] = dict(trace.get("distributedInfo", {}), rank=rank, world_size=a.ranks)
        with gzip.open(os.path.join(a.out, "rank%d.json.gz" % rank), "wt", compresslevel=1) as f:
            json.dump(doc, f)
    print(f"{a.ranks} ranks x {copies * steps} steps ({copies} copies of {steps}) in {a.out}")

if __name__ == "__main__":
    main()
