// Predictions of Mixture-of-Experts jobs: the exact operator fast path and
// the periodic jump agree with the kernel graph and with stepping on random
// small MoE jobs (dense and MoE layers, MLA, shared experts, MTP, every
// dispatcher, imbalanced routing), and the effects a user relies on go the
// right way (imbalance, overlap, all-to-all across nodes, MFU on active
// parameters, memory of expert states).
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/engine/streaming.h"
#include "core/predict/memory.h"
#include "core/predict/predictor.h"
#include "core/profile/analytical.h"
#include "core/profile/default_profiles.h"
#include "core/spec/moe.h"
#include "gtest/gtest.h"
#include "tests/testing/spec_builders.h"
#include "tests/testing/status_matchers.h"

namespace vtrain {
namespace {

using ::vtrain::testing::DescribeJob;
using ::vtrain::testing::RandomSmallJob;

// RandomSmallJob made a Llama MoE with a random expert layout; nullopt when
// the draw breaks a rule (the caller tries the next seed).
std::optional<Job> RandomSmallMoeJob(uint64_t seed) {
  Job job = RandomSmallJob(seed);
  const uint64_t r = seed * 0x9E3779B97F4A7C15ULL;
  auto pick = [&](int shift, int n) { return static_cast<int64_t>((r >> shift) % n); };
  job.model.arch = Architecture::kLlama;
  MoeSpec& moe = job.model.moe;
  moe.num_experts = int64_t{4} << pick(0, 2);  // 4 or 8
  moe.top_k = 1 + pick(2, 2);
  moe.expert_ffn = 64 << pick(4, 2);
  moe.shared_experts = pick(6, 2);
  moe.dense_layers = job.model.num_layers > 1 ? pick(8, 2) : 0;
  moe.router = pick(10, 2) == 0 ? RouterScore::kSoftmax : RouterScore::kSigmoid;
  if (pick(12, 3) == 0) {
    job.model.attention = AttentionKind::kMla;
    job.model.head_dim = 32;
    job.model.mla = {pick(14, 2) * 64, 64, 16, 32};
  }
  job.model.mtp_layers = pick(16, 3) == 0 ? 1 : 0;
  ParallelPlan& plan = job.plan;
  const int64_t tcd = plan.tensor_parallel * plan.data_parallel;
  plan.expert_parallel = std::min<int64_t>(int64_t{1} << pick(18, 3), tcd);
  while (moe.num_experts % plan.expert_parallel != 0 || tcd % plan.expert_parallel != 0) {
    plan.expert_parallel /= 2;
  }
  plan.sequence_parallel = plan.tensor_parallel > 1;
  plan.moe.dispatcher = static_cast<MoeDispatcher>(pick(22, 3));
  plan.moe.overlap = pick(24, 2) == 1;
  plan.moe.routing_sigma = pick(26, 2) == 1 ? 0.5 : 0;
  plan.moe.capacity_factor = pick(28, 3) == 0 ? 1.25 : 0;
  // Megatron's recompute modules (7 bits, those that apply; 0: core_attn alone).
  if (pick(31, 2) == 0) plan.recompute = Recompute::kSelective;
  if (plan.recompute == Recompute::kSelective) {
    plan.recompute_modules = static_cast<uint32_t>(pick(33, 128));
    if (plan.moe.overlap) plan.recompute_modules &= ~uint32_t{kRecomputeMoe};
    if (job.model.attention != AttentionKind::kMla) {
      plan.recompute_modules &= ~uint32_t{kRecomputeMlaUpProj};
    }
    if (moe.shared_experts == 0) plan.recompute_modules &= ~uint32_t{kRecomputeSharedExperts};
  }
  if (!ValidateJob(job).ok()) return std::nullopt;
  return job;
}

absl::StatusOr<Prediction> PredictMoe(const Job& job, Granularity granularity,
                                      bool periodic = true) {
  PredictOptions options;
  options.granularity = granularity;
  options.periodic = periodic;
  return Predict(job, DefaultProfileSet(job.cluster.gpu), options);
}

TEST(MoePredictDifferentialTest, KernelOperatorAndSteppingAgreeExactly) {
  int tried = 0;
  for (uint64_t seed = 1; seed <= 120 && tried < 60; ++seed) {
    const std::optional<Job> job = RandomSmallMoeJob(seed);
    if (!job) continue;
    ++tried;
    SCOPED_TRACE(absl::StrCat("seed ", seed, ": ", DescribeJob(*job),
                              " ep=", job->plan.expert_parallel,
                              " mla=", job->model.attention == AttentionKind::kMla));
    VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction kernel, PredictMoe(*job, Granularity::kKernel));
    VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction op, PredictMoe(*job, Granularity::kOperator));
    VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction stepped,
                                PredictMoe(*job, Granularity::kOperator, /*periodic=*/false));
    EXPECT_GT(kernel.iteration_time_ns, 0);
    EXPECT_EQ(kernel.iteration_time_ns, op.iteration_time_ns);
    EXPECT_EQ(stepped.iteration_time_ns, op.iteration_time_ns);
    ASSERT_EQ(kernel.stages.size(), op.stages.size());
    for (size_t s = 0; s < op.stages.size(); ++s) {
      EXPECT_EQ(kernel.stages[s].compute_ns, op.stages[s].compute_ns);
      EXPECT_EQ(kernel.stages[s].data_parallel_exposed_ns, op.stages[s].data_parallel_exposed_ns);
      EXPECT_EQ(stepped.stages[s].idle_ns, op.stages[s].idle_ns);
    }
    if (HasFailure()) return;
  }
  EXPECT_GE(tried, 30);
}

