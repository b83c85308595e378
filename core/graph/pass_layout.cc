// The communication groups, chunk layouts and sizes the stage templates
// use (declared in pass_templates.h): Megatron's rank order for tensor,
// data, context, pipeline and expert groups.
#include <algorithm>
#include <numeric>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/graph/pass_templates.h"
#include "core/spec/moe.h"
#include "core/spec/pipeline_layout.h"

namespace vtrain::internal {

CommGroup TensorParallelGroup(const Job& job) {
  const int64_t t = job.plan.tensor_parallel, gpn = job.cluster.gpus_per_node;
  const int64_t per_node = std::gcd(t, gpn);
  return {t, per_node, static_cast<double>(per_node) / static_cast<double>(gpn),
          CommUse::kTensorParallel};
}

CommGroup DataParallelGroup(const Job& job) {
  // The data-parallel ranks together with the context-parallel ones: both
  // hold the same parameters (Megatron's data-parallel group with CP).
  const int64_t t = job.plan.tensor_parallel, d = GradientRanks(job);
  const int64_t gpn = job.cluster.gpus_per_node;
  const int64_t per_node = t < gpn ? std::max<int64_t>(1, std::min(d, gpn / t)) : 1;
  return {d, per_node, static_cast<double>(per_node) / static_cast<double>(gpn),
          CommUse::kDataParallel};
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
  const int64_t gpn = job.cluster.gpus_per_node;
  const int64_t per_node = std::max<int64_t>(1, std::min(ep, gpn / std::max<int64_t>(1, etp)));
  // Every EP group on a node exchanges at once: this one gets its ranks'
  // share of the node's NICs.
  return {ep, per_node, static_cast<double>(per_node) / static_cast<double>(gpn)};
}

CommGroup ExpertTensorParallelGroup(const Job& job) {
  const int64_t etp = job.plan.expert_tensor_parallel, gpn = job.cluster.gpus_per_node;
  const int64_t per_node = std::gcd(etp, gpn);
  return {etp, per_node, static_cast<double>(per_node) / static_cast<double>(gpn)};
}

CommGroup ExpertDataParallelGroup(const Job& job) {
  // Stride etp * ep: ranks on one node only while etp * ep < a node.
  const int64_t edp = ExpertDataParallel(job.plan);
  const int64_t inner = job.plan.expert_parallel * job.plan.expert_tensor_parallel;
  const int64_t gpn = job.cluster.gpus_per_node;
  const int64_t per_node = inner < gpn ? std::max<int64_t>(1, std::min(edp, gpn / inner)) : 1;
  return {edp, per_node, static_cast<double>(per_node) / static_cast<double>(gpn),
          CommUse::kDataParallel};
}

CommGroup ContextRingGroup(const Job& job) {
  // Neighbours on the ring are t ranks apart; c * t on one node keeps the
  // whole ring on NVLink.
  const int64_t t = job.plan.tensor_parallel, c = job.plan.context_parallel;
  const int64_t gpn = job.cluster.gpus_per_node;
  const bool one_node = c * t <= gpn && gpn % (c * t) == 0;
  return {2, one_node ? 2 : 1, 1.0 / static_cast<double>(gpn)};
}

CommGroup StagePairGroup(const Job& job, int64_t stage, int64_t stages_apart) {
  const int64_t td = job.plan.tensor_parallel * GradientRanks(job);
  const int64_t gpn = job.cluster.gpus_per_node;
  bool crosses = false;
  for (int64_t i = 0; i < std::min(td, gpn) && !crosses; ++i) {
    const int64_t rank = stage * td + i;
    crosses = rank / gpn != (rank + stages_apart * td) / gpn;
  }
  if (td > gpn) crosses = true;
  return {2, crosses ? 1 : 2, 1.0 / static_cast<double>(std::min(td, gpn)), CommUse::kPipeline};
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

}  // namespace vtrain::internal
