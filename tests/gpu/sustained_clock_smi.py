#!/usr/bin/env python3
"""nvidia-smi's SM clock and power beside the probe's clocks of `twin calibrate --sustained-clock` (no GPU).

tests/gpu/sustained_clock_check.sh samples nvidia-smi every 200 ms while the load runs. The load starts where a GPU's
power first exceeds 300 W; after it come 2 s of heating and 3 s per duty (calibrate/gpu/sustained_clock.hpp
SustainedClockLoad; 4 s with 1.5 s settling before 2026-12-01), of which the last 2 s count. The BF16 curve's points
only: the FP8 curve follows after its own 0.5 s of heating. This prints, per GPU and duty, the median nvidia-smi clock, power
and temperature of the samples in that counted window beside the probe's reading from calibrate.log.
Usage: sustained_clock_smi.py OUT_DIR   (OUT_DIR: the check's output folder, smi.csv and calibrate.log)
"""
import csv, datetime, os, re, statistics, sys

HEAT_S, POINT_S, SETTLE_S, BF16_POINTS = 2.0, 3.0, 1.0, 4


def main():
    out = sys.argv[1]
    samples = {}
    with open(os.path.join(out, "smi.csv")) as f:
        for row in csv.reader(f):
            stamp = datetime.datetime.strptime(row[0].strip(), "%Y/%m/%d %H:%M:%S.%f").timestamp()
            samples.setdefault(int(row[1]), []).append((stamp, float(row[2]), float(row[3]), float(row[4])))
    probe = {}
    pattern = re.compile(r"GPU (\d+): GEMM duty ([\d.]+), (\d+) MHz after the GEMMs")
    with open(os.path.join(out, "calibrate.log")) as f:
        for line in f:
            if m := pattern.search(line):
                probe.setdefault(int(m.group(1)), []).append((float(m.group(2)), float(m.group(3))))
    print("| GPU | GEMM duty | probe MHz | nvidia-smi MHz | probe / smi | power W | temperature C |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for gpu, rows in sorted(samples.items()):
        start = next(t for t, _, power, _ in rows if power > 300)
        for p, (duty, clock) in enumerate(probe.get(gpu, [])[:BF16_POINTS]):
            begin = start + HEAT_S + p * POINT_S + SETTLE_S
            window = [r for r in rows if begin <= r[0] < start + HEAT_S + (p + 1) * POINT_S]
            if not window:
                continue
            smi = statistics.median(r[1] for r in window)
            print(f"| {gpu} | {duty:.3f} | {clock:.0f} | {smi:.0f} | {clock / smi:.3f} | "
                  f"{statistics.median(r[2] for r in window):.0f} | {statistics.median(r[3] for r in window):.0f} |")


if __name__ == "__main__":
    main()
