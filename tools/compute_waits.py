#!/usr/bin/env python3
"""What a predicted step's compute stream waits for: each gap between two compute ops of one rank in a trace of
`twin simulate` (traces/*.json, Chrome format: pid = rank, tid = stream), named by the op of another stream that ends
when the gap does (within 2 us: the op the next compute op waited for), summed by that op's stream and the first
part of its name ('pipeline_activation', 'L12', 'grad_norm'). A gap that ends with no such op is 'unexplained' (the
host, or an op of this stream's own order).

    python3 tools/compute_waits.py TRACE.json [--rank R] [--top N]

Prints the compute stream's busy and idle time, then the N largest causes of idle time. docs/VALIDATION.md ("Pipeline
receives posted ahead under delayed scaling too") read NeMo 24.07's Llama 2 70B row so: 0.93 s of its 1.07 s idle
were waits on pipeline receives, which the fix removed.
"""
import argparse
import collections
import json

SLACK_US = 2.0  # trace times are in microseconds; an op that ends this close to a gap's end explains it


def rank_streams(events, rank):
    """{stream name: [complete events]} of one rank, each list in start order."""
    names = {e["tid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name" and e.get("pid") == rank}
    streams = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and e.get("pid") == rank:
            streams[names.get(e["tid"], str(e["tid"]))].append(e)
    for ops in streams.values():
        ops.sort(key=lambda e: e["ts"])
    return streams


def waits(streams):
    """(busy us, idle us, Counter {(stream, op name's first part): idle us}) of the rank's compute stream."""
    compute = streams.get("compute", [])
    ends = collections.defaultdict(list)  # end time (us, rounded) -> [(stream, name)]
    for stream, ops in streams.items():
        if stream != "compute":
            for e in ops:
                ends[round(e["ts"] + e["dur"])].append((stream, e["name"]))
    causes = collections.Counter()
    idle = 0.0
    for before, after in zip(compute, compute[1:]):
        gap = after["ts"] - (before["ts"] + before["dur"])
        if gap <= SLACK_US:
            continue
        idle += gap
        cause = ("unexplained", "")
        for delta in range(-int(SLACK_US), int(SLACK_US) + 1):
            if round(after["ts"]) + delta in ends:
                stream, name = ends[round(after["ts"]) + delta][0]
                cause = (stream, name.split(".")[0])
                break
        causes[cause] += gap
    return sum(e["dur"] for e in compute), idle, causes


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("--rank", type=int, default=0, help="the trace's pid (a global rank); default 0")
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args()
    with open(args.trace) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    streams = rank_streams(events, args.rank)
    if not streams.get("compute"):
        ranks = sorted({e["pid"] for e in events if e.get("ph") == "X"})
        raise SystemExit(f"{args.trace}: rank {args.rank} has no compute ops; ranks in the trace: {ranks}")
    busy, idle, causes = waits(streams)
    print(f"rank {args.rank}: compute busy {busy / 1e3:.1f} ms, idle {idle / 1e3:.1f} ms between its ops")
    for (stream, name), us in causes.most_common(args.top):
        print(f"  {stream:12s} {name:28s} {us / 1e3:9.1f} ms")


if __name__ == "__main__":
    main()
