#include "core/graph/builder.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/graph/schedule.h"
#include "core/profile/analytical.h"
#include "core/util/status_macros.h"

namespace vtrain {
namespace {

constexpr double kElemBytes = 2;  // fp16 / bf16 activations and gradients

// One future task of an action, before it is placed in the graph.
struct Item {
  int64_t duration_ns = 0;
  int64_t gap_ns = 0;
  int32_t label = 0;
  TaskKind kind = TaskKind::kCompute;
};

// A run of items on the compute stream; when bucket_bytes > 0 a gradient
// all-reduce of that size follows it (last micro-batch only).
struct Segment {
  std::vector<Item> items;
  double bucket_bytes = 0;
};

// The tasks one forward or backward pass of one micro-batch puts on one
// stage's compute stream.
struct ActionTemplate {
  std::vector<Segment> segments;
  int64_t tensor_parallel_ns = 0;
  int64_t NumItems() const {
    int64_t n = 0;
    for (const Segment& s : segments) n += static_cast<int64_t>(s.items.size());
    return n;
  }
};

class TemplateWriter {
 public:
  explicit TemplateWriter(TaskGraph& graph) : graph_(graph) { segments_.emplace_back(); }

  void Operator(const OperatorProfile& profile) {
    for (const KernelRecord& k : profile.kernels) {
      segments_.back().items.push_back(
          Item{k.duration_ns, k.gap_ns, graph_.AddLabel(k.name), TaskKind::kCompute});
    }
  }
  void TensorParallel(int64_t duration_ns, int32_t label) {
    segments_.back().items.push_back(Item{duration_ns, 0, label, TaskKind::kTensorParallel});
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
  TaskGraph& graph_;
  std::vector<Segment> segments_;
  int64_t tensor_parallel_ns_ = 0;
};

struct StageTemplates {
  ActionTemplate forward;
  ActionTemplate backward;       // every micro-batch but the last
  ActionTemplate backward_last;  // the last, split at gradient buckets
  ActionTemplate optimizer;
  double parameters_per_gpu = 0;
};

class Builder {
 public:
  Builder(const Job& job, ProfileLookup& lookup, const BuildOptions& options)
      : job_(job),
        model_(job.model),
        plan_(job.plan),
        cluster_(job.cluster),
        lookup_(lookup),
        options_(options),
        t_(plan_.tensor_parallel),
        d_(plan_.data_parallel),
        p_(plan_.pipeline_parallel),
        m_(plan_.num_micro_batches()),
        gpn_(cluster_.gpus_per_node),
        activation_bytes_(static_cast<double>(plan_.micro_batch) *
                          static_cast<double>(model_.seq_len) *
                          static_cast<double>(model_.hidden_size) * kElemBytes) {}

  absl::StatusOr<IterationGraph> Build();

 private:
  OperatorKey Key(OperatorKind op, double num_parameters = 0) const {
    return MakeOperatorKey(cluster_.gpu.name, plan_.dtype, op, model_.hidden_size,
                           model_.num_heads, model_.ffn(), model_.seq_len, plan_.micro_batch, t_,
                           model_.vocab_size, static_cast<int64_t>(num_parameters));
  }
  const OperatorProfile& Op(OperatorKind op, double num_parameters = 0) {
    return lookup_.Operator(Key(op, num_parameters));
  }
  int64_t CollectiveNs(Collective c, double bytes, const CommGroup& group) {
    return lookup_.CollectiveNs(c, bytes, group).latency_ns;
  }

  // Megatron rank order: tensor-parallel ranks innermost, then data-parallel,
  // then pipeline (rank = stage * t * d + replica * t + tp_rank).
  CommGroup TensorParallelGroup() const {
    const int64_t per_node = std::gcd(t_, gpn_);
    return {t_, per_node, static_cast<double>(per_node) / static_cast<double>(gpn_)};
  }
  CommGroup DataParallelGroup() const {
    const int64_t per_node = t_ < gpn_ ? std::max<int64_t>(1, std::min(d_, gpn_ / t_)) : 1;
    return {d_, per_node, static_cast<double>(per_node) / static_cast<double>(gpn_)};
  }
  // Two ranks `stages_apart` stages apart: on one node or not, with the NIC
  // shared by the t*d GPUs of a stage on a node that send at once.
  CommGroup StagePairGroup(int64_t stage, int64_t stages_apart) const {
    const int64_t td = t_ * d_;
    bool crosses = false;
    for (int64_t i = 0; i < std::min(td, gpn_) && !crosses; ++i) {
      const int64_t rank = stage * td + i;
      crosses = rank / gpn_ != (rank + stages_apart * td) / gpn_;
    }
    if (td > gpn_) crosses = true;
    return {2, crosses ? 1 : 2, 1.0 / static_cast<double>(std::min(td, gpn_))};
  }