Job Qwen3(int64_t ep, int64_t gpus_per_node = 8) {
  Job job;
  job.model = *ModelPreset("qwen3-30b-a3b");
  job.cluster = DefaultCluster(*GpuByName("h100-sxm5-80gb"), 64);
  job.cluster.gpus_per_node = gpus_per_node;
  job.plan.tensor_parallel = 1;
  job.plan.data_parallel = 64;
  job.plan.pipeline_parallel = 1;
  job.plan.expert_parallel = ep;
  job.plan.global_batch = 256;
  job.plan.dtype = DType::kBf16;
  job.plan.recompute = Recompute::kNone;
  return job;
}

double Ms(const Job& job) {
  absl::StatusOr<Prediction> p = PredictMoe(job, Granularity::kOperator);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? static_cast<double>(p->iteration_time_ns) * 1e-6 : 0;
}

double PeakBytes(const Job& job) {
  absl::StatusOr<Prediction> p = PredictMoe(job, Granularity::kOperator);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? p->memory.peak_bytes : 0;
}

TEST(MoePredictTest, ImbalancedRoutingIsSlowerAndCapacityRecoversPartOfIt) {
  const Job balanced = Qwen3(8);
  Job skewed = balanced;
  skewed.plan.moe.routing_sigma = 1.0;
  Job capped = skewed;
  capped.plan.moe.capacity_factor = 1.25;
  EXPECT_GT(Ms(skewed), Ms(balanced));
  EXPECT_LT(Ms(capped), Ms(skewed));
  // A capacity factor pads to capacity and spares the host's wait for the
  // token counts, so compare with balanced routing under the same factor
  // (the skewed run drops copies, so it may be a hair faster).
  Job balanced_capped = balanced;
  balanced_capped.plan.moe.capacity_factor = 1.25;
  EXPECT_GE(Ms(capped), 0.99 * Ms(balanced_capped));
}

// The dropless dispatchers' host wait (MoeHostSyncs) costs a small,
// host-bound MoE layer its host's lead: Qwen3-30B-A3B at EP 8 is slower
// dropless than padded to a capacity that drops nothing (balanced
// routing, factor 1), and the wait is all that differs (without it the
// two take the same time).
TEST(MoePredictTest, TheDispatchersHostWaitSlowsASmallModel) {
  const Job dropless = Qwen3(8);
  Job padded = dropless;
  padded.plan.moe.capacity_factor = 1.0;
  EXPECT_GT(Ms(dropless), Ms(padded));
}

