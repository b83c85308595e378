#include "core/graph/pass_templates.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "core/spec/model.h"

namespace vtrain::internal {
namespace {

class TemplateWriter {
 public:
  // `collective_host_ns`: host time to launch a collective.
  TemplateWriter(LabelFn label, int64_t collective_host_ns)
      : label_(label), collective_host_ns_(collective_host_ns) {
    segments_.emplace_back();
  }

  void Operator(const OperatorProfile& profile) {
    for (const KernelRecord& k : profile.kernels) {
      segments_.back().items.push_back(
          Item{k.duration_ns, k.gap_ns, label_(k.name), TaskKind::kCompute, k.host_ns});
    }
  }
  void TensorParallel(int64_t duration_ns, int32_t label) {
    segments_.back().items.push_back(
        Item{duration_ns, 0, label, TaskKind::kTensorParallel, collective_host_ns_});
    tensor_parallel_ns_ += duration_ns;
  }
  // Ends the current segment; a bucket all-reduce of `bucket_bytes` follows it.
  void EndSegment(double bucket_bytes) {
    if (segments_.back().items.empty()) return;
    segments_.back().bucket_bytes = bucket_bytes;
    segments_.emplace_back();
  }

  // In operator granularity each segment becomes one item: its tasks run back
  // to back on one stream with nothing entering or leaving in the middle, so
  // start(i+1) = finish(i) + gap(i) and the merged task is exact.
  ActionTemplate Take(Granularity granularity, int32_t merged_label) && {
    ReplayHost();
    ActionTemplate t;
    t.tensor_parallel_ns = tensor_parallel_ns_;
    for (Segment& s : segments_) {
      if (s.items.empty()) continue;
      if (granularity == Granularity::kOperator && s.items.size() > 1) {
        Item merged{0, 0, merged_label, TaskKind::kCompute};
        for (const Item& i : s.items) merged.duration_ns += i.duration_ns + i.gap_ns;
        merged.gap_ns = s.items.back().gap_ns;
        merged.duration_ns -= merged.gap_ns;
        s.items.assign(1, merged);
      }
      t.segments.push_back(std::move(s));
    }
    return t;
  }

 private:
  // DESIGN.md §5: the host runs ahead of the GPU through a whole pass. When
  // every item's host time is known, the gaps are recomputed for the pass as
  // one sequence: item i is dispatched once the host has spent the host time
  // of items 0..i, and starts when dispatched and its predecessor is done.
  // The host and the GPU start the pass together (the synchronous pipeline
  // exchange, or the optimizer, has just synchronised them).
  void ReplayHost() {
    std::vector<Item*> items;
    for (Segment& s : segments_) {
      for (Item& i : s.items) {
        if (i.host_ns <= 0) return;  // measured gaps without host times: keep them
        items.push_back(&i);
      }
    }
    // Times are relative to the first kernel's dispatch.
    int64_t host = -items.front()->host_ns, gpu = 0;
    Item* previous = nullptr;
    for (Item* i : items) {
      host += i->host_ns;
      const int64_t start = std::max(gpu, host);
      if (previous != nullptr) previous->gap_ns = start - gpu;
      gpu = start + i->duration_ns;
      previous = i;
    }
    // What follows the pass waits for its own dispatch; like the first
    // kernel here, charge it one lead-in of this pass's first dispatch.
    if (previous != nullptr) previous->gap_ns = items.front()->host_ns;
  }

  LabelFn label_;
  const int64_t collective_host_ns_;
  std::vector<Segment> segments_;
  int64_t tensor_parallel_ns_ = 0;
};

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
        layers_per_stage_(LayersPerStage(job)),
        bucketing_(BucketsGradients(job)),
        activation_bytes_(ActivationBytes(job)) {}

  StageTemplates Make(StageEnds ends);

 private:
  const OperatorProfile& Op(OperatorKind op, double num_parameters = 0) {
    return lookup_.Operator(MakeOperatorKey(
        job_.cluster.gpu.name, plan_.dtype, op, model_.hidden_size, model_.num_heads, model_.ffn(),
        model_.seq_len, plan_.micro_batch, t_, PaddedVocab(model_, t_),
        static_cast<int64_t>(num_parameters), model_.arch, model_.kv_heads()));
  }
  // A TP all-reduce inside training: the collective plus the in-training
  // overhead (DESIGN.md §5), which grows with the group size.
  int64_t TensorParallelNs(double bytes) {
    if (t_ == 1) return 0;
    const AnalyticalParams& p = lookup_.params();
    return lookup_.CollectiveNs(Collective::kAllReduce, bytes, TensorParallelGroup(job_))
               .latency_ns +
           std::llround(p.tp_collective_overhead_ns +
                        p.tp_collective_overhead_per_rank_ns * static_cast<double>(t_));
  }
  TemplateWriter Writer() {
    return TemplateWriter(label_, std::llround(lookup_.params().host_dispatch_ns));
  }
  ActionTemplate Forward(StageEnds ends);
  ActionTemplate Backward(StageEnds ends, bool bucketed);

