#!/usr/bin/env python3
"""docs/scenario.schema.json against the scenario parser (core/ and the family plans' readers):
1. every section of the schema accepts exactly the keys the parser's only_keys calls accept, read from their source;
2. every shipped scenario (scenarios/**/*.json) validates;
3. hostile inputs the parser refuses (tests/cli/hostile/) are refused by the schema too, where a schema can say the
   rule, and by `twin simulate` (exit 1).
Usage: scenario_schema_test.py TWIN_BINARY"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

import jsonschema

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCHEMA = os.path.join(ROOT, "docs", "scenario.schema.json")

# Where each section of the schema is read: (its path in a scenario, "[]" for an array's items) -> the parser's
# source, the function that reads it and the variable holding its reader. The keys come from the only_keys calls on
# that variable inside that function (their union), never from a second list here.
SECTIONS = {
    (): [("core/scenario_parse.cpp", "Scenario parse_scenario(", "root")],
    ("model",): [("core/scenario_model.cpp", "ModelConfig parse_model(", "r")],
    ("model", "moe"): [("core/scenario_model.cpp", "MoeConfig parse_moe(", "r")],
    ("model", "mla"): [("core/model_variants.cpp", "MlaConfig parse_mla(", "r")],
    ("model", "moe", "routing"): [("core/moe_routing_parse.cpp", "RoutingModel parse_routing(", "r")],
    # The histogram's columns (a run's rank file) and its array's entries take the same keys.
    ("model", "moe", "routing", "histogram"): [("core/moe_routing_parse.cpp",
                                                "std::vector<ExpertHistogram> parse_expert_loads(", "loads"),
                                               ("core/moe_routing_parse.cpp",
                                                "std::vector<ExpertHistogram> parse_expert_loads(", "entry")],
    ("training",): [("core/scenario_parse.cpp", "TrainingConfig parse_training(", "r")],
    ("training", "fp8"): [("core/fp8.cpp", "Fp8Config parse_fp8(", "r")],
    ("training", "seq_length_buckets", "[]"): [("core/scenario_parse.cpp", "TrainingConfig parse_training(", "item")],
    ("framework",): [("core/scenario_framework.cpp", "FrameworkConfig parse_framework(", "r")],
    ("cluster",): [("core/cluster_parse.cpp", "Cluster parse_cluster(", "r")],
    ("cluster", "nodes", "[]"): [("core/cluster_parse.cpp", "Cluster parse_cluster(", "item")],
    ("cluster", "network"): [("core/cluster_parse.cpp", "Cluster parse_cluster(", "network")],
    ("cluster", "nodes", "[]", "gpu"): [("core/cluster_parse.cpp", "GpuSpec parse_gpu(", "r")],
    ("cluster", "nodes", "[]", "intra_node"): [("core/cluster_parse.cpp", "IntraNodeLink parse_intra_node(", "r")],
    ("cluster", "nodes", "[]", "nics"): [("core/cluster_parse.cpp", "Nics parse_nics(", "r")],
    ("search",): [("core/scenario_parse.cpp", "SearchSpace parse_search(", "r")],
    ("strategy",): [("core/scenario_parse.cpp", "Strategy parse_strategy(", "r"),
                    ("core/scenario_parse.cpp", "Scenario parse_scenario(", "f")],
    ("strategy", "pipelines", "[]"): [("core/scenario_pipelines.cpp", "std::vector<AsymmetricPipeline> parse_pipelines(", "pr")],
    ("strategy", "pipelines", "[]", "stages", "[]"): [("core/scenario_pipelines.cpp", "AsymmetricStage parse_stage(", "sr")],
    ("strategy", "pipelines", "[]", "stages", "[]", "devices"): [("core/scenario_pipelines.cpp", "std::vector<int> parse_devices(", "r")],
    ("strategy", "per_layer"): [("strategies/per_layer/per_layer_plan_file.cpp", "PerLayerPlan read_per_layer_detail(", "detail")],
    ("strategy", "per_layer", "layers", "[]"): [("strategies/per_layer/per_layer_plan_file.cpp",
                                                 "PerLayerPlan read_per_layer_detail(", "entry")],
    ("strategy", "hot_switch"): [("strategies/hot_switch/hot_switch_plan_file.cpp", "std::vector<HotSwitchPhase> read_hot_switch_detail(", "detail")],
    ("strategy", "hot_switch", "phases", "[]"): [("strategies/hot_switch/hot_switch_plan_file.cpp",
                                                  "std::vector<HotSwitchPhase> read_hot_switch_detail(", "entry")],
    ("strategy", "hot_switch", "phases", "[]", "switch_in"): [("strategies/hot_switch/hot_switch_plan_file.cpp",
                                                               "std::vector<HotSwitchPhase> read_hot_switch_detail(", "switch_in")],
    ("cost",): [("core/scenario_cost.cpp", "std::optional<CostConfig> parse_cost_section(", "r")],
    ("sweep",): [("core/scenario_sweep.cpp", "std::optional<SweepAxes> parse_sweep_section(", "r")],
}

# Refused by the parser, and by a rule the schema states: a range, a pattern or an unknown key.
HOSTILE = ["cost_currency_control_bytes.json", "hbm_bandwidth_absurd.json", "hot_switch_phase_unknown_key.json",
           "hot_switch_unknown_key.json", "nic_bandwidth_absurd.json", "number_overflow.json",
           "per_layer_misspelt_key.json", "per_layer_plan_zero_stage.json", "huge_key.json", "fp8_unknown_key.json",
           "model_window_negative.json", "model_mla_misspelt_key.json", "recipe_lr_absurd.json"]


def parser_keys(source, function, variable):
    with open(os.path.join(ROOT, source), encoding="utf-8") as text:
        code = text.read()
    start = code.find(function)
    if start < 0:
        raise AssertionError(f"{source}: no {function!r} (the parser moved: update SECTIONS)")
    body = code[start:code.find("\n}\n", start)]
    calls = re.findall(rf"\b{re.escape(variable)}(?:\.|->)only_keys\(\{{([^}}]*)\}}\)", body)
    if not calls:
        raise AssertionError(f"{source}: {function} has no {variable}.only_keys (update SECTIONS)")
    return {key for call in calls for key in re.findall(r'"([^"]+)"', call)}


def resolve(schema, node):
    """The object schema a node stands for: through $ref, and into the branch of an anyOf that has properties."""
    while True:
        if "$ref" in node:
            node = schema["$defs"][node["$ref"].rsplit("/", 1)[1]]
        elif "properties" not in node and "anyOf" in node:
            branches = [b for b in node["anyOf"] if "properties" in resolve(schema, b) or "items" in resolve(schema, b)]
            node = branches[0] if branches else node["anyOf"][0]
            if len(branches) > 1:  # an array or an object: the object form holds the keys
                node = next(b for b in branches if "properties" in resolve(schema, b))
        else:
            return node


def section(schema, path):
    node = resolve(schema, schema)
    for step in path:
        node = resolve(schema, node["items"] if step == "[]" else node["properties"][step])
    return node


def object_sections(schema, node=None, path=()):
    """The path of every object of the schema that lists properties, reached from the top."""
    node = resolve(schema, schema if node is None else node)
    found = []
    if "properties" in node:
        found.append(path)
        for key, child in node["properties"].items():
            found += object_sections(schema, child, path + (key,))
    elif "items" in node:
        found += object_sections(schema, node["items"], path + ("[]",))
    return found


def main():
    twin = sys.argv[1]
    with open(SCHEMA, encoding="utf-8") as text:
        schema = json.load(text)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    failures = []

    for path in object_sections(schema):
        if path not in SECTIONS and not (path and path[-1] == "strategy_fields"):
            failures.append(f"schema section /{'/'.join(path)}: no parser function in SECTIONS checks its keys")
    for path, readers in SECTIONS.items():
        accepted = set().union(*(parser_keys(*reader) for reader in readers))
        listed = set(section(schema, path).get("properties", {}))
        if listed != accepted:
            failures.append(f"/{'/'.join(path)}: schema keys {sorted(listed - accepted)} not accepted by the parser, "
                            f"parser keys {sorted(accepted - listed)} missing from the schema")

    shipped = sorted(glob.glob(os.path.join(ROOT, "scenarios", "**", "*.json"), recursive=True))
    if not shipped:
        failures.append("no shipped scenario found")
    for name in shipped:
        with open(name, encoding="utf-8") as text:
            for error in validator.iter_errors(json.load(text)):
                failures.append(f"{os.path.relpath(name, ROOT)}: at /{'/'.join(map(str, error.absolute_path))}: "
                                f"{error.message[:200]}")

    with tempfile.TemporaryDirectory() as out:
        for name in HOSTILE:
            path = os.path.join(ROOT, "tests", "cli", "hostile", name)
            with open(path, encoding="utf-8") as text:
                document = json.load(text)
            if validator.is_valid(document):
                failures.append(f"tests/cli/hostile/{name}: the schema accepts it")
            run = subprocess.run([twin, "simulate", path, "--out", out, "--quiet"], capture_output=True, text=True)
            if run.returncode != 1:
                failures.append(f"tests/cli/hostile/{name}: twin simulate exits {run.returncode}, expected 1")

    for failure in failures:
        print(failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
