// Walks one training iteration of one data-parallel replica
// (docs/architecture.md#the-method, steps 2-3) and puts every task into a sink
// after its parents: the graph builder's sink stores them, the streaming
// simulator's runs them at once.
#ifndef VTRAIN_CORE_GRAPH_WALKER_H_
#define VTRAIN_CORE_GRAPH_WALKER_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "core/graph/iteration.h"
#include "core/graph/iteration_sink.h"
#include "core/graph/pass_templates.h"
#include "core/graph/pipeline_state.h"
#include "core/graph/schedule.h"
#include "core/graph/task_graph.h"
#include "core/profile/lookup.h"
#include "core/spec/job.h"
#include "core/util/status_macros.h"

namespace vtrain {

// Generates the tasks of one iteration of `job` into a sink, in an order in
// which every task's parents come first: pipeline stages, micro-batches
// under the plan's schedule, recomputation, TP/PP/DP communication and the
// optimizer step. Every operator and collective is resolved through
// `lookup` (which records their fidelity), in the same order for every
// sink. Not thread-safe; the references must outlive the walker.
template <IterationSink Sink>
class IterationWalker {
 public:
  using Handle = typename Sink::Handle;

  // `job` must be valid (ValidateJob).
  IterationWalker(const Job& job, ProfileLookup& lookup, const BuildOptions& options, Sink& sink)
      : sink_(sink),
        job_(job),
        plan_(job.plan),
        lookup_(lookup),
        options_(options),
        d_(internal::GradientRanks(job)),
        p_(plan_.pipeline_parallel),
        m_(plan_.num_micro_batches()),
        v_(plan_.virtual_stages),
        n_(m_ * v_),
        held_(plan_.chunks_per_stage()),
        listed_(SplitsBackward(plan_.schedule)),
        bucketing_(internal::BucketsGradients(job)),
        chunk_reduce_(internal::ReducesGradientsPerChunk(job)) {}

  // Puts every task into the sink and fills stages(). RESOURCE_EXHAUSTED,
  // naming the limit, before the first task when there would be more than
  // options.max_tasks; CANCELLED once the sink has stopped.
  absl::Status Walk();
  std::vector<StageInfo>& stages() { return stages_; }
  int64_t num_micro_batches() const { return m_; }

  // Walk in steps, for the periodic fast path (engine/periodic.h): Begin
  // (checks, templates, streams), any Step calls, then Finish (the actions
  // left, in a wavefront, and the tail); Walk() is Begin then Finish.
  absl::Status Begin();
  // Emits stage `s`'s next action if it is a forward exactly when `forward`
  // says and its transfer has arrived; whether it did.
  bool Step(int64_t s, bool forward) {
    const internal::PipelineState<Handle>& ps = ps_;
    return ps.backwards[s] < n_ && NextForward(s, ps.forwards[s], ps.backwards[s]) == forward &&
           EmitNext(s);
  }
  absl::Status Finish();
  internal::PipelineState<Handle>& pipeline_state() { return ps_; }
  const ParallelPlan& plan() const { return plan_; }

 private:
  // A pass merged into one task together with its send (kMergesSends).
  struct MergedPass {
    bool forward_ok = false, backward_ok = false;
    int64_t forward_ns = 0, backward_ns = 0, forward_send_ns = 0, backward_send_ns = 0;
  };