  const Job& job_;
  const ModelSpec& model_;
  const ParallelPlan& plan_;
  ProfileLookup& lookup_;
  const Granularity granularity_;
  LabelFn label_;
  const int64_t t_, p_, layers_per_stage_;
  const bool bucketing_;
  const double activation_bytes_;
};

ActionTemplate TemplateMaker::Forward(StageEnds ends) {
  TemplateWriter w = Writer();
  const int32_t tp_label = label_("tp_all_reduce");
  const int64_t tp_ns = TensorParallelNs(activation_bytes_);
  if (ends.has_embedding) {
    w.Operator(Op(OperatorKind::kEmbeddingFwd));
    if (t_ > 1) w.TensorParallel(tp_ns, tp_label);  // vocabulary-parallel embedding
  }
  for (int64_t l = 0; l < layers_per_stage_; ++l) {
    w.Operator(Op(OperatorKind::kAttentionFwd));
    if (t_ > 1) w.TensorParallel(tp_ns, tp_label);
    w.Operator(Op(OperatorKind::kMlpFwd));
    if (t_ > 1) w.TensorParallel(tp_ns, tp_label);
  }
  if (ends.has_logit) {
    w.Operator(Op(OperatorKind::kLogitFwd));
    w.Operator(Op(OperatorKind::kLossFwd));
    if (t_ > 1) {
      // Vocabulary-parallel cross-entropy all-reduces the max, the sum of
      // exponentials and the target logit: fp32 per token each.
      const double bytes = static_cast<double>(plan_.micro_batch * model_.seq_len) * 4;
      const int64_t small_ns = TensorParallelNs(bytes);
      for (int i = 0; i < 3; ++i) w.TensorParallel(small_ns, tp_label);
    }
  }
  return std::move(w).Take(granularity_, label_("forward"));
}

// `bucketed`: split the pass where a gradient bucket fills (the last
// micro-batch with gradient bucketing).
ActionTemplate TemplateMaker::Backward(StageEnds ends, bool bucketed) {
  TemplateWriter w = Writer();
  const int32_t tp_label = label_("tp_all_reduce");
  const int64_t tp_ns = TensorParallelNs(activation_bytes_);
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
    if (t_ > 1) w.TensorParallel(tp_ns, tp_label);
    // With p > 1 the last stage holds its own copy of a tied embedding.
    gradients_ready(OutputParametersPerGpu(model_, t_, p_));
  }
  const double layer_params = LayerParameterCount(model_) / t;
  for (int64_t l = 0; l < layers_per_stage_; ++l) {
    if (plan_.recompute == Recompute::kFull) {
      // Full recomputation re-runs the layer's forward before its backward.
      w.Operator(Op(OperatorKind::kAttentionFwd));
      if (t_ > 1) w.TensorParallel(tp_ns, tp_label);
      w.Operator(Op(OperatorKind::kMlpFwd));
      if (t_ > 1) w.TensorParallel(tp_ns, tp_label);
    }
    w.Operator(Op(OperatorKind::kMlpBwd));
    if (t_ > 1) w.TensorParallel(tp_ns, tp_label);
    w.Operator(Op(OperatorKind::kAttentionBwd));
    if (t_ > 1) w.TensorParallel(tp_ns, tp_label);
    gradients_ready(layer_params);
  }
  if (ends.has_embedding) {
    w.Operator(Op(OperatorKind::kEmbeddingBwd));
    gradients_ready(EmbeddingParametersPerGpu(model_, t_));
  }
  w.EndSegment(bucketed ? pending : 0);
  return std::move(w).Take(granularity_, label_("backward"));
}

StageTemplates TemplateMaker::Make(StageEnds ends) {
  StageTemplates s;
  const double t = static_cast<double>(t_);
  s.parameters_per_gpu = static_cast<double>(layers_per_stage_) * LayerParameterCount(model_) / t;
  if (ends.has_embedding) s.parameters_per_gpu += EmbeddingParametersPerGpu(model_, t_);
  if (ends.has_logit) s.parameters_per_gpu += OutputParametersPerGpu(model_, t_, p_);
  s.forward = Forward(ends);
  s.backward = Backward(ends, /*bucketed=*/false);
  s.backward_last = bucketing_ ? Backward(ends, /*bucketed=*/true) : s.backward;
  TemplateWriter w = Writer();
  w.Operator(Op(OperatorKind::kOptimizerStep, s.parameters_per_gpu));
  s.optimizer = std::move(w).Take(granularity_, label_("optimizer_step"));
  for (Segment& seg : s.optimizer.segments) {
    for (Item& i : seg.items) i.kind = TaskKind::kOptimizer;
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
  return {t, per_node, static_cast<double>(per_node) / static_cast<double>(gpn)};
}

CommGroup DataParallelGroup(const Job& job) {
  const int64_t t = job.plan.tensor_parallel, d = job.plan.data_parallel;
  const int64_t gpn = job.cluster.gpus_per_node;
  const int64_t per_node = t < gpn ? std::max<int64_t>(1, std::min(d, gpn / t)) : 1;
  return {d, per_node, static_cast<double>(per_node) / static_cast<double>(gpn)};
}

CommGroup StagePairGroup(const Job& job, int64_t stage, int64_t stages_apart) {
  const int64_t td = job.plan.tensor_parallel * job.plan.data_parallel;
  const int64_t gpn = job.cluster.gpus_per_node;
  bool crosses = false;
  for (int64_t i = 0; i < std::min(td, gpn) && !crosses; ++i) {
    const int64_t rank = stage * td + i;
    crosses = rank / gpn != (rank + stages_apart * td) / gpn;
  }
  if (td > gpn) crosses = true;
  return {2, crosses ? 1 : 2, 1.0 / static_cast<double>(std::min(td, gpn))};
}

double ActivationBytes(const Job& job) {
  return static_cast<double>(job.plan.micro_batch) * static_cast<double>(job.model.seq_len) *
         static_cast<double>(job.model.hidden_size) * kElemBytes;
}

int64_t LayersPerStage(const Job& job) { return job.model.num_layers / job.plan.pipeline_parallel; }

bool BucketsGradients(const Job& job) {
  return job.plan.gradient_bucketing && job.plan.data_parallel > 1;
}

}  // namespace vtrain::internal
