#include "core/predict/memory.h"

#include "gtest/gtest.h"
#include "tests/testing/spec_builders.h"

namespace vtrain {
namespace {

TEST(MemoryTest, LayerActivationsFollowKorthikanti) {
  // s*b*h*(10 + 24/t + 5*a*s/(h*t)) for s=2048, b=1, h=12288, a=96, t=8:
  // 2,048 * 12,288 = 25,165,824; 10 + 3 + 5*96*2048/(12288*8) = 10 + 3 + 10
  // = 23; 25,165,824 * 23 = 578,813,952 bytes.
  EXPECT_DOUBLE_EQ(LayerActivationBytes(*ModelPreset("gpt3-175b"), 1, 8), 578'813'952.0);
}

TEST(MemoryTest, StagesHoldTheirShareAndTheMicroBatchesInFlight) {
  Job job = testing::PresetJob("gpt3-175b", 8, 4, 16, 1, 1536);
  job.model.attention_impl = AttentionImpl::kUnfused;  // Korthikanti's s x s terms
  const MemoryEstimate m = EstimateMemory(job);
  ASSERT_EQ(m.stages.size(), 16u);
  // 1F1B: stage s keeps min(p - s, m) = 16 - s micro-batches.
  EXPECT_EQ(m.stages[0].micro_batches_in_flight, 16);
  EXPECT_EQ(m.stages[15].micro_batches_in_flight, 1);
  // A middle stage: 6 layers of (4h^2 + 2hf + 9h + f) / t parameters,
  // 16 bytes each. h = 12,288, f = 49,152: 4h^2 + 2hf = 1,811,939,328,
  // 9h + f = 159,744, so 1,812,099,072 per layer; * 6 / 8 = 1,359,074,304.
  EXPECT_DOUBLE_EQ(m.stages[5].parameters, 1'359'074'304.0);
  EXPECT_DOUBLE_EQ(m.stages[5].model_states_bytes, 16 * 1'359'074'304.0);
  // Full recomputation: 2*s*b*h per layer per micro-batch in flight, plus one
  // layer's activations: (16 - 5) * 6 * 2 * 2048 * 12288 + 578,813,952.
  EXPECT_DOUBLE_EQ(m.stages[5].activations_bytes, 11.0 * 6 * 2 * 2048 * 12288 + 578'813'952.0);
  EXPECT_TRUE(m.fits) << m.peak_bytes / (1 << 30) << " GiB";
  // The first stage holds the most micro-batches and the embedding.
  EXPECT_EQ(m.peak_bytes, m.stages[0].peak_bytes);
}

TEST(MemoryTest, TooLittleParallelismDoesNotFit) {
  // 175B parameters * 16 bytes / 8 GPUs = 350 GB per GPU.
  const MemoryEstimate m = EstimateMemory(testing::PresetJob("gpt3-175b", 8, 1, 1, 1, 8));
  EXPECT_FALSE(m.fits);
  EXPECT_GT(m.peak_bytes, 300e9);
  EXPECT_EQ(m.capacity_bytes, 80.0 * (1 << 30));
}

TEST(MemoryTest, RecomputationAndSchedulesChangeActivations) {
  Job job = testing::PresetJob("gpt3-175b", 8, 4, 16, 2, 1536);
  const double full = EstimateMemory(job).stages[0].activations_bytes;
  job.plan.recompute = Recompute::kNone;
  const double none = EstimateMemory(job).stages[0].activations_bytes;
  EXPECT_GT(none, 5 * full);
  job.plan.recompute = Recompute::kFull;
  job.plan.schedule = PipelineSchedule::kGpipe;
  const MemoryEstimate gpipe = EstimateMemory(job);
  EXPECT_EQ(gpipe.stages[0].micro_batches_in_flight, job.plan.num_micro_batches());
  EXPECT_GT(gpipe.stages[0].activations_bytes, full);
  // A bigger micro-batch never needs less memory.
  Job bigger = testing::PresetJob("gpt3-175b", 8, 4, 16, 4, 1536);
  EXPECT_GT(EstimateMemory(bigger).stages[0].activations_bytes,
            EstimateMemory(testing::PresetJob("gpt3-175b", 8, 4, 16, 2, 1536))
                .stages[0]
                .activations_bytes);
}

TEST(MemoryTest, LayerActivationsForEachOptionFollowKorthikantiTable2) {
  // GPT-3 175B, s=2048, b=1, h=12288, a=96, t=8: s*b*h = 25,165,824 and
  // 5*a*s/h = 5*96*2048/12288 = 80.
  ModelSpec model = *ModelPreset("gpt3-175b");
  model.attention_impl = AttentionImpl::kUnfused;  // as Korthikanti et al. measured
  ParallelPlan plan;
  plan.tensor_parallel = 8;
  auto bytes = [&](Recompute r, bool sp, int64_t cp) {
    plan.recompute = r;
    plan.sequence_parallel = sp;
    plan.context_parallel = cp;
    return LayerActivationBytes(model, plan);
  };
  constexpr double kSbh = 25'165'824.0;
  // No recomputation: 10 + (24 + 80)/8 = 23; with SP (34 + 80)/8 = 14.25.
  EXPECT_DOUBLE_EQ(bytes(Recompute::kNone, false, 1), 578'813'952.0);
  EXPECT_DOUBLE_EQ(bytes(Recompute::kNone, true, 1), kSbh * 14.25);  // 358,612,992
  // Selective: 10 + 24/8 = 13; with SP 34/8 = 4.25.
  EXPECT_DOUBLE_EQ(bytes(Recompute::kSelective, false, 1), kSbh * 13);   // 327,155,712
  EXPECT_DOUBLE_EQ(bytes(Recompute::kSelective, true, 1), kSbh * 4.25);  // 106,954,752
  // Full: the layer input, 2 bytes per element; with SP split over t.
  EXPECT_DOUBLE_EQ(bytes(Recompute::kFull, false, 1), kSbh * 2);
  EXPECT_DOUBLE_EQ(bytes(Recompute::kFull, true, 1), kSbh * 0.25);
  // Context parallelism 2: each rank holds half the tokens.
  EXPECT_DOUBLE_EQ(bytes(Recompute::kNone, false, 2), 578'813'952.0 / 2);
  // FlashAttention keeps none of the 5*a*s/h: 10 + 24/8 = 13 without
  // recomputation, and selective drops nothing more: the core's output is
  // the projection's input (in the 24), which the projection keeps.
  model.attention_impl = AttentionImpl::kFlash;
  EXPECT_DOUBLE_EQ(bytes(Recompute::kNone, false, 1), kSbh * 13);
  EXPECT_DOUBLE_EQ(bytes(Recompute::kSelective, false, 1), kSbh * 13);
  EXPECT_DOUBLE_EQ(bytes(Recompute::kFull, false, 1), kSbh * 2);
  model.attention_impl = AttentionImpl::kUnfused;
  // SP is a no-op without tensor parallelism (as Megatron turns it off).
  plan.tensor_parallel = 1;
  EXPECT_DOUBLE_EQ(bytes(Recompute::kNone, true, 1), bytes(Recompute::kNone, false, 1));
}

// The Llama 3 70B layer plan the tests below work by hand: t = 4, c = 2,
// sequence parallelism, `recompute`.
ParallelPlan Llama70bPlan(Recompute recompute) {
  ParallelPlan plan;
  plan.tensor_parallel = 4;
  plan.context_parallel = 2;
  plan.sequence_parallel = true;
  plan.recompute = recompute;
  return plan;
}

TEST(MemoryTest, LlamaLayersKeepNoAttentionScores) {
  // Llama 3 70B: h = 8192, a = 64, 8 KV heads, f = 28672, s = 8192. Per
  // token in units of h bytes: 8 replicated; split 4 + 4 * 8/64 + 6 * 3.5
  // = 25.5. The core keeps nothing of its own under FlashAttention (its
  // output, 2, is the projection's input): recomputing it drops nothing.
  const ModelSpec model = *ModelPreset("llama3-70b");
  ParallelPlan plan = Llama70bPlan(Recompute::kNone);
  // s/c * b * h = 4096 * 8192 = 33,554,432; (8 + 25.5) / 4 = 8.375.
  EXPECT_DOUBLE_EQ(LayerActivationBytes(model, plan), 33'554'432.0 * 8.375);
  plan.recompute = Recompute::kSelective;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(model, plan), 33'554'432.0 * 8.375);
  // Without SP the 8 stays whole: 8 + 25.5 / 4 = 14.375.
  plan.sequence_parallel = false;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(model, plan), 33'554'432.0 * 14.375);
  // Unfused, the core's scores (2 bytes each, a * s / h = 64 of them a
  // token at s = 8192) are what selective recomputation drops.
  ModelSpec unfused = model;
  unfused.attention_impl = AttentionImpl::kUnfused;
  ParallelPlan none = plan;
  none.recompute = Recompute::kNone;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(unfused, none) - LayerActivationBytes(unfused, plan),
                   33'554'432.0 * 2 * 64 / 4);
}

// Under fp8 Transformer Engine's linear layers keep fp8 copies of their
// inputs: the fused norms' outputs and the activation's output halve, and
// the attention output gains the projection's copy beside FlashAttention's
// own (unfused, it halves).
TEST(MemoryTest, Fp8KeepsTheGemmsInputsAtOneByte) {
  // Llama 3 70B as above (t = 4, c = 2, SP): 8 -> 6 replicated, 25.5 ->
  // 25.5 + 1 - 3.5 = 23 split; (6 + 23) / 4 = 7.25.
  const ModelSpec llama = *ModelPreset("llama3-70b");
  ParallelPlan plan = Llama70bPlan(Recompute::kNone);
  plan.dtype = DType::kFp8;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(llama, plan), 33'554'432.0 * 7.25);
  // GPT-3 175B (t = 8, no SP): 10 -> 8; flash 24 -> 24 + 1 - 4 = 21;
  // unfused 24 + 80 -> 24 - 1 - 4 + 80 = 99.
  ModelSpec gpt = *ModelPreset("gpt3-175b");
  ParallelPlan g;
  g.tensor_parallel = 8;
  g.recompute = Recompute::kNone;
  g.dtype = DType::kFp8;
  constexpr double kSbh = 25'165'824.0;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(gpt, g), kSbh * (8 + 21.0 / 8));
  gpt.attention_impl = AttentionImpl::kUnfused;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(gpt, g), kSbh * (8 + 99.0 / 8));
  // Qwen3-30B-A3B's routed copies (t = 1, s = 4096): each keeps 3h + 5 *
  // 768 = 9,984 bytes under fp8 instead of 12,800; its attention side (no
  // shared experts) loses the QKV norm's byte and gains the output's qd/h
  // = 32 * 128 / 2048 = 2.
  ModelSpec moe = *ModelPreset("qwen3-30b-a3b");
  moe.seq_len = 4096;
  ParallelPlan p;
  p.data_parallel = 8;
  p.expert_parallel = 8;
  p.recompute = Recompute::kNone;
  const double bf16 = LayerActivationBytes(moe, p, /*moe_layer=*/true);
  p.dtype = DType::kFp8;
  const double load = ForcedBalanceSpread(moe, p);
  EXPECT_NEAR(bf16 - LayerActivationBytes(moe, p, /*moe_layer=*/true),
              32'768.0 * load * (12'800 - 9'984) + 4096.0 * 2048 * (1 - 2), 1);
}

