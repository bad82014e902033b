CUDA_DEVICE_MAX_CONNECTIONS=1 torchrun --nproc-per-node 8 --nnodes 2 pretrain_gpt.py \
    --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --sequence-parallel \
    --num-layers 32 --hidden-size 4096 --ffn-hidden-size 11008 --num-attention-heads 32 \
    --num-layers-per-virtual-pipeline-stage 8 --seq-length 4096 --max-position-embeddings 4096 \
    --position-embedding-type rope --rotary-base 10000 --normalization RMSNorm --swiglu \
    --untie-embeddings-and-output-weights --disable-bias-linear --hidden-dropout 0 --attention-dropout 0 \
    --micro-batch-size 1 --global-batch-size 64 --bf16 --use-distributed-optimizer --overlap-grad-reduce \
    --overlap-param-gather --recompute-granularity selective --attention-backend fused \
    --lr 3e-4 --data-path "/data/my corpus" --tokenizer-type HuggingFaceTokenizer  # comment
