#!/usr/bin/env python3
"""tools/compute_waits.py must name what each gap of a rank's compute stream waited for: a synthetic trace of two
ranks where rank 8's compute waits 300 us for a pipeline receive and 50 us for a TP all-gather, and once 20 us for
nothing another stream ends; rank 0's ops are not counted. Usage: compute_waits_test.py"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "tools"))
from compute_waits import rank_streams, waits  # noqa: E402


def op(rank, tid, name, ts, dur):
    return {"ph": "X", "pid": rank, "tid": tid, "name": name, "ts": ts, "dur": dur}


def thread(rank, tid, name):
    return {"ph": "M", "pid": rank, "tid": tid, "name": "thread_name", "args": {"name": name}}


EVENTS = [
    thread(8, 0, "compute"), thread(8, 1, "tp"), thread(8, 6, "pp_recv"), thread(0, 0, "compute"),
    op(8, 0, "L0.qkv.fwd.mb0", 0, 100),
    op(8, 6, "pipeline_activation.recv.mb1", 150, 250),   # ends at 400
    op(8, 0, "L0.attention.fwd.mb1", 400, 100),            # waited 300 us for the receive
    op(8, 1, "L1.tp_gather.fwd.mb1", 480, 70),             # ends at 550
    op(8, 0, "L1.qkv.fwd.mb1", 550, 100),                  # waited 50 us for the gather
    op(8, 0, "L1.fc1.fwd.mb1", 670, 30),                   # 20 us with nothing ending
    op(0, 0, "L0.qkv.fwd.mb0", 0, 10), op(0, 0, "L0.qkv.fwd.mb1", 5000, 10),  # another rank's gap
]


def main():
    busy, idle, causes = waits(rank_streams(EVENTS, 8))
    expected = {("pp_recv", "pipeline_activation"): 300.0, ("tp", "L1"): 50.0, ("unexplained", ""): 20.0}
    failures = []
    if busy != 330:
        failures.append(f"busy {busy} us, expected 330")
    if idle != 370:
        failures.append(f"idle {idle} us, expected 370")
    if dict(causes) != expected:
        failures.append(f"causes {dict(causes)}, expected {expected}")
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