// An all-to-all curve in the profile set (alltoall_perf imported by the
// agent) replaces the analytical exchange: its lookups are no longer
// analytical, and a slow curve makes the iteration slower.
TEST(MoePredictTest, AMeasuredAllToAllCurveReplacesTheAnalyticalOne) {
  const Job job = Qwen3(8);  // EP 8 inside one node
  ProfileSet set = DefaultProfileSet(job.cluster.gpu);
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction base, Predict(job, set, PredictOptions{}));
  std::vector<CollectivePoint> points;
  for (double bytes = 1024; bytes <= double{int64_t{1} << 34}; bytes *= 2) {
    points.push_back({bytes, 20'000 + bytes / 20.0});  // 20 us + 20 GB/s: slow
  }
  VTRAIN_ASSERT_OK_AND_ASSIGN(CollectiveCurve curve, CollectiveCurve::Create(points));
  set.collectives.emplace(CollectiveKey{set.gpu, LinkScope::kIntraNode, Collective::kAllToAll, 8},
                          curve);
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction slow, Predict(job, set, PredictOptions{}));
  EXPECT_GT(slow.iteration_time_ns, base.iteration_time_ns);
  int all_to_all = 0;
  for (const LookupRecord& r : slow.fidelity.records) {
    if (r.key.find("all_to_all") == std::string::npos) continue;
    ++all_to_all;
    EXPECT_NE(r.fidelity, Fidelity::kAnalytical) << r.key;
    EXPECT_FALSE(r.missing) << r.key;
  }
  EXPECT_GT(all_to_all, 0);
}

// Recomputing the MoE block re-runs it, exchange included, before its
// backward: slower than recomputing only the routed experts' SwiGLU
// (moe_act), which re-runs that one memory-bound kernel and is still slower
// than keeping it, and lighter on memory.
TEST(MoePredictTest, RecomputingTheMoeBlockCostsItsForwardAgain) {
  Job job = Qwen3(8);
  job.plan.recompute = Recompute::kSelective;
  job.plan.recompute_modules = kRecomputeMoeAct;
  Job none = job;
  none.plan.recompute = Recompute::kNone;
  none.plan.recompute_modules = 0;
  Job moe = job;
  moe.plan.recompute_modules = kRecomputeMoe;
  EXPECT_GT(Ms(job), Ms(none));
  EXPECT_GT(Ms(moe), Ms(job));
  EXPECT_LT(PeakBytes(moe), PeakBytes(job));
}

// shared_experts re-runs the shared experts' forward (with their TP
// collectives) before the MoE block's backward: slower than keeping their
// activations, faster than re-running the whole block, lighter on memory.
TEST(MoePredictTest, RecomputingTheSharedExpertsCostsTheirForward) {
  Job job = Qwen3(8);
  job.model.moe.shared_experts = 1;
  job.model.moe.shared_expert_ffn = 2048;
  job.plan.tensor_parallel = 2;
  job.plan.data_parallel = 32;
  job.plan.sequence_parallel = true;
  job.plan.recompute = Recompute::kSelective;
  job.plan.recompute_modules = kRecomputeCoreAttn;
  Job shared = job;
  shared.plan.recompute_modules = kRecomputeCoreAttn | kRecomputeSharedExperts;
  Job moe = job;
  moe.plan.recompute_modules = kRecomputeCoreAttn | kRecomputeMoe;
  EXPECT_GT(Ms(shared), Ms(job));
  EXPECT_LT(Ms(shared), Ms(moe));
  EXPECT_LT(PeakBytes(shared), PeakBytes(job));
}

