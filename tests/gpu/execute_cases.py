"""The cases tests/gpu/execute_check.py runs: the models (a small Llama-shaped one for loss curves, Llama-2-7B's widths
at 4 layers for speed), the strategies each case pins, and the switches shared by the checks that import
execute_check (which re-exports these names: `ec.SMALL`, `ec.RESIDUAL_FUSION`, ...)."""

SMALL = {"preset": "llama2-7b", "num_layers": 4, "hidden_size": 1024, "ffn_hidden_size": 2816,
         "num_attention_heads": 16, "num_query_groups": 4, "vocab_size": 8192}
LLAMA7B_4L = {"preset": "llama2-7b", "num_layers": 4}

BF16_STATE = {"main_params_dtype": "bf16", "exp_avg_dtype": "bf16", "exp_avg_sq_dtype": "bf16"}

DETERMINISTIC_ATTENTION = ["--attention", "cudnn-deterministic"]

# framework.residual_fusion: the residual adds in the row-parallel GEMMs' epilogues (TP 1) and the norm backwards
RESIDUAL_FUSION = {"framework": {"residual_fusion": True}}

# (name, GPUs, strategy fields beyond the defaults[, training fields[, twin execute arguments]])
CORRECTNESS = [
    ("single", 1, {}),
    ("recompute-selective", 1, {"recompute": "selective"}),
    ("recompute-full", 1, {"recompute": "full"}),
    # the other attention implementations (gpu/attention.hpp): cuDNN's deterministic backward, twin's kernels
    ("recompute-full-deterministic-attention", 1, {"recompute": "full"}, None, DETERMINISTIC_ATTENTION),
    ("attention-kernels", 1, {}, None, ["--attention", "kernels"]),
    # training.optimizer_precision: the same model with AdamW's state narrower (not bit-identical to the
    # fp32 state: within the tolerance of the curve)
    ("bf16-moments", 1, {}, {"exp_avg_dtype": "bf16", "exp_avg_sq_dtype": "bf16"}),
    ("bf16-params-no-master", 1, {}, BF16_STATE),
    # the residual adds inside the GEMMs and norm backwards (not bit-identical: the epilogue rounds the sum once)
    ("residual-fusion", 1, RESIDUAL_FUSION),
    ("recompute-full-residual-fusion", 1, {"recompute": "full", **RESIDUAL_FUSION}),
    ("dp2", 2, {}),
    ("dp2-zero1", 2, {"zero_stage": 1}),
    ("dp2-zero2", 2, {"zero_stage": 2}),
    ("dp2-zero3", 2, {"zero_stage": 3}),
    # ZeRO-2/3 over four micro-batches: each unit's whole gradients reduce-scattered after every micro-batch's
    # backward into the shard the GPU keeps, ZeRO-3's whole weights gathered before each pass and freed after their
    # last reader (executor/weight_residency.hpp); with full recompute, and with the reductions after each backward
    # pass (overlap_grad_reduce off) instead of after each unit
    ("dp2-zero2-mbs1", 2, {"zero_stage": 2, "micro_batch_size": 1}),
    ("dp2-zero3-mbs1", 2, {"zero_stage": 3, "micro_batch_size": 1}),
    ("dp2-zero3-mbs1-recompute-full", 2, {"zero_stage": 3, "micro_batch_size": 1, "recompute": "full"}),
    ("dp2-zero3-mbs1-reduce-after-pass", 2, {"zero_stage": 3, "micro_batch_size": 1,
                                             "framework": {"overlap_grad_reduce": False}}),
    ("tp2", 2, {"tensor_model_parallel_size": 2, "sequence_parallel": False}),
    ("tp2-sp", 2, {"tensor_model_parallel_size": 2, "sequence_parallel": True}),
    ("pp2-gpipe", 2, {"pipeline_model_parallel_size": 2, "schedule": "gpipe"}),
    ("pp2-1f1b", 2, {"pipeline_model_parallel_size": 2, "schedule": "1f1b"}),
    ("pp2-1f1b-residual-fusion", 2, {"pipeline_model_parallel_size": 2, "schedule": "1f1b", **RESIDUAL_FUSION}),
    ("tp2-sp-residual-fusion", 2, {"tensor_model_parallel_size": 2, "sequence_parallel": True, **RESIDUAL_FUSION}),
    ("pp2-interleaved", 2, {"pipeline_model_parallel_size": 2, "schedule": "interleaved-1f1b",
                            "virtual_pipeline_model_parallel_size": 2}),
    ("tp2-pp2-sp", 4, {"tensor_model_parallel_size": 2, "pipeline_model_parallel_size": 2, "sequence_parallel": True}),
    ("tp2-sp-full-recompute", 2, {"tensor_model_parallel_size": 2, "sequence_parallel": True, "recompute": "full"}),
    ("dp2-tp2-zero1", 4, {"tensor_model_parallel_size": 2, "zero_stage": 1, "sequence_parallel": True}),
]

