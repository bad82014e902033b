#!/usr/bin/env python3
"""Prints every function of the given folders longer than a limit, with its lines, and exits 1 while one
remains (ctest runs it over executor/ with 80: issue 42's aim, "no function over 80 lines in executor/").
A function's lines run from the first line of its signature to its closing brace, both included. Functions
are found by their braces, comments, strings and character literals left out: a `{` opened outside a function
whose text since the last `;`, `{` or `}` holds a `(` and is no namespace, class, struct, enum, union or
initialiser (`= {`) opens a function body; everything inside it (lambdas, local classes) counts as the
function's. With --all, prints every function's length, longest first.
Usage: python3 tools/function_lengths.py [--limit N] [--all] FOLDER..."""
import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE_ENDINGS = (".cpp", ".hpp", ".cu", ".cuh")
NOT_FUNCTIONS = re.compile(r"^(template\s*<.*>\s*)?(namespace|class|struct|enum|union|extern)\b", re.S)


def code_only(text):
    """The text with comments, strings, character literals and preprocessor lines blanked (newlines kept, so
    lines still count)."""
    pattern = re.compile(r'//[^\n]*|/\*.*?\*/|R"(\w*)\(.*?\)\1"|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|'
                         r'^[ \t]*#[^\n]*', re.S | re.M)
    return pattern.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def header_name(header):
    """The function's name as its signature gives it: the word before the parameter list's `(`."""
    match = re.search(r"([~\w:]+(?:\s*operator\s*[^\s(]+)?)\s*\(", header)
    return match.group(1) if match else header.strip()[:40]


def functions(path):
    """(name, first line, lines) of every function body in the file at `path`."""
    with open(path, encoding="utf-8") as source:
        code = code_only(source.read())
    found, stack = [], []  # stack: per open brace, the function it opens (name, first line) or None
    header_start, line = 0, 1
    for i, char in enumerate(code):
        if char == "\n":
            line += 1
        elif char == "{":
            header = code[header_start:i]
            inside = any(entry is not None for entry in stack)
            opens = (not inside and "(" in header and not NOT_FUNCTIONS.match(header.strip())
                     and not re.search(r"=\s*$", header))
            first = line - header.strip().count("\n")  # the signature's first line
            stack.append((header_name(header), first) if opens else None)
            header_start = i + 1
        elif char == "}":
            entry = stack.pop() if stack else None
            if entry is not None:
                found.append((entry[0], entry[1], line - entry[1] + 1))
            header_start = i + 1
        elif char == ";":
            header_start = i + 1
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=80)
    parser.add_argument("--all", action="store_true")
    parser.add_argument("folders", nargs="+")
    args = parser.parse_args()
    rows = []
    for folder in args.folders:
        for directory, subfolders, names in os.walk(os.path.join(ROOT, folder)):
            subfolders.sort()
            for name in sorted(n for n in names if n.endswith(SOURCE_ENDINGS)):
                path = os.path.join(directory, name)
                for fn, first, lines in functions(path):
                    rows.append((lines, os.path.relpath(path, ROOT), first, fn))
    rows.sort(key=lambda r: (-r[0], r[1], r[2]))
    over = [r for r in rows if r[0] > args.limit]
    for lines, path, first, fn in rows if args.all else over:
        print(f"{lines:5} lines  {path}:{first}  {fn}")
    if over:
        print(f"{len(over)} function(s) over {args.limit} lines: split them by concern (docs/DESIGN.md, issue 42)")
    else:
        print(f"every function of {', '.join(args.folders)} is at most {args.limit} lines")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