  StageTemplates MakeTemplates(bool has_embedding, bool has_logit);
  ActionTemplate Forward(bool has_embedding, bool has_logit);
  ActionTemplate Backward(bool has_embedding, bool has_logit, bool bucketed);
  int64_t CountTasks() const;
  void EmitAction(int64_t stage, PipelineAction action);
  TaskId EmitTemplate(const ActionTemplate& t, StreamId stream, absl::Span<const TaskId> parents,
                      StreamId bucket_stream, TaskId* last_bucket);
  void EmitTail();

  const Job& job_;
  const ModelSpec& model_;
  const ParallelPlan& plan_;
  const ClusterSpec& cluster_;
  ProfileLookup& lookup_;
  const BuildOptions& options_;
  const int64_t t_, d_, p_, m_, gpn_;
  const double activation_bytes_;
  int64_t layers_per_stage_ = 0;
  bool bucketing_ = false;

  IterationGraph out_;
  std::vector<const StageTemplates*> stage_templates_;
  std::vector<StageTemplates> distinct_templates_;  // first, middle, last, or single
  std::vector<int64_t> send_ns_;                    // per stage boundary s -> s+1
  int32_t send_label_ = 0, dp_label_ = 0, emb_label_ = 0;
  std::vector<TaskId> forward_send_, backward_send_;  // [stage * m + micro-batch]
  std::vector<TaskId> last_backward_, last_dp_;       // per stage
};

ActionTemplate Builder::Forward(bool has_embedding, bool has_logit) {
  TemplateWriter w(out_.graph);
  const int32_t tp_label = out_.graph.AddLabel("tp_all_reduce");
  const int64_t tp_ns = t_ > 1 ? CollectiveNs(Collective::kAllReduce, activation_bytes_,
                                              TensorParallelGroup()) +
                                     std::llround(lookup_.params().tp_collective_overhead_ns)
                               : 0;
  if (has_embedding) {
    w.Operator(Op(OperatorKind::kEmbeddingFwd));
    if (t_ > 1) w.TensorParallel(tp_ns, tp_label);  // vocabulary-parallel embedding
  }
  for (int64_t l = 0; l < layers_per_stage_; ++l) {
    w.Operator(Op(OperatorKind::kAttentionFwd));
    if (t_ > 1) w.TensorParallel(tp_ns, tp_label);
    w.Operator(Op(OperatorKind::kMlpFwd));
    if (t_ > 1) w.TensorParallel(tp_ns, tp_label);
  }
  if (has_logit) {
    w.Operator(Op(OperatorKind::kLogitFwd));
    w.Operator(Op(OperatorKind::kLossFwd));
    if (t_ > 1) {
      // Vocabulary-parallel cross-entropy all-reduces the max, the sum of
      // exponentials and the target logit: fp32 per token each.
      const double bytes = static_cast<double>(plan_.micro_batch * model_.seq_len) * 4;
      const int64_t small_ns =
          CollectiveNs(Collective::kAllReduce, bytes, TensorParallelGroup()) +
          std::llround(lookup_.params().tp_collective_overhead_ns);
      for (int i = 0; i < 3; ++i) w.TensorParallel(small_ns, tp_label);
    }
  }
  return std::move(w).Take(options_.granularity, out_.graph.AddLabel("forward"));
}

ActionTemplate Builder::Backward(bool has_embedding, bool has_logit, bool bucketed) {
  TemplateWriter w(out_.graph);
  const int32_t tp_label = out_.graph.AddLabel("tp_all_reduce");
  const int64_t tp_ns = t_ > 1 ? CollectiveNs(Collective::kAllReduce, activation_bytes_,
                                              TensorParallelGroup()) +
                                     std::llround(lookup_.params().tp_collective_overhead_ns)
                               : 0;
  const double h = static_cast<double>(model_.hidden_size);
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
  if (has_logit) {
    w.Operator(Op(OperatorKind::kLossBwd));
    w.Operator(Op(OperatorKind::kLogitBwd));
    if (t_ > 1) w.TensorParallel(tp_ns, tp_label);
    // With p > 1 the last stage holds its own copy of the tied embedding.
    gradients_ready(2 * h + (p_ > 1 ? static_cast<double>(model_.vocab_size) * h / t : 0));
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
  if (has_embedding) {
    w.Operator(Op(OperatorKind::kEmbeddingBwd));
    gradients_ready(static_cast<double>(model_.vocab_size) * h / t +
                    static_cast<double>(model_.seq_len) * h);
  }
  w.EndSegment(bucketed ? pending : 0);
  return std::move(w).Take(options_.granularity, out_.graph.AddLabel("backward"));
}

StageTemplates Builder::MakeTemplates(bool has_embedding, bool has_logit) {
  StageTemplates s;
  const double h = static_cast<double>(model_.hidden_size);
  const double t = static_cast<double>(t_);
  s.parameters_per_gpu = static_cast<double>(layers_per_stage_) * LayerParameterCount(model_) / t;
  if (has_embedding) {
    s.parameters_per_gpu +=
        static_cast<double>(model_.vocab_size) * h / t + static_cast<double>(model_.seq_len) * h;
  }
  if (has_logit) {
    s.parameters_per_gpu += 2 * h + (p_ > 1 ? static_cast<double>(model_.vocab_size) * h / t : 0);
  }
  s.forward = Forward(has_embedding, has_logit);
  s.backward = Backward(has_embedding, has_logit, false);
  s.backward_last = bucketing_ ? Backward(has_embedding, has_logit, true) : s.backward;
  TemplateWriter w(out_.graph);
  w.Operator(Op(OperatorKind::kOptimizerStep, s.parameters_per_gpu));
  s.optimizer = std::move(w).Take(options_.granularity, out_.graph.AddLabel("optimizer_step"));
  for (Segment& seg : s.optimizer.segments) {
    for (Item& i : seg.items) i.kind = TaskKind::kOptimizer;
  }
  return s;
}

int64_t Builder::CountTasks() const {
  double count = 0;
  for (int64_t s = 0; s < p_; ++s) {
    const StageTemplates& st = *stage_templates_[s];
    const double m = static_cast<double>(m_);
    count += m * static_cast<double>(st.forward.NumItems()) +
             (m - 1) * static_cast<double>(st.backward.NumItems()) +
             static_cast<double>(st.backward_last.NumItems() + st.optimizer.NumItems());
    if (s + 1 < p_) count += m;  // forward sends
    if (s > 0) count += m;       // backward sends
    if (d_ > 1) {
      count += bucketing_ ? static_cast<double>(st.backward_last.segments.size()) : 1;
    }
  }
  if (p_ > 1) count += 1;  // embedding gradient all-reduce
  return count > 9e18 ? INT64_MAX : static_cast<int64_t>(count);
}

TaskId Builder::EmitTemplate(const ActionTemplate& t, StreamId stream,
                             absl::Span<const TaskId> parents, StreamId bucket_stream,
                             TaskId* last_bucket) {
  TaskGraph& g = out_.graph;
  TaskId last = -1;
  bool first = true;
  for (const Segment& seg : t.segments) {
    for (const Item& i : seg.items) {
      last = g.AddTask(stream, i.duration_ns, i.gap_ns, i.kind, i.label,
                       first ? parents : absl::Span<const TaskId>());
      first = false;
    }
    if (seg.bucket_bytes > 0 && last_bucket != nullptr) {
      const int64_t ns =
          CollectiveNs(Collective::kAllReduce, seg.bucket_bytes, DataParallelGroup());
      *last_bucket = g.AddTask(bucket_stream, ns, 0, TaskKind::kDataParallel, dp_label_, {last});
    }
  }
  return last;
}

void Builder::EmitAction(int64_t s, PipelineAction a) {
  const StageTemplates& st = *stage_templates_[s];
  const StageInfo& info = out_.stages[s];
  const int64_t j = a.micro_batch;
  TaskGraph& g = out_.graph;
  if (a.forward) {
    TaskId recv = s > 0 ? forward_send_[(s - 1) * m_ + j] : -1;
    const TaskId last = EmitTemplate(st.forward, info.compute_stream,
                                     s > 0 ? absl::MakeConstSpan(&recv, 1) : absl::Span<const TaskId>(),
                                     info.data_parallel_stream, nullptr);
    if (s + 1 < p_) {
      forward_send_[s * m_ + j] =
          g.AddTask(info.pipeline_stream, send_ns_[s], 0, TaskKind::kPipeline, send_label_, {last});
    }
    return;
  }
  const bool is_last = j == m_ - 1;
  TaskId recv = s + 1 < p_ ? backward_send_[(s + 1) * m_ + j] : -1;
  const bool bucketed = is_last && bucketing_ && d_ > 1;
  const TaskId last = EmitTemplate(
      is_last ? st.backward_last : st.backward, info.compute_stream,
      s + 1 < p_ ? absl::MakeConstSpan(&recv, 1) : absl::Span<const TaskId>(),
      info.data_parallel_stream, bucketed ? &last_dp_[s] : nullptr);
  if (s > 0) {
    backward_send_[s * m_ + j] =
        g.AddTask(info.pipeline_stream, send_ns_[s - 1], 0, TaskKind::kPipeline, send_label_, {last});
  }
  if (is_last) last_backward_[s] = last;
}

void Builder::EmitTail() {
  TaskGraph& g = out_.graph;
  // Without bucketing, each stage all-reduces all its gradients at once.
  if (d_ > 1 && !bucketing_) {
    for (int64_t s = 0; s < p_; ++s) {
      const double bytes = stage_templates_[s]->parameters_per_gpu * kElemBytes;
      const int64_t ns = CollectiveNs(Collective::kAllReduce, bytes, DataParallelGroup());
      last_dp_[s] = g.AddTask(out_.stages[s].data_parallel_stream, ns, 0, TaskKind::kDataParallel,
                              dp_label_, {last_backward_[s]});
    }
  }
  auto done = [&](int64_t s) { return last_dp_[s] >= 0 ? last_dp_[s] : last_backward_[s]; };
  TaskId embedding_sync = -1;
  if (p_ > 1) {
    // Tied embeddings: the first and last stages all-reduce the word
    // embedding gradient (Megatron's allreduce_embedding_grads).
    const double bytes = static_cast<double>(model_.vocab_size) *
                         static_cast<double>(model_.hidden_size) / static_cast<double>(t_) *
                         kElemBytes;
    const int64_t ns = CollectiveNs(Collective::kAllReduce, bytes, StagePairGroup(0, p_ - 1));
    embedding_sync = g.AddTask(out_.stages[0].data_parallel_stream, ns, 0,
                               TaskKind::kDataParallel, emb_label_, {done(0), done(p_ - 1)});
  }
  for (int64_t s = 0; s < p_; ++s) {
    std::vector<TaskId> parents = {done(s)};
    if (embedding_sync >= 0 && (s == 0 || s == p_ - 1)) parents.push_back(embedding_sync);
    EmitTemplate(stage_templates_[s]->optimizer, out_.stages[s].compute_stream, parents,
                 out_.stages[s].data_parallel_stream, nullptr);
  }
}

absl::StatusOr<IterationGraph> Builder::Build() {
  layers_per_stage_ = model_.num_layers / p_;
  bucketing_ = plan_.gradient_bucketing && d_ > 1;
  out_.num_micro_batches = m_;
  TaskGraph& g = out_.graph;
  send_label_ = g.AddLabel("pipeline_send_recv");
  dp_label_ = g.AddLabel("dp_all_reduce");
  emb_label_ = g.AddLabel("embedding_all_reduce");

  // Stages differ only in holding the embedding (first) or the logit (last).
  distinct_templates_.reserve(4);
  stage_templates_.resize(p_);
  auto templates_for = [&](bool emb, bool logit) -> const StageTemplates* {
    distinct_templates_.push_back(MakeTemplates(emb, logit));
    return &distinct_templates_.back();
  };
  if (p_ == 1) {
    stage_templates_[0] = templates_for(true, true);
  } else {
    stage_templates_[0] = templates_for(true, false);
    const StageTemplates* middle = p_ > 2 ? templates_for(false, false) : nullptr;
    for (int64_t s = 1; s + 1 < p_; ++s) stage_templates_[s] = middle;
    stage_templates_[p_ - 1] = templates_for(false, true);
  }

  const int64_t tasks = CountTasks();
  if (tasks > options_.max_tasks) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the iteration graph would have ", tasks, " tasks at ", GranularityName(options_.granularity),
        " granularity, above the limit max_tasks=", options_.max_tasks,
        "; use operator granularity, fewer micro-batches, or raise the limit"));
  }
  g.Reserve(tasks, 2 * tasks / std::max<int64_t>(1, stage_templates_[0]->forward.NumItems()) + 4 * p_);

