#!/usr/bin/env python3
"""Prints every `default:` label of a switch over an enumeration in the given folders' sources and exits 1 while one
remains: such a switch names each enumerator, so that the compiler names the case a new one leaves unhandled
(docs/DESIGN.md "Style", issue 42). A switch is over an enumeration when the case label before its `default:` is a
qualified name (`case OpKind::gemm:`); switches over characters or numbers keep their `default:`. Comments,
strings and character literals are left out (tools/function_lengths.py's code_only).
Usage: python3 tools/switch_defaults.py FOLDER..."""
import os
import re
import sys

from function_lengths import ROOT, SOURCE_ENDINGS, code_only

DEFAULT_LABEL = re.compile(r"\bdefault\s*:(?!:)")
CASE_LABEL = re.compile(r"\bcase\s+([^:]*(?:::[^:]+)*?)\s*:(?!:)")
ENUMERATOR = re.compile(r"^[\w:]*\w::\w+$")


def defaults(path):
    """The line numbers of the `default:` labels in the file at `path`."""
    with open(path, encoding="utf-8") as source:
        code = code_only(source.read())
    found = []
    for m in DEFAULT_LABEL.finditer(code):
        cases = CASE_LABEL.findall(code, 0, m.start())
        if cases and ENUMERATOR.match(cases[-1].strip()):
            found.append(code.count("\n", 0, m.start()) + 1)
    return found


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    found = []
    for folder in sys.argv[1:]:
        for directory, _, files in sorted(os.walk(os.path.join(ROOT, folder))):
            for name in sorted(files):
                if name.endswith(SOURCE_ENDINGS):
                    path = os.path.join(directory, name)
                    found += [(os.path.relpath(path, ROOT), line) for line in defaults(path)]
    for path, line in found:
        print(f"{path}:{line}: default: in a switch; name every case instead")
    print(f"{len(found)} default label(s) in {', '.join(sys.argv[1:])}" if found
          else f"no default label in {', '.join(sys.argv[1:])}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
