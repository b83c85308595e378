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
  int64_t host_ns = 0;  // host dispatch time; 0 when unknown
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

// Where the builder puts tasks: a materialised graph, or a timeline that runs
// each task as soon as it is generated (the streaming fast path).
class GraphSink {
 public:
  using Handle = TaskId;
  // Every task of the graph is one kernel, collective or merged pass.
  static constexpr bool kMergesSends = false;
  GraphSink(TaskGraph& graph, const std::function<bool()>& cancelled)
      : graph_(graph), cancelled_(cancelled) {}
  static Handle None() { return -1; }
  static bool IsSet(Handle h) { return h >= 0; }
  StreamId AddStream(std::string name) { return graph_.AddStream(std::move(name)); }
  int32_t Label(const std::string& name) { return graph_.AddLabel(name); }
  void Reserve(int64_t tasks, int64_t edges) { graph_.Reserve(tasks, edges); }
  Handle Add(StreamId stream, int64_t duration_ns, int64_t gap_ns, TaskKind kind, int32_t label,
             absl::Span<const Handle> parents) {
    if ((graph_.num_tasks() & 0xFFFF) == 0xFFFF && cancelled_ && cancelled_()) stopped_ = true;
    return graph_.AddTask(stream, duration_ns, gap_ns, kind, label, parents);
  }
  bool Stopped() const { return stopped_; }
  int64_t num_tasks() const { return graph_.num_tasks(); }

 private:
  TaskGraph& graph_;
  const std::function<bool()>& cancelled_;
  bool stopped_ = false;
};

class TimelineSink {
 public:
  using Handle = Completion;
  // A pass and the pipeline send after it become one task (see Build).
  static constexpr bool kMergesSends = true;
  explicit TimelineSink(const std::function<bool()>& cancelled) : cancelled_(cancelled) {}
  static Handle None() { return Completion{}; }
  static bool IsSet(const Handle& h) { return h.finish_ns >= 0; }
  StreamId AddStream(const std::string&) { return timeline_.AddStream(); }
  int32_t Label(const std::string&) { return 0; }
  void Reserve(int64_t, int64_t) {}
  Handle Add(StreamId stream, int64_t duration_ns, int64_t gap_ns, TaskKind kind, int32_t,
             absl::Span<const Handle> parents) {
    if ((++num_tasks_ & 0xFFFF) == 0 && cancelled_ && cancelled_()) stopped_ = true;
    return timeline_.Run(stream, duration_ns, gap_ns, kind, parents);
  }
  // Add with no gap and at most one parent (the fast path's merged passes).
  Handle AddOne(StreamId stream, int64_t duration_ns, TaskKind kind, const Handle* parent,
                int64_t tail_ns) {
    if ((++num_tasks_ & 0xFFFF) == 0 && cancelled_ && cancelled_()) stopped_ = true;
    const bool binds = parent != nullptr && parent->finish_ns > 0;
    return timeline_.RunAfter(stream, duration_ns, 0, kind, binds ? parent->finish_ns : 0,
                              binds ? parent : nullptr, tail_ns);
  }
  bool Stopped() const { return stopped_; }
  int64_t num_tasks() const { return num_tasks_; }
  const Timeline& timeline() const { return timeline_; }

 private:
  const std::function<bool()>& cancelled_;
  Timeline timeline_;
  int64_t num_tasks_ = 0;
  bool stopped_ = false;
};

template <typename Sink>
class TemplateWriter {
 public:
  // `collective_host_ns`: host time to launch a collective.
  TemplateWriter(Sink& sink, int64_t collective_host_ns)
      : sink_(sink), collective_host_ns_(collective_host_ns) {
    segments_.emplace_back();
  }

