// The iteration walker's setup: the templates of every (virtual) stage, the
// bounds it checks before walking (task count, summed task time), the stages'
// streams and send times, and the passes merged with their sends; and its
// tail: gradient reductions and optimizer steps.
// Included by walker.h only; not for direct use.
#ifndef VTRAIN_CORE_GRAPH_WALKER_SETUP_INL_H_
#define VTRAIN_CORE_GRAPH_WALKER_SETUP_INL_H_

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "core/graph/pass_templates.h"
#include "core/graph/walker.h"

namespace vtrain {

template <IterationSink Sink>
void IterationWalker<Sink>::MakeTemplates() {
  // Stages differ in holding the embedding (first) or the logit (last), and
  // for MoE models in which of their layers are MoE layers: one template per
  // distinct chunk (first, middle, last for a dense model).
  const int64_t virtual_stages = p_ * v_;
  stage_templates_.resize(virtual_stages);
  absl::flat_hash_map<std::string, const internal::StageTemplates*> made;
  chunks_ = internal::JobChunks(job_);
  for (int64_t vs = 0; vs < virtual_stages; ++vs) {
    const internal::StageEnds& ends = chunks_[vs];
    const internal::StageTemplates*& t = made[internal::ChunkSignature(job_, ends)];
    if (t == nullptr) {
      distinct_templates_.push_back(internal::MakeStageTemplates(
          job_, lookup_, options_.granularity, ends,
          [this](const std::string& name) { return sink_.Label(name); }));
      t = &distinct_templates_.back();
    }
    stage_templates_[vs] = t;
  }
  for (int64_t vs = 0; vs < virtual_stages; ++vs) {
    expert_reduce_ = expert_reduce_ || stage_templates_[vs]->expert_reduce_ns > 0;
  }
}

template <IterationSink Sink>
int64_t IterationWalker<Sink>::CountTasks() const {
  if (listed_) return CountListedTasks();
  double count = 0;
  const double m = static_cast<double>(m_);
  for (int64_t s = 0; s < p_ && v_ == 1; ++s) {
    const internal::StageTemplates& st = *stage_templates_[s];
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
  // Interleaved: no merged sends, no buckets; every chunk but the last of
  // the last stage sends forward, every one but the first of the first
  // backward; an optimizer step per chunk, a gradient collective per stage
  // (per chunk when the chunks reduce their own).
  for (int64_t vs = 0; vs < p_ * v_ && v_ > 1; ++vs) {
    const internal::StageTemplates& st = *stage_templates_[vs];
    count += m * static_cast<double>(st.forward.NumItems() + st.backward.NumItems()) +
             static_cast<double>(st.optimizer.NumItems());
    if (vs + 1 < p_ * v_) count += m;
    if (vs > 0) count += m;
    if (d_ > 1 && (chunk_reduce_ || vs < p_)) count += 1;
  }
  if (p_ > 1 && TiedEmbeddings(job_.model)) count += 1;  // embedding gradient all-reduce
  for (int64_t s = 0; s < p_ && expert_reduce_; ++s) {   // routed experts' gradients
    bool any = false;
    for (int64_t c = 0; c < held_; ++c)
      any = any || stage_templates_[Pos(s, c)]->expert_reduce_ns > 0;
    count += any ? 1 : 0;
  }
  return count > 9e18 ? INT64_MAX : static_cast<int64_t>(count);
}

template <IterationSink Sink>
double IterationWalker<Sink>::TotalTaskNs() const {
  auto sum = [](const internal::ActionTemplate& t) {
    return t.TaskNs() + static_cast<double>(t.tensor_parallel_ns);
  };
  double total = 0;
  for (int64_t vs = 0; vs < p_ * v_; ++vs) {
    const internal::StageTemplates& t = *stage_templates_[vs];
    total += static_cast<double>(m_) * (sum(t.forward) + sum(t.backward)) + sum(t.backward_last) +
             sum(t.optimizer);
  }
  // Every boundary carries each micro-batch's V chunks both ways (bounded
  // above for the wrap, which carries V - 1).
  for (const int64_t send : send_ns_)
    total += 2 * static_cast<double>(n_) * static_cast<double>(send);
  return total;
}

// The pipeline send times, the streams and what each stage holds.
template <IterationSink Sink>
void IterationWalker<Sink>::DescribeStages() {
  send_ns_.resize(std::max<int64_t>(0, v_ > 1 && !listed_ ? p_ : p_ - 1));
  const double send_bytes = internal::ActivationBytes(job_) /
                            static_cast<double>(plan_.tensor_parallel);  // scatter-gather
  send_bytes_ = send_bytes;
  CommGroup last;  // neighbouring stage pairs mostly share a group: one lookup
  const std::vector<CommGroup> pairs = internal::NeighbourStagePairGroups(job_);
  for (int64_t s = 0; s + 1 < p_; ++s) {
    const CommGroup& g = pairs[s];
    const bool same = s > 0 && g.ranks == last.ranks && g.ranks_per_node == last.ranks_per_node &&
                      g.nic_fraction == last.nic_fraction &&
                      g.spine_slowdown == last.spine_slowdown;
    send_ns_[s] = same ? send_ns_[s - 1] : CollectiveNs(Collective::kSendRecv, send_bytes, g);
    last = g;
  }
  if (v_ > 1 && !listed_) {
    send_ns_[p_ - 1] =
        CollectiveNs(Collective::kSendRecv, send_bytes, internal::StagePairGroup(job_, 0, p_ - 1));
  }
  stages_.resize(p_);
  for (int64_t s = 0; s < p_; ++s) {
    StageInfo& info = stages_[s];
    info.first_layer = chunks_[s].first_layer;  // of its first chunk
    info.num_layers = 0;
    for (int64_t c = 0; c < held_; ++c) info.num_layers += chunks_[Pos(s, c)].num_layers;
    info.has_embedding = s == 0;
    info.has_logit = s == p_ - 1;
    info.compute_stream = sink_.AddStream(absl::StrCat("stage", s, "/compute"));
    info.data_parallel_stream = sink_.AddStream(absl::StrCat("stage", s, "/data_parallel"));
    // DualPipe overlaps its transfers with compute too.
    const bool own_stream = v_ > 1 || plan_.schedule == PipelineSchedule::kDualPipe;
    send_streams_.push_back(own_stream ? sink_.AddStream(absl::StrCat("stage", s, "/pipeline"))
                                       : info.compute_stream);
    for (int64_t c = 0; c < held_; ++c) {
      const int64_t vs = Pos(s, c);
      const internal::StageTemplates& st = *stage_templates_[vs];
      // DualPipe's chunks run half the micro-batches each.
      const int64_t passes = plan_.schedule == PipelineSchedule::kDualPipe ? m_ / 2 : m_;
      info.tensor_parallel_ns +=
          passes * (st.forward.tensor_parallel_ns + st.backward.tensor_parallel_ns);
      info.tensor_parallel_hidden_ns +=
          passes * (st.forward.tensor_parallel_hidden_ns + st.backward.tensor_parallel_hidden_ns);
      info.context_parallel_ns +=
          passes * (st.forward.context_parallel_ns + st.backward.context_parallel_ns);
      info.expert_parallel_ns +=
          passes * (st.forward.expert_parallel_ns + st.backward.expert_parallel_ns);
      info.param_gather_ns += st.param_gather_ns;
      info.param_gather_hidden_ns += st.param_gather_hidden_ns;
      // Sends out of this chunk, forward and backward, when they hold the
      // compute stream.
      if (!own_stream) {
        info.pipeline_send_ns += m_ * ((vs + 1 < p_ * v_ ? send_ns_[s + 1 < p_ ? s : p_ - 1] : 0) +
                                       (vs > 0 ? send_ns_[s > 0 ? s - 1 : p_ - 1] : 0));
      }
      info.parameters_per_gpu += st.parameters_per_gpu;
    }
  }
}

// The streaming fast path's common actions, precomputed per stage: a pass
// merged into one task together with its send. The send starts when the
// pass's last gap ends (start(send) = finish(pass) + gap), so the sum is
// exact. The last backward keeps its send separate: its end also starts the
// gradient all-reduce. Every other action goes through EmitAction.
template <IterationSink Sink>
void IterationWalker<Sink>::MergePasses() {
  merged_.assign(p_, MergedPass{});
  for (int64_t s = 0; s < p_ && Sink::kMergesSends && v_ == 1 && !listed_; ++s) {
    const internal::StageTemplates& st = *stage_templates_[s];
    MergedPass& mp = merged_[s];
    if (s + 1 < p_ && MergesSend(st.forward)) {
      const internal::Item& i = st.forward.segments[0].items[0];
      mp.forward_ok = true;
      mp.forward_send_ns = send_ns_[s];
      mp.forward_ns = i.duration_ns + i.gap_ns + send_ns_[s];
    }
    if (s > 0 && MergesSend(st.backward)) {
      const internal::Item& i = st.backward.segments[0].items[0];
      mp.backward_ok = true;
      mp.backward_send_ns = send_ns_[s - 1];
      mp.backward_ns = i.duration_ns + i.gap_ns + send_ns_[s - 1];
    }
  }
}

template <IterationSink Sink>
void IterationWalker<Sink>::EmitTail() {
  // Without bucketing (or per-chunk reduction), each stage reduces all its
  // gradients at once.
  if (d_ > 1 && !bucketing_ && !chunk_reduce_) {
    int64_t ns = 0;
    double last_bytes = -1;
    for (int64_t s = 0; s < p_; ++s) {
      double bytes = 0;
      for (int64_t c = 0; c < held_; ++c) bytes += stage_templates_[Pos(s, c)]->gradient_bytes;
      // The middle stages hold as many gradients: one lookup for them.
      if (bytes != last_bytes) {
        ns = CollectiveNs(internal::GradientCollective(job_), bytes,
                          internal::DataParallelGroup(job_));
        last_bytes = bytes;
      }
      NoteBytes(bytes);
      last_dp_[s] = sink_.Add(stages_[s].data_parallel_stream, ns, 0, TaskKind::kDataParallel,
                              dp_label_, absl::MakeConstSpan(&last_backward_[s], 1));
    }
  }
  auto done = [&](int64_t s) { return Sink::IsSet(last_dp_[s]) ? last_dp_[s] : last_backward_[s]; };
  // MoE: the routed experts' gradients, reduced over the expert
  // data-parallel group after the rest, on the same stream.
  for (int64_t s = 0; s < p_ && expert_reduce_; ++s) {
    int64_t ns = 0;
    double bytes = 0;
    for (int64_t c = 0; c < held_; ++c) {
      ns += stage_templates_[Pos(s, c)]->expert_reduce_ns;
      bytes += stage_templates_[Pos(s, c)]->expert_gradient_bytes;
    }
    if (ns == 0) continue;
    NoteBytes(bytes);
    const Handle parent = done(s);
    last_dp_[s] = sink_.Add(stages_[s].data_parallel_stream, ns, 0, TaskKind::kDataParallel,
                            expert_dp_label_, absl::MakeConstSpan(&parent, 1));
  }
  Handle embedding_sync = Sink::None();
  if (p_ > 1 && TiedEmbeddings(job_.model)) {
    // Tied embeddings: the first and last stages all-reduce the word
    // embedding gradient (Megatron's allreduce_embedding_grads).
    const ModelSpec& model = job_.model;
    const double bytes =
        static_cast<double>(model.vocab_size) * static_cast<double>(model.hidden_size) /
        static_cast<double>(plan_.tensor_parallel) * internal::GradientElemBytes(plan_);
    const int64_t ns =
        CollectiveNs(Collective::kAllReduce, bytes, internal::StagePairGroup(job_, 0, p_ - 1));
    const Handle ends[2] = {done(0), done(p_ - 1)};
    NoteBytes(bytes);
    embedding_sync = sink_.Add(stages_[0].data_parallel_stream, ns, 0, TaskKind::kDataParallel,
                               emb_label_, ends);
  }
  for (int64_t s = 0; s < p_; ++s) {
    Handle parents[2] = {done(s), embedding_sync};
    const bool synced = Sink::IsSet(embedding_sync) && (s == 0 || s == p_ - 1);
    // One step per model chunk, one after another on the stream.
    for (int64_t c = 0; c < held_; ++c) {
      NoteChunk(/*micro_batch=*/-1, c, s);
      EmitTemplate(stage_templates_[Pos(s, c)]->optimizer, stages_[s].compute_stream,
                   absl::MakeConstSpan(parents, synced ? 2 : 1), stages_[s].data_parallel_stream,
                   nullptr);
    }
  }
}

}  // namespace vtrain

#endif  // VTRAIN_CORE_GRAPH_WALKER_SETUP_INL_H_