TEST(MemoryTest, InterleavingHoldsMegatronsWarmUpOfChunks) {
  // p=4, V=2, m=8: stage 0 warms up 2*(4-0-1) + (2-1)*4 = 10 chunk forwards
  // and holds 11; stage 3 warms up 0 + 4 and holds 5.
  Job job = testing::PresetJob("gpt3-175b", 8, 4, 4, 1, 32);
  job.model.attention_impl = AttentionImpl::kUnfused;
  job.plan.virtual_stages = 2;
  ASSERT_EQ(job.plan.num_micro_batches(), 8);
  const MemoryEstimate m = EstimateMemory(job);
  EXPECT_EQ(m.stages[0].micro_batches_in_flight, 11);
  EXPECT_EQ(m.stages[3].micro_batches_in_flight, 5);
  // Each chunk holds 96 / (4 * 2) = 12 layers; full recomputation keeps
  // 2*s*b*h per layer plus one whole layer (578,813,952 bytes).
  EXPECT_DOUBLE_EQ(m.stages[0].activations_bytes, 11.0 * 12 * 2 * 25'165'824 + 578'813'952.0);
  // Without interleaving the first stage holds p = 4 micro-batches of 24
  // layers: 96 layer inputs against 132 with V = 2 (Korthikanti §4.2.3:
  // L * (1 + (p - 1) / (p * V)) = 96 * 1.375 = 132).
  job.plan.virtual_stages = 1;
  EXPECT_DOUBLE_EQ(EstimateMemory(job).stages[0].activations_bytes,
                   4.0 * 24 * 2 * 25'165'824 + 578'813'952.0);
}

