#!/usr/bin/env python3
"""Checks that every repository file a source, a CMakeLists.txt or docs/DESIGN.md names exists: a path whose first
folder is one of the repository's (`executor/gpu/execute.cpp`), or a bare C++ file name (`kernel_benches.cpp`) found
somewhere in the tree. The other documents keep dated records and may name files of their time. Prints each stale
reference as FILE: NAME and exits 1 while one remains (ctest runs it). Usage: python3 tools/file_references.py"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECKED_ENDINGS = (".cpp", ".hpp", ".cu", ".cuh", "CMakeLists.txt")
CHECKED_FILES = {"docs/DESIGN.md"}
NAME = re.compile(r"(?<![\w./*-])((?:[\w-]+/)*[\w-]+\.(?:hpp|cpp|cu|cuh|py|sh|md|txt|cmake))\b")


def tracked_files():
    """git's list of the tree; without git (a source archive), every file outside hidden and build folders."""
    try:
        listing = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
        return [f for f in listing.split("\n") if f]
    except (OSError, subprocess.CalledProcessError):
        found = []
        for directory, subfolders, names in os.walk(ROOT):
            subfolders[:] = [s for s in subfolders if not s.startswith((".", "build"))]
            found += [os.path.relpath(os.path.join(directory, n), ROOT).replace(os.sep, "/") for n in names]
        return found


def generated_names(files):
    """Files a CMakeLists.txt writes into the build tree (`${CMAKE_CURRENT_BINARY_DIR}/generated/twin_commit.hpp`)."""
    names = set()
    for path in files:
        if path.endswith("CMakeLists.txt"):
            with open(os.path.join(ROOT, path), encoding="utf-8", errors="replace") as text:
                for line in text:
                    names.update(os.path.basename(n) for n in re.findall(r"BINARY_DIR}/([\w/.-]+)", line))
    return names


def stale_references(files):
    basenames = {os.path.basename(f) for f in files} | generated_names(files)
    top_folders = {f.split("/")[0] for f in files if "/" in f}
    stale = []
    for path in files:
        if not (path.endswith(CHECKED_ENDINGS) or path in CHECKED_FILES):
            continue
        with open(os.path.join(ROOT, path), encoding="utf-8", errors="replace") as text:
            named = sorted(set(NAME.findall(text.read())))
        for name in named:
            if "/" in name:
                if name.split("/")[0] not in top_folders:
                    continue  # another project's path (megatron/..., nlohmann/...)
                here = os.path.join(os.path.dirname(path), name)
                if os.path.exists(os.path.join(ROOT, name)) or os.path.exists(os.path.join(ROOT, here)):
                    continue
            elif name in basenames or not name.endswith((".hpp", ".cpp", ".cu", ".cuh")):
                continue
            stale.append(f"{path}: {name}")
    return stale


def main():
    stale = stale_references(tracked_files())
    for line in stale:
        print(line)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