  int64_t CollectiveNs(Collective c, double bytes, const CommGroup& group) {
    return lookup_.CollectiveNs(c, bytes, group).latency_ns;
  }
  // Whether the sink folds the send after `t` into it: only a pass already
  // merged into one task, whose end nothing but the send depends on.
  static bool MergesSend(const internal::ActionTemplate& t) {
    return Sink::kMergesSends && t.segments.size() == 1 && t.segments[0].items.size() == 1 &&
           t.segments[0].bucket_bytes == 0;
  }
  void MakeTemplates();
  int64_t CountTasks() const;
  // The summed duration and gap of the templates' tasks and sends (doubles).
  double TotalTaskNs() const;
  void DescribeStages();
  void MergePasses();
  // The split-backward schedules (walker_listed_inl.h): each stage runs its
  // ScheduledPasses in order.
  int64_t CountListedTasks() const;
  bool DrainListed(int64_t stage);
  bool EmitListed(int64_t stage, const ScheduledPass& pass);
  // The stage that runs place `position` for micro-batch `mb`.
  int64_t StageOf(int64_t position, int64_t mb) const;
  // `stage`'s `chunk`-th chunk's place in the model (ParallelPlan::chunk_position).
  int64_t Pos(int64_t stage, int64_t chunk) const { return plan_.chunk_position(stage, chunk); }
  bool Drain(int64_t stage);
  bool EmitNext(int64_t stage);
  // Whether `stage`'s next action, after `f` forwards and `b` backwards, is
  // a forward.
  bool NextForward(int64_t stage, int64_t f, int64_t b) const {
    return v_ == 1 ? NextIsForward(plan_.schedule, stage, p_, m_, f, b)
                   : InterleavedNextIsForward(stage, p_, v_, m_, f, b);
  }
  // The chunk of `stage`'s `k`-th forward or backward (0 without interleaving).
  int64_t ChunkOf(bool forward, int64_t k) const {
    return v_ == 1 ? 0 : InterleavedPass(forward, p_, v_, k).chunk;
  }
  // The queue `stage`'s `k`-th forward or backward receives from, if any.
  internal::SendQueue<Handle>* Source(int64_t stage, bool forward, int64_t k);
  // `k`: the action's index among the stage's forwards or backwards (the
  // micro-batch without interleaving).
  void EmitAction(int64_t stage, PipelineAction action, int64_t k);
  Handle EmitTemplate(const internal::ActionTemplate& t, StreamId stream,
                      absl::Span<const Handle> parents, StreamId bucket_stream,
                      Handle* last_bucket);
  void EmitTail();
  // Notes on the tasks emitted from now on, for a sink that keeps them (the
  // graph builder, for traces); the others pay nothing.
  static constexpr bool kNotes = requires(Sink & sink, const TaskNote& note) {
    sink.SetNote(note);
  };
  void Note(const TaskNote& note) {
    if constexpr (kNotes) {
      note_ = note;
      sink_.SetNote(note);
    }
  }
  // A chunk's tasks: its micro-batch (-1: none), layers and, for a transfer,
  // its bytes.
  void NoteChunk(int64_t micro_batch, int64_t chunk, int64_t stage, double bytes = 0) {
    if constexpr (kNotes) {
      const internal::StageEnds& c = chunks_[Pos(stage, chunk)];
      Note(TaskNote{static_cast<int32_t>(micro_batch), static_cast<int32_t>(chunk),
                    static_cast<int32_t>(c.first_layer), static_cast<int32_t>(c.num_layers),
                    bytes});
    }
  }
  // A collective's tasks: its bytes only, or `of`'s note with its bytes.
  void NoteBytes(double bytes) { NoteBytesOf(TaskNote(), bytes); }
  void NoteBytesOf(TaskNote of, double bytes) {
    of.bytes = bytes;
    Note(of);
  }

  Sink& sink_;
  const Job& job_;
  const ParallelPlan& plan_;
  ProfileLookup& lookup_;
  const BuildOptions& options_;
  // d_: the ranks that reduce gradients (d * c); v_: model chunks per stage
  // (interleaving); n_ = m_ * v_: forwards (and backwards) per stage;
  // held_: chunks per stage (ParallelPlan::chunks_per_stage).
  const int64_t d_, p_, m_, v_, n_, held_;
  const bool listed_, bucketing_, chunk_reduce_;

