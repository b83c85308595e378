// The job and plan-space flags vtrainctl's commands declare, with their help
// (declared in client/job_flags.h; parsed in client/job_flags.cc).
#include "client/fabric_flags.h"
#include "client/job_flags.h"
#include "client/moe_flags.h"
#include "common/flag_parser.h"

namespace vtrain::client {

void AddModelFlags(common::FlagParser& p) {
  p.AddValue("model", "PRESET",
             "model preset: gpt3-125m ... gpt3-175b, mtnlg-530b, llama2-7b/13b/70b, llama3-8b/70b, "
             "llama3.1-405b; MoE: deepseek-v3, qwen3-30b-a3b, qwen3-235b-a22b, gpt-oss-20b/120b, "
             "mixtral-8x7b/8x22b");
  p.AddValue("arch", "A", "layer architecture: gpt or llama (model.arch; default the preset's)");
  p.AddValue("attention-impl", "I",
             "attention core: flash (one fused kernel, the default for every model) or unfused "
             "(the paper's Megatron-LM, as the measured A100 runs were; model.attention_impl)");
  p.AddValue("kv-heads", "N",
             "key/value heads for grouped-query attention (model.num_kv_heads, llama only)");
  p.AddValue("layers", "N", "decoder layers (model.num_layers); overrides the preset");
  p.AddValue("hidden", "N", "hidden size (model.hidden_size)");
  p.AddValue("heads", "N", "attention heads (model.num_heads)");
  p.AddValue("seq-len", "N", "sequence length (model.seq_len)");
  p.AddValue("vocab", "N", "vocabulary size (model.vocab_size, default 50257)");
  p.AddValue("ffn", "N", "FFN hidden size (model.ffn_hidden_size, default 4 x hidden)");
  AddMoeModelFlags(p);
}

void AddClusterFlags(common::FlagParser& p) {
  p.AddValue("gpu", "NAME", "GPU model (default a100-sxm4-80gb); see 'vtrainctl presets'");
  p.AddValue("gpus-per-node", "N", "GPUs per node (cluster.gpus_per_node, default 8)");
  p.AddValue("nvlink-domain", "G",
             "GPUs one NVLink domain joins, whole nodes (72: GB200 NVL72; default a node)");
  p.AddValue("intra-node-bandwidth", "BW", "per-GPU NVLink bandwidth with unit, e.g. 150GB/s");
  p.AddValue("inter-node-bandwidth", "BW", "per-node network bandwidth with unit, e.g. 800Gb/s");
  p.AddValue("price-usd-per-gpu-hour", "USD", "price of one GPU-hour, for the cost");
  AddFabricFlags(p);
  p.AddValue("node-failure-rate", "R",
             "node failures per 1,000 node-days, for the goodput with --tokens (default 6.5; 0: "
             "none)");
  p.AddValue("checkpoint-gbps", "G", "checkpoint write bandwidth per node, Gb/s (default 16)");
  p.AddValue("async-checkpoint", "on|off",
             "asynchronous checkpointing: training waits only for the copy to host (default off)");
  p.AddValue("restart-minutes", "M",
             "restart after a failure, before reading the checkpoint "
             "(default 10)");
  p.AddValue("checkpoint-interval", "S",
             "seconds between checkpoints (default: the interval that maximises goodput)");
}

void AddJobFlags(common::FlagParser& p) {
  p.AddValue("job-file", "FILE",
             "-f: the job as JSON (vtrain.v1.PredictRequest); other job flags override it");
  p.AddValue("megatron-args", "FILE|-",
             "the job from a Megatron-LM launch (a torchrun ... pretrain_gpt.py script or an "
             "argument list; read, never run); other job flags override it (docs/megatron.md)");
  p.AddValue("megatron-bridge-config", "FILE|-",
             "the job from a Megatron-Bridge / NeMo 2 ConfigContainer YAML dump "
             "(run_config.yaml); other job flags override it (docs/megatron.md)");
  p.AddValue("vtrain-config", "FILE", "the job from a vTrain configuration JSON file");
  AddModelFlags(p);
  AddClusterFlags(p);
  p.AddValue("gpus", "N", "GPUs in the job (cluster.num_gpus; default tp x dp x pp)");
  p.AddValue("settings", "S",
             "where unset training settings come from: tuned (default: the model's public "
             "recipe), megatron-defaults (every overlap off) or paper (the vTrain paper's A100 "
             "runs); docs/settings.md");
  p.AddValue("tp", "N", "tensor-parallel degree (plan.tensor_parallel, default 1)");
  p.AddValue("pp", "N", "pipeline-parallel degree (plan.pipeline_parallel, default 1)");
  p.AddValue("dp", "N", "data-parallel degree (plan.data_parallel, default GPUs / (tp x pp))");
  p.AddValue("micro-batch", "N", "micro-batch size (plan.micro_batch, default 1)");
  p.AddValue("global-batch", "N", "global batch in sequences (plan.global_batch)");
  p.AddValue("schedule", "S",
             "pipeline schedule: gpipe, 1f1b, zb-h1, dualpipe or dualpipev (default 1f1b; "
             "docs/schedules.md)");
  p.AddValue("recompute", "R",
             "activation recomputation: none, selective or full (default: the settings')");
  p.AddValue("recompute-modules", "M,..",
             "with --recompute selective, Megatron's modules: core_attn (default), layernorm, "
             "mlp, moe, moe_act, mla_up_proj, shared_experts");
  p.AddValue("sequence-parallel", "on|off",
             "sequence parallelism with tensor parallelism (default: the settings'; no-op at tp "
             "1)");
  p.AddValue("cp", "N", "context-parallel degree (plan.context_parallel, default 1)");
  p.AddValue("cp-comm", "C",
             "context-parallel exchange: p2p (K/V ring, default), a2a (all-to-all onto heads) "
             "or a2a+p2p (all-to-all in groups, a ring over them)");
  p.AddValue("cp-a2a-size", "N",
             "a2a+p2p: ranks per all-to-all group (default: the largest in one NVLink domain)");
  p.AddValue("data-parallel-sharding", "S",
             "none, optimizer (distributed optimizer / ZeRO-1) or full (FSDP); default: the "
             "settings'");
  p.AddValue("virtual-stages", "V", "model chunks per GPU for interleaved 1F1B (default 1)");
  p.AddValue("pipeline-layout", "L",
             "auto (default: even, else Megatron-style lighter ends) or a layout in Megatron's "
             "notation, e.g. 'Et*3|(tt|)*29m|L' (see docs/pipeline-layout.md)");
  p.AddValue("first-stage-layers", "N", "decoder layers on the first pipeline stage");
  p.AddValue("last-stage-layers", "N", "decoder layers on the last pipeline stage");
  p.AddValue("gradient-bucketing", "on|off",
             "overlap DP all-reduce with backward (default: the settings')");
  p.AddValue("bucket-size", "SIZE", "gradient bucket size, e.g. 25MiB (default 25MiB)");
  p.AddValue("tp-comm-overlap", "on|off",
             "pipeline the sequence-parallel all-gather/reduce-scatter with the GEMMs, as "
             "Megatron-Core's --tp-comm-overlap (needs --sequence-parallel on; default: the "
             "settings')");
  p.AddValue("overlap-param-gather", "on|off",
             "run the distributed optimizer's parameter all-gather under the next forward "
             "(needs --data-parallel-sharding optimizer; default: the settings')");
  p.AddValue("bf16-moments", "on|off",
             "Megatron-Core's precision-aware optimizer with bf16 Adam moments: 8 bytes of "
             "optimizer state a parameter, not 12 (memory only; default: the settings')");
  p.AddValue("fp32-grads", "on|off",
             "accumulate and reduce gradients in an fp32 buffer, as Megatron-LM does with --bf16: "
             "4 bytes of gradient a parameter, not 2, in memory and in the data-parallel "
             "reduction (default: the settings': on under megatron-defaults, off under tuned)");
  p.AddValue("dtype", "T",
             "fp16, bf16 or fp8 (fp8: H100/H200/B200; default bf16, fp16 where the GPU has no "
             "bf16, and under --settings paper)");
  p.AddValue("fp8-recipe", "R",
             "fp8 scaling: delayed (default), current, blockwise (DeepSeek 1x128/128x128) or "
             "mxfp8 (Blackwell)");
  AddMoePlanFlags(p);
  p.AddValue(
      "memory-headroom", "F",
      "fraction of GPU memory a plan must leave free to fit (memory_headroom, default 0.03)");
}

void AddTrainingSpaceFlags(common::FlagParser& p) {
  p.AddValue("settings", "S",
             "tuned (default: the space an expert searches, with the model's recipe), "
             "megatron-defaults or paper (the paper's space: full recomputation, no overlaps)");
  p.AddValue("recompute-values", "R,..",
             "none,selective,full (default: all three when tuned, none or full otherwise)");
  p.AddValue("cp-values", "A,B,..", "context-parallel degrees to try (default 1)");
  p.AddValue("cp-comm", "C", "how plans with context parallelism exchange: p2p, a2a, a2a+p2p");
  p.AddValue("fp8-recipe", "R", "how fp8 plans scale: delayed, current, blockwise, mxfp8");
  p.AddValue("virtual-stages-values", "A,B,..", "interleaving chunks per stage to try (default 1)");
  p.AddValue("pp-values", "A,B,..",
             "pipeline degrees to try (default every divisor of the layers; others are laid "
             "out unevenly)");
  p.AddValue("sequence-parallel-values", "on,off",
             "sequence parallelism to try (default: on when tuned, else off)");
  p.AddValue("sharding-values", "S,..",
             "none,optimizer,full data-parallel sharding (default: optimizer when tuned, else "
             "none)");
  p.AddValue("gradient-bucketing", "on|off",
             "every plan overlaps its DP gradient reduction with the backward (default: the "
             "settings')");
  p.AddValue("tp-comm-overlap", "on|off",
             "plans with sequence parallelism overlap TP collectives with GEMMs (default: the "
             "settings')");
  p.AddValue("overlap-param-gather", "on|off",
             "plans with the distributed optimizer gather parameters under the next forward "
             "(default: the settings')");
  AddMoeSpaceFlags(p);
}

}  // namespace vtrain::client
