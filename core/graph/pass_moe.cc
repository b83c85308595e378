// The MoE token exchange between expert-parallel ranks, priced through the
// profile lookup (pass_templates.h, MoeExchangeNs).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "core/graph/pass_templates.h"
#include "core/graph/template_writer.h"
#include "core/profile/kernel_model.h"
#include "core/spec/model.h"
#include "core/spec/moe.h"

namespace vtrain::internal {

MoeExchange MoeExchangeNs(const Job& job, ProfileLookup& lookup, double load) {
  const ModelSpec& model = job.model;
  const ParallelPlan& plan = job.plan;
  const double h = static_cast<double>(model.hidden_size);
  const double tokens = MoeTokensPerRank(model, plan);
  const double k = static_cast<double>(model.moe.top_k);
  const int64_t ep = plan.expert_parallel, etp = plan.expert_tensor_parallel;
  const CommGroup ep_group = ExpertParallelGroup(job);
  MoeExchange x;
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
      x.dispatch_ns =
          static_cast<double>(lookup.CollectiveNs(Collective::kAllGather, bytes, g).latency_ns);
      x.combine_ns =
          static_cast<double>(lookup.CollectiveNs(Collective::kReduceScatter, bytes, g).latency_ns);
    }
  } else if (ep > 1) {
    // Each rank sends its tokens' top-k copies (the busiest receives `load`
    // times the mean) and gets the outputs back. DeepEP (flex) sends a token
    // once per destination node. Megatron-Core dispatches 16-bit tokens
    // under fp8 training too: its DeepEP path passes the bf16 hidden states
    // (token_dispatcher.py, fused_dispatch) and HybridEP's says "we do not
    // support fp8 dispatch" (fused_a2a.py), unlike DeepSeek's own training.
    const double dispatch_elem = kElemBytes;
    double dedup = 1;
    if (IsFlex(plan.moe.dispatcher)) {
      const double nodes = static_cast<double>(ep_group.nodes());
      if (nodes > 1) dedup = std::min(1.0, nodes * (1 - std::pow(1 - 1 / nodes, k)) / k);
    }
    const double copies = tokens * k * load;
    x.dispatch_ns = static_cast<double>(
        lookup.CollectiveNs(Collective::kAllToAll, copies * h * dispatch_elem * dedup, ep_group)
            .latency_ns);
    x.combine_ns = static_cast<double>(
        lookup.CollectiveNs(Collective::kAllToAll, copies * h * kElemBytes * dedup, ep_group)
            .latency_ns);
  }
  if (etp > 1 && plan.moe.dispatcher != MoeDispatcher::kAllGather) {
    // Expert tensor parallelism gathers the etp ranks' copies before the
    // experts and reduce-scatters the outputs after.
    const double bytes = tokens * k * load * static_cast<double>(etp) * h * kElemBytes;
    const CommGroup g = ExpertTensorParallelGroup(job);
    x.dispatch_ns +=
        static_cast<double>(lookup.CollectiveNs(Collective::kAllGather, bytes, g).latency_ns);
    x.combine_ns +=
        static_cast<double>(lookup.CollectiveNs(Collective::kReduceScatter, bytes, g).latency_ns);
  }
  return x;
}

std::vector<KernelRecord> MoeChunkSortKernels(const Job& job, const AnalyticalParams& params,
                                              double load, bool backward) {
  const ParallelPlan& plan = job.plan;
  const ModelSpec& model = job.model;
  const int64_t local = model.moe.num_experts / std::max<int64_t>(1, plan.expert_parallel);
  if (plan.moe.dispatcher != MoeDispatcher::kAllToAll || plan.expert_parallel <= 1 || local <= 1) {
    return {};
  }
  const double copies = MoeTokensPerRank(model, plan) * static_cast<double>(model.moe.top_k) *
                        load * static_cast<double>(plan.expert_tensor_parallel);
  const double bytes = 2 * copies * static_cast<double>(model.hidden_size) * kElemBytes;
  KernelSequence seq(job.cluster.gpu, plan.dtype, params);
  seq.Memory(backward ? "moe_sort_chunks_bwd" : "moe_sort_chunks_fwd", bytes);
  seq.Memory(backward ? "moe_sort_chunks_bwd" : "moe_sort_chunks_fwd", bytes);
  return std::move(seq).Finish();
}

