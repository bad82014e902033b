#!/usr/bin/env python3
"""Prints how Megatron-LM's pretrain scripts declare command-line flags, read from the source of a Megatron-LM
checkout without importing it (no torch needed): the flags megatron/training/arguments.py adds itself, and those
its ArgumentGroupFactory builds from config dataclass fields (megatron/training/argument_utils.py: a bool field
defaulting to False is a store_true flag, one defaulting to True is --no-X/--disable-X, a Literal or an enum gives
the choices, field metadata "argparse_meta" overrides). core/megatron_flags.cpp holds what this printed at the
commit it names.

Usage: python3 tools/megatron_flag_facts.py MEGATRON_LM_GIT_DIR [--commit REV] FLAG...
  e.g. python3 tools/megatron_flag_facts.py ~/Megatron-LM --commit d98e8a64 --seq-length --swiglu"""
import ast
import json
import subprocess
import sys

CONFIG_FILES = ["megatron/core/transformer/transformer_config.py", "megatron/core/model_parallel_config.py",
                "megatron/training/config/training_config.py", "megatron/training/config/common_config.py"]
ENUM_FILES = ["megatron/core/transformer/enums.py"]


def show(repo, rev, path):
    return subprocess.run(["git", "-C", repo, "show", f"{rev}:{path}"], capture_output=True, text=True,
                          check=True).stdout


def literal(node):
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError):
        return ast.unparse(node)


def explicit_flags(tree):
    """group.add_argument('--name', ...) calls of arguments.py."""
    facts = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            names = [a.value for a in node.args if isinstance(a, ast.Constant) and str(a.value).startswith("--")]
            kw = {k.arg: literal(k.value) for k in node.keywords
                  if k.arg in ("type", "choices", "action", "default", "dest", "nargs")}
            for name in names:
                facts[name] = dict(kw, declared_at=f"megatron/training/arguments.py:{node.lineno}")
    return facts


def dataclass_fields(classes, name):
    node, path = classes[name]
    fields = []
    for base in node.bases:
        if isinstance(base, ast.Name) and base.id in classes:
            fields += dataclass_fields(classes, base.id)
    fields += [(s, path) for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]
    return fields


def field_fact(statement, path, enums):
    """The flag names and facts ArgumentGroupFactory gives one dataclass field."""
    name = statement.target.id
    default, meta = statement.value, None
    if isinstance(default, ast.Call) and getattr(default.func, "id", "") == "field":
        keywords = {k.arg: k.value for k in default.keywords}
        default = keywords.get("default")
        metadata = keywords.get("metadata")
        if isinstance(metadata, ast.Dict):
            for key, value in zip(metadata.keys, metadata.values):
                if literal(key) == "argparse_meta" and isinstance(value, ast.Dict):
                    meta = {literal(k): literal(v) for k, v in zip(value.keys, value.values)}
    default = literal(default) if default is not None else None
    annotation = statement.annotation
    if isinstance(annotation, ast.Subscript) and ast.unparse(annotation.value) == "Optional":
        annotation = annotation.slice
    if isinstance(annotation, ast.BinOp):  # int | None
        annotation = annotation.left
    kind = ast.unparse(annotation)
    fact = {"default": default, "declared_at": f"{path}:{statement.lineno}"}
    flag = "--" + name.replace("_", "-")
    names = [flag]
    if kind == "bool":
        fact["action"] = "store_false" if default is True else "store_true"
        if default is True:
            names = ["--no-" + flag[2:], "--disable-" + flag[2:]]
    elif kind.startswith("Literal["):
        choices = annotation.slice
        fact["type"], fact["choices"] = "str", [literal(c) for c in getattr(choices, "elts", [choices])]
    elif kind in enums:
        fact["type"], fact["choices"] = "enum", enums[kind]
    else:
        fact["type"] = kind
    if meta:
        names = meta.pop("arg_names", names)
        fact.update(meta)
    return names, fact


def factory_flags(repo, rev, tree):
    classes, enums = {}, {}
    for path in CONFIG_FILES:
        for node in ast.parse(show(repo, rev, path)).body:
            if isinstance(node, ast.ClassDef):
                classes[node.name] = (node, path)
    for path in ENUM_FILES:
        for node in ast.parse(show(repo, rev, path)).body:
            if isinstance(node, ast.ClassDef):
                enums[node.name] = [s.targets[0].id for s in node.body if isinstance(s, ast.Assign)]
    lists = {node.targets[0].id: (node.lineno, literal(node.value)) for node in ast.walk(tree)
             if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
             and isinstance(node.value, ast.List)}
    facts = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "ArgumentGroupFactory"):
            continue
        if node.args[0].id not in classes:
            continue
        exclude = []
        for keyword in node.keywords:
            if keyword.arg == "exclude":
                exclude = lists[keyword.value.id][1] if isinstance(keyword.value, ast.Name) else literal(keyword.value)
        for statement, path in dataclass_fields(classes, node.args[0].id):
            if statement.target.id in exclude:
                continue
            names, fact = field_fact(statement, path, enums)
            for name in names:
                facts.setdefault(name, fact)
    return facts


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    repo, args = sys.argv[1], sys.argv[2:]
    rev = "HEAD"
    if args[0] == "--commit":
        rev, args = args[1], args[2:]
    tree = ast.parse(show(repo, rev, "megatron/training/arguments.py"))
    facts = factory_flags(repo, rev, tree)
    facts.update(explicit_flags(tree))
    commit = subprocess.run(["git", "-C", repo, "rev-parse", rev], capture_output=True, text=True).stdout.strip()
    print(f"# Megatron-LM {commit}")
    for flag in args:
        print(flag, json.dumps(facts.get(flag, "not accepted")))


if __name__ == "__main__":
    main()
