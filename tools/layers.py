#!/usr/bin/env python3
"""Prints the folders of twin's sources and which folders each includes from (its #include "folder/..."
lines), every cycle among them, and the folders by level: the picture docs/DESIGN.md shows. Usage: python3 tools/layers.py"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDERS = ["core", "cost", "calibrate", "gpu", "calibrate/gpu", "sim", "strategies/double_strand", "strategies",
           "strategies/per_layer", "strategies/hot_switch", "strategies/heterogeneous", "strategies/families", "traces",
           "validation", "reports", "pipeline", "executor", "executor/gpu", "python", "cli"]


def folder_of(path):
    best = ""
    for folder in FOLDERS:
        if (path == folder or path.startswith(folder + "/")) and len(folder) > len(best):
            best = folder
    return best


def edges():
    graph = {f: set() for f in FOLDERS}
    for folder in FOLDERS:
        directory = os.path.join(ROOT, folder)
        for name in sorted(os.listdir(directory)):
            if not name.endswith((".cpp", ".hpp", ".cu", ".cuh")):
                continue
            with open(os.path.join(directory, name), encoding="utf-8") as source:
                for included in re.findall(r'^#include "([^"]+)"', source.read(), re.M):
                    target = folder_of(os.path.dirname(included))
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
            elif len(path) < len(FOLDERS):
                walk(nxt, path + [nxt])
    for folder in FOLDERS:
        walk(folder, [folder])
    return sorted(found)


def main():
    graph = edges()
    for folder in FOLDERS:
        print(f"{folder:25} -> {', '.join(sorted(graph[folder])) or '(nothing)'}")
    found = cycles(graph)
    for cycle in found:
        print("cycle: " + " -> ".join(cycle + (cycle[0],)))
    if not found:
        print()
        print_levels(graph)
    return 0 if not found else 1


def print_levels(graph):
    """The folders by level: one more than the highest folder each includes from (docs/DESIGN.md's picture)."""
    level = {}
    def of(folder):
        if folder not in level:
            level[folder] = 1 + max((of(t) for t in graph[folder]), default=-1)
        return level[folder]
    for folder in FOLDERS:
        of(folder)
    for value in range(max(level.values()), -1, -1):
        print(f"{value:4}  " + "   ".join(f for f in FOLDERS if level[f] == value))


if __name__ == "__main__":
    sys.exit(main())
