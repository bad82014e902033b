#!/usr/bin/env python3
"""A shipped scenario with some model keys changed, for the device checks that run a model beside its variant:
the model section updated with MODEL_JSON (a JSON object), NAME_SUFFIX appended to the scenario's name, written to
DESTINATION. Usage: python3 tests/gpu/scenario_variant.py SOURCE DESTINATION NAME_SUFFIX MODEL_JSON"""
import json
import sys


def main(source, destination, name_suffix, model_json):
    scenario = json.load(open(source))
    scenario["model"].update(json.loads(model_json))
    scenario["name"] += name_suffix
    json.dump(scenario, open(destination, "w"), indent=2)


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    main(*sys.argv[1:])
