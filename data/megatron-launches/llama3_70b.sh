#!/bin/bash
# Llama 3 70B on 64 H100s, fp8, in the style of Megatron-LM's examples/llama:
# hyper-parameters as variables, an fp8 branch, quoted multi-word elements.
GPUS_PER_NODE=8
NUM_NODES=8
DTYPE=${DTYPE:-"fp8"}
TP_SIZE=4
PP_SIZE=4
CP_SIZE=2
SEQ_LENGTH=8192
MICRO_BATCH_SIZE=1
GLOBAL_BATCH_SIZE=128

CHECKPOINT_PATH=${1:-"checkpoints/llama3_70b"}
mkdir -p "$(dirname "$CHECKPOINT_PATH")"

MODEL_ARGS=(
    --use-mcore-models
    --num-layers 80
    --hidden-size 8192
    --ffn-hidden-size 28672
    --num-attention-heads 64
    --group-query-attention
    --num-query-groups 8
    --kv-channels 128
    --seq-length $SEQ_LENGTH
    --max-position-embeddings $SEQ_LENGTH
    --position-embedding-type rope
    --rotary-base 500000
    --swiglu
    --normalization RMSNorm
    --untie-embeddings-and-output-weights
    --disable-bias-linear
    --attention-dropout 0.0
    --hidden-dropout 0.0
    "--vocab-size 128256"
    --tokenizer-type NullTokenizer
)

TRAINING_ARGS=(
    --micro-batch-size $MICRO_BATCH_SIZE
    --global-batch-size $GLOBAL_BATCH_SIZE
    --lr 1.5e-4
    --min-lr 1.5e-5
    --lr-decay-style cosine
    --bf16
    --use-distributed-optimizer
    --overlap-grad-reduce
    --overlap-param-gather
    --manual-gc
)

DTYPE_ARGS=()
if [[ "$DTYPE" == "fp8" ]]; then
    DTYPE_ARGS+=(
        "--fp8-format hybrid"
        --fp8-amax-history-len 1024
        --fp8-amax-compute-algo max
    )
else
    DTYPE_ARGS+=(--no-fp8-wgrad)
fi

MODEL_PARALLEL_ARGS=(
    --tensor-model-parallel-size $TP_SIZE
    --pipeline-model-parallel-size $PP_SIZE
    --context-parallel-size $CP_SIZE
    --num-layers-per-virtual-pipeline-stage 4
    --sequence-parallel
    --tp-comm-overlap
)

torchrun --nproc_per_node $GPUS_PER_NODE --nnodes $NUM_NODES \
    pretrain_gpt.py ${MODEL_ARGS[@]} ${TRAINING_ARGS[@]} ${DTYPE_ARGS[@]} \
    ${MODEL_PARALLEL_ARGS[@]} --log-interval 1 --save "$CHECKPOINT_PATH"
