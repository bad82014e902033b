#!/usr/bin/env python3
"""Prints the folders of twin's sources and which folders each includes from (its #include "folder/..."
lines), every cycle among them, every include a rule forbids, and the folders by level: the picture
docs/DESIGN.md shows. Every folder holding sources is found (subfolders and gpu/kernels/ included), so a new
folder cannot escape the check. Exit 1 while a cycle or a forbidden include remains (ctest runs it).
Usage: python3 tools/layers.py [--root DIR]   (DIR: another tree, for tests/tools/layers_test.py)"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE_ENDINGS = (".cpp", ".hpp", ".cu", ".cuh")
# Not layers of the program: tests, tools, documentation, build trees and other worktrees' leftovers.
NOT_LAYERS = {"tests", "tools", "docs", "scenarios", "shared"}

# Includes a layer must not make, each with the reason; a folder matches itself and its subfolders.
FAMILY_INTERFACE = ("the executor runs what a plan family states behind strategies/families/ (plan_graphs.hpp, "
                    "rank_plan.hpp) and never names a family, so a new family needs no executor change")
FORBIDDEN = [
    ("executor", "reports", "the executor reads a plan through core/plan_file.hpp; reports write it"),
] + [("executor", "strategies/" + family, FAMILY_INTERFACE)
     for family in ("per_layer", "hot_switch", "heterogeneous", "double_strand")]


def source_folders():
    """Every folder below ROOT holding a source file, skipping hidden and build folders."""
    found = []
    for directory, subfolders, names in os.walk(ROOT):
        relative = os.path.relpath(directory, ROOT)
        subfolders[:] = sorted(s for s in subfolders if not s.startswith((".", "build"))
                               and os.path.normpath(os.path.join(relative, s)) not in NOT_LAYERS)
        if relative != "." and any(name.endswith(SOURCE_ENDINGS) for name in names):
            found.append(relative.replace(os.sep, "/"))
    return sorted(found)


def folder_of(path, folders):
    best = ""
    for folder in folders:
        if (path == folder or path.startswith(folder + "/")) and len(folder) > len(best):
            best = folder
    return best


def edges(folders):
    graph = {f: set() for f in folders}
    for folder in folders:
        directory = os.path.join(ROOT, folder)
        for name in sorted(os.listdir(directory)):
            if not name.endswith(SOURCE_ENDINGS):
                continue
            with open(os.path.join(directory, name), encoding="utf-8") as source:
                for included in re.findall(r'^#include "([^"]+)"', source.read(), re.M):
                    target = folder_of(os.path.dirname(included), folders)
                    if target and target != folder:
                        graph[folder].add(target)
    return graph


def cycles(graph):
    found = set()
    def walk(node, path):
        for nxt in sorted(graph[node]):
            if nxt in path:
                cycle = path[path.index(nxt):]
                start = cycle.index(min(cycle))
                found.add(tuple(cycle[start:] + cycle[:start]))
            elif len(path) < len(graph):
                walk(nxt, path + [nxt])
    for folder in sorted(graph):
        walk(folder, [folder])
    return sorted(found)


def within(folder, layer):
    return folder == layer or folder.startswith(layer + "/")


def forbidden(graph):
    return [f"forbidden: {folder} -> {target} ({why})" for folder in sorted(graph) for target in sorted(graph[folder])
            for layer, below, why in FORBIDDEN if within(folder, layer) and within(target, below)]


def main():
    global ROOT
    if len(sys.argv) == 3 and sys.argv[1] == "--root":
        ROOT = os.path.abspath(sys.argv[2])
    folders = source_folders()
    graph = edges(folders)
    for folder in folders:
        print(f"{folder:25} -> {', '.join(sorted(graph[folder])) or '(nothing)'}")
    found = cycles(graph)
    for cycle in found:
        print("cycle: " + " -> ".join(cycle + (cycle[0],)))
    broken = forbidden(graph)
    for line in broken:
        print(line)
    if not found:
        print()
        print_levels(graph)
    return 0 if not found and not broken else 1


def print_levels(graph):
    """The folders by level: one more than the highest folder each includes from (docs/DESIGN.md's picture)."""
    level = {}
    def of(folder):
        if folder not in level:
            level[folder] = 1 + max((of(t) for t in graph[folder]), default=-1)
        return level[folder]
    for folder in graph:
        of(folder)
    for value in range(max(level.values()), -1, -1):
        print(f"{value:4}  " + "   ".join(f for f in sorted(graph) if level[f] == value))


if __name__ == "__main__":
    sys.exit(main())
