#!/usr/bin/env python3
"""Lists the source files that switch over OpKind (a `case OpKind::` label): the places a new op kind must fill in,
which the compiler names (-Werror=switch, no `default:`). Exit 1 when a file switches over OpKind that PLACES does
not name, or one PLACES names no longer does, or docs/DESIGN.md's "Adding an op kind" omits one: a new switch over
every kind is a decision to make here, with its reason, not a side effect (issue 42: a new compute kind touches at
most 8 files). Switches over communication alone take core/op_kinds.hpp's `Collective`, over a kind's size its
`ShapeForm`, so a compute kind does not reach them.
Usage: python3 tools/op_kind_places.py [--root DIR]   (DIR: another tree, for tests/tools/op_kind_places_test.py)"""
import os
import re
import sys

# Each file allowed to switch over every OpKind, and what it decides for a kind.
PLACES = {
    "core/op_kinds.hpp": "the row: name, pricing, measurement, executor, size form, collective",
    "cost/compute_kinds.cpp": "the bytes a kind moves and the key its kernel is measured and looked up under",
    "calibrate/gpu/kernel_benches.cpp": "the CUPTI bench launching the kind's kernel entry",
    "executor/op_binding.cpp": "the executor's action for an op of the kind, or a refusal",
}
SOURCE_ENDINGS = (".cpp", ".hpp", ".cu", ".cuh")
NOT_SOURCES = {"tests", "tools", "docs", "scenarios", "shared", "python"}


def switching_files(root):
    found = set()
    for directory, subfolders, names in os.walk(root):
        relative = os.path.relpath(directory, root)
        subfolders[:] = sorted(s for s in subfolders if not s.startswith((".", "build"))
                               and os.path.normpath(os.path.join(relative, s)) not in NOT_SOURCES)
        for name in names:
            if name.endswith(SOURCE_ENDINGS):
                path = os.path.join(directory, name)
                with open(path, encoding="utf-8") as source:
                    if re.search(r"\bcase\s+OpKind::", source.read()):
                        found.add(os.path.relpath(path, root).replace(os.sep, "/"))
    return found


def documented(root):
    with open(os.path.join(root, "docs", "DESIGN.md"), encoding="utf-8") as design:
        text = design.read()
    start = text.find("## Adding an op kind")
    if start < 0:
        return set()
    end = text.find("\n## ", start + 1)
    return set(re.findall(r"`([\w/]+\.(?:cpp|hpp|cu))`", text[start:end if end > 0 else len(text)]))


def main():
    root = sys.argv[sys.argv.index("--root") + 1] if "--root" in sys.argv else \
        os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found = switching_files(root)
    named = documented(root)
    failures = [f"{path}: switches over OpKind but tools/op_kind_places.py's PLACES does not name it (switch over "
                f"core/op_kinds.hpp's Collective or ShapeForm, or add it with its reason)" for path in sorted(found - set(PLACES))]
    failures += [f"{path}: named in PLACES but no longer switches over OpKind" for path in sorted(set(PLACES) - found)]
    failures += [f"{path}: switches over OpKind but docs/DESIGN.md \"Adding an op kind\" does not name it"
                 for path in sorted(found - named)]
    for path in sorted(found):
        print(f"{path}: {PLACES.get(path, '?')}")
    for failure in failures:
        print(failure, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
