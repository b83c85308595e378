// The iteration walker's setup: the templates of every (virtual) stage, the
// bounds it checks before walking (task count, summed task time), the stages'
// streams and send times, and the passes merged with their sends.
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
  // backward; an optimizer step per chunk, a gradient collective per stage.
  for (int64_t vs = 0; vs < p_ * v_ && v_ > 1; ++vs) {
    const internal::StageTemplates& st = *stage_templates_[vs];
    count += m * static_cast<double>(st.forward.NumItems() + st.backward.NumItems()) +
             static_cast<double>(st.optimizer.NumItems());
    if (vs + 1 < p_ * v_) count += m;
    if (vs > 0) count += m;
    if (d_ > 1 && vs < p_) count += 1;
  }
  if (p_ > 1 && TiedEmbeddings(job_.model)) count += 1;  // embedding gradient all-reduce
  for (int64_t s = 0; s < p_ && expert_reduce_; ++s) {   // routed experts' gradients
    bool any = false;
    for (int64_t c = 0; c < v_; ++c)
      any = any || stage_templates_[c * p_ + s]->expert_reduce_ns > 0;
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
  send_ns_.resize(std::max<int64_t>(0, v_ > 1 ? p_ : p_ - 1));
  const double send_bytes = internal::ActivationBytes(job_) /
                            static_cast<double>(plan_.tensor_parallel);  // scatter-gather
  send_bytes_ = send_bytes;
  CommGroup last;  // neighbouring stage pairs mostly share a group: one lookup
  for (int64_t s = 0; s + 1 < p_; ++s) {
    const CommGroup g = internal::StagePairGroup(job_, s, 1);
    const bool same = s > 0 && g.ranks == last.ranks && g.ranks_per_node == last.ranks_per_node &&
                      g.nic_fraction == last.nic_fraction;
    send_ns_[s] = same ? send_ns_[s - 1] : CollectiveNs(Collective::kSendRecv, send_bytes, g);
    last = g;
  }
  if (v_ > 1) {
    send_ns_[p_ - 1] =
        CollectiveNs(Collective::kSendRecv, send_bytes, internal::StagePairGroup(job_, 0, p_ - 1));
  }
  stages_.resize(p_);
  for (int64_t s = 0; s < p_; ++s) {
    StageInfo& info = stages_[s];
    info.first_layer = chunks_[s].first_layer;  // of its first chunk
    info.num_layers = 0;
    for (int64_t c = 0; c < v_; ++c) info.num_layers += chunks_[c * p_ + s].num_layers;
    info.has_embedding = s == 0;
    info.has_logit = s == p_ - 1;
    info.compute_stream = sink_.AddStream(absl::StrCat("stage", s, "/compute"));
    info.data_parallel_stream = sink_.AddStream(absl::StrCat("stage", s, "/data_parallel"));
    send_streams_.push_back(v_ == 1 ? info.compute_stream
                                    : sink_.AddStream(absl::StrCat("stage", s, "/pipeline")));
    for (int64_t c = 0; c < v_; ++c) {
      const int64_t vs = c * p_ + s;
      const internal::StageTemplates& st = *stage_templates_[vs];
      info.tensor_parallel_ns +=
          m_ * (st.forward.tensor_parallel_ns + st.backward.tensor_parallel_ns);
      // Sends out of this chunk, forward and backward, when they hold the
      // compute stream.
      if (v_ == 1) {
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
  for (int64_t s = 0; s < p_ && Sink::kMergesSends && v_ == 1; ++s) {
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

}  // namespace vtrain

#endif  // VTRAIN_CORE_GRAPH_WALKER_SETUP_INL_H_
