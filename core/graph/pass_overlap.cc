// Megatron-Core's communication overlaps, priced: what of a collective the
// compute beside it does not hide (pass_templates.h; docs/how-it-works.md,
// "Communication overlap").
#include <algorithm>
#include <cmath>
#include <string>

#include "core/graph/pass_templates.h"

namespace vtrain::internal {

GemmEnds GemmEndsOf(const ResolvedOperator& op) {
  GemmEnds ends;
  bool seen = false;
  for (const KernelRecord& k : op.profile.kernels) {
    if (k.name.find("gemm") == std::string::npos) continue;
    if (!seen) ends.first_ns = static_cast<double>(k.duration_ns);
    ends.last_ns = static_cast<double>(k.duration_ns);
    seen = true;
  }
  return ends;
}

// Transformer Engine's ring exchange (all-gather) and pipelined
// reduce-scatter: t - 1 steps each take the longer of a GEMM chunk (g / t)
// and a transfer (c / (t - 1)), plus the one GEMM chunk on local data, so
// (t - 1) * max(g / t, c / (t - 1)) + g / t in all; what exceeds the GEMM's
// own g is max(0, c - g * (t - 1) / t). gemm_ns = 0: nothing hides.
int64_t ExposedTensorParallelNs(int64_t collective_ns, double gemm_ns, int64_t t) {
  if (t <= 1) return collective_ns;
  const double td = static_cast<double>(t);
  const double exposed =
      std::max(0.0, static_cast<double>(collective_ns) - gemm_ns * (td - 1) / td);
  return std::min<int64_t>(collective_ns, std::llround(exposed));
}

// Megatron's --overlap-param-gather launches each bucket's all-gather ahead
// of the forward that needs it; the forward's first layers wait for the
// first bucket, and the rest arrives while the forward computes.
int64_t ExposedParamGatherNs(int64_t gather_ns, double bytes, int64_t bucket_bytes,
                             double forward_ns) {
  const double buckets =
      std::max(1.0, std::ceil(bytes / static_cast<double>(std::max<int64_t>(1, bucket_bytes))));
  const double ns = static_cast<double>(gather_ns);
  const double exposed = std::max(ns / buckets, ns - forward_ns);
  return std::min<int64_t>(gather_ns, std::llround(exposed));
}

double ParamGatherWindowNs(const ParallelPlan& plan, double forward_ns) {
  const int64_t passes =
      plan.virtual_stages > 1 ? std::min(plan.pipeline_parallel, plan.num_micro_batches()) : 1;
  return forward_ns * static_cast<double>(passes);
}

void AddParamGather(const Job& job, ProfileLookup& lookup, int32_t label, StageTemplates& s) {
  const ParallelPlan& plan = job.plan;
  const double bytes = s.parameters_per_gpu * kElemBytes;
  const int64_t ns =
      lookup.CollectiveNs(Collective::kAllGather, bytes, DataParallelGroup(job)).latency_ns;
  s.param_gather_ns = plan.param_gather_overlap
                          ? ExposedParamGatherNs(ns, bytes, plan.bucket_size_bytes,
                                                 ParamGatherWindowNs(plan, s.forward.TaskNs()))
                          : ns;
  s.param_gather_hidden_ns = ns - s.param_gather_ns;
  s.optimizer.segments.back().items.push_back(Item{s.param_gather_ns, 0, label,
                                                   TaskKind::kDataParallel,
                                                   std::llround(lookup.params().host_dispatch_ns)});
}

}  // namespace vtrain::internal
