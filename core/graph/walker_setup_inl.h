// The iteration walker's setup: the templates of every (virtual) stage and
// the bounds it checks before walking (task count, summed task time).
// Included by walker.h only; not for direct use.
#ifndef VTRAIN_CORE_GRAPH_WALKER_SETUP_INL_H_
#define VTRAIN_CORE_GRAPH_WALKER_SETUP_INL_H_

#include <cstdint>
#include <string>

#include "core/graph/pass_templates.h"
#include "core/graph/walker.h"

namespace vtrain {

template <IterationSink Sink>
void IterationWalker<Sink>::MakeTemplates() {
  // Stages differ only in holding the embedding (first) or the logit (last).
  distinct_templates_.reserve(4);
  const int64_t virtual_stages = p_ * v_;
  stage_templates_.resize(virtual_stages);
  auto templates_for = [&](internal::StageEnds ends) -> const internal::StageTemplates* {
    distinct_templates_.push_back(internal::MakeStageTemplates(
        job_, lookup_, options_.granularity, ends,
        [this](const std::string& name) { return sink_.Label(name); }));
    return &distinct_templates_.back();
  };
  if (virtual_stages == 1) {
    stage_templates_[0] = templates_for({.has_embedding = true, .has_logit = true});
  } else {
    stage_templates_[0] = templates_for({.has_embedding = true, .has_logit = false});
    const internal::StageTemplates* middle =
        virtual_stages > 2 ? templates_for({.has_embedding = false, .has_logit = false}) : nullptr;
    for (int64_t s = 1; s + 1 < virtual_stages; ++s) stage_templates_[s] = middle;
    stage_templates_[virtual_stages - 1] =
        templates_for({.has_embedding = false, .has_logit = true});
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

}  // namespace vtrain

#endif  // VTRAIN_CORE_GRAPH_WALKER_SETUP_INL_H_