TEST(MemoryTest, ShardingDividesTheStatesOverDataAndContextRanks) {
  // The middle stage of t=8, d=4, p=16: 1,359,074,304 parameters, a layer
  // 1,812,099,072 / 8 = 226,512,384 on one GPU.
  Job job = testing::PresetJob("gpt3-175b", 8, 4, 16, 1, 1536);
  constexpr double kParams = 1'359'074'304.0;
  job.plan.data_parallel_sharding = DataParallelSharding::kOptimizer;
  // Distributed optimizer: 2 + 2 bytes of fp16 weights and gradients, 12/d
  // of fp32 master weights and moments: 4 + 3 = 7 bytes per parameter.
  EXPECT_DOUBLE_EQ(EstimateMemory(job).stages[5].model_states_bytes, 7 * kParams);
  // FSDP: 16/d = 4 bytes per parameter plus two layers' gathered fp16
  // weights and gradients: 4 * kParams + 2 * 226,512,384 * 4.
  job.plan.data_parallel_sharding = DataParallelSharding::kFull;
  EXPECT_DOUBLE_EQ(EstimateMemory(job).stages[5].model_states_bytes,
                   4 * kParams + 2 * 226'512'384.0 * 4);
  // Context parallelism 2 joins the shards: 16 / 8 = 2 bytes per parameter.
  job.plan.context_parallel = 2;
  job.cluster.num_gpus *= 2;
  EXPECT_DOUBLE_EQ(EstimateMemory(job).stages[5].model_states_bytes,
                   2 * kParams + 2 * 226'512'384.0 * 4);
  job.plan.data_parallel_sharding = DataParallelSharding::kOptimizer;
  EXPECT_DOUBLE_EQ(EstimateMemory(job).stages[5].model_states_bytes, 5.5 * kParams);
}