// layernorm re-runs the norms that are modules of their own: a MoE model's
// pre-MLP norm costs time, while a dense Llama's norms (fused into their
// GEMMs) are not recomputed, so neither its time nor its memory moves.
TEST(MoePredictTest, RecomputingLayernormCostsOnlyWhereANormIsItsOwnModule) {
  Job moe = Qwen3(8);
  Job moe_norms = moe;
  moe_norms.plan.recompute = Recompute::kSelective;
  moe_norms.plan.recompute_modules = kRecomputeLayernorm;
  EXPECT_GT(Ms(moe_norms), Ms(moe));
  Job dense = moe;
  dense.model = *ModelPreset("llama3-8b");
  dense.plan.expert_parallel = 1;
  Job dense_norms = dense;
  dense_norms.plan.recompute = Recompute::kSelective;
  dense_norms.plan.recompute_modules = kRecomputeLayernorm;
  EXPECT_DOUBLE_EQ(Ms(dense_norms), Ms(dense));
  EXPECT_EQ(PeakBytes(dense), PeakBytes(dense_norms));
}

TEST(MoePredictTest, OverlapHidesTokenExchange) {
  Job job = Qwen3(64);
  Job overlapped = job;
  overlapped.plan.moe.overlap = true;
  EXPECT_LT(Ms(overlapped), Ms(job));
}

// The all-to-all model: inside a node over NVLink; across nodes bounded by
// each rank's share of the NIC, so it gets no faster past a few nodes
// (DeepEP's published H800 figures flatten from EP 16 to 64).
TEST(MoeAllToAllTest, AcrossNodesIsNicBoundAndFlattens) {
  const GpuSpec gpu = *GpuByName("h100-sxm5-80gb");
  const LinkBandwidths links{gpu.default_intra_node_bandwidth_bytes_per_s,
                             gpu.default_inter_node_bandwidth_bytes_per_s};
  const AnalyticalParams params = DefaultAnalyticalParams();
  const double bytes = 64e6;
  auto ns = [&](int64_t ranks) {
    const int64_t per_node = std::min<int64_t>(ranks, 8);
    return AnalyticalCollectiveNs(Collective::kAllToAll, bytes,
                                  CommGroup{ranks, per_node, static_cast<double>(per_node) / 8},
                                  links, params);
  };
  EXPECT_LT(ns(8), ns(16));
  EXPECT_LT(ns(16), ns(32));
  EXPECT_LT(ns(32), ns(64));
  // Past EP 64 more ranks neither speed it up nor slow it much: the off-node
  // share approaches all of it, through the same NIC share.
  EXPECT_GE(ns(256), ns(64));
  EXPECT_LT(ns(256), 1.15 * ns(64));
  // The NIC share per rank (400 GB/s per node / 8) sets the floor.
  const double nic_per_rank = links.inter_node_bytes_per_s / 8 * params.inter_node_efficiency;
  EXPECT_GT(ns(256), 0.9 * bytes / nic_per_rank * 1e9);
}

TEST(MoePredictTest, OneExpertBehavesLikeTheDenseMlp) {
  // A MoE of one expert of the dense width, top-1, no EP, is the dense model
  // plus a router, a permutation and grouped GEMMs of one group: a little
  // slower, not much.
  Job dense;
  dense.model = *ModelPreset("llama3-8b");
  dense.model.seq_len = 4096;
  dense.cluster = DefaultCluster(*GpuByName("h100-sxm5-80gb"), 8);
  dense.plan.data_parallel = 8;
  dense.plan.global_batch = 64;
  dense.plan.dtype = DType::kBf16;
  Job moe = dense;
  moe.model.moe = {.num_experts = 1, .top_k = 1, .expert_ffn = dense.model.ffn()};
  const double d = Ms(dense), m = Ms(moe);
  EXPECT_GT(m, d);
  EXPECT_LT(m, 1.15 * d);
  // And its model FLOPs are the dense model's: one active expert of the same width.
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction pd, PredictMoe(dense, Granularity::kOperator));
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction pm, PredictMoe(moe, Granularity::kOperator));
  EXPECT_NEAR(pm.model_flops / pd.model_flops, 1.0, 1e-9);
}

