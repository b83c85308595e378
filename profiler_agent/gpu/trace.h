// Record-to-table reduction for the GPU agent: turns CUPTI activity records
// (kernels, the API calls that launched them, operator ranges) into
// per-operator kernel tables with the median duration and gap of each kernel
// over repetitions (docs/architecture.md#the-method, step 1). Plain C++17, no
// CUDA, so it is tested on recorded fixtures on machines without a GPU.
#ifndef VTRAIN_PROFILER_AGENT_GPU_TRACE_H_
#define VTRAIN_PROFILER_AGENT_GPU_TRACE_H_

#include <cstdint>
#include <string>
#include <vector>

namespace vtrain::gpu {

// A kernel as CUPTI's CONCURRENT_KERNEL activity reports it (GPU clock, ns).
struct KernelActivity {
  std::string name;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint32_t stream = 0;
  uint32_t correlation = 0;
};

// The runtime or driver API call that launched a kernel (host clock, ns);
// the correlation id links it to its kernel.
struct LaunchActivity {
  uint32_t correlation = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint64_t thread = 0;
};

// An operator range on the host: an explicit marker of the agent's own
// workloads, or an NVTX push/pop range of a framework. Kernels launched on
// `thread` between start and end belong to it (the innermost such range).
struct OperatorRange {
  std::string name;  // operator name, e.g. "attention_fwd"
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint64_t thread = 0;
};

struct Trace {
  std::vector<KernelActivity> kernels;
  std::vector<LaunchActivity> launches;
  std::vector<OperatorRange> ranges;
};

// One kernel position of an operator, over its repetitions.
struct KernelStats {
  std::string name;
  int64_t duration_ns = 0;  // median
  int64_t duration_min_ns = 0;
  int64_t duration_max_ns = 0;
  int64_t gap_ns = 0;  // median idle time on the stream until the next kernel
};

struct OperatorTable {
  std::string op;
  int repetitions = 0;  // ranges of this name that launched kernels
  int consistent = 0;   // of those, how many launched the modal kernel sequence
  std::vector<KernelStats> kernels;
  // (max - min) / median of the operator's total kernel time over the
  // consistent repetitions: the spread the profile's numbers carry.
  double spread = 0;
};

struct ReduceResult {
  std::vector<OperatorTable> tables;  // in order of first appearance
  int64_t unattributed_kernels = 0;   // launched outside every range (warm-up, setup)
  std::string error;                  // non-empty: nothing usable
};

// Attributes every kernel to the innermost range that contains its launch
// (same thread), orders each range's kernels by GPU start time, and reduces
// the repetitions of each operator: the modal kernel-name sequence wins (a
// repetition that launched a different sequence is counted, not averaged
// in); per position the median duration and the median gap to the next
// kernel of the same range (0 after the last). Ranges that launched no
// kernel are dropped. Fails when no kernel falls in any range.
ReduceResult Reduce(const Trace& trace);

// The raw records as text, one per line, so a recording can be kept and
// reduced again elsewhere (`vtrain-agent-gpu profile --trace-out`, then
// `vtrain-agent-gpu reduce`):
//   K,start_ns,end_ns,stream,correlation,NAME    a kernel (the name is last:
//   L,correlation,start_ns,end_ns,thread         it may hold commas) / a launch
//   R,start_ns,end_ns,thread,NAME                an operator range
std::string TraceToText(const Trace& trace);

// Parses TraceToText's form into *out; returns "" or "line N: what is wrong".
std::string TraceFromText(const std::string& text, Trace* out);

// Median of a non-empty list (the lower middle for even sizes, so the
// result is one of the measurements).
int64_t Median(std::vector<int64_t> values);

}  // namespace vtrain::gpu

#endif  // VTRAIN_PROFILER_AGENT_GPU_TRACE_H_
