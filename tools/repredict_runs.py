#!/usr/bin/env python3
"""Re-predict archived twin execute runs (each run folder: metrics.json, scenario.json) with one or more profiles:
each run's plan simulated with `--plan-key`, its measured step time beside each prediction, then mean and max
|error| per profile. Usage: python3 tools/repredict_runs.py TWIN RUNS_DIR PROFILE..."""
import csv
import glob
import json
import os
import subprocess
import sys
import tempfile
twin, runs_dir, profiles = sys.argv[1], sys.argv[2], sys.argv[3:]
rows=[]
for run in sorted(glob.glob(os.path.join(runs_dir, '*'))):
    m=json.load(open(os.path.join(run,'metrics.json'))); meas=m['measured']['iteration_s']; key=m['plan']
    preds=[]
    for p in profiles:
        out=tempfile.mkdtemp()
        r=subprocess.run([twin,'simulate',os.path.join(run,'scenario.json'),'--profile',p,'--plan-key',key,'--out',out,'--quiet','--top','0'],capture_output=True,text=True)
        t=None
        for row in csv.DictReader(open(os.path.join(out,'ranking.csv'))):
            if row['strategy']==key: t=float(row['iteration_time_s']); break
        preds.append(t)
    rows.append((os.path.basename(run), meas, preds))
for name, meas, preds in rows:
    print(f"{name[:60]:60s} {meas:.4f} " + " ".join(f"{p:.4f} ({(p/meas-1)*100:+.1f}%)" for p in preds))
for i,p in enumerate(profiles):
    errs=[abs(r[2][i]/r[1]-1) for r in rows]
    print(p, f"mean |error| {100*sum(errs)/len(errs):.2f}% max {100*max(errs):.2f}%")