TEST(MoePredictTest, ModelFlopsCountActiveExpertsOnly) {
  const Job job = Qwen3(8);
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction p, PredictMoe(job, Granularity::kOperator));
  // 6 * active parameters per token is the bulk of it (attention scores and
  // the logit layer's padding make up the rest).
  const double tokens = static_cast<double>(job.plan.global_batch * job.model.seq_len);
  const double six_n = 6 * ActiveParameterCount(job.model) * tokens;
  EXPECT_GT(p.model_flops, 0.9 * six_n);
  EXPECT_LT(p.model_flops, 1.5 * six_n);
  EXPECT_LT(p.model_flops, 0.3 * 6 * ModelParameterCount(job.model) * tokens);
}

// DeepEP's buffers (the flex dispatcher), by hand from its size hints:
// DeepSeek-V3's hidden 7168 at EP 64 holds 10 x 8 x 288 x (14,336 + 2,056)
// NVLink bytes and 10 x 8 x 2 x 140 x (14,336 + 2,072) RDMA bytes, plus a
// 32 MiB workspace; one node's EP 8 has no RDMA buffer; alltoall none.
TEST(MoeMemoryTest, TheFlexDispatcherHoldsDeepEpsBuffers) {
  Job job;
  job.model = *ModelPreset("deepseek-v3");
  job.cluster = DefaultCluster(*GpuByName("h100-sxm5-80gb"), 1024);
  job.plan.tensor_parallel = 2;
  job.plan.pipeline_parallel = 8;
  job.plan.data_parallel = 64;
  job.plan.expert_parallel = 64;
  job.plan.global_batch = 1024;
  job.plan.moe.dispatcher = MoeDispatcher::kFlex;
  const double nvl = 10.0 * 8 * 288 * (14336 + 2056), rdma = 10.0 * 8 * 2 * 140 * (14336 + 2072);
  EXPECT_DOUBLE_EQ(DispatcherBufferBytes(job), nvl + rdma + 32.0 * (1 << 20));
  const MemoryEstimate flex = EstimateMemory(job);
  job.plan.expert_parallel = 8;
  EXPECT_DOUBLE_EQ(DispatcherBufferBytes(job), 10.0 * 8 * 256 * (14336 + 2056) + 32.0 * (1 << 20));
  job.plan.expert_parallel = 64;
  job.plan.moe.dispatcher = MoeDispatcher::kAllToAll;
  EXPECT_EQ(DispatcherBufferBytes(job), 0);
  const MemoryEstimate alltoall = EstimateMemory(job);
  // The same everywhere but the reserve: every stage holds the buffers.
  ASSERT_EQ(flex.stages.size(), alltoall.stages.size());
  for (size_t s = 0; s < flex.stages.size(); ++s) {
    EXPECT_DOUBLE_EQ(flex.stages[s].reserve_bytes - alltoall.stages[s].reserve_bytes,
                     nvl + rdma + 32.0 * (1 << 20));
  }
}

// HybridEP's buffers, by hand from DeepEP's hybrid-ep branch: Qwen3-30B-A3B
// (hidden 2048, 128 experts) at EP 16 over two nodes, 4,096 tokens a rank:
// 4096 x 16 x (4096 + 4 x 8 x 8 + 64) NVLink bytes (+ 8 x 64 x 16 flags),
// the routing map's all-gather 4096 x 16 x 8 x 16, and the RDMA staging
// 4096 x ((4096 + 512 + 64) + (12288 + 768 + 64)) (+ 32 x 66).
TEST(MoeMemoryTest, HybridEpSizesItsBuffersForEveryRanksTokens) {
  Job job;
  job.model = *ModelPreset("qwen3-30b-a3b");
  job.cluster = DefaultCluster(*GpuByName("h100-sxm5-80gb"), 16);
  job.plan.data_parallel = 16;
  job.plan.expert_parallel = 16;
  job.plan.global_batch = 64;
  job.plan.moe.dispatcher = MoeDispatcher::kHybridEp;
  const double nvl = 4096.0 * 16 * (4096 + 4 * 8 * 8 + 64) + 8.0 * 64 * 16;
  const double allgather = 4096.0 * 16 * 8 * 16;
  const double rdma = 4096.0 * ((4096 + 512 + 64) + (12288 + 768 + 64)) + 32.0 * 66;
  EXPECT_DOUBLE_EQ(DispatcherBufferBytes(job), nvl + allgather + rdma);
  // Twice the tokens, about twice the buffers; DeepEP's do not grow.
  Job longer = job;
  longer.model.seq_len = 8192;
  EXPECT_GT(DispatcherBufferBytes(longer), 1.9 * DispatcherBufferBytes(job));
  longer.plan.moe.dispatcher = MoeDispatcher::kFlex;
  job.plan.moe.dispatcher = MoeDispatcher::kFlex;
  EXPECT_DOUBLE_EQ(DispatcherBufferBytes(longer), DispatcherBufferBytes(job));
}

