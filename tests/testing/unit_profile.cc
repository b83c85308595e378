#include "tests/testing/unit_profile.h"

#include <utility>

#include "core/spec/model.h"

namespace vtrain::testing {
namespace {

int64_t Span(const std::vector<KernelRecord>& kernels) {
  OperatorProfile p;
  p.kernels = kernels;
  return p.SpanNs();
}

OperatorProfile Measured(std::vector<KernelRecord> kernels) {
  OperatorProfile p;
  p.kernels = std::move(kernels);
  p.fidelity = Fidelity::kMeasured;
  return p;
}

double StageParameters(const Job& job, int64_t virtual_stage) {
  // Mirrors TemplateMaker::Make, operation for operation, so that the
  // double rounds identically before the cast to int64.
  const int64_t p = job.plan.pipeline_parallel;
  const int64_t last = p * job.plan.virtual_stages - 1;
  const int64_t t = job.plan.tensor_parallel;
  const int64_t layers_per_stage = job.model.num_layers / (last + 1);
  double params = static_cast<double>(layers_per_stage) * LayerParameterCount(job.model) /
                  static_cast<double>(t);
  if (virtual_stage == 0) params += EmbeddingParametersPerGpu(job.model, t);
  if (virtual_stage == last) params += OutputParametersPerGpu(job.model, t, p);
  return params;
}

}  // namespace

int64_t UnitTimes::LayerForwardNs() const { return Span(attention_fwd) + Span(mlp_fwd); }
int64_t UnitTimes::LayerBackwardNs() const { return Span(attention_bwd) + Span(mlp_bwd); }

int64_t StageOptimizerParameters(const Job& job, int64_t stage) {
  const double ranks =
      static_cast<double>(job.plan.data_parallel) * static_cast<double>(job.plan.context_parallel);
  const bool sharded = job.plan.data_parallel_sharding != DataParallelSharding::kNone && ranks > 1;
  return static_cast<int64_t>(StageParameters(job, stage) / (sharded ? ranks : 1));
}

ProfileSet UnitProfileSet(const Job& job, const UnitTimes& times) {
  ProfileSet set;
  set.name = "unit";
  set.gpu = job.cluster.gpu.name;
  set.provenance = "tests/testing/unit_profile.cc";
  // Free communication: no latency and a link efficiency of 10^9, so with
  // UseFreeLinks a transfer takes bytes / 10^24 s, which rounds to 0 ns for
  // anything under 5 * 10^14 bytes.
  set.params.intra_node_latency_ns = 0;
  set.params.intra_node_latency_per_rank_ns = 0;
  set.params.inter_node_latency_ns = 0;
  set.params.intra_node_efficiency = 1e9;
  set.params.inter_node_efficiency = 1e9;
  set.params.tp_collective_overhead_ns = 0;
  set.params.tp_collective_overhead_per_rank_ns = 0;

  const ModelSpec& m = job.model;
  const ParallelPlan& plan = job.plan;
  LayerShape shape;
  shape.attention_impl = m.attention_impl;
  auto key = [&](OperatorKind op, int64_t num_parameters, bool core_only = false) {
    return WithLayerShape(
        WithParallelSplits(
            MakeOperatorKey(job.cluster.gpu.name, plan.dtype, op, m.hidden_size, m.num_heads,
                            m.ffn(), m.seq_len, plan.micro_batch, plan.tensor_parallel,
                            PaddedVocab(m, plan.tensor_parallel), num_parameters, m.arch,
                            m.kv_heads()),
            plan.sequence_parallel, plan.context_parallel, core_only),
        shape);
  };
  const std::vector<KernelRecord> zero = {{"zero", 0, 0}};
  set.operators[key(OperatorKind::kAttentionFwd, 0)] = Measured(times.attention_fwd);
  set.operators[key(OperatorKind::kMlpFwd, 0)] = Measured(times.mlp_fwd);
  set.operators[key(OperatorKind::kAttentionBwd, 0)] = Measured(times.attention_bwd);
  set.operators[key(OperatorKind::kMlpBwd, 0)] = Measured(times.mlp_bwd);
  set.operators[key(OperatorKind::kAttentionFwd, 0, /*core_only=*/true)] =
      Measured(times.attention_core_fwd);
  for (OperatorKind op :
       {OperatorKind::kEmbeddingFwd, OperatorKind::kEmbeddingBwd, OperatorKind::kLogitFwd,
        OperatorKind::kLogitBwd, OperatorKind::kLossFwd, OperatorKind::kLossBwd}) {
    set.operators[key(op, 0)] = Measured(zero);
  }
  for (int64_t s = 0; s < plan.pipeline_parallel * plan.virtual_stages; ++s) {
    set.operators[key(OperatorKind::kOptimizerStep, StageOptimizerParameters(job, s))] =
        Measured(zero);
  }
  return set;
}

void UseFreeLinks(Job& job) {
  job.cluster.intra_node_bandwidth_bytes_per_s = 1e15;
  job.cluster.inter_node_bandwidth_bytes_per_s = 1e15;
}

}  // namespace vtrain::testing
