#!/usr/bin/env python3
"""Builds tests/validation/published.json, the table `twin validate` runs, from the transcriptions of
published training results kept beside it:

  tests/validation/a100_rows.json       Narayanan et al. 2021 Table 1, Korthikanti et al. 2022 Table 5 and abstract
  tests/validation/h100_rows.json       Llama 3 Table 4, Megatron-LM README (H100), LLM Foundry MPT (H100)
  tests/validation/a100_more_rows.json  LLM Foundry MPT (A100), NeMo Megatron GPT-3 (DGX A100), BLOOM-176B and its
                                        topology search (Megatron-DeepSpeed), MT-NLG 530B; each row states its
                                        scenario's sections outright (a row with `not_simulated` is a
                                        configuration twin cannot price yet, and is left out)
  tests/validation/hopper_more_rows.json  NVIDIA DGX Cloud Benchmarking (NeMo on DGX H100), releases 24.11 and 25.02
  tests/validation/zero3_rows.json       Narayanan et al. 2021 Table 2: DeepSpeed ZeRO-3 against PTD parallelism (A100)
  tests/validation/torchtitan_rows.json  torchtitan's published step measurements (docs/performance.md of 2024:
                                        FSDP2 on A100 and H100; benchmarks/ of 2025: FSDP2 + TP on H100), rows as
                                        a100_more_rows.json states them; the rows it cannot describe under `refused`
  tests/validation/automodel_rows.json   NeMo AutoModel's pre-training step times (docs/performance-summary.mdx of
                                        2026: FSDP2 with context parallelism on H100), stated the same way

Every row becomes a twin scenario: the model, the batch, the cluster and the framework as the source states
them; what the source leaves open is searched within the published constraints (the best predicted
configuration stands for the one the authors tuned), and the row's `unknowns` says what and how. The target is
the published figure (iteration time, tokens/s per GPU, TFLOP/s per GPU with the source's FLOP formula, or
MFU), converted to an iteration time by `twin validate`. Rerun after editing a transcription:

  python3 tools/build_validation_table.py

The rows of Megatron-LM of 2021-22 (Narayanan et al. 2021 Tables 1 and 2's PTD-P rows, Korthikanti et al. 2022) state
framework.scatter_gather_tensors_in_pipeline, as that code ran them (docs/VALIDATION.md "Megatron-LM's scatter/gather of
pipeline tensors"); --without-megatron-scatter-gather leaves it out (the table before 2026-11-29 21:00 UTC).
BLOOM's rows (2022) state it too, as DeepSpeed's pipeline engine ran them: it partitions the activations it sends over the
model-parallel group since 2020 and the gradients since 2021-09-29, both before BLOOM's runs; --without-bloom-pipe-partition
leaves it out. --deepspeed-pipe-partition states it on MT-NLG's rows too, an experiment only: their DeepSpeed version is
not stated, and the two partitions came at different dates, which one switch cannot say.
BLOOM-176B's production row and the runs of 2022-02-28 state framework.deepspeed_bf16_optimizer, the optimizer they ran
(docs/VALIDATION.md "DeepSpeed's BF16_Optimizer"); --without-bf16-optimizer leaves it out. The topology search of
2022-02-25 ran before that optimizer existed and does not state it. The runs of 2022-02-28 are transcribed but held back
(a100_more_rows.json `held_back`); --with-bloom-bf16-optimizer-runs adds them, an experiment only. Both --without-bloom-pipe-partition and --without-bf16-optimizer: the table
before 2026-11-29 23:30 UTC. The groups whose framework reduced bf16 gradients in fp32 state framework.reduce_dtype
float32 (FP32_GRADIENT_REDUCTION below, each with its source; docs/VALIDATION.md "Gradients reduced in fp32");
--without-fp32-gradient-reduction leaves it out (the table before 2026-11-30). LLM Foundry's H100 rows state
framework.checkpoint_early_stop (CHECKPOINT_EARLY_STOP below; docs/VALIDATION.md "PyTorch's checkpoint stops early");
--without-checkpoint-early-stop leaves it out (the table before 2026-12-04). LLM Foundry's rows state framework.name
pytorch-fsdp (PYTORCH_FSDP1 below: Composer's FSDP is PyTorch's FSDP1 in eager mode; docs/VALIDATION.md "LLM Foundry's
rows as the framework they ran"); --without-pytorch-fsdp1 leaves it out (the table before 2026-12-07, priced with
Megatron's kernels). --out writes the table elsewhere.
"""
import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.join(ROOT, "tests", "validation")

