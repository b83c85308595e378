// The communication groups, chunk layouts and sizes the stage templates
// use (declared in pass_templates.h): Megatron's rank order for tensor,
// data, context, pipeline and expert groups.
#include <algorithm>
#include <numeric>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/graph/pass_templates.h"
#include "core/spec/fabric.h"
#include "core/spec/moe.h"
#include "core/spec/pipeline_layout.h"

namespace vtrain::internal {
namespace {

int64_t JobRanks(const Job& job) {
  const ParallelPlan& p = job.plan;
  return p.tensor_parallel * p.context_parallel * p.data_parallel * p.pipeline_parallel;
}

// The spine slowdown of every group of one kind running at once: groups of
// `size` ranks, member k of group g at rank first(g) + k * stride, where the
// groups' first ranks are every rank whose index along this dimension is 0
// (block = size * stride: ranks r with (r % block) < stride start a group).
double StridedSpine(const Job& job, int64_t size, int64_t stride, double nic_share,
                    bool all_to_all = false) {
  if (job.cluster.fabric.flat() || size < 2) return 1;
  const int64_t ranks = JobRanks(job);
  SpineLoad load(job.cluster.fabric, job.cluster.gpus_per_node, ranks);
  std::vector<int64_t> members(static_cast<size_t>(size));
  for (int64_t first = 0; first < ranks; ++first) {
    if (first % (size * stride) >= stride) continue;
    for (int64_t k = 0; k < size; ++k) members[static_cast<size_t>(k)] = first + k * stride;
    if (all_to_all) {
      load.AddAllToAll(members, nic_share);
    } else {
      load.AddRing(members, nic_share);
    }
  }
  return load.Slowdown();
}

// The spine slowdown of the pipeline sends: every stage sends to the stage
// `apart` on at once (activations forward, gradients back), around the end
// for interleaving. Stages that start on node boundaries send node to node:
// one flow per node carrying its GPUs' shares together.
double PipelineSpine(const Job& job, int64_t apart, double nic_share) {
  const int64_t p = job.plan.pipeline_parallel, per_stage = JobRanks(job) / p;
  const int64_t gpn = NvlinkDomainGpus(job.cluster);
  SpineLoad load(job.cluster.fabric, gpn, JobRanks(job));
  const bool whole_nodes = per_stage % gpn == 0;
  const int64_t step = whole_nodes ? gpn : 1;
  const double share = whole_nodes ? nic_share * static_cast<double>(gpn) : nic_share;
  for (int64_t s = 0; s < p; ++s) {
    const int64_t to = (s + apart) % p;
    if (to == s || (to < s && job.plan.virtual_stages == 1)) continue;
    for (int64_t i = 0; i < per_stage; i += step) {
      load.AddFlow(s * per_stage + i, to * per_stage + i, share);
      load.AddFlow(to * per_stage + i, s * per_stage + i, share);
    }
  }
  return load.Slowdown();
}

}  // namespace

CommGroup TensorParallelGroup(const Job& job) {
  const int64_t t = job.plan.tensor_parallel, gpn = NvlinkDomainGpus(job.cluster);
  const int64_t per_node = std::gcd(t, gpn);
  CommGroup g{t, per_node, static_cast<double>(per_node) / static_cast<double>(gpn),
              CommUse::kTensorParallel};
  if (t > gpn) g.spine_slowdown = StridedSpine(job, t, 1, g.nic_fraction);
  return g;
}

CommGroup DataParallelGroup(const Job& job) {
  // The data-parallel ranks together with the context-parallel ones: both
  // hold the same parameters (Megatron's data-parallel group with CP).
  const int64_t t = job.plan.tensor_parallel, d = GradientRanks(job);
  const int64_t gpn = NvlinkDomainGpus(job.cluster);
  const int64_t per_node = t < gpn ? std::max<int64_t>(1, std::min(d, gpn / t)) : 1;
  CommGroup g{d, per_node, static_cast<double>(per_node) / static_cast<double>(gpn),
              CommUse::kDataParallel};
  g.spine_slowdown = StridedSpine(job, d, t, g.nic_fraction);
  return g;
}

std::vector<StageEnds> JobChunks(const Job& job) {
  return ResolvePipelineLayout(job).value_or(std::vector<StageEnds>());  // empty: not valid
}

std::string ChunkSignature(const Job& job, const StageEnds& ends) {
  std::string signature;
  signature.push_back(ends.embedding ? 'E' : '-');
  signature.push_back(ends.loss ? 'L' : '-');
  absl::StrAppend(&signature, ends.num_layers, "/", ends.mtp_layers);
  if (!job.model.is_moe()) return signature;
  for (int64_t l = 0; l < ends.num_layers; ++l) {
    signature.push_back(job.model.IsMoeLayer(ends.first_layer + l) ? 'M' : 'D');
  }
  return signature;
}

CommGroup ExpertParallelGroup(const Job& job) {
  // Megatron's expert rank order: etp innermost, then ep (stride etp).
  const int64_t ep = job.plan.expert_parallel, etp = job.plan.expert_tensor_parallel;
  const int64_t gpn = NvlinkDomainGpus(job.cluster);
  const int64_t per_node = std::max<int64_t>(1, std::min(ep, gpn / std::max<int64_t>(1, etp)));
  // Every EP group on a node exchanges at once: this one gets its ranks'
  // share of the node's NICs.
  CommGroup g{ep, per_node, static_cast<double>(per_node) / static_cast<double>(gpn)};
  g.spine_slowdown = StridedSpine(job, ep, etp, g.nic_fraction, /*all_to_all=*/true);
  return g;
}

CommGroup ExpertTensorParallelGroup(const Job& job) {
  const int64_t etp = job.plan.expert_tensor_parallel, gpn = NvlinkDomainGpus(job.cluster);
  const int64_t per_node = std::gcd(etp, gpn);
  CommGroup g{etp, per_node, static_cast<double>(per_node) / static_cast<double>(gpn)};
  if (etp > gpn) g.spine_slowdown = StridedSpine(job, etp, 1, g.nic_fraction);
  return g;
}

CommGroup ExpertDataParallelGroup(const Job& job) {
  // Stride etp * ep: ranks on one node only while etp * ep < a node.
  const int64_t edp = ExpertDataParallel(job.plan);
  const int64_t inner = job.plan.expert_parallel * job.plan.expert_tensor_parallel;
  const int64_t gpn = NvlinkDomainGpus(job.cluster);
  const int64_t per_node = inner < gpn ? std::max<int64_t>(1, std::min(edp, gpn / inner)) : 1;
  CommGroup g{edp, per_node, static_cast<double>(per_node) / static_cast<double>(gpn),
              CommUse::kDataParallel};
  g.spine_slowdown = StridedSpine(job, edp, inner, g.nic_fraction);
  return g;
}

CommGroup ContextRingGroup(const Job& job) {
  // Neighbours on the ring are t * c1 ranks apart (c1: the all-to-all
  // groups of a2a+p2p, 1 for p2p); c * t on one node keeps the whole ring
  // on NVLink.
  const int64_t t = job.plan.tensor_parallel, c = job.plan.context_parallel;
  const int64_t gpn = NvlinkDomainGpus(job.cluster);
  const int64_t a2a = job.plan.cp_a2a_ranks(gpn);
  const bool one_node = c * t <= gpn && gpn % (c * t) == 0;
  CommGroup g{2, one_node ? 2 : 1, 1.0 / static_cast<double>(gpn)};
  g.spine_slowdown = StridedSpine(job, c / a2a, t * a2a, g.nic_fraction);
  return g;
}

CommGroup ContextAllToAllGroup(const Job& job) {
  // c1 context-parallel ranks, t apart (Megatron's order: tp innermost).
  const int64_t t = job.plan.tensor_parallel;
  const int64_t gpn = NvlinkDomainGpus(job.cluster);
  const int64_t a2a = job.plan.cp_a2a_ranks(gpn);
  const int64_t per_node = t < gpn ? std::max<int64_t>(1, std::min(a2a, gpn / t)) : 1;
  CommGroup g{a2a, per_node, static_cast<double>(per_node) / static_cast<double>(gpn)};
  g.spine_slowdown = StridedSpine(job, a2a, t, g.nic_fraction, /*all_to_all=*/true);
  return g;
}

namespace {

// StagePairGroup on a flat fabric.
CommGroup FlatStagePairGroup(const Job& job, int64_t stage, int64_t stages_apart) {
  const int64_t td = job.plan.tensor_parallel * GradientRanks(job);
  const int64_t gpn = NvlinkDomainGpus(job.cluster);
  bool crosses = false;
  for (int64_t i = 0; i < std::min(td, gpn) && !crosses; ++i) {
    const int64_t rank = stage * td + i;
    crosses = rank / gpn != (rank + stages_apart * td) / gpn;
  }
  if (td > gpn) crosses = true;
  return {2, crosses ? 1 : 2, 1.0 / static_cast<double>(std::min(td, gpn)), CommUse::kPipeline};
}

}  // namespace

CommGroup StagePairGroup(const Job& job, int64_t stage, int64_t stages_apart) {
  CommGroup g = FlatStagePairGroup(job, stage, stages_apart);
  if (g.nodes() > 1 && !job.cluster.fabric.flat()) {
    g.spine_slowdown = PipelineSpine(job, stages_apart, g.nic_fraction);
  }
  return g;
}

std::vector<CommGroup> NeighbourStagePairGroups(const Job& job) {
  std::vector<CommGroup> groups;
  double spine = 0;  // every stage sends at once: one load for all of them
  for (int64_t s = 0; s + 1 < job.plan.pipeline_parallel; ++s) {
    CommGroup g = FlatStagePairGroup(job, s, 1);
    if (g.nodes() > 1 && !job.cluster.fabric.flat()) {
      if (spine == 0) spine = PipelineSpine(job, 1, g.nic_fraction);
      g.spine_slowdown = spine;
    }
    groups.push_back(g);
  }
  return groups;
}

double ActivationBytes(const Job& job) {
  return static_cast<double>(job.plan.micro_batch) * static_cast<double>(job.model.seq_len) /
         static_cast<double>(job.plan.context_parallel) *
         static_cast<double>(job.model.hidden_size) * kElemBytes;
}

int64_t GradientRanks(const Job& job) { return job.plan.data_parallel * job.plan.context_parallel; }

Collective GradientCollective(const Job& job) {
  return job.plan.data_parallel_sharding == DataParallelSharding::kNone
             ? Collective::kAllReduce
             : Collective::kReduceScatter;
}

bool BucketsGradients(const Job& job) {
  // FSDP reduces layer by layer already; with interleaving each stage
  // reduces once after its last chunk backward, and under the split-backward
  // schedules once after its last weight gradient.
  return job.plan.gradient_bucketing && GradientRanks(job) > 1 &&
         job.plan.data_parallel_sharding != DataParallelSharding::kFull &&
         job.plan.virtual_stages == 1 && !SplitsBackward(job.plan.schedule);
}

bool ReducesGradientsPerChunk(const Job& job) {
  // Megatron-Core with overlap_grad_reduce and interleaving starts each
  // model chunk's gradient reduction when that chunk's backward of the last
  // micro-batch ends (schedules.py launches the chunk's grad sync there), so
  // the chunks finishing early in the cool-down reduce under the others'
  // backward passes.
  return job.plan.gradient_bucketing && GradientRanks(job) > 1 &&
         job.plan.data_parallel_sharding != DataParallelSharding::kFull &&
         job.plan.virtual_stages > 1 && !SplitsBackward(job.plan.schedule);
}

}  // namespace vtrain::internal