TEST(MemoryTest, SequenceAndContextParallelismShrinkTheEndBuffers) {
  Job job = testing::PresetJob("gpt3-175b", 8, 4, 16, 1, 1536);
  const MemoryEstimate base = EstimateMemory(job);
  job.plan.sequence_parallel = true;
  const MemoryEstimate sp = EstimateMemory(job);
  // The embedding output 2*s*b*h is split over t = 8.
  EXPECT_DOUBLE_EQ(sp.stages[0].logits_bytes, base.stages[0].logits_bytes / 8);
  job.plan.context_parallel = 2;
  job.cluster.num_gpus *= 2;
  const MemoryEstimate cp = EstimateMemory(job);
  EXPECT_DOUBLE_EQ(cp.stages[15].logits_bytes, base.stages[15].logits_bytes / 2);
  EXPECT_LT(cp.stages[0].activations_bytes, sp.stages[0].activations_bytes);
}

// Megatron's --recompute-modules: each module drops what it recomputes.
TEST(MemoryTest, RecomputeModulesDropWhatTheyRecompute) {
  // Llama 3 70B as above, t = 4, c = 2, SP: 8 replicated, 25.5 split, of
  // which the MLP's 6 * 3.5 = 21 (the core's share is 0 under
  // FlashAttention); per token, / 4.
  const ModelSpec model = *ModelPreset("llama3-70b");
  ParallelPlan plan = Llama70bPlan(Recompute::kSelective);
  const double unit = 33'554'432.0;
  // Its norms are fused into the QKV and fc1 GEMMs (Transformer Engine),
  // which keep their inputs: recomputing layernorm drops nothing.
  plan.recompute_modules = kRecomputeLayernorm;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(model, plan), unit * (8 + 25.5) / 4);
  plan.recompute_modules = kRecomputeMlp;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(model, plan), unit * (8 + 25.5 - 21) / 4);
  plan.recompute_modules = kRecomputeCoreAttn | kRecomputeMlp;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(model, plan), unit * (8 + 25.5 - 21) / 4);
  // Not selective: the modules mean nothing.
  plan.recompute = Recompute::kNone;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(model, plan), unit * (8 + 25.5) / 4);

  // Qwen3-30B-A3B (h = 2048, 128 experts, top-8, expert FFN 768, no shared
  // experts), s = 4096, t = 1: 4,096 tokens, 32,768 routed copies, each
  // keeping 4h + 6 * 768 bytes: 32,768 * 12,800 = 419,430,400, plus fp32
  // router probabilities 4,096 * 128 * 4 = 2,097,152. The busiest EP rank
  // holds its forced-balance spread more copies than the mean.
  ModelSpec moe = *ModelPreset("qwen3-30b-a3b");
  moe.seq_len = 4096;
  ParallelPlan p;
  p.data_parallel = 8;
  p.expert_parallel = 8;
  p.recompute = Recompute::kNone;
  const double load = ForcedBalanceSpread(moe, p);
  EXPECT_GT(load, 1.001);
  EXPECT_LT(load, 1.02);
  const double none = LayerActivationBytes(moe, p, /*moe_layer=*/true);
  p.recompute = Recompute::kSelective;
  p.recompute_modules = kRecomputeMoeAct;  // drops the SwiGLU output, 2 * 768 a copy
  EXPECT_NEAR(none - LayerActivationBytes(moe, p, true), 32'768.0 * load * 2 * 768, 1);
  p.recompute_modules = kRecomputeMoe;  // drops every routed copy and the probabilities
  EXPECT_NEAR(none - LayerActivationBytes(moe, p, true), 419'430'400.0 * load + 2'097'152.0, 1);
  // layernorm drops the MoE layer's pre-MLP norm output (its own module, the
  // router's input), 2 bytes of h = 2048 a token, and nothing of a dense
  // layer of the same model (its norms fused into the GEMMs after them).
  p.recompute_modules = kRecomputeLayernorm;
  EXPECT_NEAR(none - LayerActivationBytes(moe, p, true), 4096.0 * 2 * 2048, 1);
  ParallelPlan dense = p;
  dense.recompute = Recompute::kNone;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(moe, p, false), LayerActivationBytes(moe, dense, false));
}

