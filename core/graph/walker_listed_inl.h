// The iteration walker under the schedules that split the backward pass
// (zb-h1, dualpipe, dualpipev): each stage runs its list of passes
// (ScheduledPasses, schedule.h) in order, each pass once its input has
// arrived. Included by walker.h only; not for direct use.
#ifndef VTRAIN_CORE_GRAPH_WALKER_LISTED_INL_H_
#define VTRAIN_CORE_GRAPH_WALKER_LISTED_INL_H_

#include <algorithm>
#include <cstdint>

#include "absl/types/span.h"
#include "core/graph/schedule.h"
#include "core/graph/walker.h"

namespace vtrain {

template <IterationSink Sink>
int64_t IterationWalker<Sink>::StageOf(int64_t position, int64_t mb) const {
  switch (plan_.schedule) {
    case PipelineSchedule::kDualPipeV:
      return position < p_ ? position : 2 * p_ - 1 - position;
    case PipelineSchedule::kDualPipe:
      // The second half of the micro-batches runs up the pipeline.
      return 2 * mb < m_ ? position : p_ - 1 - position;
    default:
      return position;
  }
}

template <IterationSink Sink>
int64_t IterationWalker<Sink>::CountListedTasks() const {
  // Every chunk of every micro-batch runs at least a forward and a backward
  // task on each stage: past the limit, say so without building the lists.
  const double at_least = 2.0 * static_cast<double>(p_ * held_) * static_cast<double>(m_) /
                          (plan_.schedule == PipelineSchedule::kDualPipe ? 2 : 1);
  if (at_least > static_cast<double>(options_.max_tasks)) {
    return at_least > 9e18 ? INT64_MAX : static_cast<int64_t>(at_least);
  }
  double count = 0;
  const int64_t positions = p_ * v_;
  for (int64_t s = 0; s < p_; ++s) {
    for (const ScheduledPass& pass : ScheduledPasses(plan_, s)) {
      const int64_t q = Pos(s, pass.chunk);
      const internal::StageTemplates& st = *stage_templates_[q];
      count += static_cast<double>(internal::PassTemplate(st, pass.kind, pass.paired).NumItems());
      switch (pass.kind) {
        case PassKind::kForward:
          if (q + 1 < positions && StageOf(q + 1, pass.micro_batch) != s) count += 1;
          break;
        case PassKind::kBackward:
        case PassKind::kInputGrad:
          if (q > 0 && StageOf(q - 1, pass.micro_batch) != s) count += 1;
          break;
        case PassKind::kWeightGrad:
          break;
      }
    }
    // An optimizer step per chunk, a gradient collective per stage.
    for (int64_t c = 0; c < held_; ++c) {
      count += static_cast<double>(stage_templates_[Pos(s, c)]->optimizer.NumItems());
    }
    if (d_ > 1) count += 1;
    bool experts = false;
    for (int64_t c = 0; c < held_; ++c) {
      experts = experts || stage_templates_[Pos(s, c)]->expert_reduce_ns > 0;
    }
    if (experts) count += 1;
  }
  if (p_ > 1 && TiedEmbeddings(job_.model)) count += 1;
  return count > 9e18 ? INT64_MAX : static_cast<int64_t>(count);
}

template <IterationSink Sink>
bool IterationWalker<Sink>::DrainListed(int64_t s) {
  bool any = false;
  const std::vector<ScheduledPass>& order = orders_[s];
  while (order_pos_[s] < order.size() && !sink_.Stopped() && EmitListed(s, order[order_pos_[s]])) {
    any = true;
  }
  return any;
}

// Emits `pass` (stage `s`'s next, and with a paired forward the backward
// after it) if its input has arrived; whether it did.
template <IterationSink Sink>
bool IterationWalker<Sink>::EmitListed(int64_t s, const ScheduledPass& pass) {
  const int64_t positions = p_ * v_;
  // What the pass waits for, if anything: the previous place's forward, the
  // next place's backward (the last place's backward follows its own forward
  // on the stream).
  auto input = [&](const ScheduledPass& x) -> const Handle* {
    const int64_t q = Pos(s, x.chunk);
    if (x.kind == PassKind::kForward)
      return q > 0 ? &forward_out_[(q - 1) * m_ + x.micro_batch] : nullptr;
    if (x.kind == PassKind::kWeightGrad || q + 1 == positions) return nullptr;
    return &backward_out_[(q + 1) * m_ + x.micro_batch];
  };
  const Handle* in = input(pass);
  if (in != nullptr && !Sink::IsSet(*in)) return false;
  Handle parents[2] = {Sink::None(), Sink::None()};
  int n = 0;
  if (in != nullptr) parents[n++] = *in;
  if (pass.paired && pass.kind == PassKind::kForward) {
    // DualPipe's F&B starts once both inputs are there.
    const Handle* other = input(orders_[s][order_pos_[s] + 1]);
    if (other != nullptr && !Sink::IsSet(*other)) return false;
    if (other != nullptr) parents[n++] = *other;
  }
  ++order_pos_[s];
  --ps_.remaining;
  const int64_t q = Pos(s, pass.chunk), mb = pass.micro_batch;
  const internal::StageTemplates& st = *stage_templates_[q];
  const StageInfo& info = stages_[s];
  NoteChunk(mb, pass.chunk, s);
  const internal::ActionTemplate& t = internal::PassTemplate(st, pass.kind, pass.paired);
  const Handle last = EmitTemplate(t, info.compute_stream, absl::MakeConstSpan(parents, n),
                                   info.data_parallel_stream, nullptr);
  last_backward_[s] = last;  // the stage's last pass, once all are out
  if (pass.kind == PassKind::kWeightGrad) return true;
  // Hand the result on: a send to another stage, or the task itself.
  const bool forward = pass.kind == PassKind::kForward;
  const int64_t next = forward ? q + 1 : q - 1;
  if (next < 0 || next >= positions) return true;
  Handle& out = (forward ? forward_out_ : backward_out_)[q * m_ + mb];
  const int64_t to = StageOf(next, mb);
  if (to == s) {
    out = last;
    return true;
  }
  NoteChunk(mb, pass.chunk, s, send_bytes_);
  out = sink_.Add(send_streams_[s], send_ns_[std::min(s, to)], 0, TaskKind::kPipeline, send_label_,
                  absl::MakeConstSpan(&last, 1));
  return true;
}

}  // namespace vtrain

#endif  // VTRAIN_CORE_GRAPH_WALKER_LISTED_INL_H_
