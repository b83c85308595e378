#include "core/graph/template_writer.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace vtrain::internal {

void TemplateWriter::Operator(const ResolvedOperator& op) {
  if (merge_) {
    AddChain(op);
    return;
  }
  for (const KernelRecord& k : op.profile.kernels) {
    segments_.back().items.push_back(
        Item{k.duration_ns, k.gap_ns, label_(k.name), TaskKind::kCompute, k.host_ns, sync_next_});
    sync_next_ = false;
  }
}

void TemplateWriter::HostSync() {
  // Before the pass's first item the host and the GPU start together anyway.
  if (!merge_) {
    sync_next_ = segments_.size() > 1 || !segments_.front().items.empty();
    return;
  }
  if (first_host_ns_ >= 0) replay_.host = std::max(replay_.host, replay_.gpu);
}

void TemplateWriter::TensorParallel(int64_t duration_ns, int32_t label, int64_t hidden_ns,
                                    Comm comm) {
  tensor_parallel_hidden_ns_ += hidden_ns;
  if (comm == Comm::kContext) context_parallel_ns_ += duration_ns;
  if (comm == Comm::kExpert) expert_parallel_ns_ += duration_ns;
  const Item item{duration_ns, 0, label, TaskKind::kTensorParallel, collective_host_ns_};
  if (merge_) {
    Add(item, nullptr);
  } else {
    segments_.back().items.push_back(item);
    segments_.back().items.back().host_sync = sync_next_;
    sync_next_ = false;
  }
  tensor_parallel_ns_ += duration_ns;
}

void TemplateWriter::EndSegment(double bucket_bytes) {
  if (merge_) {
    if (merged_.empty() || merged_.back().closed) return;
    merged_.back().bucket_bytes = bucket_bytes;
    merged_.back().closed = true;
    return;
  }
  if (segments_.back().items.empty()) return;
  segments_.back().bucket_bytes = bucket_bytes;
  segments_.emplace_back();
}

ActionTemplate TemplateWriter::Take(int32_t merged_label) && {
  if (merge_) return TakeMerged(merged_label);
  ReplayHost();
  ActionTemplate t;
  t.tensor_parallel_ns = tensor_parallel_ns_;
  t.tensor_parallel_hidden_ns = tensor_parallel_hidden_ns_;
  t.context_parallel_ns = context_parallel_ns_;
  t.expert_parallel_ns = expert_parallel_ns_;
  for (Segment& s : segments_) {
    if (s.items.empty()) continue;
    t.segments.push_back(std::move(s));
  }
  return t;
}

TemplateWriter::MergedSegment& TemplateWriter::Begin(const Item& item, const std::string* name,
                                                     int64_t start, int64_t end_before) {
  if (!merged_.empty()) merged_.back().replay_gap_ns = start - end_before;  // unless last
  if (merged_.empty() || merged_.back().closed) {
    merged_.emplace_back();
    merged_.back().first = item;
    merged_.back().name = name;
    merged_.back().start_ns = start;
  }
  return merged_.back();
}

void TemplateWriter::Add(const Item& item, const std::string* name) {
  if (item.host_ns <= 0) replay_ok_ = false;  // measured gaps without host times: keep them
  StartPass(item.host_ns);
  const int64_t end_before = replay_.gpu;
  const int64_t start = replay_.Place(item, collective_host_wait_);
  MergedSegment& m = Begin(item, name, start, end_before);
  ++m.count;
  m.plain_ns += item.duration_ns + item.gap_ns;
  m.plain_last_gap_ns = item.gap_ns;
  m.end_ns = replay_.gpu;
}

void TemplateWriter::AddChain(const ResolvedOperator& op) {
  const std::vector<KernelRecord>& kernels = op.profile.kernels;
  if (kernels.empty()) return;
  const KernelChain& c = op.chain;
  const KernelRecord& k0 = kernels.front();
  if (!c.host_known) replay_ok_ = false;
  StartPass(k0.host_ns);
  const int64_t h0 = replay_.host, g0 = replay_.gpu;
  const int64_t start = std::max(g0, h0 + k0.host_ns);
  MergedSegment& m = Begin(Item{k0.duration_ns, k0.gap_ns, 0, TaskKind::kCompute, k0.host_ns},
                           &k0.name, start, g0);
  replay_.host = h0 + c.host_ns;
  replay_.gpu = std::max(g0 + c.duration_ns, h0 + c.host_lead_ns);
  m.count += c.count;
  m.plain_ns += c.plain_ns;
  m.plain_last_gap_ns = kernels.back().gap_ns;
  m.end_ns = replay_.gpu;
}

ActionTemplate TemplateWriter::TakeMerged(int32_t merged_label) {
  ActionTemplate t;
  t.tensor_parallel_ns = tensor_parallel_ns_;
  t.tensor_parallel_hidden_ns = tensor_parallel_hidden_ns_;
  t.context_parallel_ns = context_parallel_ns_;
  t.expert_parallel_ns = expert_parallel_ns_;
  // What follows the pass waits for its own dispatch; like the first
  // kernel here, charge it one lead-in of this pass's first dispatch.
  if (replay_ok_ && !merged_.empty()) merged_.back().replay_gap_ns = first_host_ns_;
  for (const MergedSegment& m : merged_) {
    Segment s;
    s.bucket_bytes = m.closed ? m.bucket_bytes : 0;
    Item item = m.first;
    if (m.count == 1) {
      if (m.name != nullptr) item.label = label_(*m.name);
      if (replay_ok_) item.gap_ns = m.replay_gap_ns;
    } else {
      item = Item{0, 0, merged_label, TaskKind::kCompute};
      item.gap_ns = replay_ok_ ? m.replay_gap_ns : m.plain_last_gap_ns;
      item.duration_ns = replay_ok_ ? m.end_ns - m.start_ns : m.plain_ns - m.plain_last_gap_ns;
    }
    s.items.assign(1, item);
    t.segments.push_back(std::move(s));
  }
  return t;
}

void TemplateWriter::ReplayHost() {
  std::vector<Item*> items;
  for (Segment& s : segments_) {
    for (Item& i : s.items) {
      if (i.host_ns <= 0) return;  // measured gaps without host times: keep them
      items.push_back(&i);
    }
  }
  if (items.empty()) return;
  Replay r;
  r.host = -items.front()->host_ns;
  Item* previous = nullptr;
  for (Item* i : items) {
    const int64_t end_before = r.gpu;
    const int64_t start = r.Place(*i, collective_host_wait_);
    if (previous != nullptr) previous->gap_ns = start - end_before;
    previous = i;
  }
  // What follows the pass waits for its own dispatch (as in TakeMerged).
  previous->gap_ns = items.front()->host_ns;
}

}  // namespace vtrain::internal
