#!/usr/bin/env python3
"""Writes a run folder of twin execute whose ops.csv is about BYTES long, for measuring the readers' memory.

Usage: tools/large_run_folder.py SOURCE_RUN_DIR OUT_DIR BYTES

OUT_DIR gets SOURCE_RUN_DIR's best.json, metrics.json and scenario.json, and an ops.csv of SOURCE's rows repeated as
further ranks (rank 0's rows as ranks 0, 1, 2, ...): each rank lists every op of its class once, so the file is valid
row by row and every reader reads it to its end (`twin report` then names the ranks metrics.json lacks; `twin
calibrate --from-trace` folds every row). The same arguments give the same bytes.
"""
import shutil
import sys
from pathlib import Path


def main() -> int:
    if len(sys.argv) != 4:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    source, out, size = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    out.mkdir(parents=True, exist_ok=True)
    for name in ("best.json", "metrics.json", "scenario.json"):
        if (source / name).exists():
            shutil.copyfile(source / name, out / name)
    lines = (source / "ops.csv").read_text().splitlines()
    header, rows = lines[0], [line.split(",") for line in lines[1:] if line]
    rank_zero = [row for row in rows if row[1] == "0"]
    written = 0
    with open(out / "ops.csv", "w", newline="") as csv:
        written += csv.write(header + "\r\n")
        rank = 0
        while written < size:
            block = "".join(",".join(row[:1] + [str(rank)] + row[2:]) + "\r\n" for row in rank_zero)
            if written + len(block) > size and rank > 0:
                break
            written += csv.write(block)
            rank += 1
    print(f"{out / 'ops.csv'}: {written} bytes, {rank} ranks of {len(rank_zero)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
