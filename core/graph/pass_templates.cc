#include "core/graph/pass_templates.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "core/graph/template_writer.h"
#include "core/spec/model.h"

namespace vtrain::internal {
namespace {

// Makes the templates of one stage; see MakeStageTemplates.
class TemplateMaker {
 public:
  TemplateMaker(const Job& job, ProfileLookup& lookup, Granularity granularity, LabelFn label)
      : job_(job),
        model_(job.model),
        plan_(job.plan),
        lookup_(lookup),
        granularity_(granularity),
        label_(label),
        t_(plan_.tensor_parallel),
        p_(plan_.pipeline_parallel),
        c_(plan_.context_parallel),
        layers_per_stage_(LayersPerStage(job)),
        bucketing_(BucketsGradients(job)),
        sp_(plan_.sequence_parallel_active()),
        fsdp_(plan_.data_parallel_sharding == DataParallelSharding::kFull &&
              GradientRanks(job) > 1),
        activation_bytes_(ActivationBytes(job)) {}

  StageTemplates Make(StageEnds ends);

 private:
  const ResolvedOperator& Op(OperatorKind op, double num_parameters = 0, bool core_only = false) {
    return lookup_.Resolved(WithParallelSplits(
        MakeOperatorKey(job_.cluster.gpu.name, plan_.dtype, op, model_.hidden_size,
                        model_.num_heads, model_.ffn(), model_.seq_len, plan_.micro_batch, t_,
                        PaddedVocab(model_, t_), static_cast<int64_t>(num_parameters), model_.arch,
                        model_.kv_heads()),
        sp_, c_, core_only));
  }
  // A TP collective inside training: the collective plus the in-training
  // overhead (DESIGN.md §5), which grows with the group size.
  int64_t TensorParallelNs(Collective collective, double bytes) {
    if (t_ == 1) return 0;
    const AnalyticalParams& p = lookup_.params();
    return lookup_.CollectiveNs(collective, bytes, TensorParallelGroup(job_)).latency_ns +
           std::llround(p.tp_collective_overhead_ns +
                        p.tp_collective_overhead_per_rank_ns * static_cast<double>(t_));
  }
  // A TP collective holds its rank's host for the dispatch plus the wait for
  // the slowest rank (tp_host_sync_*), DESIGN.md §5.
  TemplateWriter Writer() {
    const AnalyticalParams& p = lookup_.params();
    // The ranks counted are those inside one node: the calibration runs hold
    // t <= 8, and a group spread over nodes waits on the network (its
    // collective's own time) rather than on more hosts, so the power law is
    // not extrapolated past a node.
    const double ranks = static_cast<double>(
        std::min<int64_t>(t_, std::max<int64_t>(1, job_.cluster.gpus_per_node)));
    const double sync = t_ > 1
                            ? p.tp_host_sync_ns + p.tp_host_sync_per_rank_ns *
                                                      std::pow(ranks - 1, p.tp_host_sync_exponent)
                            : 0;
    return TemplateWriter(label_, granularity_, std::llround(p.host_dispatch_ns + sync),
                          p.tp_host_blocking);
  }
  // The TP collectives around a tensor-parallel block of one layer: without
  // sequence parallelism one all-reduce after it (Shoeybi et al. 2019, the
  // g operator); with it an all-gather before and a reduce-scatter after
  // (Korthikanti et al. 2022, §4.2.2), which move the same bytes as the ring
  // all-reduce they replace. The backward pass mirrors the forward.
  void Block(TemplateWriter& w, const ResolvedOperator& op) {
    if (t_ > 1 && sp_) w.TensorParallel(gather_ns_, gather_label_);
    w.Operator(op);
    if (t_ > 1)
      w.TensorParallel(sp_ ? scatter_ns_ : reduce_ns_, sp_ ? scatter_label_ : reduce_label_);
  }
  // Context parallelism's K/V ring (Megatron-Core / Transformer Engine): c
  // steps of attention on one K/V block each, the c - 1 exchanges of the
  // next block overlapped with the current step's compute; what the compute
  // does not hide blocks the stream. `factor`: 1 forward; 2 backward (K/V and
  // their gradients travel, over twice the compute).
  void ContextRing(TemplateWriter& w, double factor) {
    if (c_ == 1) return;
    const double step_compute = factor * static_cast<double>(core_ns_) / static_cast<double>(c_);
    const double exposed =
        static_cast<double>(c_ - 1) *
        std::max(0.0, factor * static_cast<double>(ring_step_ns_) - step_compute);
    w.TensorParallel(std::llround(exposed), ring_label_);
  }
  // FSDP's per-layer parameter all-gather (and, backward, gradient
  // reduce-scatter), on their own stream, prefetched during the layer before:
  // only what that layer's compute does not hide blocks the stream.
  void ShardedLayer(TemplateWriter& w, double collective_ns, double layer_ns) {
    if (!fsdp_) return;
    w.TensorParallel(std::llround(std::max(0.0, collective_ns - layer_ns)), fsdp_label_);
  }
  void Prepare();
  ActionTemplate Forward(StageEnds ends);
  ActionTemplate Backward(StageEnds ends, bool bucketed);