bool MoeSyncSplit(const std::vector<KernelRecord>& kernels, std::vector<KernelRecord>& route,
                  std::vector<KernelRecord>& experts) {
  size_t at = kernels.size();
  for (size_t i = 0; i < kernels.size(); ++i) {
    if (kernels[i].host_ns <= 0) return false;
    if (at == kernels.size() && absl::StartsWith(kernels[i].name, "moe_permute")) at = i;
  }
  if (at == 0 || at == kernels.size()) return false;
  route.assign(kernels.begin(), kernels.begin() + static_cast<std::ptrdiff_t>(at));
  experts.assign(kernels.begin() + static_cast<std::ptrdiff_t>(at), kernels.end());
  return true;
}

MoeBlockParts MakeMoeBlockParts(const Job& job, const AnalyticalParams& params,
                                const ResolvedOperator& forward, const MoeExchange& x,
                                double load) {
  auto resolved = [](std::vector<KernelRecord> kernels) {
    ResolvedOperator op;
    op.profile.kernels = std::move(kernels);
    op.chain = ChainOf(op.profile.kernels);
    return op;
  };
  MoeBlockParts parts;
  parts.exposed_ns = x.dispatch_ns + x.combine_ns;
  if (parts.exposed_ns > 0) parts.dispatch_share = x.dispatch_ns / parts.exposed_ns;
  parts.sort_fwd = resolved(MoeChunkSortKernels(job, params, load, /*backward=*/false));
  parts.sort_bwd = resolved(MoeChunkSortKernels(job, params, load, /*backward=*/true));
  std::vector<KernelRecord> route, experts;
  if (MoeHostSyncs(job.plan) && MoeSyncSplit(forward.profile.kernels, route, experts)) {
    parts.route = resolved(std::move(route));
    parts.experts = resolved(std::move(experts));
  }
  return parts;
}

void WriteMoeBlock(TemplateWriter& w, const ResolvedOperator& op, bool backward,
                   const MoeBlockParts& parts) {
  constexpr TemplateWriter::Comm kEp = TemplateWriter::Comm::kExpert;
  const ResolvedOperator& sort = backward ? parts.sort_bwd : parts.sort_fwd;
  if (backward || parts.route.profile.kernels.empty()) {
    w.Operator(op);
    w.Operator(sort);
    if (parts.exposed_ns > 0) w.TensorParallel(std::llround(parts.exposed_ns), parts.label, 0, kEp);
    return;
  }
  w.Operator(parts.route);
  w.HostSync();
  const int64_t dispatch = std::llround(parts.exposed_ns * parts.dispatch_share);
  if (dispatch > 0) w.TensorParallel(dispatch, parts.label, 0, kEp);
  w.Operator(parts.experts);
  w.Operator(sort);
  const int64_t combine = std::llround(parts.exposed_ns) - dispatch;
  if (combine > 0) w.TensorParallel(combine, parts.label, 0, kEp);
}

namespace {

// An exchange of `comm` ns beside `compute` ns of compute started with it:
// the compute runs at (1 - share) of its speed while the exchange's kernels
// hold their SMs.
double Beside(double comm, double compute, double share) {
  return std::max(comm, compute + share * std::min(comm, compute / (1 - share)));
}

}  // namespace

double PairedMoeExposedNs(const MoeExchange& x, const MoeLayerCompute& forward,
                          const MoeLayerCompute& backward, double comm_sm_share) {
  const double f = std::clamp(comm_sm_share, 0.0, 0.9);
  // Phase 1: the backward's combine beside the forward's attention.
  const double first = Beside(x.combine_ns, forward.attention_ns, f);
  // Phase 2: the forward's dispatch then the backward's, beside the
  // backward's MoE block then the forward's. The forward's experts wait for
  // its dispatch; the backward's dispatch waits for its data gradients
  // (about half of its MoE block).
  const double comm = 2 * x.dispatch_ns;
  const double compute = backward.moe_ns + forward.moe_ns;
  const double second = std::max({Beside(comm, compute, f), x.dispatch_ns + forward.moe_ns,
                                  backward.moe_ns / 2 + x.dispatch_ns});
  // Phase 3: the forward's combine beside the backward's attention.
  const double third = Beside(x.combine_ns, backward.attention_ns, f);
  const double alone =
      forward.attention_ns + forward.moe_ns + backward.attention_ns + backward.moe_ns;
  return std::max(0.0, (first + second + third - alone) / 2);
}

