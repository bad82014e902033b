#!/usr/bin/env python3
"""tools/interference_points.py: provenance pairs become overlap.points, pairs of one key as the mean of their raw
slowdowns clamped to >= 1, every other entry kept; a profile without pairs is refused (non-zero exit)."""
import json
import os
import subprocess
import sys
import tempfile

TOOL = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "interference_points.py")


def pair(waves, compute_raw, comm_raw, beside="gemm"):
    p = {"collective": "all_gather", "size_bytes": 1 << 25, "beside": beside,
         "compute_slowdown_raw": compute_raw, "communication_slowdown_raw": comm_raw}
    if beside == "gemm":
        p["gemm_waves"] = waves
    return p


def main():
    folder = tempfile.mkdtemp()
    profile = {"format": "twin-profile", "overlap": {"compute_slowdown": 1.2, "communication_slowdown": 1.1},
               "provenance": {"interference_points": [pair(0.25, 1.8, 1.2), pair(0.25, 2.0, 0.9), pair(15.5, 1.1, 2.0),
                                                      pair(None, 0.95, 1.5, "memory_bound")]},
               "gpus": [{"gpu": "H200-141GB"}]}
    source, out = os.path.join(folder, "p.json"), os.path.join(folder, "q.json")
    json.dump(profile, open(source, "w"))
    subprocess.run([sys.executable, TOOL, source, "--out", out], check=True, capture_output=True)
    points = json.load(open(out))["overlap"]["points"]
    assert len(points) == 3, points
    assert abs(points[0]["compute_slowdown"] - 1.9) < 1e-12 and points[0]["communication_slowdown"] == 1.05, points[0]
    assert points[1]["gemm_waves"] == 15.5 and points[1]["communication_slowdown"] == 2.0, points[1]
    assert "gemm_waves" not in points[2] and points[2]["compute_slowdown"] == 1.0, points[2]
    assert json.load(open(out))["gpus"] == profile["gpus"]
    del profile["provenance"]["interference_points"]
    json.dump(profile, open(source, "w"))
    refused = subprocess.run([sys.executable, TOOL, source, "--out", out], capture_output=True, text=True)
    assert refused.returncode != 0 and "no provenance.interference_points" in refused.stderr, refused
    print("interference_points: 3 points from 4 pairs, a profile without pairs refused")


if __name__ == "__main__":
    main()