# Qwen3's QK-norm (an RMSNorm over each query and key head, model.qk_layernorm): each TP rank's heads add to the
# norm weights' gradients, which are summed over TP with or without SP (Megatron's finalize_model_grads).
QK_NORM_SMALL = dict(SMALL, qk_layernorm=True)
QK_NORM = [
    ("qk-norm-single", 1, {}),
    ("qk-norm-tp2", 2, {"tensor_model_parallel_size": 2, "sequence_parallel": False}),
    ("qk-norm-tp2-sp", 2, {"tensor_model_parallel_size": 2, "sequence_parallel": True}),
]

# Tied embeddings (the output layer uses the embedding table; over pipeline stages the last holds a copy whose
# gradient is summed with the table's over the embedding group).
TIED_SMALL = dict(SMALL, untie_embeddings_and_output_weights=False)
TIED = [
    ("tied-single", 1, {}),
    ("tied-recompute-full", 1, {"recompute": "full"}),
    ("tied-pp2", 2, {"pipeline_model_parallel_size": 2}),
    ("tied-tp2-sp", 2, {"tensor_model_parallel_size": 2, "sequence_parallel": True}),
    ("tied-dp2-pp2", 4, {"pipeline_model_parallel_size": 2}),
    # ZeRO over the data group with the table's copy on the last stage: the copy first in its unit, padded as the
    # table's unit, so that both hold the same shard and the embedding group sums shards (executor/parameters.cpp).
    ("tied-dp2-pp2-zero1", 4, {"pipeline_model_parallel_size": 2, "zero_stage": 1}),
    ("tied-dp2-pp2-zero3", 4, {"pipeline_model_parallel_size": 2, "zero_stage": 3}),
    # One stage under ZeRO-3: the output layer reads the table, whose gathered copy stays until that read
    ("tied-dp2-zero3-mbs1", 2, {"zero_stage": 3, "micro_batch_size": 1}),
    ("tied-dp2-zero2-mbs1", 2, {"zero_stage": 2, "micro_batch_size": 1}),
    ("tied-cp2-pp2-zero1", 4, {"pipeline_model_parallel_size": 2, "context_parallel_size": 2, "zero_stage": 1}),
]

# (name, GPUs, micro-batch, global batch, strategy fields[, training fields[, twin execute arguments]])
SPEED = [
    ("7b4l-mbs1", 1, 1, 1, {}),
    ("7b4l-mbs2", 1, 2, 2, {}),
    ("7b4l-mbs1-deterministic-attention", 1, 1, 1, {}, None, DETERMINISTIC_ATTENTION),
    ("7b4l-mbs2-deterministic-attention", 1, 2, 2, {}, None, DETERMINISTIC_ATTENTION),
    ("7b4l-mbs1-bf16-moments", 1, 1, 1, {}, {"exp_avg_dtype": "bf16", "exp_avg_sq_dtype": "bf16"}),
    ("7b4l-mbs1-bf16-state", 1, 1, 1, {}, BF16_STATE),
    ("7b4l-mbs2-bf16-state", 1, 2, 2, {}, BF16_STATE),
    ("7b4l-mbs1-residual-fusion", 1, 1, 1, RESIDUAL_FUSION),
    ("7b4l-mbs2-residual-fusion", 1, 2, 2, RESIDUAL_FUSION),
    ("7b4l-mbs1-bf16-state-residual-fusion", 1, 1, 1, RESIDUAL_FUSION, BF16_STATE),
    ("7b4l-mbs2-bf16-state-residual-fusion", 1, 2, 2, RESIDUAL_FUSION, BF16_STATE),
    ("7b4l-dp2", 2, 1, 2, {}),
    ("7b4l-dp4", 4, 1, 4, {}),
    ("7b4l-tp2", 2, 1, 1, {"tensor_model_parallel_size": 2, "sequence_parallel": True}),
    ("7b4l-tp4", 4, 1, 1, {"tensor_model_parallel_size": 4, "sequence_parallel": True}),
    ("7b4l-pp2", 2, 1, 8, {"pipeline_model_parallel_size": 2}),
    ("7b4l-pp4", 4, 1, 8, {"pipeline_model_parallel_size": 4}),
]