double PairedPassShare(const ParallelPlan& plan) {
  const int64_t m = plan.num_micro_batches();
  if (m <= 0) return 0;
  const int64_t p = plan.pipeline_parallel;
  if (p == 1) return static_cast<double>(m - 1) / static_cast<double>(m);
  // megatron/core/pipeline_parallel/schedules.py, get_pp_rank_microbatches:
  // rank r warms up with (p - r - 1) * 2 + (v - 1) * p forwards, one more
  // under the all-to-all overlap, and cools down with as many backwards.
  const int64_t v = plan.virtual_stages;
  const int64_t passes = m * v;
  double paired = 0;
  for (int64_t r = 0; r < p; ++r) {
    const int64_t warmup = std::min(passes, (p - r - 1) * 2 + (v - 1) * p + 1);
    paired += static_cast<double>(passes - warmup) / static_cast<double>(passes);
  }
  return paired / static_cast<double>(p);
}

double ExposedMoeExchangeNs(const Job& job, const MoeExchange& x, const MoeLayerCompute& forward,
                            const MoeLayerCompute& backward, double paired_share) {
  // The exchange's kernels hold SMs beside the compute: DeepEP's default of
  // 20 (deep_ep/buffer.py, Buffer.num_sms), taken for NCCL's all-to-all too;
  // HybridEP's 32 (moe_hybridep_num_sms, as the recipes and the ModelZoo set it).
  const int64_t sms = job.cluster.gpu.num_sms;
  const double held = job.plan.moe.dispatcher == MoeDispatcher::kHybridEp ? 32.0 : 20.0;
  const double share = sms > 0 ? std::min(1.0, held / static_cast<double>(sms)) : 0;
  const double whole = x.dispatch_ns + x.combine_ns;
  return (1 - paired_share) * whole +
         paired_share * PairedMoeExposedNs(x, forward, backward, share);
}

int64_t ExpertReduceNs(const Job& job, ProfileLookup& lookup, const StageTemplates& s) {
  if (!(s.expert_gradient_bytes > 0) || ExpertDataParallel(job.plan) <= 1) return 0;
  const int64_t all = lookup
                          .CollectiveNs(GradientCollective(job), s.expert_gradient_bytes,
                                        ExpertDataParallelGroup(job))
                          .latency_ns;
  if (!job.plan.gradient_bucketing) return all;
  // --overlap-grad-reduce: Megatron-Core's DDP buckets the routed experts'
  // gradients as it does the dense ones (its expert-parallel buffers) and
  // reduces each bucket as the last backward fills it, beside that
  // backward's compute and the dense buckets' own reductions (Megatron-FSDP
  // reduce-scatters them module by module). Charged after the backward,
  // only what that window cannot hold stays: at least the last bucket.
  const double dense_ns =
      s.gradient_bytes > 0 && GradientRanks(job) > 1
          ? static_cast<double>(
                lookup
                    .CollectiveNs(GradientCollective(job), s.gradient_bytes, DataParallelGroup(job))
                    .latency_ns)
          : 0;
  const double window = std::max(0.0, s.backward_last.TaskNs() - dense_ns);
  return ExposedParamGatherNs(all, s.expert_gradient_bytes, job.plan.bucket_size_bytes, window);
}

LayerParameters ChunkParameters(const ModelSpec& model, StageEnds ends) {
  LayerParameters p = LayerParametersIn(model, ends.first_layer, ends.num_layers);
  if (ends.mtp_layers > 0) {
    const LayerParameters last = LayerParametersIn(model, model.num_layers - 1, 1);
    const double h = static_cast<double>(model.hidden_size);
    const double mtp = static_cast<double>(ends.mtp_layers);
    p.dense += mtp * (last.dense + 2 * h * h + 2 * h);
    p.experts += mtp * last.experts;
  }
  return p;
}

}  // namespace vtrain::internal
