#!/usr/bin/env python3
"""tools/op_kind_places.py must refuse a new switch over every OpKind outside its list and accept one over
core/op_kinds.hpp's Collective: a tree with the allowed places, documented, exits 0; the same tree with a sixth file
switching over OpKind exits 1 naming it; one switching over Collective instead exits 0. Usage: op_kind_places_test.py"""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECK = os.path.join(ROOT, "tools", "op_kind_places.py")
sys.path.insert(0, os.path.join(ROOT, "tools"))
from op_kind_places import PLACES  # noqa: E402

SWITCH = "int f(OpKind k) {\n  switch (k) {\n    case OpKind::gemm: return 1;\n  }\n}\n"
COLLECTIVE_SWITCH = "int g(Collective c) {\n  switch (c) {\n    case Collective::send: return 1;\n  }\n}\n"


def tree(folder, extra):
    files = {path: SWITCH for path in PLACES}
    files["docs/DESIGN.md"] = "## Adding an op kind\n" + "".join(f"| `{path}` |\n" for path in PLACES) + "## Next\n"
    files.update(extra)
    for path, text in files.items():
        os.makedirs(os.path.join(folder, os.path.dirname(path)), exist_ok=True)
        with open(os.path.join(folder, path), "w", encoding="utf-8") as out:
            out.write(text)


def run(folder):
    return subprocess.run([sys.executable, CHECK, "--root", folder], capture_output=True, text=True)


def main():
    failures = []
    cases = [("the allowed places", {}, 0, None),
             ("one more switch over OpKind", {"sim/new_rule.cpp": SWITCH}, 1, "sim/new_rule.cpp: switches over OpKind"),
             ("a switch over Collective", {"sim/new_rule.cpp": COLLECTIVE_SWITCH}, 0, None)]
    for name, extra, expected, line in cases:
        with tempfile.TemporaryDirectory() as folder:
            tree(folder, extra)
            result = run(folder)
            if result.returncode != expected or (line and line not in result.stderr):
                failures.append(f"{name}: exit {result.returncode} (expected {expected}):\n{result.stderr}")
    for failure in failures:
        print(failure)
    print("op_kind_places.py holds the switches over OpKind to its list" if not failures else "FAILED")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
