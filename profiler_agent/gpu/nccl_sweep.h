// NCCL collective sweeps on one node (one process drives every GPU):
// all-reduce, all-gather, reduce-scatter and send/recv over 2..N GPUs and
// message sizes doubling from min_bytes to max_bytes, as collective curves.
// Sizes follow nccl-tests' convention (the whole buffer; per rank for
// send/recv), so curves line up with `vtrain-agent import nccl-tests`.
#ifndef VTRAIN_PROFILER_AGENT_GPU_NCCL_SWEEP_H_
#define VTRAIN_PROFILER_AGENT_GPU_NCCL_SWEEP_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "profiler_agent/gpu/profile_json.h"

namespace vtrain::gpu {

struct NcclSweepOptions {
  int min_gpus = 2;
  int max_gpus = 0;  // 0: every visible GPU
  int64_t min_bytes = 1 << 10;
  int64_t max_bytes = 1 << 30;
  int warmup = 5;
  int iterations = 20;
  std::vector<std::string> collectives = {"all_reduce", "all_gather", "reduce_scatter", "send_recv",
                                          "all_to_all"};
};

struct NcclSweepResult {
  std::vector<CollectiveEntry> curves;
  std::string error;
};

// Runs the sweep; one progress line per (collective, GPU count).
NcclSweepResult RunNcclSweep(const NcclSweepOptions& options, std::ostream& progress);

// Correctness check over `gpus` GPUs (1 is allowed): all-reduces rank-valued
// buffers and compares with the expected sums, then times one 64 MiB
// all-reduce. Returns "" or the problem; *latency_ns gets the time.
std::string NcclCheck(int gpus, double* latency_ns);

// "2.28.9" (ncclGetVersion), or "" when NCCL cannot be queried.
std::string NcclVersion();

}  // namespace vtrain::gpu

#endif  // VTRAIN_PROFILER_AGENT_GPU_NCCL_SWEEP_H_
