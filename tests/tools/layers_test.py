#!/usr/bin/env python3
"""tools/layers.py must fail on an include a rule forbids, naming the edge and the reason: a tree whose executor
includes a plan family's folder (issue 42 item 1) exits 1 with that line, the same tree including the family
interface (strategies/families/) instead exits 0. Usage: layers_test.py"""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECK = os.path.join(ROOT, "tools", "layers.py")


def tree(folder, executor_includes):
    files = {"core/op.hpp": "", "strategies/plan.hpp": '#include "core/op.hpp"\n',
             "strategies/per_layer/per_layer.hpp": '#include "strategies/plan.hpp"\n',
             "strategies/families/rank_plan.hpp": '#include "strategies/per_layer/per_layer.hpp"\n',
             "executor/execute.cpp": f'#include "{executor_includes}"\n'}
    for path, text in files.items():
        os.makedirs(os.path.join(folder, os.path.dirname(path)), exist_ok=True)
        with open(os.path.join(folder, path), "w", encoding="utf-8") as out:
            out.write(text)


def run(folder):
    return subprocess.run([sys.executable, CHECK, "--root", folder], capture_output=True, text=True)


def main():
    failures = []
    with tempfile.TemporaryDirectory() as bad, tempfile.TemporaryDirectory() as good:
        tree(bad, "strategies/per_layer/per_layer.hpp")
        tree(good, "strategies/families/rank_plan.hpp")
        refused, accepted = run(bad), run(good)
        line = "forbidden: executor -> strategies/per_layer (the executor runs what a plan family states"
        if refused.returncode != 1 or line not in refused.stdout:
            failures.append(f"an executor including a family folder: exit {refused.returncode}, output:\n{refused.stdout}")
        if accepted.returncode != 0:
            failures.append(f"an executor including the family interface: exit {accepted.returncode}:\n{accepted.stdout}")
    for failure in failures:
        print(failure)
    print("layers.py refuses an executor that includes a family folder" if not failures else "FAILED")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
