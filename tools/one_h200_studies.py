#!/usr/bin/env python3
"""Unpack the archived blind one-H200 accuracy studies (docs/accuracy/) into OUT/<study>/runs/<run>/, one folder per
study, so that tools/repredict_runs.py and tools/fold_transfer_study.py read them all from one place. The archives
nest the studies' work folders as folders or as inner tarballs; both are unpacked. A study run again in a later
archive is its own folder, <study>@<the archive's date>. Prints each study with its runs.
SET: one-h200 (the default: the seventeen one-H200 studies of 2026-11-28..12-01), or the study sets of the fold-clock
study of 2026-12-06 (docs/ACCURACY.md "A fold on one H100 no longer makes its predictions worse"): fold-clock-h100
(four one-H100 studies) and fold-clock-h200 (four one-H200 studies at the current lowering).
Usage: python3 tools/one_h200_studies.py OUT [SET]"""
import io
import os
import sys
import tarfile

ARCHIVES = [  # (archive under docs/accuracy, the work folders or inner tarballs in it that are one-H200 studies)
    "2026-11-28-blind-1xH200.tar.gz",
    "2026-11-29-attention-clock-1xH200.tar.gz",
    "2026-11-30-attention-pairs-1xH200.tar.gz",
    "2026-11-30-head-dims-1xH200.tar.gz",
    "2026-11-30-blind-internlm2-20b-h200.tar.gz",
    "2026-11-30-blind-nemo-stablelm-1xH200.tar.gz",
    "2026-11-30-windowed-1xH200.tar.gz",
    "2026-11-30-gpt3-2.7b-1xH200.tar.xz",
    "2026-11-30-gpt3-6.7b-1xH200.tar.xz",
    "2026-12-01-qwen3-4b-fresh-1xH200.tar.gz",
    "2026-12-01-blind-stablelm-internlm2-fresh-1xH200.tar.gz",
]
SETS = {  # SET: (its archives, the suffix of its studies' work folders)
    "one-h200": (ARCHIVES, "-1xH200-work"),
    "fold-clock-h100": (["2026-12-05-blind-h100-calibrate-1xH100.tar.xz", "2026-12-06-fold-clock-1xH100-1xH200.tar.xz"],
                        "-1xH100-work"),
    "fold-clock-h200": (["2026-12-06-probe-nvml-blind-1xH200.tar.xz", "2026-12-06-fold-clock-1xH100-1xH200.tar.xz"],
                        "-1xH200-work"),
}


def study_of(path, suffix):
    """The study a member belongs to ('phi3-medium-widths') and its path inside the work folder, or None."""
    parts = path.split("/")
    for i, part in enumerate(parts):
        name = part[:-len(".tar.gz")] if part.endswith(".tar.gz") else part
        if name.startswith("accuracy-") and name.endswith(suffix):
            return name[len("accuracy-"):-len(suffix)], "/".join(parts[i + 1:])
    return None


def unpack(archive, suffix, out, studies, earlier):
    """Unpacks `archive`'s studies (work folders ending in `suffix`); a study named in `earlier` (those of the archives before) gets the archive's date."""
    date = os.path.basename(archive)[:10]
    with tarfile.open(archive) as outer:
        for member in outer.getmembers():
            found = study_of(member.name, suffix)
            if not found or not member.isfile():
                continue
            study, inner = found
            if study in earlier:
                study = f"{study}@{date}"
            data = outer.extractfile(member).read()
            if member.name.endswith(suffix + ".tar.gz"):  # a work folder kept as its own tarball
                with tarfile.open(fileobj=io.BytesIO(data)) as nested:
                    for m in nested.getmembers():
                        found_inner = study_of(m.name, suffix)
                        rel = found_inner[1] if found_inner else m.name
                        if m.isfile() and rel.startswith("runs/"):
                            write(out, study, rel, nested.extractfile(m).read(), studies)
            elif inner.startswith("runs/"):
                write(out, study, inner, data, studies)


def write(out, study, rel, data, studies):
    path = os.path.join(out, study, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    parts = rel.split("/")
    if len(parts) >= 3 and parts[2] == "metrics.json":
        studies.setdefault(study, set()).add(parts[1])


def main():
    if len(sys.argv) not in (2, 3) or (len(sys.argv) == 3 and sys.argv[2] not in SETS):
        sys.exit(__doc__)
    out = sys.argv[1]
    archives, suffix = SETS[sys.argv[2] if len(sys.argv) == 3 else "one-h200"]
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "accuracy")
    studies = {}
    for archive in archives:
        earlier = set(studies)
        unpack(os.path.join(here, archive), suffix, out, studies, earlier)
    for study in sorted(studies):
        print(f"{study}: {len(studies[study])} runs")


if __name__ == "__main__":
    main()