  std::vector<StageInfo> stages_;
  // Every chunk's layers and ends, per virtual stage chunk * p + stage.
  std::vector<internal::StageEnds> chunks_;
  // Per virtual stage chunk * p + stage (the stage itself without interleaving).
  std::vector<const internal::StageTemplates*> stage_templates_;
  // One per distinct chunk (ChunkSignature); a deque keeps the pointers
  // stage_templates_ holds valid.
  std::deque<internal::StageTemplates> distinct_templates_;
  bool expert_reduce_ = false;  // some chunk reduces routed-expert gradients
  // Per stage boundary s -> s+1; with interleaving [p - 1] is the wrap from
  // the last stage to the first.
  std::vector<int64_t> send_ns_;
  // Where stage s's pipeline sends run: its compute stream (synchronous), or
  // with interleaving a stream of their own, as Megatron-LM overlaps them
  // (--overlap-p2p-communication, its default, which only the interleaved
  // schedule uses).
  std::vector<StreamId> send_streams_;
  int32_t send_label_ = 0, dp_label_ = 0, emb_label_ = 0, expert_dp_label_ = 0;
  int64_t tasks_ = 0;  // CountTasks()
  internal::PipelineState<Handle> ps_;
  std::vector<Handle> last_backward_, last_dp_;  // per stage
  std::vector<MergedPass> merged_;               // per stage; unused unless kMergesSends
  double send_bytes_ = 0;                        // a pipeline transfer's message
  TaskNote note_;                                // Note()
  // Split-backward schedules: each stage's passes and how far it got; what
  // each place's forward and backward of each micro-batch handed on (its
  // send, or its last task when the next place is on the same stage), at
  // position * m + micro-batch.
  std::vector<std::vector<ScheduledPass>> orders_;
  std::vector<size_t> order_pos_;
  std::vector<Handle> forward_out_, backward_out_;
};

// Emits the next action of stage `s` (which has one left) if it can run now
// (its transfer has arrived), in schedule order; whether it did.
template <IterationSink Sink>
bool IterationWalker<Sink>::EmitNext(int64_t s) {
  internal::PipelineState<Handle>& ps = ps_;
  const int64_t f = ps.forwards[s], b = ps.backwards[s];
  const bool forward = NextForward(s, f, b);
  // Sends arrive in the order they are consumed, so a waiting one is this
  // action's.
  if (const internal::SendQueue<Handle>* q = Source(s, forward, forward ? f : b);
      q != nullptr && q->empty()) {
    return false;
  }
  --ps.remaining;
  if constexpr (Sink::kMergesSends) {
    const MergedPass& mp = merged_[s];
    const StreamId stream = stages_[s].compute_stream;
    if (forward && mp.forward_ok) {
      Handle recv = Sink::None();
      if (s > 0) recv = ps.forward_sends[s - 1].Pop(f);
      ps.forward_sends[s].Push(f, sink_.AddOne(stream, mp.forward_ns, TaskKind::kPipeline,
                                               s > 0 ? &recv : nullptr, mp.forward_send_ns));
      ps.forwards[s] = f + 1;
      return true;
    }
    if (!forward && mp.backward_ok && b != m_ - 1) {
      Handle recv = Sink::None();
      if (s + 1 < p_) recv = ps.backward_sends[s + 1].Pop(b);
      ps.backward_sends[s].Push(b, sink_.AddOne(stream, mp.backward_ns, TaskKind::kPipeline,
                                                s + 1 < p_ ? &recv : nullptr, mp.backward_send_ns));
      ps.backwards[s] = b + 1;
      return true;
    }
  }
  const int64_t k = forward ? f : b;
  (forward ? ps.forwards[s] : ps.backwards[s]) += 1;
  EmitAction(
      s,
      PipelineAction{.forward = forward,
                     .micro_batch = v_ == 1 ? k : InterleavedPass(forward, p_, v_, k).micro_batch},
      k);
  return true;
}

// Emits the actions of stage `s` that can run now; whether it emitted any.
template <IterationSink Sink>
bool IterationWalker<Sink>::Drain(int64_t s) {
  if (listed_) return DrainListed(s);
  bool any = false;
  while (ps_.backwards[s] < n_ && !sink_.Stopped() && EmitNext(s)) any = true;
  return any;
}

template <IterationSink Sink>
typename Sink::Handle IterationWalker<Sink>::EmitTemplate(const internal::ActionTemplate& t,
                                                          StreamId stream,
                                                          absl::Span<const Handle> parents,
                                                          StreamId bucket_stream,
                                                          Handle* last_bucket) {
  // The operator fast path's common case: one merged task, no bucket.
  if (t.segments.size() == 1 && t.segments[0].items.size() == 1 &&
      t.segments[0].bucket_bytes == 0) {
    const internal::Item& i = t.segments[0].items[0];
    return sink_.Add(stream, i.duration_ns, i.gap_ns, i.kind, i.label, parents);
  }
  Handle last = Sink::None();
  bool first = true;
  for (const internal::Segment& seg : t.segments) {
    for (const internal::Item& i : seg.items) {
      last = sink_.Add(stream, i.duration_ns, i.gap_ns, i.kind, i.label,
                       first ? parents : absl::Span<const Handle>());
      first = false;
    }
    if (seg.bucket_bytes > 0 && last_bucket != nullptr) {
      const int64_t ns = CollectiveNs(internal::GradientCollective(job_), seg.bucket_bytes,
                                      internal::DataParallelGroup(job_));
      // The bucket's note is its pass's with its bytes; the pass's after it.
      const TaskNote pass = note_;
      NoteBytesOf(pass, seg.bucket_bytes);
      *last_bucket = sink_.Add(bucket_stream, ns, 0, TaskKind::kDataParallel, dp_label_,
                               absl::MakeConstSpan(&last, 1));
      Note(pass);
    }
  }
  return last;
}

template <IterationSink Sink>
internal::SendQueue<typename Sink::Handle>* IterationWalker<Sink>::Source(int64_t s, bool forward,
                                                                          int64_t k) {
  // Without interleaving (chunk 0 of 1) only the first stage's forwards and
  // the last stage's backwards receive nothing; with it, only the model's
  // first chunk forward and its last chunk backward.
  const int64_t chunk = ChunkOf(forward, k);
  if (forward) {
    if (s == 0 && chunk == 0) return nullptr;
    return &ps_.forward_sends[s > 0 ? s - 1 : p_ - 1];
  }
  if (s == p_ - 1 && chunk == v_ - 1) return nullptr;
  return &ps_.backward_sends[s + 1 < p_ ? s + 1 : 0];
}

template <IterationSink Sink>
void IterationWalker<Sink>::EmitAction(int64_t s, PipelineAction a, int64_t k) {
  const int64_t chunk = ChunkOf(a.forward, k);
  const int64_t vs = chunk * p_ + s;  // virtual stage
  const internal::StageTemplates& st = *stage_templates_[vs];
  const StageInfo& info = stages_[s];
  NoteChunk(a.micro_batch, chunk, s);
  // Indices in the queues: the pass index, or its place in the wrap's FIFO.
  auto pop = [&](internal::SendQueue<Handle>* q, bool wraps) {
    return q->Pop(wraps ? InterleavedWrapIndex(false, p_, v_, k) : k);
  };
  if (a.forward) {
    Handle recv = Sink::None();
    internal::SendQueue<Handle>* source = Source(s, true, k);
    if (source != nullptr) recv = pop(source, s == 0);
    const auto parents =
        source != nullptr ? absl::MakeConstSpan(&recv, 1) : absl::Span<const Handle>();
    const Handle last =
        EmitTemplate(st.forward, info.compute_stream, parents, info.data_parallel_stream, nullptr);
    if (vs + 1 < p_ * v_) {
      const bool wraps = s == p_ - 1;
      NoteChunk(a.micro_batch, chunk, s, send_bytes_);
      ps_.forward_sends[s].Push(wraps ? InterleavedWrapIndex(true, p_, v_, k) : k,
                                sink_.Add(send_streams_[s], send_ns_[s], 0, TaskKind::kPipeline,
                                          send_label_, absl::MakeConstSpan(&last, 1)));
    }
    return;
  }
  const bool is_last = k == n_ - 1;
  Handle recv = Sink::None();
  internal::SendQueue<Handle>* source = Source(s, false, k);
  if (source != nullptr) recv = pop(source, s == p_ - 1);
  const auto parents =
      source != nullptr ? absl::MakeConstSpan(&recv, 1) : absl::Span<const Handle>();
  const bool bucketed = is_last && bucketing_ && d_ > 1;
  const Handle last =
      EmitTemplate(is_last ? st.backward_last : st.backward, info.compute_stream, parents,
                   info.data_parallel_stream, bucketed ? &last_dp_[s] : nullptr);
  if (vs > 0) {
    const bool wraps = s == 0;
    NoteChunk(a.micro_batch, chunk, s, send_bytes_);
    ps_.backward_sends[s].Push(
        wraps ? InterleavedWrapIndex(true, p_, v_, k) : k,
        sink_.Add(send_streams_[s], send_ns_[wraps ? p_ - 1 : s - 1], 0, TaskKind::kPipeline,
                  send_label_, absl::MakeConstSpan(&last, 1)));
  }
  if (chunk_reduce_ && a.micro_batch == m_ - 1) {
    // This chunk's gradients are complete: reduce them now, after the
    // stage's earlier chunks' reductions on the same stream.
    const double bytes = st.gradient_bytes;
    const int64_t ns =
        CollectiveNs(internal::GradientCollective(job_), bytes, internal::DataParallelGroup(job_));
    NoteBytes(bytes);
    const Handle after[2] = {last, last_dp_[s]};
    last_dp_[s] = sink_.Add(info.data_parallel_stream, ns, 0, TaskKind::kDataParallel, dp_label_,
                            absl::MakeConstSpan(after, Sink::IsSet(last_dp_[s]) ? 2 : 1));
  }
  if (is_last) last_backward_[s] = last;
}

template <IterationSink Sink>
absl::Status IterationWalker<Sink>::Walk() {
  VTRAIN_RETURN_IF_ERROR(Begin());
  return Finish();
}

template <IterationSink Sink>
absl::Status IterationWalker<Sink>::Begin() {
  send_label_ = sink_.Label("pipeline_send_recv");
  dp_label_ = sink_.Label("dp_all_reduce");
  emb_label_ = sink_.Label("embedding_all_reduce");
  if (job_.model.is_moe()) expert_dp_label_ = sink_.Label("expert_dp_gradient_reduce");
  MakeTemplates();

  const int64_t tasks = tasks_ = CountTasks();
  if (tasks > options_.max_tasks) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the iteration graph would have ", tasks, " tasks at ",
        GranularityName(options_.granularity), " granularity, above the limit max_tasks=",
        options_.max_tasks, "; use operator granularity, fewer micro-batches, or raise the limit"));
  }
  if (options_.granularity == Granularity::kKernel &&
      tasks > options_.max_graph_bytes / kGraphBytesPerTask) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the iteration graph would take about ",
                     tasks * kGraphBytesPerTask / (1 << 20), " MiB at kernel granularity (", tasks,
                     " tasks), above the limit of ", options_.max_graph_bytes / (1 << 20),
                     " MiB; use operator granularity or fewer "
                     "micro-batches"));
  }
  sink_.Reserve(tasks,
                2 * tasks / std::max<int64_t>(1, stage_templates_[0]->forward.NumItems()) + 4 * p_);
  DescribeStages();
  // Times are int64 nanoseconds: the makespan is at most the sum of every
  // task's duration and gap (the length of one chain of them), so bound that
  // sum, in doubles, before simulating (kernels up to the profile limit times
  // hundreds of thousands of micro-batches would overflow).
  if (const double total_ns = TotalTaskNs(); total_ns > kMaxIterationNs) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the iteration would last up to ", total_ns / 1e9 / 86400 / 365,
        " years of task time, beyond what vtrain simulates (", kMaxIterationNs / 1e9 / 86400 / 365,
        " years); check the profile set's kernel durations and the number of micro-batches"));
  }

  ps_.forward_sends.resize(p_);
  ps_.backward_sends.resize(p_);
  last_backward_.assign(p_, Sink::None());
  last_dp_.assign(p_, Sink::None());
  MergePasses();

  ps_.forwards.assign(p_, 0);
  ps_.backwards.assign(p_, 0);
  ps_.remaining = p_ * 2 * n_;
  if (listed_) {
    ps_.remaining = 0;
    orders_.resize(p_);
    for (int64_t s = 0; s < p_; ++s) {
      orders_[s] = ScheduledPasses(plan_, s);
      ps_.remaining += static_cast<int64_t>(orders_[s].size());
    }
    order_pos_.assign(p_, 0);
    forward_out_.assign(p_ * v_ * m_, Sink::None());
    backward_out_.assign(p_ * v_ * m_, Sink::None());
  }
  return absl::OkStatus();
}

template <IterationSink Sink>
absl::Status IterationWalker<Sink>::Finish() {
  // Emit actions in a wavefront so that every task's parents exist when it is
  // added: forwards flow down the pipeline, backwards up.
  while (ps_.remaining > 0) {
    bool progressed = false;
    for (int64_t s = 0; s < p_; ++s) progressed |= Drain(s);
    for (int64_t s = p_ - 1; s >= 0; --s) progressed |= Drain(s);
    if (sink_.Stopped()) return absl::CancelledError("simulation cancelled by the caller");
    if (!progressed) {
      return absl::InternalError(absl::StrCat("pipeline schedule ", ScheduleName(plan_.schedule),
                                              " deadlocked with ", ps_.remaining, " actions left"));
    }
  }
  EmitTail();
  VTRAIN_CHECK(sink_.num_tasks() == tasks_);
  return absl::OkStatus();
}

}  // namespace vtrain

#include "core/graph/walker_listed_inl.h"  // IWYU pragma: export
#include "core/graph/walker_setup_inl.h"   // IWYU pragma: export

#endif  // VTRAIN_CORE_GRAPH_WALKER_H_