  send_ns_.resize(std::max<int64_t>(0, p_ - 1));
  const double send_bytes = activation_bytes_ / static_cast<double>(t_);  // scatter-gather
  for (int64_t s = 0; s + 1 < p_; ++s) {
    send_ns_[s] = CollectiveNs(Collective::kSendRecv, send_bytes, StagePairGroup(s, 1));
  }

  out_.stages.resize(p_);
  for (int64_t s = 0; s < p_; ++s) {
    StageInfo& info = out_.stages[s];
    const StageTemplates& st = *stage_templates_[s];
    info.first_layer = s * layers_per_stage_;
    info.num_layers = layers_per_stage_;
    info.has_embedding = s == 0;
    info.has_logit = s == p_ - 1;
    info.compute_stream = g.AddStream(absl::StrCat("stage", s, "/compute"));
    info.pipeline_stream = g.AddStream(absl::StrCat("stage", s, "/pipeline"));
    info.data_parallel_stream = g.AddStream(absl::StrCat("stage", s, "/data_parallel"));
    info.tensor_parallel_ns = m_ * (st.forward.tensor_parallel_ns + st.backward.tensor_parallel_ns);
    info.parameters_per_gpu = st.parameters_per_gpu;
  }

  forward_send_.assign(p_ * m_, -1);
  backward_send_.assign(p_ * m_, -1);
  last_backward_.assign(p_, -1);
  last_dp_.assign(p_, -1);

