#!/usr/bin/env python3
"""tools/rescale_attention_clock.py and tools/clock_law.py: the law is read from cost/sm_clock.hpp as the simulator
prices it; a micro-benchmarked attention timing moves from the law it was scaled with to that law by its own clock,
a traced entry and every other kind stay, and a profile whose attention is not at its reference clock, or an entry
without its clock, is refused. Usage: rescale_attention_clock_test.py"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import clock_law  # noqa: E402
from rescale_attention_clock import rescale  # noqa: E402

FORWARD = "attention_forward:b=1,h=32,kvh=8,sq=4096,skv=4096,d=128,causal=1,flash=1"
BACKWARD = "attention_backward:b=1,h=32,kvh=8,sq=4096,skv=4096,d=128,causal=1,flash=1"
TRACED = "attention_forward:b=2,h=32,kvh=8,sq=4096,skv=4096,d=128,causal=1,flash=1"
NORM = "norm_forward:rows=4096,cols=4096"


def check(condition, what):
    if not condition:
        sys.exit("FAILED: " + what)


def entry(ns, clock_MHz=None, source=None):
    e = {"median_ns": ns, "p10_ns": ns, "p90_ns": ns, "samples": 15}
    if clock_MHz:
        e["sm_clock_MHz"] = clock_MHz
    if source:
        e["source"] = source
    return e


def gpu(measured, at_reference=True):
    g = {"gpu": "H200-141GB", "reference_sm_clock_MHz": 1800.0, "measured": measured}
    if at_reference:
        g["attention_at_reference_clock"] = True
    return {"gpus": [g], "provenance": {}}


def refused(profile, words):
    try:
        rescale(profile, {"attention_forward": 0.5, "attention_backward": 0.5})
    except SystemExit as e:
        check(words in str(e), str(e))
        return
    sys.exit(f"FAILED: a profile was rescaled where '{words}' should refuse it")


def main():
    with open(os.path.join(ROOT, "cost", "sm_clock.hpp")) as f:
        header = f.read()
    law = clock_law.exponents()
    for kind, name in (("attention_forward", "kAttentionForwardClockExponent"),
                       ("attention_backward", "kAttentionBackwardClockExponent")):
        stated = float(re.search(name + r" = ([0-9.]+);", header).group(1))
        check(law[kind] == stated, f"{kind}: {law[kind]} read, {stated} stated")
    check(law["gemm"] == 1.0, "GEMMs follow the cycle law")

    before = {"attention_forward": 0.5, "attention_backward": 0.25}
    profile = gpu({FORWARD: entry(1000.0, 1980.0), BACKWARD: entry(3000.0, 1620.0),
                   TRACED: entry(2000.0, 1500.0, "trace:run"), NORM: entry(50.0)})
    check(rescale(profile, before) == 2, "two micro-benchmarked attention entries move")
    measured = profile["gpus"][0]["measured"]
    expected_forward = 1000.0 * 1.1 ** (law["attention_forward"] - 0.5)
    expected_backward = 3000.0 * 0.9 ** (law["attention_backward"] - 0.25)
    check(abs(measured[FORWARD]["median_ns"] - expected_forward) < 1e-6, f"forward {measured[FORWARD]}")
    check(abs(measured[BACKWARD]["p90_ns"] - expected_backward) < 1e-6, f"backward {measured[BACKWARD]}")
    check(measured[FORWARD]["sm_clock_MHz"] == 1980.0, "the clock it ran at stays")
    check(measured[TRACED]["median_ns"] == 2000.0, "a traced entry holds the training clock and stays")
    check(measured[NORM]["median_ns"] == 50.0, "a memory-bound kind stays")

    refused(gpu({FORWARD: entry(1000.0, 1980.0)}, at_reference=False), "not at a reference clock")
    refused(gpu({FORWARD: entry(1000.0)}), "no sm_clock_MHz")
    print("rescale_attention_clock: all checks passed")


if __name__ == "__main__":
    main()