  void Operator(const OperatorProfile& profile) {
    for (const KernelRecord& k : profile.kernels) {
      segments_.back().items.push_back(Item{k.duration_ns, k.gap_ns, sink_.Label(k.name),
                                            TaskKind::kCompute, k.host_ns});
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

  Sink& sink_;
  const int64_t collective_host_ns_;
  std::vector<Segment> segments_;
  int64_t tensor_parallel_ns_ = 0;
};

// Point-to-point transfers from one stage to its neighbour, in micro-batch
// order. Both schedules produce and consume them in that order, so a FIFO
// whose storage is reused once drained holds only those in flight.
template <typename Handle>
class SendQueue {
 public:
  bool empty() const { return size_ == 0; }
  void Push(int64_t micro_batch, const Handle& h) {
    VTRAIN_CHECK(micro_batch == pushed_++);
    if (size_ == ring_.size()) Grow();
    size_t tail = head_ + size_;
    if (tail >= ring_.size()) tail -= ring_.size();
    ring_[tail] = h;
    ++size_;
  }
  Handle Pop(int64_t micro_batch) {
    VTRAIN_CHECK(size_ > 0 && micro_batch == popped_++);
    const Handle h = ring_[head_];
    if (++head_ == ring_.size()) head_ = 0;
    --size_;
    return h;
  }

 private:
  // A ring buffer that doubles when full; 1F1B keeps at most p in flight.
  void Grow() {
    std::vector<Handle> bigger(std::max<size_t>(8, 2 * ring_.size()));
    for (size_t i = 0; i < size_; ++i) bigger[i] = ring_[(head_ + i) % ring_.size()];
    ring_ = std::move(bigger);
    head_ = 0;
  }

  std::vector<Handle> ring_;
  size_t head_ = 0, size_ = 0;
  int64_t pushed_ = 0, popped_ = 0;
};

struct StageTemplates {
  ActionTemplate forward;
  ActionTemplate backward;       // every micro-batch but the last
  ActionTemplate backward_last;  // the last, split at gradient buckets
  ActionTemplate optimizer;
  double parameters_per_gpu = 0;
};

template <typename Sink>
class Builder {
 public:
  using Handle = typename Sink::Handle;

  Builder(const Job& job, ProfileLookup& lookup, const BuildOptions& options, Sink& sink)
      : sink_(sink),
        job_(job),
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

  // Generates every task into the sink; fills stages().
  absl::Status Build();
  std::vector<StageInfo>& stages() { return stages_; }
  int64_t num_micro_batches() const { return m_; }

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

  // A TP all-reduce inside training: the collective plus the in-training
  // overhead (DESIGN.md §5), which grows with the group size.
  int64_t TensorParallelNs(double bytes) {
    if (t_ == 1) return 0;
    const AnalyticalParams& p = lookup_.params();
    return CollectiveNs(Collective::kAllReduce, bytes, TensorParallelGroup()) +
           std::llround(p.tp_collective_overhead_ns +
                        p.tp_collective_overhead_per_rank_ns * static_cast<double>(t_));
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
  // Whether the sink folds the send after `t` into it: only a pass already
  // merged into one task, whose end nothing but the send depends on.
  static bool MergesSend(const ActionTemplate& t) {
    return Sink::kMergesSends && t.segments.size() == 1 && t.segments[0].items.size() == 1 &&
           t.segments[0].bucket_bytes == 0;
  }
  ActionTemplate Forward(bool has_embedding, bool has_logit);
  ActionTemplate Backward(bool has_embedding, bool has_logit, bool bucketed);
  int64_t CountTasks() const;
  void EmitAction(int64_t stage, PipelineAction action);
  Handle EmitTemplate(const ActionTemplate& t, StreamId stream, absl::Span<const Handle> parents,
                      StreamId bucket_stream, Handle* last_bucket);
  void EmitTail();

  Sink& sink_;
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

  std::vector<StageInfo> stages_;
  std::vector<const StageTemplates*> stage_templates_;
  std::vector<StageTemplates> distinct_templates_;  // first, middle, last, or single
  std::vector<int64_t> send_ns_;                    // per stage boundary s -> s+1
  int32_t send_label_ = 0, dp_label_ = 0, emb_label_ = 0;
  // forward_sends_[s]: stage s to s+1; backward_sends_[s]: stage s to s-1.
  std::vector<SendQueue<Handle>> forward_sends_, backward_sends_;
  std::vector<Handle> last_backward_, last_dp_;       // per stage
};

template <typename Sink>
ActionTemplate Builder<Sink>::Forward(bool has_embedding, bool has_logit) {
  TemplateWriter<Sink> w(sink_, std::llround(lookup_.params().host_dispatch_ns));
  const int32_t tp_label = sink_.Label("tp_all_reduce");
  const int64_t tp_ns = TensorParallelNs(activation_bytes_);
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
      const int64_t small_ns = TensorParallelNs(bytes);
      for (int i = 0; i < 3; ++i) w.TensorParallel(small_ns, tp_label);
    }
  }
  return std::move(w).Take(options_.granularity, sink_.Label("forward"));
}

template <typename Sink>
ActionTemplate Builder<Sink>::Backward(bool has_embedding, bool has_logit, bool bucketed) {
  TemplateWriter<Sink> w(sink_, std::llround(lookup_.params().host_dispatch_ns));
  const int32_t tp_label = sink_.Label("tp_all_reduce");
  const int64_t tp_ns = TensorParallelNs(activation_bytes_);
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
  return std::move(w).Take(options_.granularity, sink_.Label("backward"));
}

template <typename Sink>
StageTemplates Builder<Sink>::MakeTemplates(bool has_embedding, bool has_logit) {
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
  TemplateWriter<Sink> w(sink_, std::llround(lookup_.params().host_dispatch_ns));
  w.Operator(Op(OperatorKind::kOptimizerStep, s.parameters_per_gpu));
  s.optimizer = std::move(w).Take(options_.granularity, sink_.Label("optimizer_step"));
  for (Segment& seg : s.optimizer.segments) {
    for (Item& i : seg.items) i.kind = TaskKind::kOptimizer;
  }
  return s;
}

template <typename Sink>
int64_t Builder<Sink>::CountTasks() const {
  double count = 0;
  for (int64_t s = 0; s < p_; ++s) {
    const StageTemplates& st = *stage_templates_[s];
    const double m = static_cast<double>(m_);
    count += m * static_cast<double>(st.forward.NumItems()) +
             (m - 1) * static_cast<double>(st.backward.NumItems()) +
             static_cast<double>(st.backward_last.NumItems() + st.optimizer.NumItems());
    // Pipeline sends, unless folded into the pass before them.
    if (s + 1 < p_ && !MergesSend(st.forward)) count += m;
    if (s > 0) count += MergesSend(st.backward) ? 1 : m;
    if (d_ > 1) {
      count += bucketing_ ? static_cast<double>(st.backward_last.segments.size()) : 1;
    }
  }
  if (p_ > 1) count += 1;  // embedding gradient all-reduce
  return count > 9e18 ? INT64_MAX : static_cast<int64_t>(count);
}

template <typename Sink>
typename Sink::Handle Builder<Sink>::EmitTemplate(const ActionTemplate& t, StreamId stream,
                                                  absl::Span<const Handle> parents,
                                                  StreamId bucket_stream, Handle* last_bucket) {
  // The operator fast path's common case: one merged task, no bucket.
  if (t.segments.size() == 1 && t.segments[0].items.size() == 1 &&
      t.segments[0].bucket_bytes == 0) {
    const Item& i = t.segments[0].items[0];
    return sink_.Add(stream, i.duration_ns, i.gap_ns, i.kind, i.label, parents);
  }
  Handle last = Sink::None();
  bool first = true;
  for (const Segment& seg : t.segments) {
    for (const Item& i : seg.items) {
      last = sink_.Add(stream, i.duration_ns, i.gap_ns, i.kind, i.label,
                       first ? parents : absl::Span<const Handle>());
      first = false;
    }
    if (seg.bucket_bytes > 0 && last_bucket != nullptr) {
      const int64_t ns =
          CollectiveNs(Collective::kAllReduce, seg.bucket_bytes, DataParallelGroup());
      *last_bucket = sink_.Add(bucket_stream, ns, 0, TaskKind::kDataParallel, dp_label_,
                               absl::MakeConstSpan(&last, 1));
    }
  }
  return last;
}

template <typename Sink>
void Builder<Sink>::EmitAction(int64_t s, PipelineAction a) {
  const StageTemplates& st = *stage_templates_[s];
  const StageInfo& info = stages_[s];
  const int64_t j = a.micro_batch;
  if (a.forward) {
    Handle recv = Sink::None();
    if (s > 0) recv = forward_sends_[s - 1].Pop(j);
    const auto parents = s > 0 ? absl::MakeConstSpan(&recv, 1) : absl::Span<const Handle>();
    const Handle last =
        EmitTemplate(st.forward, info.compute_stream, parents, info.data_parallel_stream, nullptr);
    if (s + 1 < p_) {
      forward_sends_[s].Push(j, sink_.Add(info.compute_stream, send_ns_[s], 0,
                                          TaskKind::kPipeline, send_label_,
                                          absl::MakeConstSpan(&last, 1)));
    }
    return;
  }
  const bool is_last = j == m_ - 1;
  Handle recv = Sink::None();
  if (s + 1 < p_) recv = backward_sends_[s + 1].Pop(j);
  const auto parents = s + 1 < p_ ? absl::MakeConstSpan(&recv, 1) : absl::Span<const Handle>();
  const bool bucketed = is_last && bucketing_ && d_ > 1;
  const Handle last =
      EmitTemplate(is_last ? st.backward_last : st.backward, info.compute_stream, parents,
                   info.data_parallel_stream, bucketed ? &last_dp_[s] : nullptr);
  if (s > 0) {
    backward_sends_[s].Push(j, sink_.Add(info.compute_stream, send_ns_[s - 1], 0,
                                         TaskKind::kPipeline, send_label_,
                                         absl::MakeConstSpan(&last, 1)));
  }
  if (is_last) last_backward_[s] = last;
}

template <typename Sink>
void Builder<Sink>::EmitTail() {
  // Without bucketing, each stage all-reduces all its gradients at once.
  if (d_ > 1 && !bucketing_) {
    for (int64_t s = 0; s < p_; ++s) {
      const double bytes = stage_templates_[s]->parameters_per_gpu * kElemBytes;
      const int64_t ns = CollectiveNs(Collective::kAllReduce, bytes, DataParallelGroup());
      last_dp_[s] = sink_.Add(stages_[s].data_parallel_stream, ns, 0, TaskKind::kDataParallel,
                              dp_label_, absl::MakeConstSpan(&last_backward_[s], 1));
    }
  }
  auto done = [&](int64_t s) {
    return Sink::IsSet(last_dp_[s]) ? last_dp_[s] : last_backward_[s];
  };
  Handle embedding_sync = Sink::None();
  if (p_ > 1) {
    // Tied embeddings: the first and last stages all-reduce the word
    // embedding gradient (Megatron's allreduce_embedding_grads).
    const double bytes = static_cast<double>(model_.vocab_size) *
                         static_cast<double>(model_.hidden_size) / static_cast<double>(t_) *
                         kElemBytes;
    const int64_t ns = CollectiveNs(Collective::kAllReduce, bytes, StagePairGroup(0, p_ - 1));
    const Handle ends[2] = {done(0), done(p_ - 1)};
    embedding_sync = sink_.Add(stages_[0].data_parallel_stream, ns, 0, TaskKind::kDataParallel,
                               emb_label_, ends);
  }
  for (int64_t s = 0; s < p_; ++s) {
    Handle parents[2] = {done(s), embedding_sync};
    const bool synced = Sink::IsSet(embedding_sync) && (s == 0 || s == p_ - 1);
    EmitTemplate(stage_templates_[s]->optimizer, stages_[s].compute_stream,
                 absl::MakeConstSpan(parents, synced ? 2 : 1), stages_[s].data_parallel_stream,
                 nullptr);
  }
}

template <typename Sink>
absl::Status Builder<Sink>::Build() {
  layers_per_stage_ = model_.num_layers / p_;
  bucketing_ = plan_.gradient_bucketing && d_ > 1;
  send_label_ = sink_.Label("pipeline_send_recv");
  dp_label_ = sink_.Label("dp_all_reduce");
  emb_label_ = sink_.Label("embedding_all_reduce");

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
  sink_.Reserve(tasks, 2 * tasks / std::max<int64_t>(1, stage_templates_[0]->forward.NumItems()) +
                          4 * p_);

  send_ns_.resize(std::max<int64_t>(0, p_ - 1));
  const double send_bytes = activation_bytes_ / static_cast<double>(t_);  // scatter-gather
  for (int64_t s = 0; s + 1 < p_; ++s) {
    send_ns_[s] = CollectiveNs(Collective::kSendRecv, send_bytes, StagePairGroup(s, 1));
  }

  stages_.resize(p_);
  for (int64_t s = 0; s < p_; ++s) {
    StageInfo& info = stages_[s];
    const StageTemplates& st = *stage_templates_[s];
    info.first_layer = s * layers_per_stage_;
    info.num_layers = layers_per_stage_;
    info.has_embedding = s == 0;
    info.has_logit = s == p_ - 1;
    info.compute_stream = sink_.AddStream(absl::StrCat("stage", s, "/compute"));
    info.data_parallel_stream = sink_.AddStream(absl::StrCat("stage", s, "/data_parallel"));
    info.tensor_parallel_ns = m_ * (st.forward.tensor_parallel_ns + st.backward.tensor_parallel_ns);
    info.pipeline_send_ns =
        m_ * ((s + 1 < p_ ? send_ns_[s] : 0) + (s > 0 ? send_ns_[s - 1] : 0));
    info.parameters_per_gpu = st.parameters_per_gpu;
  }

  forward_sends_.resize(p_);
  backward_sends_.resize(p_);
  last_backward_.assign(p_, Sink::None());
  last_dp_.assign(p_, Sink::None());

  // Emit actions in a wavefront so that every task's parents exist when it is
  // added: forwards flow down the pipeline, backwards up.
  std::vector<int64_t> forwards(p_, 0), backwards(p_, 0);
  int64_t remaining = p_ * 2 * m_;
  // The streaming fast path's common actions, precomputed per stage: a pass
  // merged into one task together with its send. The send starts when the
  // pass's last gap ends (start(send) = finish(pass) + gap), so the sum is
  // exact. The last backward keeps its send separate: its end also starts
  // the gradient all-reduce. Every other action goes through EmitAction.
  struct MergedPass {
    bool forward_ok = false, backward_ok = false;
    int64_t forward_ns = 0, backward_ns = 0, forward_send_ns = 0, backward_send_ns = 0;
  };
  std::vector<MergedPass> merged(p_);
  for (int64_t s = 0; s < p_ && Sink::kMergesSends; ++s) {
    const StageTemplates& st = *stage_templates_[s];
    MergedPass& mp = merged[s];
    if (s + 1 < p_ && MergesSend(st.forward)) {
      const Item& i = st.forward.segments[0].items[0];
      mp.forward_ok = true;
      mp.forward_send_ns = send_ns_[s];
      mp.forward_ns = i.duration_ns + i.gap_ns + send_ns_[s];
    }
    if (s > 0 && MergesSend(st.backward)) {
      const Item& i = st.backward.segments[0].items[0];
      mp.backward_ok = true;
      mp.backward_send_ns = send_ns_[s - 1];
      mp.backward_ns = i.duration_ns + i.gap_ns + send_ns_[s - 1];
    }
  }
  auto drain = [&](int64_t s) {
    int64_t f = forwards[s], b = backwards[s];
    const int64_t begin = f + b;
    const MergedPass& mp = merged[s];
    const StreamId stream = stages_[s].compute_stream;
    while (b < m_ && !sink_.Stopped()) {
      const bool forward = NextIsForward(plan_.schedule, s, p_, m_, f, b);
      // Sends arrive in micro-batch order, so a waiting one is this action's.
      if (forward ? (s > 0 && forward_sends_[s - 1].empty())
                  : (s + 1 < p_ && backward_sends_[s + 1].empty())) {
        break;
      }
      if constexpr (Sink::kMergesSends) {
        if (forward && mp.forward_ok) {
          Handle recv = Sink::None();
          if (s > 0) recv = forward_sends_[s - 1].Pop(f);
          forward_sends_[s].Push(f, sink_.AddOne(stream, mp.forward_ns, TaskKind::kPipeline,
                                                 s > 0 ? &recv : nullptr, mp.forward_send_ns));
          ++f;
          continue;
        }
        if (!forward && mp.backward_ok && b != m_ - 1) {
          Handle recv = Sink::None();
          if (s + 1 < p_) recv = backward_sends_[s + 1].Pop(b);
          backward_sends_[s].Push(b, sink_.AddOne(stream, mp.backward_ns, TaskKind::kPipeline,
                                                  s + 1 < p_ ? &recv : nullptr,
                                                  mp.backward_send_ns));
          ++b;
          continue;
        }
      }
      EmitAction(s, PipelineAction{forward, forward ? f++ : b++});
    }
    forwards[s] = f;
    backwards[s] = b;
    remaining -= f + b - begin;
    return f + b > begin;
  };
  while (remaining > 0) {
    bool progressed = false;
    for (int64_t s = 0; s < p_; ++s) progressed |= drain(s);
    for (int64_t s = p_ - 1; s >= 0; --s) progressed |= drain(s);
    if (sink_.Stopped()) return absl::CancelledError("simulation cancelled by the caller");
    if (!progressed) {
      return absl::InternalError(absl::StrCat("pipeline schedule ", ScheduleName(plan_.schedule),
                                              " deadlocked with ", remaining, " actions left"));
    }
  }
  EmitTail();
  VTRAIN_CHECK(sink_.num_tasks() == tasks);
  return absl::OkStatus();
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
  IterationGraph out;
  GraphSink sink(out.graph, options.cancelled);
  Builder<GraphSink> builder(job, lookup, options, sink);
  VTRAIN_RETURN_IF_ERROR(builder.Build());
  out.stages = std::move(builder.stages());
  out.num_micro_batches = builder.num_micro_batches();
  return out;
}

absl::StatusOr<IterationSimulation> SimulateIteration(const Job& job, ProfileLookup& lookup,
                                                      const BuildOptions& options,
                                                      const std::function<bool()>& cancelled) {
  VTRAIN_RETURN_IF_ERROR(ValidateJob(job));
  TimelineSink sink(cancelled);
  Builder<TimelineSink> builder(job, lookup, options, sink);
  VTRAIN_RETURN_IF_ERROR(builder.Build());
  IterationSimulation out;
  out.result = sink.timeline().Finish();
  out.stages = std::move(builder.stages());
  out.num_micro_batches = builder.num_micro_batches();
  out.num_tasks = sink.num_tasks();
  return out;
}

}  // namespace vtrain
