#!/usr/bin/env python3
"""Which kind of traced entry carries what a fold does to other models? Folds run 00 of FOLDED (a study of STUDIES,
tools/one_h200_studies.py's folders) into PROFILE, then predicts every other study with the folded profile, and again
with the fold's traced entries of one kernel kind taken out (each kind in turn; the rest of the fold kept). Prints the
other studies' mean of mean |errors| and each study's, unfolded, folded, and without each kind.
Usage: python3 tools/fold_kind_ablation.py TWIN STUDIES PROFILE FOLDED"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fold_transfer_study import fold, study_errors  # noqa: E402
from repredict_runs import finished_runs  # noqa: E402


def line(label, errors):
    each = "  ".join(f"{study} {error:.2f}%" for study, error in errors.items())
    return f"{label:36s} {sum(errors.values()) / len(errors):5.2f}%   {each}"


def without_kind(document, kind):
    """`document` without the traced entries (those with a source) of kernel kind `kind`."""
    copy = json.loads(json.dumps(document))
    for gpu in copy["gpus"]:
        gpu["measured"] = {key: m for key, m in gpu.get("measured", {}).items()
                           if not (m.get("source") and key.split(":")[0] == kind)}
    return copy


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    twin, root, profile, folded_study = sys.argv[1:]
    studies = {name: finished_runs(os.path.join(root, name, "runs")) for name in sorted(os.listdir(root))
               if os.path.isdir(os.path.join(root, name, "runs"))}
    if folded_study not in studies:
        sys.exit(f"{folded_study}: no such study in {root}")
    others = {name: runs for name, runs in studies.items() if name != folded_study}
    print(line("unfolded", study_errors(twin, others, profile)))
    with tempfile.TemporaryDirectory() as tmp:
        folded = os.path.join(tmp, "folded.json")
        refused = fold(twin, studies[folded_study][0], profile, folded)
        if refused:
            sys.exit(f"{folded_study} not folded: {refused}")
        print(line("folded", study_errors(twin, others, folded)), flush=True)
        with open(folded) as f:
            document = json.load(f)
        kinds = sorted({key.split(":")[0] for gpu in document["gpus"]
                        for key, m in gpu.get("measured", {}).items() if m.get("source")})
        for kind in kinds:
            path = os.path.join(tmp, f"without-{kind}.json")
            with open(path, "w") as f:
                json.dump(without_kind(document, kind), f)
            print(line(f"folded without {kind}", study_errors(twin, others, path)), flush=True)


if __name__ == "__main__":
    main()