// Under MLA the input norm is a module of its own too (Megatron-Core's MLA
// layer spec): recomputing layernorm drops its output in every layer, and in
// a MoE layer the pre-MLP norm's as well; with sequence parallelism / t.
TEST(MemoryTest, RecomputingLayernormUnderMlaDropsTheInputNorm) {
  const ModelSpec model = *ModelPreset("deepseek-v3");
  ParallelPlan plan;
  plan.tensor_parallel = 2;
  plan.sequence_parallel = true;
  plan.expert_parallel = 8;
  plan.data_parallel = 4;
  plan.recompute = Recompute::kSelective;
  plan.recompute_modules = kRecomputeCoreAttn;
  const double tokens = static_cast<double>(model.seq_len);
  const double h = static_cast<double>(model.hidden_size);
  for (const bool moe_layer : {false, true}) {
    const double kept = LayerActivationBytes(model, plan, moe_layer);
    ParallelPlan norms = plan;
    norms.recompute_modules = kRecomputeCoreAttn | kRecomputeLayernorm;
    const double own = moe_layer ? 4 : 2;
    EXPECT_NEAR(kept - LayerActivationBytes(model, norms, moe_layer), tokens * h * own / 2, 1)
        << "moe_layer " << moe_layer;
  }
}

}  // namespace
}  // namespace vtrain