  const Job& job_;
  const ModelSpec& model_;
  const ParallelPlan& plan_;
  ProfileLookup& lookup_;
  const Granularity granularity_;
  LabelFn label_;
  const int64_t t_, p_, c_, layers_per_stage_;
  const bool bucketing_, sp_, fsdp_;
  const double activation_bytes_;
  // Set by Prepare.
  int64_t reduce_ns_ = 0, gather_ns_ = 0, scatter_ns_ = 0, core_ns_ = 0, ring_step_ns_ = 0;
  double fsdp_gather_ns_ = 0, fsdp_scatter_ns_ = 0;
  int32_t reduce_label_ = 0, gather_label_ = 0, scatter_label_ = 0, ring_label_ = 0,
          fsdp_label_ = 0;
};

void TemplateMaker::Prepare() {
  reduce_label_ = label_("tp_all_reduce");
  gather_label_ = label_("tp_all_gather");
  scatter_label_ = label_("tp_reduce_scatter");
  ring_label_ = label_("cp_ring_exposed");
  fsdp_label_ = label_("fsdp_exposed");
  // Message sizes as nccl-tests counts them: the whole b*s*h buffer.
  if (sp_) {
    gather_ns_ = TensorParallelNs(Collective::kAllGather, activation_bytes_);
    scatter_ns_ = TensorParallelNs(Collective::kReduceScatter, activation_bytes_);
  } else {
    reduce_ns_ = TensorParallelNs(Collective::kAllReduce, activation_bytes_);
  }
  if (c_ > 1) {
    core_ns_ = Op(OperatorKind::kAttentionFwd, 0, /*core_only=*/true).profile.SpanNs();
    // One K and one V block of s/c tokens and h/t channels.
    ring_step_ns_ =
        lookup_
            .CollectiveNs(Collective::kSendRecv, 2 * activation_bytes_ / static_cast<double>(t_),
                          ContextRingGroup(job_))
            .latency_ns;
  }
  if (fsdp_) {
    const double layer_bytes = LayerParameterCount(model_) / static_cast<double>(t_) * kElemBytes;
    const CommGroup group = DataParallelGroup(job_);
    fsdp_gather_ns_ = static_cast<double>(
        lookup_.CollectiveNs(Collective::kAllGather, layer_bytes, group).latency_ns);
    fsdp_scatter_ns_ = static_cast<double>(
        lookup_.CollectiveNs(Collective::kReduceScatter, layer_bytes, group).latency_ns);
  }
}

ActionTemplate TemplateMaker::Forward(StageEnds ends) {
  TemplateWriter w = Writer();
  if (ends.has_embedding) {
    w.Operator(Op(OperatorKind::kEmbeddingFwd));
    // Vocabulary-parallel embedding: partial sums all-reduced, or with SP
    // reduce-scattered onto the sequence split.
    if (t_ > 1)
      w.TensorParallel(sp_ ? scatter_ns_ : reduce_ns_, sp_ ? scatter_label_ : reduce_label_);
  }
  const ResolvedOperator& attention = Op(OperatorKind::kAttentionFwd);
  const ResolvedOperator& mlp = Op(OperatorKind::kMlpFwd);
  const double layer_ns = static_cast<double>(attention.profile.SpanNs() + mlp.profile.SpanNs());
  for (int64_t l = 0; l < layers_per_stage_; ++l) {
    // The stage's first layer has nothing before it to hide its gather.
    ShardedLayer(w, fsdp_gather_ns_, l == 0 ? 0 : layer_ns);
    Block(w, attention);
    ContextRing(w, 1);
    Block(w, mlp);
  }
  if (ends.has_logit) {
    // SP gathers the final layer norm's output before the logit GEMM.
    if (t_ > 1 && sp_) w.TensorParallel(gather_ns_, gather_label_);
    w.Operator(Op(OperatorKind::kLogitFwd));
    w.Operator(Op(OperatorKind::kLossFwd));
    if (t_ > 1) {
      // Vocabulary-parallel cross-entropy all-reduces the max, the sum of
      // exponentials and the target logit: fp32 per token each.
      const double bytes = static_cast<double>(plan_.micro_batch * model_.seq_len / c_) * 4;
      const int64_t small_ns = TensorParallelNs(Collective::kAllReduce, bytes);
      for (int i = 0; i < 3; ++i) w.TensorParallel(small_ns, reduce_label_);
    }
  }
  return std::move(w).Take(label_("forward"));
}

// `bucketed`: split the pass where a gradient bucket fills (the last
// micro-batch with gradient bucketing).
ActionTemplate TemplateMaker::Backward(StageEnds ends, bool bucketed) {
  TemplateWriter w = Writer();
  const double t = static_cast<double>(t_);
  const double bucket_limit = static_cast<double>(plan_.bucket_size_bytes);
  double pending = 0;
  // Gradients of `params` parameters are final: close a bucket once full.
  auto gradients_ready = [&](double params) {
    if (!bucketed) return;
    pending += params * kElemBytes;
    if (pending >= bucket_limit) {
      w.EndSegment(pending);
      pending = 0;
    }
  };
  if (ends.has_logit) {
    w.Operator(Op(OperatorKind::kLossBwd));
    w.Operator(Op(OperatorKind::kLogitBwd));
    if (t_ > 1)
      w.TensorParallel(sp_ ? scatter_ns_ : reduce_ns_, sp_ ? scatter_label_ : reduce_label_);
    // With p > 1 the last stage holds its own copy of a tied embedding.
    gradients_ready(OutputParametersPerGpu(model_, t_, p_));
  }
  const double layer_params = LayerParameterCount(model_) / t;
  const ResolvedOperator& mlp_bwd = Op(OperatorKind::kMlpBwd);
  const ResolvedOperator& attention_bwd = Op(OperatorKind::kAttentionBwd);
  const double layer_ns =
      static_cast<double>(attention_bwd.profile.SpanNs() + mlp_bwd.profile.SpanNs());
  // Looked up once, not per layer (the lookup's references are stable).
  const bool full = plan_.recompute == Recompute::kFull;
  const bool selective = plan_.recompute == Recompute::kSelective;
  const ResolvedOperator* attention_fwd = full ? &Op(OperatorKind::kAttentionFwd) : nullptr;
  const ResolvedOperator* mlp_fwd = full ? &Op(OperatorKind::kMlpFwd) : nullptr;
  const ResolvedOperator* core_fwd =
      selective ? &Op(OperatorKind::kAttentionFwd, 0, /*core_only=*/true) : nullptr;
  for (int64_t l = 0; l < layers_per_stage_; ++l) {
    ShardedLayer(w, fsdp_gather_ns_ + fsdp_scatter_ns_, l == 0 ? 0 : layer_ns);
    if (full) {
      // Full recomputation re-runs the layer's forward before its backward.
      Block(w, *attention_fwd);
      ContextRing(w, 1);
      Block(w, *mlp_fwd);
    }
    Block(w, mlp_bwd);
    // Selective recomputation re-runs only the attention core before the
    // attention backward (Korthikanti et al. 2022, §5).
    if (selective) w.Operator(*core_fwd);
    Block(w, attention_bwd);
    ContextRing(w, 2);
    gradients_ready(layer_params);
  }
  if (ends.has_embedding) {
    // SP: the gradient of the embedding's reduce-scatter is an all-gather.
    if (t_ > 1 && sp_) w.TensorParallel(gather_ns_, gather_label_);
    w.Operator(Op(OperatorKind::kEmbeddingBwd));
    gradients_ready(EmbeddingParametersPerGpu(model_, t_));
  }
  w.EndSegment(bucketed ? pending : 0);
  return std::move(w).Take(label_("backward"));
}

StageTemplates TemplateMaker::Make(StageEnds ends) {
  Prepare();
  StageTemplates s;
  const double t = static_cast<double>(t_);
  const double layer_parameters =
      static_cast<double>(layers_per_stage_) * LayerParameterCount(model_) / t;
  s.parameters_per_gpu = layer_parameters;
  if (ends.has_embedding) s.parameters_per_gpu += EmbeddingParametersPerGpu(model_, t_);
  if (ends.has_logit) s.parameters_per_gpu += OutputParametersPerGpu(model_, t_, p_);
  // FSDP reduce-scatters the layers' gradients layer by layer; the rest at
  // the end of the pass.
  s.gradient_bytes = (s.parameters_per_gpu - (fsdp_ ? layer_parameters : 0)) * kElemBytes;
  s.forward = Forward(ends);
  s.backward = Backward(ends, /*bucketed=*/false);
  s.backward_last = bucketing_ ? Backward(ends, /*bucketed=*/true) : s.backward;
  // Sharded optimizers step their 1/(d*c) share.
  const double ranks = static_cast<double>(GradientRanks(job_));
  const bool sharded = plan_.data_parallel_sharding != DataParallelSharding::kNone && ranks > 1;
  TemplateWriter w = Writer();
  w.Operator(Op(OperatorKind::kOptimizerStep, s.parameters_per_gpu / (sharded ? ranks : 1)));
  s.optimizer = std::move(w).Take(label_("optimizer_step"));
  for (Segment& seg : s.optimizer.segments) {
    for (Item& i : seg.items) i.kind = TaskKind::kOptimizer;
  }
  if (sharded && plan_.data_parallel_sharding == DataParallelSharding::kOptimizer) {
    // The distributed optimizer all-gathers the updated fp16 parameters.
    const int64_t ns = lookup_
                           .CollectiveNs(Collective::kAllGather, s.parameters_per_gpu * kElemBytes,
                                         DataParallelGroup(job_))
                           .latency_ns;
    s.optimizer.segments.back().items.push_back(
        Item{ns, 0, label_("dp_param_all_gather"), TaskKind::kDataParallel,
             std::llround(lookup_.params().host_dispatch_ns)});
  }
  return s;
}

}  // namespace

StageTemplates MakeStageTemplates(const Job& job, ProfileLookup& lookup, Granularity granularity,
                                  StageEnds ends, LabelFn label) {
  return TemplateMaker(job, lookup, granularity, label).Make(ends);
}

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

int64_t LayersPerStage(const Job& job) {
  return job.model.num_layers / (job.plan.pipeline_parallel * job.plan.virtual_stages);
}

bool BucketsGradients(const Job& job) {
  // FSDP reduces layer by layer already; with interleaving each stage
  // reduces once after its last chunk backward.
  return job.plan.gradient_bucketing && GradientRanks(job) > 1 &&
         job.plan.data_parallel_sharding != DataParallelSharding::kFull &&
         job.plan.virtual_stages == 1;
}

}  // namespace vtrain::internal
