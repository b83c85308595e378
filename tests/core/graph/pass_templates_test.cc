#include "core/graph/pass_templates.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/graph/template_writer.h"
#include "core/spec/moe.h"
#include "gtest/gtest.h"
#include "tests/testing/spec_builders.h"

namespace vtrain::internal {
namespace {

using ::vtrain::testing::TinyJob;
using ::vtrain::testing::WithPlan;

// A profile set whose collectives take one nanosecond per byte each rank
// sends (no latency, no in-training overhead, 1 GB/s at efficiency 1), so a
// template's tensor-parallel time is the bytes its collectives put on the
// wire.
ProfileSet WireByteProfiles() {
  ProfileSet set;
  set.name = "wire-bytes";
  set.gpu = "a100-sxm4-80gb";
  set.params.intra_node_latency_ns = 0;
  set.params.intra_node_latency_per_rank_ns = 0;
  set.params.inter_node_latency_ns = 0;
  set.params.intra_node_efficiency = 1;
  set.params.inter_node_efficiency = 1;
  set.params.tp_collective_overhead_ns = 0;
  set.params.tp_collective_overhead_per_rank_ns = 0;
  return set;
}

struct Made {
  StageTemplates templates;
  std::vector<std::string> labels;
};

// The templates of a middle stage (no embedding, no logit) of `job`.
Made MakeMiddle(Job job, bool ends = false, const ProfileSet& set = WireByteProfiles()) {
  job.cluster.intra_node_bandwidth_bytes_per_s = 1e9;
  ProfileLookup lookup(set, job.cluster.gpu, {1e9, 1e9});
  Made made;
  made.templates = MakeStageTemplates(
      job, lookup, Granularity::kKernel,
      {.num_layers = job.model.num_layers / (job.plan.pipeline_parallel * job.plan.virtual_stages),
       .embedding = ends,
       .loss = ends},
      [&](const std::string& name) {
        for (size_t i = 0; i < made.labels.size(); ++i) {
          if (made.labels[i] == name) return static_cast<int32_t>(i);
        }
        made.labels.push_back(name);
        return static_cast<int32_t>(made.labels.size() - 1);
      });
  return made;
}

int64_t CountLabel(const Made& made, const ActionTemplate& t, const std::string& name) {
  int64_t n = 0;
  for (const Segment& s : t.segments) {
    for (const Item& i : s.items) n += made.labels[i.label] == name ? 1 : 0;
  }
  return n;
}

TEST(PassTemplatesTest, SequenceParallelismMovesExactlyKorthikantisBytes) {
  // Korthikanti et al. 2022, §4.2.2: with sequence parallelism each of the
  // layer's two forward all-reduces becomes a reduce-scatter and an
  // all-gather, which move the same bytes: a ring all-reduce of N bytes
  // sends 2 (t-1)/t N per rank, a reduce-scatter and an all-gather (t-1)/t N
  // each. TinyJob: b*s*h*2 = 1 * 128 * 64 * 2 = 16,384 bytes; 8 layers, one
  // stage holds them all (p = 1), 2 blocks per layer.
  for (int64_t t : {2, 4}) {
    SCOPED_TRACE(absl::StrCat("t=", t));
    Job job = WithPlan(TinyJob(), t, 1, 1, 1, 4);
    job.plan.recompute = Recompute::kNone;
    const Made plain = MakeMiddle(job);
    job.plan.sequence_parallel = true;
    const Made sp = MakeMiddle(job);
    const double n = 16'384;
    const double per_layer = 2 * 2 * static_cast<double>(t - 1) / static_cast<double>(t) * n;
    EXPECT_EQ(plain.templates.forward.tensor_parallel_ns, std::llround(8 * per_layer));
    EXPECT_EQ(sp.templates.forward.tensor_parallel_ns, std::llround(8 * per_layer));
    EXPECT_EQ(sp.templates.backward.tensor_parallel_ns, std::llround(8 * per_layer));
    // 16 all-reduces forward become 16 reduce-scatters and 16 all-gathers.
    EXPECT_EQ(CountLabel(plain, plain.templates.forward, "tp_all_reduce"), 16);
    EXPECT_EQ(CountLabel(sp, sp.templates.forward, "tp_all_reduce"), 0);
    EXPECT_EQ(CountLabel(sp, sp.templates.forward, "tp_reduce_scatter"), 16);
    EXPECT_EQ(CountLabel(sp, sp.templates.forward, "tp_all_gather"), 16);
  }
  // With t = 1 sequence parallelism is a no-op.
  Job job = WithPlan(TinyJob(), 1, 1, 1, 1, 4);
  job.plan.sequence_parallel = true;
  EXPECT_EQ(MakeMiddle(job).templates.forward.tensor_parallel_ns, 0);
}

// The host time a TP collective holds its rank: host_dispatch_ns plus
// tp_host_sync_ns + tp_host_sync_per_rank_ns * (ranks - 1)^exponent, the
// ranks counted inside one node only.
TEST(PassTemplatesTest, TensorParallelHostSyncFollowsThePowerLawUpToANode) {
  ProfileSet set = WireByteProfiles();
  set.params.host_dispatch_ns = 1000;
  set.params.tp_host_sync_ns = 500;
  set.params.tp_host_sync_per_rank_ns = 10;
  set.params.tp_host_sync_exponent = 3;
  auto tp_host_ns = [&](int64_t t, int64_t gpus_per_node) {
    Job job = WithPlan(TinyJob(), t, 1, 1, 1, 4);
    job.model.num_heads = 16;
    job.cluster.gpus_per_node = gpus_per_node;
    const Made m = MakeMiddle(job, false, set);
    for (const Segment& s : m.templates.forward.segments) {
      for (const Item& i : s.items) {
        if (i.kind == TaskKind::kTensorParallel) return i.host_ns;
      }
    }
    return int64_t{-1};
  };
  EXPECT_EQ(tp_host_ns(2, 8), 1000 + 500 + 10 * 1);
  EXPECT_EQ(tp_host_ns(4, 8), 1000 + 500 + 10 * 27);
  EXPECT_EQ(tp_host_ns(8, 8), 1000 + 500 + 10 * 343);
  // Sixteen ranks over two nodes wait as the eight of one node do.
  EXPECT_EQ(tp_host_ns(16, 8), tp_host_ns(8, 8));
  EXPECT_EQ(tp_host_ns(8, 4), tp_host_ns(4, 8));
  set.params.tp_host_sync_exponent = 1;
  EXPECT_EQ(tp_host_ns(8, 8), 1000 + 500 + 10 * 7);
}

TEST(PassTemplatesTest, SequenceParallelismShortensNormAndDropoutKernelsOnly) {
  Job job = WithPlan(TinyJob(), 4, 1, 1, 1, 4);
  job.model.hidden_size = 4096;
  job.model.num_heads = 32;
  job.model.seq_len = 2048;
  const Made plain = MakeMiddle(job);
  job.plan.sequence_parallel = true;
  const Made sp = MakeMiddle(job);
  auto kernel_ns = [](const Made& m, const std::string& name) {
    for (const Segment& s : m.templates.forward.segments) {
      for (const Item& i : s.items) {
        if (m.labels[i.label] == name) return i.duration_ns;
      }
    }
    return int64_t{-1};
  };
  EXPECT_LT(kernel_ns(sp, "layernorm_fwd"), kernel_ns(plain, "layernorm_fwd"));
  EXPECT_LT(kernel_ns(sp, "bias_dropout_add_fwd"), kernel_ns(plain, "bias_dropout_add_fwd"));
  EXPECT_EQ(kernel_ns(sp, "gemm_qkv_fwd"), kernel_ns(plain, "gemm_qkv_fwd"));
  EXPECT_EQ(kernel_ns(sp, "bgemm_attention_scores_fwd"),
            kernel_ns(plain, "bgemm_attention_scores_fwd"));
}

TEST(PassTemplatesTest, SelectiveRecomputationRerunsOnlyTheAttentionCore) {
  Job job = WithPlan(TinyJob(), 1, 1, 1, 1, 4);
  job.model.attention_impl = AttentionImpl::kUnfused;
  job.plan.recompute = Recompute::kSelective;
  const Made selective = MakeMiddle(job);
  // Per layer: the core's four kernels once more, before attention_bwd.
  EXPECT_EQ(CountLabel(selective, selective.templates.backward, "bgemm_attention_scores_fwd"), 8);
  EXPECT_EQ(CountLabel(selective, selective.templates.backward, "scaled_masked_softmax_fwd"), 8);
  EXPECT_EQ(CountLabel(selective, selective.templates.backward, "gemm_qkv_fwd"), 0);
  job.plan.recompute = Recompute::kFull;
  const Made full = MakeMiddle(job);
  EXPECT_EQ(CountLabel(full, full.templates.backward, "gemm_qkv_fwd"), 8);
  EXPECT_LT(selective.templates.backward.TaskNs(), full.templates.backward.TaskNs());
}

TEST(PassTemplatesTest, ShardingChangesTheGradientCollectiveAndTheOptimizerShare) {
  Job job = WithPlan(TinyJob(), 1, 4, 1, 1, 4);
  EXPECT_EQ(GradientCollective(job), Collective::kAllReduce);
  const Made none = MakeMiddle(job, /*ends=*/true);
  job.plan.data_parallel_sharding = DataParallelSharding::kOptimizer;
  EXPECT_EQ(GradientCollective(job), Collective::kReduceScatter);
  const Made zero1 = MakeMiddle(job, /*ends=*/true);
  // The same gradients, reduce-scattered; the updated parameters gathered
  // after the optimizer step, which updates a quarter of them.
  EXPECT_DOUBLE_EQ(zero1.templates.gradient_bytes, none.templates.gradient_bytes);
  EXPECT_DOUBLE_EQ(none.templates.gradient_bytes, none.templates.parameters_per_gpu * 2);
  EXPECT_EQ(CountLabel(zero1, zero1.templates.optimizer, "dp_param_all_gather"), 1);
  EXPECT_EQ(CountLabel(none, none.templates.optimizer, "dp_param_all_gather"), 0);
  // FSDP: the layers' gradients leave layer by layer; only the embedding,
  // final norm and position table are left for the end.
  job.plan.data_parallel_sharding = DataParallelSharding::kFull;
  const Made fsdp = MakeMiddle(job, /*ends=*/true);
  const double h = 64, vocab = 512, seq = 128;
  EXPECT_DOUBLE_EQ(fsdp.templates.gradient_bytes, (vocab * h + seq * h + 2 * h) * 2);
  EXPECT_EQ(CountLabel(fsdp, fsdp.templates.forward, "fsdp_exposed"), 8);
  EXPECT_EQ(CountLabel(fsdp, fsdp.templates.backward, "fsdp_exposed"), 8);
  // Context-parallel ranks reduce gradients too: d * c.
  job.plan.context_parallel = 2;
  EXPECT_EQ(GradientRanks(job), 8);
  EXPECT_EQ(DataParallelGroup(job).ranks, 8);
}

TEST(PassTemplatesTest, ContextParallelismSplitsTokensAndExchangesKeysAndValues) {
  Job job = WithPlan(TinyJob(), 1, 1, 1, 1, 4);
  job.plan.recompute = Recompute::kNone;
  job.model.hidden_size = 4096;
  job.model.num_heads = 32;
  job.model.seq_len = 4096;
  job.model.attention_impl = AttentionImpl::kUnfused;  // the score GEMM is its own kernel
  const double whole = ActivationBytes(job);
  const Made plain = MakeMiddle(job);
  job.plan.context_parallel = 2;
  job.cluster.num_gpus = 2;
  EXPECT_DOUBLE_EQ(ActivationBytes(job), whole / 2);
  const Made cp = MakeMiddle(job);
  // One ring per attention, forward and backward.
  EXPECT_EQ(CountLabel(cp, cp.templates.forward, "cp_ring_exposed"), 8);
  EXPECT_EQ(CountLabel(cp, cp.templates.backward, "cp_ring_exposed"), 8);
  EXPECT_EQ(CountLabel(plain, plain.templates.forward, "cp_ring_exposed"), 0);
  // At 1 ns per byte a K and a V block, 2 * b * s/c * h * 2 = 33,554,432
  // bytes, take 33,554,432 ns; c - 1 = 1 exchange, less the half of the
  // attention core that hides it: 8 rings take at most 8 * 33,554,432 ns,
  // and more than nothing.
  EXPECT_GT(cp.templates.forward.tensor_parallel_ns, 0);
  EXPECT_LE(cp.templates.forward.tensor_parallel_ns, 8 * 33'554'432);
  // Half the queries against every key: the score GEMM halves.
  auto kernel_ns = [](const Made& m, const std::string& name) {
    for (const Segment& s : m.templates.forward.segments) {
      for (const Item& i : s.items) {
        if (m.labels[i.label] == name) return i.duration_ns;
      }
    }
    return int64_t{-1};
  };
  EXPECT_NEAR(static_cast<double>(kernel_ns(cp, "bgemm_attention_scores_fwd")),
              static_cast<double>(kernel_ns(plain, "bgemm_attention_scores_fwd")) / 2,
              0.1 * static_cast<double>(kernel_ns(plain, "bgemm_attention_scores_fwd")));
  EXPECT_LT(kernel_ns(cp, "gemm_qkv_fwd"), kernel_ns(plain, "gemm_qkv_fwd"));
}

// --cp-comm a2a: per attention block, Q, K, V all-to-all onto the head
// split and the output back, not overlapped, and no ring; a2a+p2p: the
// all-to-all inside groups of cp_a2a_size and a ring over the groups.
TEST(PassTemplatesTest, ContextParallelAllToAllMovesQkvAndTheOutput) {
  Job job = WithPlan(TinyJob(), 1, 1, 1, 1, 4);  // h = 64, 4 heads, s = 128
  job.plan.recompute = Recompute::kNone;
  job.plan.context_parallel = 2;
  job.cluster.num_gpus = 2;
  job.plan.cp_comm = ContextParallelComm::kA2A;
  ASSERT_TRUE(ValidateJob(job).ok());
  const Made a2a = MakeMiddle(job);
  EXPECT_EQ(CountLabel(a2a, a2a.templates.forward, "cp_ring_exposed"), 0);
  EXPECT_EQ(CountLabel(a2a, a2a.templates.forward, "cp_all_to_all"), 8);
  EXPECT_EQ(CountLabel(a2a, a2a.templates.backward, "cp_all_to_all"), 8);
  // A rank's 64 tokens: the output 64 * 64 * 2 = 8,192 bytes, Q, K and V
  // three times that; an all-to-all of 2 ranks sends half of each, at 1 ns a
  // byte: 4,096 + 12,288 ns per attention block, both ways.
  EXPECT_EQ(a2a.templates.forward.tensor_parallel_ns, 8 * (4096 + 12'288));
  EXPECT_EQ(a2a.templates.backward.tensor_parallel_ns, 8 * (4096 + 12'288));
  // Hierarchical: c = 4 in all-to-all pairs, a ring over the 2 pairs.
  job.plan.context_parallel = 4;
  job.cluster.num_gpus = 4;
  job.plan.cp_comm = ContextParallelComm::kA2AP2P;
  job.plan.cp_a2a_size = 2;
  ASSERT_TRUE(ValidateJob(job).ok());
  EXPECT_EQ(job.plan.cp_a2a_ranks(8), 2);
  EXPECT_EQ(job.plan.cp_ring_ranks(8), 2);
  const Made both = MakeMiddle(job);
  EXPECT_EQ(CountLabel(both, both.templates.forward, "cp_all_to_all"), 8);
  EXPECT_EQ(CountLabel(both, both.templates.forward, "cp_ring_exposed"), 8);
  // 32 tokens a rank: 2,048 + 6,144 ns of all-to-all per block, and a ring
  // step's exposed part on top.
  EXPECT_GE(both.templates.forward.tensor_parallel_ns, 8 * (2048 + 6144));
  // The default all-to-all group: the largest divisor of c with c1 * t
  // ranks in one NVLink domain.
  job.plan.cp_a2a_size = 0;
  job.plan.tensor_parallel = 2;
  job.plan.context_parallel = 8;
  EXPECT_EQ(job.plan.cp_a2a_ranks(8), 4);
  EXPECT_EQ(job.plan.cp_a2a_ranks(72), 8);
  EXPECT_EQ(job.plan.cp_a2a_ranks(2), 1);
}

// --tp-comm-overlap: each sequence-parallel all-gather pipelines with the
// GEMM after it and each reduce-scatter with the GEMM before it, in t
// chunks; what stays exposed is max(0, c - g * (t - 1) / t), and exposed
// plus hidden is the collective's whole time.
TEST(PassTemplatesTest, TensorParallelOverlapChargesWhatTheGemmDoesNotCover) {
  for (int64_t t : {2, 4}) {
    SCOPED_TRACE(absl::StrCat("t=", t));
    Job job = WithPlan(TinyJob(), t, 1, 1, 1, 4);
    job.plan.recompute = Recompute::kNone;
    job.plan.sequence_parallel = true;
    const Made plain = MakeMiddle(job);
    job.plan.tp_comm_overlap = true;
    const Made overlapped = MakeMiddle(job);
    // Each collective moves (t - 1) / t of the 16,384-byte buffer: 1 ns a byte.
    const double c = 16'384.0 * static_cast<double>(t - 1) / static_cast<double>(t);
    auto check = [&](const ActionTemplate& plain_pass, const ActionTemplate& pass) {
      const std::vector<Item>& items = pass.segments.front().items;
      int64_t checked = 0;
      for (size_t i = 0; i < items.size(); ++i) {
        if (items[i].kind != TaskKind::kTensorParallel) continue;
        const bool gather = overlapped.labels[items[i].label] == "tp_all_gather";
        // The GEMM it pipelines with: the next one for a gather, the one
        // before for a reduce-scatter.
        double g = -1;
        const int64_t step = gather ? 1 : -1;
        for (int64_t k = static_cast<int64_t>(i);
             g < 0 && k >= 0 && k < static_cast<int64_t>(items.size()); k += step) {
          const Item& item = items[static_cast<size_t>(k)];
          if (overlapped.labels[item.label].rfind("gemm_", 0) == 0) {
            g = static_cast<double>(item.duration_ns);
          }
        }
        ASSERT_GT(g, 0);
        const double want = std::max(0.0, c - g * static_cast<double>(t - 1) / t);
        EXPECT_NEAR(static_cast<double>(items[i].duration_ns), want, 1.0);
        ++checked;
      }
      EXPECT_EQ(checked, 8 * 4);  // 8 layers, a gather and a scatter per block
      EXPECT_LT(pass.tensor_parallel_ns, plain_pass.tensor_parallel_ns);
      EXPECT_EQ(pass.tensor_parallel_ns + pass.tensor_parallel_hidden_ns,
                plain_pass.tensor_parallel_ns);
      EXPECT_EQ(plain_pass.tensor_parallel_hidden_ns, 0);
    };
    check(plain.templates.forward, overlapped.templates.forward);
    check(plain.templates.backward, overlapped.templates.backward);
  }
  // Without sequence parallelism there is nothing to overlap (and
  // ValidateJob refuses the combination); with t = 1 it is a no-op.
  Job job = WithPlan(TinyJob(), 1, 1, 1, 1, 4);
  job.plan.sequence_parallel = true;
  job.plan.tp_comm_overlap = true;
  EXPECT_EQ(MakeMiddle(job).templates.forward.tensor_parallel_hidden_ns, 0);
}

// --overlap-param-gather: the distributed optimizer's all-gather runs bucket
// by bucket under the next forward; the first bucket is always waited for.
TEST(PassTemplatesTest, ParameterGatherOverlapHidesAllButTheFirstBucket) {
  Job job = WithPlan(TinyJob(), 1, 4, 1, 1, 4);
  job.plan.data_parallel_sharding = DataParallelSharding::kOptimizer;
  auto gather_item = [](const Made& m) {
    for (const Segment& s : m.templates.optimizer.segments) {
      for (const Item& i : s.items) {
        if (m.labels[i.label] == "dp_param_all_gather") return i.duration_ns;
      }
    }
    return int64_t{-1};
  };
  const Made plain = MakeMiddle(job, /*ends=*/true);
  const int64_t all = plain.templates.param_gather_ns;
  ASSERT_GT(all, 0);
  EXPECT_EQ(gather_item(plain), all);
  EXPECT_EQ(plain.templates.param_gather_hidden_ns, 0);
  job.plan.param_gather_overlap = true;
  // Buckets of 1,000 bytes: the wire-byte gather takes 3/4 ns a byte.
  job.plan.bucket_size_bytes = 1000;
  const Made overlapped = MakeMiddle(job, /*ends=*/true);
  const double bytes = overlapped.templates.parameters_per_gpu * 2;
  const double first = static_cast<double>(all) / std::ceil(bytes / 1000);
  const double want =
      std::max(first, static_cast<double>(all) - overlapped.templates.forward.TaskNs());
  EXPECT_NEAR(static_cast<double>(overlapped.templates.param_gather_ns), want, 1.0);
  EXPECT_LT(overlapped.templates.param_gather_ns, all);
  EXPECT_EQ(gather_item(overlapped), overlapped.templates.param_gather_ns);
  EXPECT_EQ(overlapped.templates.param_gather_ns + overlapped.templates.param_gather_hidden_ns,
            all);
  // One bucket holds everything: nothing can be hidden.
  job.plan.bucket_size_bytes = int64_t{1} << 40;
  EXPECT_EQ(MakeMiddle(job, /*ends=*/true).templates.param_gather_ns, all);
}

// --overlap-grad-reduce buckets the routed experts' gradients beside the
// last backward (Megatron-Core's expert-parallel DDP buffers): only the last
// bucket and what the backward cannot hold stay exposed; one bucket holding
// everything hides nothing.
TEST(PassTemplatesTest, BucketedExpertGradientsHideBesideTheLastBackward) {
  Job job;
  job.model = *ModelPreset("qwen3-30b-a3b");
  job.model.num_layers = 2;
  job.cluster = DefaultCluster(*GpuByName("h100-sxm5-80gb"), 64);
  job.plan.data_parallel = 64;
  job.plan.expert_parallel = 8;  // expert data-parallel 8
  job.plan.global_batch = 64;
  job.plan.dtype = DType::kBf16;
  job.plan.recompute = Recompute::kNone;
  const int64_t after = MakeMiddle(job).templates.expert_reduce_ns;
  ASSERT_GT(after, 0);
  job.plan.gradient_bucketing = true;
  job.plan.bucket_size_bytes = int64_t{1} << 20;
  const Made beside = MakeMiddle(job);
  EXPECT_GT(beside.templates.expert_reduce_ns, 0);
  EXPECT_LT(beside.templates.expert_reduce_ns, after);
  // At least the last of its buckets.
  const double buckets = std::ceil(beside.templates.expert_gradient_bytes / (1 << 20));
  EXPECT_GE(static_cast<double>(beside.templates.expert_reduce_ns),
            static_cast<double>(after) / buckets - 1);
  job.plan.bucket_size_bytes = int64_t{1} << 40;
  EXPECT_EQ(MakeMiddle(job).templates.expert_reduce_ns, after);
}

// Megatron's merged 1F1B layer, by hand (PairedMoeExposedNs): phases
// max(combine, fwd attention), max(2 dispatch, bwd moe + fwd moe, ...),
// max(combine, bwd attention), less the compute, halved per pass.
TEST(PairedMoeExposedTest, HandComputedPhases) {
  // Compute-bound: every exchange fits beside compute.
  EXPECT_DOUBLE_EQ(PairedMoeExposedNs({3, 2}, {4, 5}, {8, 10}, 0), 0);
  // Exchange-bound: 10 + 20 + 10 = 40 against 15 of compute.
  EXPECT_DOUBLE_EQ(PairedMoeExposedNs({10, 10}, {2, 3}, {4, 6}, 0), 12.5);
  // The forward's experts wait for its dispatch: 5 + 10 beats both the
  // two dispatches (10) and the two MoE blocks (12); 4 + 15 + 6 = 25
  // against 22.
  EXPECT_DOUBLE_EQ(PairedMoeExposedNs({5, 1}, {4, 10}, {6, 2}, 0), 1.5);
  // With 20% of the SMs held by the exchange, compute beside it slows:
  // 4 + 0.4, 15 + 1.2, 8 + 0.4 = 29 against 27.
  EXPECT_NEAR(PairedMoeExposedNs({3, 2}, {4, 5}, {8, 10}, 0.2), 1.0, 1e-9);
  // Never more than the exchange itself.
  EXPECT_LE(PairedMoeExposedNs({7, 9}, {1, 1}, {1, 1}, 0.5), 16);
}

// Megatron's warm-up counts: rank r runs (p - r - 1) * 2 + (v - 1) * p + 1
// forwards alone (capped at m * v), and as many backwards.
TEST(PairedMoeExposedTest, PairedPassShareCountsWarmUp) {
  ParallelPlan plan;
  plan.data_parallel = 1;
  plan.micro_batch = 1;
  plan.global_batch = 8;
  plan.pipeline_parallel = 1;
  EXPECT_DOUBLE_EQ(PairedPassShare(plan), 7.0 / 8);
  plan.global_batch = 4;
  plan.pipeline_parallel = 2;
  plan.virtual_stages = 2;
  // 8 passes; warm-ups 5 and 3.
  EXPECT_DOUBLE_EQ(PairedPassShare(plan), (3.0 / 8 + 5.0 / 8) / 2);
  plan.global_batch = 2;
  plan.pipeline_parallel = 4;
  // 4 passes, every rank's warm-up longer: nothing pairs.
  EXPECT_DOUBLE_EQ(PairedPassShare(plan), 0);
}

// The host's wait for the token counts (TemplateWriter::HostSync): the
// items after it are dispatched only once the GPU has drained, in both
// granularities alike. A 1,000 ns kernel dispatched in 10 ns, then three
// 5 ns kernels of 100 ns of host time each: without the wait the host is
// far ahead and they run back to back (1,015 ns); with it each waits for
// its own dispatch (1,000 + 3 x 100 + 5 = 1,305 ns).
int64_t WrittenSpanNs(Granularity granularity, bool sync) {
  std::vector<std::string> labels;
  auto label = [&](const std::string& name) {
    labels.push_back(name);
    return static_cast<int32_t>(labels.size() - 1);
  };
  TemplateWriter w(label, granularity, /*collective_host_ns=*/10);
  ResolvedOperator long_op, short_ops;
  long_op.profile.kernels = {{.name = "long", .duration_ns = 1000, .host_ns = 10}};
  for (int i = 0; i < 3; ++i) {
    short_ops.profile.kernels.push_back({.name = "short", .duration_ns = 5, .host_ns = 100});
  }
  long_op.chain = ChainOf(long_op.profile.kernels);
  short_ops.chain = ChainOf(short_ops.profile.kernels);
  w.HostSync();  // before anything: nothing to wait for
  w.Operator(long_op);
  if (sync) w.HostSync();
  w.Operator(short_ops);
  const ActionTemplate t = std::move(w).Take(0);
  int64_t span = 0, last_gap = 0;
  for (const Segment& s : t.segments) {
    for (const Item& i : s.items) {
      span += i.duration_ns + i.gap_ns;
      last_gap = i.gap_ns;
    }
  }
  return span - last_gap;
}

TEST(TemplateWriterTest, HostSyncWaitsForTheGpuInBothGranularities) {
  for (Granularity g : {Granularity::kKernel, Granularity::kOperator}) {
    EXPECT_EQ(WrittenSpanNs(g, false), 1015);
    EXPECT_EQ(WrittenSpanNs(g, true), 1305);
  }
}

TEST(MoeHostSyncTest, SplitCutsBeforeThePermutationAndNeedsHostTimes) {
  std::vector<KernelRecord> kernels = {{.name = "rmsnorm_fwd", .duration_ns = 1, .host_ns = 1},
                                       {.name = "router_topk_fwd", .duration_ns = 1, .host_ns = 1},
                                       {.name = "moe_permute_row_map_fwd", .host_ns = 1},
                                       {.name = "moe_permute_fwd", .host_ns = 1},
                                       {.name = "grouped_gemm_fc1_fwd", .host_ns = 1}};
  std::vector<KernelRecord> route, experts;
  ASSERT_TRUE(MoeSyncSplit(kernels, route, experts));
  ASSERT_EQ(route.size(), 2u);
  ASSERT_EQ(experts.size(), 3u);
  EXPECT_EQ(experts.front().name, "moe_permute_row_map_fwd");
  // Measured kernels (no host times) keep their measured gaps: no split.
  kernels[1].host_ns = 0;
  route.clear();
  experts.clear();
  EXPECT_FALSE(MoeSyncSplit(kernels, route, experts));
  EXPECT_TRUE(route.empty());
  // Nothing to cut before.
  EXPECT_FALSE(MoeSyncSplit({{.name = "rmsnorm_fwd", .host_ns = 1}}, route, experts));
}

TEST(MoeHostSyncTest, DroplessDispatchWaitsPaddedCapacityDoesNot) {
  ParallelPlan plan;
  EXPECT_FALSE(MoeHostSyncs(plan));  // no expert parallelism: no exchange
  plan.expert_parallel = 8;
  EXPECT_TRUE(MoeHostSyncs(plan));
  for (MoeDispatcher d : {MoeDispatcher::kAllGather, MoeDispatcher::kFlex}) {
    plan.moe.dispatcher = d;
    EXPECT_TRUE(MoeHostSyncs(plan));
  }
  plan.moe.capacity_factor = 1.0;
  EXPECT_FALSE(MoeHostSyncs(plan));
}

// The alltoall dispatcher regroups the received copies by local expert and
// back: two full passes over them, and none for DeepEP, one local expert
// or no expert parallelism.
TEST(MoeHostSyncTest, AllToAllSortsTheReceivedCopiesTwice) {
  Job job = TinyJob();
  job.model.arch = Architecture::kLlama;
  job.model.moe = {.num_experts = 8, .top_k = 2, .expert_ffn = 64};
  job.model.hidden_size = 4096;  // 64 MiB of copies: past the kernel floor
  job.model.seq_len = 4096;
  job.plan.expert_parallel = 2;
  const AnalyticalParams params;
  const std::vector<KernelRecord> fwd = MoeChunkSortKernels(job, params, 1.0, false);
  ASSERT_EQ(fwd.size(), 2u);
  EXPECT_EQ(fwd[0].name, "moe_sort_chunks_fwd");
  EXPECT_GT(fwd[0].duration_ns, 0);
  EXPECT_GT(fwd[0].host_ns, 0);
  EXPECT_EQ(MoeChunkSortKernels(job, params, 1.0, true)[1].name, "moe_sort_chunks_bwd");
  // The busiest rank's load scales the bytes.
  const double at1 = static_cast<double>(fwd[0].duration_ns);
  EXPECT_GT(static_cast<double>(MoeChunkSortKernels(job, params, 4.0, false)[0].duration_ns), at1);
  job.plan.moe.dispatcher = MoeDispatcher::kFlex;
  EXPECT_TRUE(MoeChunkSortKernels(job, params, 1.0, false).empty());
  job.plan.moe.dispatcher = MoeDispatcher::kAllToAll;
  job.plan.expert_parallel = 8;  // one local expert
  EXPECT_TRUE(MoeChunkSortKernels(job, params, 1.0, false).empty());
  job.plan.expert_parallel = 1;
  EXPECT_TRUE(MoeChunkSortKernels(job, params, 1.0, false).empty());
}

}  // namespace
}  // namespace vtrain::internal
