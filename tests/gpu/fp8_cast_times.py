"""The FP8 casts a profile timed (`twin calibrate` of an FP8 scenario): per recipe and kernel key, the median time
and the bandwidth of the bytes the cast moves (the key's bytes, strategies/fp8_linears.hpp fp8_cast_bytes), beside
the same key's time in a second profile where one is given (a calibration before a kernel change).
    python3 fp8_cast_times.py PROFILE [BEFORE]"""
import json
import sys


def casts(path):
    measured = json.load(open(path))["gpus"][0]["measured"]
    return {key: entry["median_ns"] for key, entry in measured.items() if key.startswith("fp8_cast:")}


def recipe_of(key):
    return key.partition(",recipe=")[2] or "tensorwise"


now = casts(sys.argv[1])
before = casts(sys.argv[2]) if len(sys.argv) > 2 else {}
print("| recipe | bytes | median us | TB/s | before us | before TB/s |")
print("|---|---|---|---|---|---|")
for key in sorted(now, key=lambda k: (recipe_of(k), int(k.split("bytes=")[1].split(",")[0]))):
    nbytes = int(key.split("bytes=")[1].split(",")[0])
    ns = now[key]
    row = f"| {recipe_of(key)} | {nbytes} | {ns / 1e3:.1f} | {nbytes / ns / 1e3:.2f} |"
    row += f" {before[key] / 1e3:.1f} | {nbytes / before[key] / 1e3:.2f} |" if key in before else " | |"
    print(row)