  // Emit actions in a wavefront so that every task's parents exist when it is
  // added: forwards flow down the pipeline, backwards up.
  std::vector<int64_t> next(p_, 0);
  int64_t remaining = p_ * 2 * m_;
  auto drain = [&](int64_t s) {
    bool progressed = false;
    while (next[s] < 2 * m_) {
      const PipelineAction a = ScheduleAction(plan_.schedule, s, p_, m_, next[s]);
      const bool ready = a.forward ? (s == 0 || forward_send_[(s - 1) * m_ + a.micro_batch] >= 0)
                                   : (s + 1 == p_ || backward_send_[(s + 1) * m_ + a.micro_batch] >= 0);
      if (!ready) break;
      EmitAction(s, a);
      ++next[s];
      --remaining;
      progressed = true;
    }
    return progressed;
  };
  while (remaining > 0) {
    bool progressed = false;
    for (int64_t s = 0; s < p_; ++s) progressed |= drain(s);
    for (int64_t s = p_ - 1; s >= 0; --s) progressed |= drain(s);
    if (!progressed) {
      return absl::InternalError(absl::StrCat("pipeline schedule ", ScheduleName(plan_.schedule),
                                              " deadlocked with ", remaining, " actions left"));
    }
  }
  EmitTail();
  VTRAIN_CHECK(g.num_tasks() == tasks);
  return std::move(out_);
}

}  // namespace

absl::string_view GranularityName(Granularity g) {
  return g == Granularity::kKernel ? "kernel" : "operator";
}

absl::StatusOr<Granularity> ParseGranularity(absl::string_view name) {
  if (name == "kernel") return Granularity::kKernel;
  if (name == "operator") return Granularity::kOperator;
  return absl::InvalidArgumentError(
      absl::StrCat("granularity='", name, "' is unknown; use kernel or operator"));
}

absl::StatusOr<IterationGraph> BuildIterationGraph(const Job& job, ProfileLookup& lookup,
                                                   const BuildOptions& options) {
  VTRAIN_RETURN_IF_ERROR(ValidateJob(job));
  Builder builder(job, lookup, options);
  return builder.Build();
}

}  // namespace vtrain
