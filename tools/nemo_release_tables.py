#!/usr/bin/env python3
"""Writes a `twin validate` table of NeMo Megatron's GPT-3 175B scaling figures as the 22.06 release published them,
beside the 22.08 figures tests/validation/published.json holds (group nemo-megatron-a100-2023), so that the two
releases of one framework can be predicted side by side (docs/VALIDATION.md "NeMo Megatron's tables are the 22.08
release's").

NVIDIA/NeMo-Framework-Launcher README.md 7.1.2 at d4317ddd (2022-07-14, the 22.06 release) printed 175B tokens/s on
16, 32 and 128 DGX A100 nodes: 20642, 38025, 141306; its conf/training/gpt3/175b.yaml: TP 8, PP 8, micro-batch 2,
global batch 1536, sequence parallel, selective recompute, gradient accumulation fusion, optimizer fused_adam (NeMo's
O2 wrapper all-reduces the fp32 gradients after the pipeline: no distributed optimizer). 3579cdb3 (2022-09-07, the
22.08 release) replaced that table with the one the table's rows hold. Every other field of a row is copied from the
table's own 22.08 row, so the two differ only where the releases' configs differ.

Not part of published.json: the 22.08 table replaced it, and the guard holds the table as it is.

  python3 tools/nemo_release_tables.py OUT.json && build/twin validate OUT.json --jobs 2
"""
import copy
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TABLE = os.path.join(ROOT, "tests", "validation", "published.json")
BASE_ROW = "nemo_gpt3_175b_128gpu"
QUOTE = "175B: | 16 | 32 | 128 | / | Tokens per Second | 20642 | 38025 | 141306 |"
URL = ("https://github.com/NVIDIA/NeMo-Framework-Launcher/blob/d4317dddae7f6b150e16423bc9915c48280ac033/README.md")
NODES_TOKENS_PER_S = [(16, 20642), (32, 38025), (128, 141306)]


def release_2206_row(base, nodes, tokens_per_s):
    row = copy.deepcopy(base)
    gpus = nodes * base["scenario"]["cluster"]["nodes"][0]["gpus_per_node"]
    row["id"] = f"nemo2206_gpt3_175b_{gpus}gpu"
    row["group"] = "nemo-megatron-a100-22.06"
    row["source"] = {"reference": "NVIDIA/NeMo-Framework-Launcher README.md 7.1.2 at d4317ddd (22.06 release)",
                     "url": URL, "quote": QUOTE}
    row["notes"] = ("175b.yaml at d4317ddd: TP 8, PP 8, micro_batch_size 2, global_batch_size 1536, "
                    "sequence_parallel, selective recompute, fused_adam under NeMo's O2 wrapper")
    row["published"] = {"metric": "tokens_per_s_per_gpu", "value": tokens_per_s / gpus}
    scenario = row["scenario"]
    scenario["name"] = row["id"]
    scenario["training"]["global_batch_size"] = 1536
    scenario["cluster"]["nodes"][0]["count"] = nodes
    scenario["framework"]["use_distributed_optimizer"] = False
    scenario["search"]["zero_stage"] = [0]
    return row


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    table = json.load(open(TABLE))
    base = next(r for r in table["rows"] if r["id"] == BASE_ROW)
    table["about"] = "NeMo Megatron 22.06's GPT-3 175B scaling figures (tools/nemo_release_tables.py)"
    table["rows"] = [release_2206_row(base, n, t) for n, t in NODES_TOKENS_PER_S]
    with open(sys.argv[1], "w") as f:
        json.dump(table, f, indent=1)
        f.write("\n")
    print(f"wrote {sys.argv[1]}: {len(table['rows'])} rows")


if __name__ == "__main__":
    main()
