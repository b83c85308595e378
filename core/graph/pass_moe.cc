// The MoE token exchange between expert-parallel ranks, priced through the
// profile lookup (pass_templates.h, MoeExchangeNs).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/graph/pass_templates.h"
#include "core/spec/moe.h"

namespace vtrain::internal {

double MoeExchangeNs(const Job& job, ProfileLookup& lookup, double load) {
  const ModelSpec& model = job.model;
  const ParallelPlan& plan = job.plan;
  const double h = static_cast<double>(model.hidden_size);
  const double tokens = MoeTokensPerRank(model, plan);
  const double k = static_cast<double>(model.moe.top_k);
  const int64_t ep = plan.expert_parallel, etp = plan.expert_tensor_parallel;
  const CommGroup ep_group = ExpertParallelGroup(job);
  double ns = 0;
  if (plan.moe.dispatcher == MoeDispatcher::kAllGather) {
    // Every token gathered on every rank of the ep * etp group, the outputs
    // reduce-scattered back (nccl-tests counts the gathered buffer).
    const int64_t ranks = ep * etp;
    if (ranks > 1) {
      CommGroup g = ep_group;
      g.ranks = ranks;
      const int64_t domain = NvlinkDomainGpus(job.cluster);
      g.ranks_per_node = std::min<int64_t>(ranks, domain);
      g.nic_fraction = static_cast<double>(g.ranks_per_node) / static_cast<double>(domain);
      const double bytes = tokens * static_cast<double>(ranks) * h * kElemBytes;
      ns =
          static_cast<double>(lookup.CollectiveNs(Collective::kAllGather, bytes, g).latency_ns +
                              lookup.CollectiveNs(Collective::kReduceScatter, bytes, g).latency_ns);
    }
  } else if (ep > 1) {
    // Each rank sends its tokens' top-k copies (the busiest receives `load`
    // times the mean) and gets the outputs back. DeepEP (flex) dispatches in
    // fp8 under fp8 training and sends a token once per destination node.
    double dispatch_elem = kElemBytes;
    double dedup = 1;
    if (plan.moe.dispatcher == MoeDispatcher::kFlex) {
      if (plan.dtype == DType::kFp8) dispatch_elem = 1 + 4.0 / 128;  // fp8 + a scale per 128
      const double nodes = static_cast<double>(ep_group.nodes());
      if (nodes > 1) dedup = std::min(1.0, nodes * (1 - std::pow(1 - 1 / nodes, k)) / k);
    }
    const double copies = tokens * k * load;
    ns = static_cast<double>(
        lookup.CollectiveNs(Collective::kAllToAll, copies * h * dispatch_elem * dedup, ep_group)
            .latency_ns +
        lookup.CollectiveNs(Collective::kAllToAll, copies * h * kElemBytes * dedup, ep_group)
            .latency_ns);
  }
  if (etp > 1 && plan.moe.dispatcher != MoeDispatcher::kAllGather) {
    // Expert tensor parallelism gathers the etp ranks' copies before the
    // experts and reduce-scatters the outputs after.
    const double bytes = tokens * k * load * static_cast<double>(etp) * h * kElemBytes;
    const CommGroup g = ExpertTensorParallelGroup(job);
    ns += static_cast<double>(lookup.CollectiveNs(Collective::kAllGather, bytes, g).latency_ns +
                              lookup.CollectiveNs(Collective::kReduceScatter, bytes, g).latency_ns);
  }
  return ns;
}

}  // namespace vtrain::internal