TEST(MoeMemoryTest, ExpertStatesSplitOverEpAndShardOverEdp) {
  Job job;
  job.model = *ModelPreset("mixtral-8x7b");
  job.cluster = DefaultCluster(*GpuByName("h100-sxm5-80gb"), 64);
  job.plan.tensor_parallel = 1;
  job.plan.data_parallel = 16;
  job.plan.pipeline_parallel = 4;
  job.plan.global_batch = 64;
  job.plan.expert_parallel = 8;
  job.plan.data_parallel_sharding = DataParallelSharding::kOptimizer;
  ASSERT_TRUE(ValidateJob(job).ok());
  const MemoryEstimate mem = EstimateMemory(job);
  // Stage 1 by hand: 8 layers, each with attention, router and norms (dense,
  // / t = 1) and 8 experts of 3*4096*14336 over ep = 8.
  const double h = 4096;
  const double attention = 2 * h * 4096 + 2 * h * 1024 + h;
  const double dense = 8 * (attention + 8 * h + h);
  const double experts = 8 * 8 * 3 * h * 14336 / 8;
  EXPECT_NEAR(mem.stages[1].parameters / (dense + experts), 1.0, 1e-12);
  // fp16 weights and gradients (4 bytes) of everything; fp32 optimizer states
  // (12 bytes) of the dense part over d = 16 and of the experts over edp = 2.
  const double states = 4 * (dense + experts) + 12 * dense / 16 + 12 * experts / 2;
  EXPECT_NEAR(mem.stages[1].model_states_bytes / states, 1.0, 1e-12);
}

TEST(MoePredictTest, EveryMoePresetPredictsAtAPlausiblePlan) {
  struct Row {
    const char* preset;
    int64_t t, p, ep, gpus;
  } rows[] = {{"qwen3-30b-a3b", 1, 1, 8, 16},  {"gpt-oss-20b", 1, 1, 8, 16},
              {"mixtral-8x7b", 1, 4, 8, 64},   {"gpt-oss-120b", 1, 4, 16, 64},
              {"mixtral-8x22b", 2, 8, 8, 256}, {"qwen3-235b-a22b", 2, 8, 32, 256},
              {"deepseek-v3", 1, 16, 64, 1024}};
  for (const Row& r : rows) {
    SCOPED_TRACE(r.preset);
    Job job;
    job.model = *ModelPreset(r.preset);
    job.cluster = DefaultCluster(*GpuByName("h100-sxm5-80gb"), r.gpus);
    job.plan.tensor_parallel = r.t;
    job.plan.pipeline_parallel = r.p;
    job.plan.data_parallel = r.gpus / (r.t * r.p);
    job.plan.expert_parallel = r.ep;
    job.plan.sequence_parallel = r.t > 1;
    job.plan.global_batch = 1024;
    job.plan.dtype = DType::kBf16;
    if (job.model.num_layers % r.p != 0) job.model.num_layers -= job.model.num_layers % r.p;
    ASSERT_TRUE(ValidateJob(job).ok()) << ValidateJob(job);
    VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction p, PredictMoe(job, Granularity::kOperator));
    EXPECT_GT(p.mfu, 0.02);
    EXPECT_LT(p.mfu, 0.8);
  }
}

}  // namespace
}  // namespace vtrain
