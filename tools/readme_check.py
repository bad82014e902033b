#!/usr/bin/env python3
"""Checks that what the README names exists: every repository path (a path whose first folder or file is one of the
repository's, `docs/SCENARIOS.md`, `scenarios/*.json`), every link and the section a link's anchor or a quoted section
name points to (`docs/SIMULATOR.md, "Limits"`), every `twin <command>` in code, and every `--flag` in code, against
the commands and options the built binary's `twin --help` and `twin <command> --help` print. A command the binary was
built without (`twin execute` without the CUDA toolkit) is checked against the options its CLI source declares.
Prints each problem as README.md:LINE: what and exits 1 while one remains (ctest runs it).
Usage: python3 tools/readme_check.py --twin build/twin [--readme README.md]"""
import argparse
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Commands whose options live in a CUDA build only: where the binary lacks them, their CLI source declares them.
GPU_ONLY_COMMANDS = {"execute": "cli/execute_command.cpp"}
GLOBAL_FLAGS = {"--help", "--version"}

PATH = re.compile(r"(?<![\w./<>-])(\.?[\w-]+(?:/[\w.*<>-]*)+)")
LINK = re.compile(r"\]\(([^)\s]+)\)")
SECTION = re.compile(r"(docs/[\w-]+\.md)\]?(?:\([^)]*\))?,?\s*\(?\"([^\"]+)\"")
COMMAND = re.compile(r"(?:^|[\s/])twin\s+([a-z][\w-]*)")
FLAG = re.compile(r"(?<![\w-])(--[a-zA-Z][\w-]*)")


def top_level_names():
    """The first component of every file git tracks (without git: of every file outside hidden and build folders)."""
    try:
        listing = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
        files = [f for f in listing.split("\n") if f]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for directory, subfolders, names in os.walk(ROOT):
            subfolders[:] = [s for s in subfolders if not s.startswith("build") and s != ".git"]
            files += [os.path.relpath(os.path.join(directory, n), ROOT).replace(os.sep, "/") for n in names]
    return {f.split("/")[0] for f in files}


def help_text(twin, *args):
    run = subprocess.run([twin, *args, "--help"], capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"readme_check: `{twin} {' '.join(args)} --help` failed (exit {run.returncode}): {run.stderr.strip()}")
    return run.stdout


def commands_and_flags(twin):
    """{command: its flags}, from the binary's help, and from the CLI source for a GPU command it was built without."""
    top = help_text(twin)
    listed = re.findall(r"^  ([a-z][\w-]*)\s", top.split("Subcommands:", 1)[-1], re.MULTILINE)
    commands = {}
    for command in listed:
        options = help_text(twin, command).split("Options:", 1)[-1]
        commands[command] = set(re.findall(r"^\s+(?:-\w,)?(--[\w-]+)", options, re.MULTILINE)) | GLOBAL_FLAGS
    for command, source in GPU_ONLY_COMMANDS.items():
        if command in commands:
            continue
        with open(os.path.join(ROOT, source), encoding="utf-8") as text:
            declared = text.read()
        if not re.search(rf'add_subcommand\(\s*"{command}"', declared):
            sys.exit(f"readme_check: {source} no longer declares `twin {command}`: update GPU_ONLY_COMMANDS")
        commands[command] = set(re.findall(r'add_(?:option|flag)\("!?(?:-\w,)?(--[\w-]+)', declared)) | GLOBAL_FLAGS
    return commands


def slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation but '-' and '_' dropped, spaces as '-'."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def headings(path):
    with open(path, encoding="utf-8") as text:
        return [re.sub(r"[`*]", "", line.lstrip("#").strip()) for line in text if re.match(r"#{1,6} ", line)]


def code_pieces(lines):
    """(line number, text) of every code block line (a line ending in '\\' joined to the next) and inline code span."""
    pieces, in_block, pending = [], False, None
    for number, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            in_block = not in_block
            continue
        if in_block:
            if pending:
                pending = (pending[0], pending[1] + " " + line)
            else:
                pending = (number, line)
            if not line.rstrip().endswith("\\"):
                pieces.append(pending)
                pending = None
            continue
        pieces += [(number, span) for span in re.findall(r"`([^`]+)`", line)]
    return pieces


def check(readme, twin):
    with open(readme, encoding="utf-8") as text:
        lines = text.read().split("\n")
    name = os.path.basename(readme)
    tops = top_level_names()
    problems = []

    for number, line in enumerate(lines, 1):
        for path in PATH.findall(LINK.sub("]", line)):  # a link's target is checked as a link below
            path = path.rstrip(".,:;")
            if path.split("/")[0] not in tops or "<" in path:
                continue  # not the repository's (build/twin, out/...), or a placeholder (points/<point>/)
            if not glob.glob(os.path.join(ROOT, path.rstrip("/"))):
                problems.append(f"{name}:{number}: no file or folder {path}")
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):
                continue  # a web address
            file_part, _, anchor = target.partition("#")
            full = os.path.join(ROOT, file_part) if file_part else os.path.abspath(readme)  # the README's folder
            if not os.path.exists(full):
                problems.append(f"{name}:{number}: link to a missing file {file_part}")
            elif anchor and full.endswith(".md") and anchor not in {slug(h) for h in headings(full)}:
                problems.append(f"{name}:{number}: link to a missing section {target}")
        for doc, section in SECTION.findall(line):
            full = os.path.join(ROOT, doc)
            if os.path.exists(full) and not any(h.startswith(section) for h in headings(full)):
                problems.append(f'{name}:{number}: {doc} has no section "{section}"')

    commands = commands_and_flags(twin)
    every_flag = set().union(*commands.values())
    for number, piece in code_pieces(lines):
        # A flag belongs to the twin command before it in the piece (the flags of sbatch or cmake before one do not);
        # a piece with no command of twin's ("--exhaustive", "twin --help") is checked against every command's flags.
        found = list(COMMAND.finditer(piece))
        for match in found:
            if match.group(1) not in commands:
                problems.append(f"{name}:{number}: `twin {match.group(1)}` is no command of {twin}")
        if not found:
            if piece.lstrip().startswith("--") or re.search(r"\btwin\b", piece):
                for flag in FLAG.findall(piece):
                    if flag not in every_flag:
                        problems.append(f"{name}:{number}: {flag} is no option of any twin command")
            continue
        for i, match in enumerate(found):
            end = found[i + 1].start() if i + 1 < len(found) else len(piece)
            tail = re.split(r"&&|\|\||;|\|(?=\s)", piece[match.end():end])[0]
            for flag in FLAG.findall(tail):
                if match.group(1) in commands and flag not in commands[match.group(1)]:
                    problems.append(f"{name}:{number}: {flag} is no option of `twin {match.group(1)}`")
    return list(dict.fromkeys(problems))  # a name twice on a line (as text and as a link) is one problem


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--twin", required=True, help="the built twin binary")
    parser.add_argument("--readme", default=os.path.join(ROOT, "README.md"))
    args = parser.parse_args()
    problems = check(args.readme, args.twin)
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} name(s) in {args.readme} that do not exist")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
