// The writer of one pass's template (pass_templates.h): the items a forward
// or backward pass, or the optimizer step, puts on a stage's compute stream,
// with the host-dispatch replay (docs/architecture.md#small-shapes-are-host-bound),
// merged per segment at operator granularity.
#ifndef VTRAIN_CORE_GRAPH_TEMPLATE_WRITER_H_
#define VTRAIN_CORE_GRAPH_TEMPLATE_WRITER_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/graph/pass_templates.h"
#include "core/profile/lookup.h"

namespace vtrain::internal {

// Writes the items of one pass. At kernel granularity it keeps every item;
// at operator granularity it keeps only what the merged segments need (each
// segment's first item, the times of its first start and last end, and the
// plain sums for measured gaps), computed as the items arrive: a pass of a
// few thousand kernels then costs a few additions per kernel and no
// allocation. Both give the same templates (the merge is exact either way).
class TemplateWriter {
 public:
  // `collective_host_ns`: host time to launch a collective.
  // `collective_host_wait`: the fraction of a TP collective the host waits
  // for before dispatching on (AnalyticalParams::tp_host_blocking).
  TemplateWriter(LabelFn label, Granularity granularity, int64_t collective_host_ns,
                 double collective_host_wait = 0)
      : label_(label),
        merge_(granularity == Granularity::kOperator),
        collective_host_ns_(collective_host_ns),
        collective_host_wait_(collective_host_wait) {
    segments_.emplace_back();
  }

  void Operator(const ResolvedOperator& op);
  // A collective blocking the stream for `duration_ns` inside a pass;
  // `hidden_ns`: the part of it that overlaps compute (tp_comm_overlap),
  // counted apart. `comm` says whose it is, for the breakdown.
  enum class Comm { kTensor, kContext, kExpert };
  void TensorParallel(int64_t duration_ns, int32_t label, int64_t hidden_ns = 0,
                      Comm comm = Comm::kTensor);
  // The host waits here until the GPU has finished everything before
  // (Megatron-Core's MoE dispatchers read the token counts on the host:
  // docs/moe.md#how-a-moe-layer-is-simulated). Without host times
  // (measured gaps), or before the pass's first item, it changes nothing.
  void HostSync();
  // Ends the current segment; a bucket all-reduce of `bucket_bytes` follows it.
  void EndSegment(double bucket_bytes);

  // In operator granularity each segment becomes one item: its tasks run back
  // to back on one stream with nothing entering or leaving in the middle, so
  // start(i+1) = finish(i) + gap(i) and the merged task is exact.
  ActionTemplate Take(int32_t merged_label) &&;

 private:
  // One segment at operator granularity, as far as its merged item needs.
  struct MergedSegment {
    Item first;                         // its first item (kept whole if alone)
    const std::string* name = nullptr;  // the first item's kernel name, if a kernel
    int64_t count = 0;
    int64_t plain_ns = 0;              // sum of durations and measured gaps
    int64_t plain_last_gap_ns = 0;     // the last item's measured gap
    int64_t start_ns = 0, end_ns = 0;  // replayed: first start, last end
    int64_t replay_gap_ns = 0;         // replayed gap after the last item
    double bucket_bytes = 0;
    bool closed = false;
  };

  // The host runs ahead of the GPU through a whole pass
  // (docs/architecture.md#small-shapes-are-host-bound). When every item's host
  // time is known, the gaps are recomputed for the pass as one sequence: item i
  // is dispatched once the host has spent the host time of items 0..i, and
  // starts when dispatched and its predecessor is done.
  // The host and the GPU start the pass together (the synchronous pipeline
  // exchange, or the optimizer, has just synchronised them). Times are
  // relative to the first kernel's dispatch.
  struct Replay {
    int64_t host = 0, gpu = 0;
    // Places `i`; returns its start.
    int64_t Place(const Item& i, double collective_host_wait) {
      if (i.host_sync) host = std::max(host, gpu);
      host += i.host_ns;
      const int64_t start = std::max(gpu, host);
      gpu = start + i.duration_ns;
      if (i.kind == TaskKind::kTensorParallel && collective_host_wait > 0) {
        host = std::max<int64_t>(
            host, start + std::llround(collective_host_wait * static_cast<double>(i.duration_ns)));
      }
      return start;
    }
  };

  void StartPass(int64_t first_host_ns) {
    if (first_host_ns_ >= 0) return;
    first_host_ns_ = first_host_ns;
    replay_.host = -first_host_ns;
  }
  // The segment an item starting at `start` belongs to (the GPU was free
  // from `end_before`): the open one, or a new one after a closed one.
  MergedSegment& Begin(const Item& item, const std::string* name, int64_t start,
                       int64_t end_before);

  void Add(const Item& item, const std::string* name);

  // An operator's kernels at once, through their chain (lookup.h): the same
  // state as placing them one by one.
  void AddChain(const ResolvedOperator& op);

  ActionTemplate TakeMerged(int32_t merged_label);

  // Kernel granularity: the same replay over the kept items.
  void ReplayHost();

  LabelFn label_;
  const bool merge_;
  const int64_t collective_host_ns_;
  const double collective_host_wait_;
  std::vector<Segment> segments_;      // kernel granularity
  std::vector<MergedSegment> merged_;  // operator granularity
  Replay replay_;
  int64_t first_host_ns_ = -1;
  bool replay_ok_ = true;
  bool sync_next_ = false;  // kernel granularity: the next item waits (HostSync)
  int64_t tensor_parallel_ns_ = 0;
  int64_t tensor_parallel_hidden_ns_ = 0;
  int64_t context_parallel_ns_ = 0, expert_parallel_ns_ = 0;
};

}  // namespace vtrain::internal

#endif  // VTRAIN_CORE_GRAPH_TEMPLATE_WRITER_H_
