#!/usr/bin/env python3
"""tools/switch_defaults.py must flag a `default:` in a switch over an enumeration and leave one over characters:
a file of each kind, checked with the tool's own reader. Usage: switch_defaults_test.py"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "tools"))
from switch_defaults import defaults  # noqa: E402

OVER_AN_ENUM = """enum class Kind { a, b };
// default: in a comment is no label
int f(Kind k) {
  switch (k) {
    case Kind::a: return 1;
    default: return 2;
  }
}
"""
OVER_CHARACTERS = """const char* g(char c) {
  switch (c) {
    case '&': return "default: in a string";
    default: return "";
  }
}
"""


def main():
    with tempfile.TemporaryDirectory() as folder:
        found = {}
        for name, text in (("enum.cpp", OVER_AN_ENUM), ("chars.cpp", OVER_CHARACTERS)):
            path = os.path.join(folder, name)
            with open(path, "w", encoding="utf-8") as out:
                out.write(text)
            found[name] = defaults(path)
    failures = []
    if found["enum.cpp"] != [6]:
        failures.append(f"the enum switch's default on line 6 not found alone: {found['enum.cpp']}")
    if found["chars.cpp"]:
        failures.append(f"a switch over characters flagged: {found['chars.cpp']}")
    for failure in failures:
        print(failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