# DGX A100 on Selene: NVSwitch (600 GB/s bidirectional per GPU), 8 HDR 200 Gb/s HCAs for compute traffic.
SELENE = {"gpu": "A100-SXM-80GB", "gpus_per_node": 8, "intra_node": {"kind": "nvswitch", "bandwidth_GBps": 300},
          "nics": {"count": 8, "bandwidth_Gbps": 200}}
# DGX/HGX H100: NVSwitch (900 GB/s bidirectional per GPU), one 400 Gb/s NIC per GPU.
HGX_H100 = {"gpu": "H100-SXM-80GB", "gpus_per_node": 8, "intra_node": {"kind": "nvswitch", "bandwidth_GBps": 450},
            "nics": {"count": 8, "bandwidth_Gbps": 400}}

GPT_2021 = {"activation": "gelu", "normalization": "layernorm", "attention_backend": "unfused",
            "untie_embeddings_and_output_weights": False, "position_embedding_rope": False, "add_bias_linear": True,
            "hidden_dropout": 0.1, "attention_dropout": 0.1}


def cluster(node, gpus):
    return {"nodes": [dict(node, count=gpus // node["gpus_per_node"])],
            "network": {"topology": "fat-tree", "oversubscription": 1.0}}


def divisors(n, limit):
    return [d for d in range(1, limit + 1) if n % d == 0]


def shape(model, keys=("num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_query_groups",
                       "vocab_size")):
    return {k: model[k] for k in keys}


def source(row):
    s = row["source"]
    if isinstance(s, str):
        return {"reference": s}
    out = {"reference": s["reference"], "table": s.get("table", ""), "url": s.get("url", "")}
    if s.get("quote"):
        out["quote"] = s["quote"]
    return out


def a100_rows():
    rows = []
    for r in json.load(open(os.path.join(HERE, "a100_rows.json")))["rows"]:
        m, s, hw, me = r["model"], r["strategy"], r["hardware"], r["measured"]
        gpus = hw["num_gpus"]
        narayanan = r["group"].startswith("Narayanan")
        model = dict(shape(m), name=m["name"], max_position_embeddings=m["seq_length"], **GPT_2021)
        recompute = "full" if s["recompute"].startswith("full") else "selective"
        layers_per_stage = m["num_layers"] // s["pp"]
        unknowns = []
        if s["micro_batch_size"]:
            mbs = [s["micro_batch_size"]]
        else:
            per_replica = s["global_batch_size"] // s["dp"]
            mbs = [b for b in (1, 2, 4, 8) if per_replica % b == 0]
            unknowns.append(f"micro_batch_size not published: searched over {mbs}")
        if s["pp"] == 1:
            schedule, vpp = ["1f1b"], [1]
        elif s.get("virtual_pipeline"):
            schedule, vpp = ["interleaved-1f1b"], [s["virtual_pipeline"]]
        elif "no interleaving" in s["schedule"]:
            schedule, vpp = ["1f1b"], [1]
        else:
            vpp = divisors(layers_per_stage, layers_per_stage)
            schedule = ["1f1b"] + (["interleaved-1f1b"] if len(vpp) > 1 else [])
            unknowns.append(f"interleaving not published: 1F1B and interleaved 1F1B with {vpp} chunks searched")
        gbs = s["global_batch_size"]
        if gbs is None:  # the abstract's 2,240-GPU runs: Table 3's 280 sequences per data-parallel replica
            gbs = 280 * s["dp"]
            unknowns.append("global batch not published: Table 3's 280 sequences per data-parallel replica (2,240)")
        framework = {"overlap_grad_reduce": False, "overlap_param_gather": False, "tp_comm_overlap": False,
                     "gradient_accumulation_fusion": not narayanan, "cross_entropy_loss_fusion": False,
                     "use_distributed_optimizer": False}
        if me.get("iteration_time_s"):
            published = {"metric": "iteration_time_s", "value": me["iteration_time_s"]}
        elif me.get("tflops_per_gpu"):
            published = {"metric": "tflops_per_gpu", "value": me["tflops_per_gpu"], "flops_formula": "narayanan2021"}
        else:
            published = {"metric": "mfu", "value": me["mfu"], "flops_formula": "korthikanti2022", "peak_tflops": 312}
        scenario = {
            "name": r["id"], "model": model,
            "training": {"seq_length": m["seq_length"], "global_batch_size": gbs, "precision": "fp16"},
            "framework": framework, "cluster": cluster(SELENE, gpus),
            "search": {"tensor_model_parallel_size": [s["tp"]], "pipeline_model_parallel_size": [s["pp"]],
                       "context_parallel_size": [1], "expert_model_parallel_size": [1],
                       "virtual_pipeline_model_parallel_size": vpp, "sequence_parallel": [bool(s["sequence_parallel"])],
                       "micro_batch_size": mbs, "zero_stage": [0], "recompute": [recompute], "schedule": schedule},
            "profile": "builtin"}
        notes = ("Megatron-LM of April 2021: gradients all-reduced after the backward (LocalDDP, no overlap), "
                 "no gradient accumulation fusion (added Feb 2022), fp16, unfused attention with fused softmax, "
                 "dropout 0.1" if narayanan else
                 "Megatron-LM of May 2022: no data parallelism in Table 5 (DP 1) or gradients all-reduced after the "
                 "backward (DP 8), gradient accumulation fusion, unfused attention (selective recompute recomputes it)")
        rows.append({"id": r["id"], "group": group_name(r["group"]), "source": source(r),
                     "confidence": r["confidence"], "notes": notes + ". " + r["strategy"].get("notes", ""),
                     "unknowns": "; ".join(unknowns), "published": published, "scenario": scenario})
    return rows


def group_name(raw):
    return {"Narayanan2021_Table1": "narayanan2021-table1",
            "Korthikanti2022_Table3_Table5": "korthikanti2022-table5",
            "Korthikanti2022_abstract_530B_DP8": "korthikanti2022-abstract",
            "dubey2024_llama3_table4": "dubey2024-llama3-table4",
            "megatron_lm_readme_h100_weak_scaling_2024": "megatron-readme-h100-2024",
            "llmfoundry_mpt_h100_bf16_large_scale_2024": "llmfoundry-mpt-h100-2024",
            "dgxc_benchmarking_h100_24_11": "dgxc-nemo-h100-24.11",
            "dgxc_benchmarking_h100_25_02": "dgxc-nemo-h100-25.02"}[raw]


def h100_model(m, defaults):
    out = shape(m) | {"name": m["name"]}
    if m.get("kv_channels"):
        out["kv_channels"] = m["kv_channels"]
    for key, value in defaults.items():
        given = m.get(key)
        out[key] = given if isinstance(given, (bool, int, float)) and not isinstance(given, str) else value
    return out


def h100_rows():
    rows = []
    for r in json.load(open(os.path.join(HERE, "h100_rows.json")))["rows"]:
        if r["training"]["precision"] != "bf16" or r["group"].startswith("torchtitan"):
            continue  # FP8 is not modelled; torchtitan ran 96 GB H100s capped at 500 W, which no profile describes
        m, s, t, p = r["model"], r["strategy"], r["training"], r["published"]
        gpus = r["hardware"]["num_gpus"]
        tp, pp, cp = s["tensor_model_parallel_size"], s["pipeline_model_parallel_size"], s["context_parallel_size"]
        dp = gpus // (tp * pp * cp)
        unknowns = []
        search = {"tensor_model_parallel_size": [tp], "pipeline_model_parallel_size": [pp],
                  "context_parallel_size": [cp], "expert_model_parallel_size": [1]}
        group = r["group"]
        if group.startswith("dubey"):
            model = h100_model(m, {"activation": "swiglu", "normalization": "rmsnorm", "position_embedding_rope": True,
                                   "untie_embeddings_and_output_weights": True, "add_bias_linear": False})
            framework = {"overlap_grad_reduce": True, "overlap_param_gather": True, "tp_comm_overlap": False,
                         "gradient_accumulation_fusion": True, "attention_backend": "flash",
                         "cp_comm_type": "all_gather"}  # section 3.3.2: K and V all-gathered, not a ring
            per_replica = t["global_batch_size"] // dp
            mbs = [b for b in (1, 2) if per_replica % b == 0]
            search |= {"virtual_pipeline_model_parallel_size": [s["virtual_pipeline_model_parallel_size"]],
                       "schedule": ["interleaved-1f1b"], "sequence_parallel": [True, False],
                       "micro_batch_size": mbs, "zero_stage": [2], "recompute": ["none"]}
            unknowns.append(f"micro_batch_size not published: searched over {mbs}; sequence parallelism not stated: "
                            "searched; 8 virtual stages inferred (126 layers + embedding and loss chunks = 128 = 16 x 8); "
                            "ZeRO 2 for FSDP without resharding after forward; network: 400 Gb/s per GPU, taken as "
                            "non-blocking (the paper's pods are, the aggregation layer above them is 1:7)")
            node = HGX_H100
            published = {"metric": "tflops_per_gpu", "value": p["value"], "flops_formula": "palm",
                         "parameters": 405e9}
        elif group.startswith("megatron_lm"):
            model = h100_model(m, {"activation": "gelu", "normalization": "layernorm", "position_embedding_rope": False,
                                   "untie_embeddings_and_output_weights": True, "add_bias_linear": True})
            model["max_position_embeddings"] = t["seq_length"]
            framework = {"overlap_grad_reduce": True, "overlap_param_gather": True, "tp_comm_overlap": tp > 1,
                         "gradient_accumulation_fusion": True, "cross_entropy_loss_fusion": False,
                         "attention_backend": "fused", "use_distributed_optimizer": True}
            per_replica = t["global_batch_size"] // dp
            mbs = [b for b in (1, 2, 4) if per_replica % b == 0]
            layers_per_stage = m["num_layers"] // pp
            vpp = divisors(layers_per_stage, layers_per_stage) if pp > 1 else [1]
            search |= {"virtual_pipeline_model_parallel_size": vpp,
                       "schedule": ["1f1b"] + (["interleaved-1f1b"] if len(vpp) > 1 else []),
                       "sequence_parallel": [tp > 1], "micro_batch_size": mbs, "zero_stage": [1],
                       "recompute": ["none", "selective", "full"]}
            unknowns.append(f"micro_batch_size, recompute and interleaving not published: searched over {mbs}, "
                            f"none/selective/full and {vpp} chunks; cluster not stated: DGX H100 (8 x 400 Gb/s) "
                            "assumed; GeLU, LayerNorm, biases, learned positions (Megatron GPT defaults) assumed")
            node = HGX_H100
            published = {"metric": "tflops_per_gpu", "value": p["value"], "flops_formula": "megatron2024"}
        else:  # LLM Foundry MPT: PyTorch FSDP
            model = h100_model(m, {"activation": "gelu", "normalization": "layernorm", "position_embedding_rope": False,
                                   "untie_embeddings_and_output_weights": False, "add_bias_linear": True})
            model["max_position_embeddings"] = t["seq_length"]
            framework = {"overlap_grad_reduce": True, "overlap_param_gather": True, "tp_comm_overlap": False,
                         "gradient_accumulation_fusion": True, "cross_entropy_loss_fusion": False,
                         "attention_backend": "flash"}
            search |= {"virtual_pipeline_model_parallel_size": [1], "schedule": ["1f1b"], "sequence_parallel": [False],
                       "micro_batch_size": [s["micro_batch_size"]], "zero_stage": [s["zero_stage"]],
                       "recompute": [s["recompute"]]}
            unknowns.append("network not stated: 8 x 400 Gb/s per node assumed; FSDP FULL_SHARD as ZeRO 3 with "
                            "weights gathered one layer ahead, SHARD_GRAD_OP as ZeRO 2")
            node = HGX_H100
            published = {"metric": "tokens_per_s_per_gpu", "value": p["value"]}
        training = {"seq_length": t["seq_length"], "global_batch_size": t["global_batch_size"], "precision": "bf16"}
        if t.get("store_param_remainders"):  # NeMo's distributed_fused_adam on a bf16 model
            training["store_param_remainders"] = True
        scenario = {"name": r["id"], "model": model, "training": training,
                    "framework": framework, "cluster": cluster(node, gpus), "search": search, "profile": "builtin"}
        notes = r.get("confidence_notes", "")
        rows.append({"id": r["id"], "group": group_name(group), "source": source(r),
                     "confidence": r["confidence"], "notes": notes, "unknowns": "; ".join(unknowns),
                     "published": published, "scenario": scenario})
    return rows


# Keys of a100_more_rows.json's sections that explain a value to the reader and are no part of the scenario.
NOTE_KEYS = ("shape_source", "training_notes", "framework_notes")


def without_notes(section):
    return {key: value for key, value in section.items() if key not in NOTE_KEYS}


def stated_rows(transcription, with_held_back=False):
    """Rows that state their scenario's sections outright (a100_more_rows.json, torchtitan_rows.json). A row with
    `held_back` (one twin can price, left out of the table for the reason given) joins with `with_held_back`."""
    rows = []
    for r in json.load(open(os.path.join(HERE, transcription)))["rows"]:
        if "not_simulated" in r:  # a published configuration twin cannot price yet, kept in the transcription
            print(f"left out {r['id']}: {r['not_simulated']}", file=sys.stderr)
            continue
        if "held_back" in r and not with_held_back:
            print(f"held back: {r['id']}", file=sys.stderr)
            continue
        hw, strategy, framework = r["hardware"], r["strategy"], r["framework"]
        scenario = {"name": r["id"], "model": without_notes(r["model"]), "training": without_notes(r["training"]),
                    "framework": without_notes(framework),
                    "cluster": dict(cluster(hw["node"], hw["num_gpus"]), network=hw["network"]),
                    "search": strategy["search"], "profile": "builtin"}
        notes = " ".join((strategy["strategy_notes"] + ".", framework["framework_notes"] + ".", hw["hardware_notes"]))
        rows.append({"id": r["id"], "group": r["group"], "source": source(r), "confidence": r["confidence"],
                     "notes": notes, "unknowns": r["unknowns"], "published": r["published"], "scenario": scenario})
    return rows


def hopper_more_rows():
    """NeMo's recipes as NVIDIA ran them: every parallel size, the micro-batch and the recompute are the recipe's,
    so the search holds one candidate (two where the recipe and its README disagree on the virtual pipeline). A row
    with `held_back` (a published run twin cannot simulate yet, and why) stays in the transcription only."""
    rows = []
    for r in json.load(open(os.path.join(HERE, "hopper_more_rows.json")))["rows"]:
        if r.get("held_back"):
            print(f"held back: {r['id']}: {r['held_back']}", file=sys.stderr)
            continue
        m, s, t = r["model"], r["strategy"], r["training"]
        model = {k: v for k, v in m.items() if k != "shape_source"}
        if not model["position_embedding_rope"]:
            model["max_position_embeddings"] = t["seq_length"]
        framework = {k: v for k, v in r["framework"].items() if k != "framework_notes"}
        vpp = s["virtual_pipeline_search"] or [s["virtual_pipeline_model_parallel_size"] or 1]
        search = {"tensor_model_parallel_size": [s["tensor_model_parallel_size"]],
                  "pipeline_model_parallel_size": [s["pipeline_model_parallel_size"]],
                  "context_parallel_size": [s["context_parallel_size"]], "expert_model_parallel_size": [1],
                  "virtual_pipeline_model_parallel_size": vpp, "schedule": [s["schedule"]],
                  "sequence_parallel": [s["sequence_parallel"]], "micro_batch_size": [s["micro_batch_size"]],
                  "zero_stage": [s["zero_stage"]], "recompute": [s["recompute"]]}
        training = {"seq_length": t["seq_length"], "global_batch_size": t["global_batch_size"], "precision": "bf16"}
        if t.get("store_param_remainders"):  # NeMo's distributed_fused_adam on a bf16 model
            training["store_param_remainders"] = True
        scenario = {"name": r["id"], "model": model, "training": training,
                    "framework": framework, "cluster": cluster(HGX_H100, r["hardware"]["num_gpus"]),
                    "search": search, "profile": "builtin"}
        rows.append({"id": r["id"], "group": group_name(r["group"]), "source": source(r),
                     "confidence": r["confidence"], "notes": r["confidence_notes"], "unknowns": r["unknowns"],
                     "published": {"metric": "iteration_time_s", "value": r["published"]["value"]},
                     "scenario": scenario})
    return rows


def zero3_rows():
    """Narayanan et al. 2021 Table 2: DeepSpeed ZeRO-3 without model parallelism, and PTD parallelism beside it."""
    table = json.load(open(os.path.join(HERE, "zero3_rows.json")))
    rows = []
    for r in table["rows"]:
        if r.get("held_back"):  # a published run twin cannot simulate yet, and why: kept in the transcription only
            print(f"held back: {r['id']}: {r['held_back']}", file=sys.stderr)
            continue
        m = table["models"][r["model"]]
        gpus, zero3 = r["num_gpus"], r["scheme"] == "zero3"
        model = dict(shape(m), name=r["model"], max_position_embeddings=m["seq_length"], **GPT_2021)
        framework = {"overlap_grad_reduce": zero3, "overlap_param_gather": False, "tp_comm_overlap": False,
                     "gradient_accumulation_fusion": False, "cross_entropy_loss_fusion": False}
        if zero3:
            # DeepSpeed stage 3 of April 2021: gradients reduce-scattered during the backward (overlap_comm is on
            # by default for stage 3, deepspeed/runtime/zero/constants.py at c83e49f)
            tp, pp = 1, 1
            vpp, schedule = [1], ["1f1b"]
            framework["zero_implementation"] = "deepspeed"
            notes = ("DeepSpeed ZeRO-3 (April 2021, microsoft/DeepSpeed c83e49f) inside Megatron-LM of April 2021: "
                     "every weight all-gathered before each use, gradients reduce-scattered in the backward, fp16")
        else:
            tp, pp = 8, r["model_parallel_size"] // 8
            layers_per_stage = m["num_layers"] // pp
            vpp = divisors(layers_per_stage, layers_per_stage)
            schedule = ["1f1b"] + (["interleaved-1f1b"] if len(vpp) > 1 else [])
            framework["use_distributed_optimizer"] = False
            notes = ("Megatron-LM of April 2021: gradients all-reduced after the backward (LocalDDP, no overlap), no "
                     "gradient accumulation fusion, fp16, unfused attention with fused softmax, dropout 0.1")
        scenario = {
            "name": r["id"], "model": model,
            "training": {"seq_length": m["seq_length"], "global_batch_size": r["batch_size"], "precision": "fp16"},
            "framework": framework, "cluster": cluster(SELENE, gpus),
            "search": {"tensor_model_parallel_size": [tp], "pipeline_model_parallel_size": [pp],
                       "context_parallel_size": [1], "expert_model_parallel_size": [1],
                       "virtual_pipeline_model_parallel_size": vpp, "sequence_parallel": [False],
                       "micro_batch_size": [r["micro_batch_size"]], "zero_stage": [3 if zero3 else 0],
                       "recompute": ["full"], "schedule": schedule},
            "profile": "builtin"}
        source = dict(table["source"], table="Table 2")
        source["quote"] = r["quote"] + ". Caption: " + source.pop("caption")
        source.pop("header")
        source.pop("table_image")
        rows.append({"id": r["id"], "group": "narayanan2021-table2-zero3",
                     "source": {k: source[k] for k in ("reference", "table", "url", "quote")},
                     "confidence": "high", "notes": notes,
                     "unknowns": table["unknowns"][r["scheme"]],
                     "published": {"metric": "tflops_per_gpu", "value": r["tflops_per_gpu"],
                                   "flops_formula": "narayanan2021"},
                     "scenario": scenario})
    return rows


MEGATRON_2021_22 = ("narayanan2021-table1", "korthikanti2022-table5", "korthikanti2022-abstract")
BLOOM = ("bloom2022-176b", "bloom2022-topology-search", "bloom2022-bf16-optimizer-search")
MTNLG = ("smith2022-mtnlg-530b",)


def split_pipeline_tensors(rows, megatron, bloom, mtnlg):
    """Each TP rank's share of a pipeline tensor sent, the whole gathered over TP on arrival. Megatron-LM: its
    --no-scatter-gather-tensors-in-pipeline left it on (arguments.py at NVIDIA/Megatron-LM f938e19a58, April 2021;
    7fccd6a17a, May 2022, skips it under sequence parallelism), Narayanan et al. 2021 section 4.1. DeepSpeed's pipeline
    engine partitions the activations it sends over the model-parallel group since 2020 (is_pipe_partitioned,
    deepspeed/runtime/pipe/engine.py at c83e49f) and the gradients since 2021-09-29 (is_grad_partitioned, e2fdd254e,
    "Big science related changes"; both set to is_model_parallel, TP > 1, at 56c522386, April 2022)."""
    for r in rows:
        framework = r["scenario"]["framework"]
        ptdp = r["group"] == "narayanan2021-table2-zero3" and "zero_implementation" not in framework
        if ((megatron and (r["group"] in MEGATRON_2021_22 or ptdp)) or (bloom and r["group"] in BLOOM) or
                (mtnlg and r["group"] in MTNLG)):
            framework["scatter_gather_tensors_in_pipeline"] = True
            r["notes"] += " Pipeline tensors scattered over TP and gathered on arrival (scatter/gather)."


# Groups whose framework reduced bf16 training's data-parallel gradients in fp32 (framework.reduce_dtype float32), each
# as its source states it. The other bf16 groups reduce in 16 bits: NeMo's performance recipes (DGX Cloud) set
# plugins.grad_reduce_in_fp32 False; LLM Foundry's A100 tables (May 2023, mosaicml 0.14) ran Composer's FSDP 'DEFAULT'
# before it reduced in fp32 (reduce_dtype None: FSDP reduces in the bf16 param_dtype); BLOOM's BF16_Optimizer all-reduces
# in bf16; torchtitan states float32 itself (pytorch-fsdp2's default).
FP32_GRADIENT_REDUCTION = {
    "megatron-readme-h100-2024": "Megatron-LM reduces bf16 training's gradients in fp32 (arguments.py: 'bfloat16 requires "
                                 "gradient accumulation and all-reduce to be done in fp32', accumulate_allreduce_grads_in_fp32 "
                                 "forced on; the README lists its runs' overlap flags, no --grad-reduce-in-bf16)",
    "llmfoundry-mpt-h100-2024": "Composer's FSDP mixed_precision DEFAULT (the table's MP Mode) reduces in fp32 since "
                                "mosaicml/composer d745fcb1b ('patch default', 2023-10-10, v0.16.4; reduce_dtype = "
                                "torch.float32 in get_mixed_precision), and the table's commit 5e85bd6 pins mosaicml>=0.17.2",
    "dubey2024-llama3-table4": "Dubey et al. 2024, section 3.3.4: gradients reduce-scattered in FP32 across data-parallel "
                               "workers in FSDP",
}


def state_gradient_reduction(rows):
    """framework.reduce_dtype float32 on the groups of FP32_GRADIENT_REDUCTION (docs/VALIDATION.md "Gradients reduced in
    fp32")."""
    for r in rows:
        if r["group"] in FP32_GRADIENT_REDUCTION:
            r["scenario"]["framework"]["reduce_dtype"] = "float32"
            r["notes"] += " Gradients reduced over data parallelism in fp32: " + FP32_GRADIENT_REDUCTION[r["group"]] + "."


CHECKPOINT_EARLY_STOP = {
    "llmfoundry-mpt-h100-2024": "the table's commit 5e85bd6 pins torch>=2.1,<2.1.1 (setup.py) and its model yamls set "
                                "fsdp_config.activation_checkpointing_reentrant false (scripts/train/yamls/pretrain/"
                                "mpt-*.yaml): PyTorch's non-reentrant checkpoint, which stops recomputing a block once the "
                                "tensors its backward keeps are made again (fc2 and the residual add after it do not run twice)",
}


def state_checkpoint_early_stop(rows):
    """framework.checkpoint_early_stop on the groups of CHECKPOINT_EARLY_STOP (docs/VALIDATION.md "PyTorch's checkpoint
    stops early"); torchtitan's rows (pytorch-fsdp2) stop early by default. LLM Foundry's A100 table (5f43bf1) pinned
    torch==1.13.1, whose non-reentrant checkpoint ran the whole block again: not stated."""
    for r in rows:
        if r["group"] in CHECKPOINT_EARLY_STOP:
            r["scenario"]["framework"]["checkpoint_early_stop"] = True
            r["notes"] += " Full recompute stops early: " + CHECKPOINT_EARLY_STOP[r["group"]] + "."


# Groups run by PyTorch's FullyShardedDataParallel (FSDP1, flat parameters) in eager mode: framework.name pytorch-fsdp.
def composer_fsdp1(no_compile_source):
    return ("Composer's FSDP wraps each MPT block in PyTorch's FullyShardedDataParallel (FSDP1: flat parameters, the "
            f"weights views into them); no torch.compile ({no_compile_source}); eager LayerNorm "
            "(low_precision_layernorm) and GeLU")


PYTORCH_FSDP1 = {
    "llmfoundry-mpt-a100-2023": composer_fsdp1("scripts/train/benchmarking/submit_benchmarks.py sets no compile config"),
    "llmfoundry-mpt-h100-2024": composer_fsdp1("neither sweep.py nor submit_benchmarks.py sets a compile config"),
}


def state_pytorch_fsdp1(rows):
    """framework.name pytorch-fsdp on the groups of PYTORCH_FSDP1: eager PyTorch's kernels and host time, FSDP1's passes
    around its collectives (strategies/pytorch_fsdp2.hpp), not Megatron's fused kernels."""
    for r in rows:
        if r["group"] in PYTORCH_FSDP1:
            r["scenario"]["framework"]["name"] = "pytorch-fsdp"
            r["notes"] += " PyTorch FSDP1 in eager mode stated: " + PYTORCH_FSDP1[r["group"]] + "."
            if "checkpoint_early_stop" not in r["scenario"]["framework"]:  # pytorch-fsdp's default says PyTorch 2.1's
                r["scenario"]["framework"]["checkpoint_early_stop"] = False
                r["notes"] += (" Full recompute runs the whole block again: the table's commit 5f43bf1 pins "
                               "torch==1.13.1, whose non-reentrant checkpoint had no early stop (PyTorch 2.1's).")


BF16_OPTIMIZER_ROWS = ("bloom_176b_384gpu",)
BF16_OPTIMIZER_GROUPS = ("bloom2022-bf16-optimizer-search",)


def state_bf16_optimizer(rows):
    """DeepSpeed's BF16_Optimizer (microsoft/DeepSpeed 56c522386): tr11-176B-ml.slurm (bigscience-workshop/bigscience
    9e64ede) runs --bf16 with ZERO_STAGE=0 ('important: bf16 must use z0! it implements its own zero stage 1
    equivalent') and no communication_data_type, so the engine all-reduces the fp32 gradients in bf16. The production
    row and the runs of 2022-02-28 ('from now on the testing is happening with BF16 optimizer that was just written',
    chronicles-prequel.md 'Rebalancing layers'); the topology search's runs of 2022-02-25 precede the optimizer."""
    for r in rows:
        if r["id"] in BF16_OPTIMIZER_ROWS or r["group"] in BF16_OPTIMIZER_GROUPS:
            r["scenario"]["framework"]["deepspeed_bf16_optimizer"] = True
            r["notes"] += (" DeepSpeed's BF16_Optimizer stated: fp32 gradients all-reduced in bf16 after the backward, "
                           "bf16 weights all-gathered after the step.")


def main():
    parser = argparse.ArgumentParser(description="Build tests/validation/published.json from the transcriptions.")
    parser.add_argument("--without-megatron-scatter-gather", action="store_true")
    parser.add_argument("--deepspeed-pipe-partition", action="store_true")
    parser.add_argument("--without-bf16-optimizer", action="store_true")
    parser.add_argument("--without-bloom-pipe-partition", action="store_true")
    parser.add_argument("--with-bloom-bf16-optimizer-runs", action="store_true")
    parser.add_argument("--without-fp32-gradient-reduction", action="store_true")
    parser.add_argument("--without-checkpoint-early-stop", action="store_true")
    parser.add_argument("--without-pytorch-fsdp1", action="store_true")
    parser.add_argument("--out", default=os.path.join(HERE, "published.json"))
    args = parser.parse_args()
    rows = (a100_rows() + h100_rows() + stated_rows("a100_more_rows.json", args.with_bloom_bf16_optimizer_runs) + hopper_more_rows() + zero3_rows() +
            stated_rows("torchtitan_rows.json") + stated_rows("automodel_rows.json"))
    split_pipeline_tensors(rows, not args.without_megatron_scatter_gather, not args.without_bloom_pipe_partition,
                           args.deepspeed_pipe_partition)
    if not args.without_bf16_optimizer:
        state_bf16_optimizer(rows)
    if not args.without_fp32_gradient_reduction:
        state_gradient_reduction(rows)
    if not args.without_checkpoint_early_stop:
        state_checkpoint_early_stop(rows)
    if not args.without_pytorch_fsdp1:
        state_pytorch_fsdp1(rows)
    table = {"format": "twin-validation", "version": 1,
             "about": "Published end-to-end training results, each a twin scenario and the published figure; built by "
                      "tools/build_validation_table.py from a100_rows.json, h100_rows.json, a100_more_rows.json, "
                      "hopper_more_rows.json, zero3_rows.json, torchtitan_rows.json and automodel_rows.json (the transcriptions, with their "
                      "sources and quotes). "
                      "docs/VALIDATION.md describes the table and its results.",
             "rows": rows}
    path = args.out
    with open(path + ".tmp", "w") as out:
        json.dump(table, out, indent=1)
        out.write("\n")
    os.replace(path + ".tmp", path)
    print(f"wrote {path}: {len(rows)} rows", file=sys.stderr)


if __name__ == "__main__":
    main()
