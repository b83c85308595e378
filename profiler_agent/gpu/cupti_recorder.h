// CUPTI activity recording for the GPU agent: kernels (name, GPU start and
// end, stream, correlation id), the runtime and driver calls that launched
// them (host time, thread) and, for framework processes, NVTX ranges.
// CUPTI delivers records through process-wide callbacks without a context
// pointer, so there is one recorder per process.
#ifndef VTRAIN_PROFILER_AGENT_GPU_CUPTI_RECORDER_H_
#define VTRAIN_PROFILER_AGENT_GPU_CUPTI_RECORDER_H_

#include <cstdint>
#include <string>

#include "profiler_agent/gpu/trace.h"

namespace vtrain::gpu {

class CuptiRecorder {
 public:
  // Enables kernel, runtime-API and driver-API records (and NVTX marker
  // records when `nvtx`). Returns "" or the failing call and CUPTI's
  // message. Call before the work to record; calling twice is an error.
  static std::string Start(bool nvtx);

  // Flushes CUPTI's buffers and moves everything recorded so far out.
  // NVTX push/pop and start/end markers are paired into ranges here.
  static Trace Collect();

  // Disables recording (records in flight are dropped at the next Collect).
  static void Stop();

  // The first GPU CUPTI reported (device records, enabled with `nvtx`):
  // its name ("NVIDIA H200") and memory; "" when none was reported. Lets the
  // injection library label tables without CUDA calls of its own.
  static std::string DeviceName(uint64_t* memory_bytes);

  // CUPTI's timestamp, the clock of the host-side records (ns).
  static uint64_t Now();

  // Records dropped: CUPTI out of buffer space, a failed flush, or more than
  // the 4 million records kept in memory.
  static uint64_t Dropped();
};

}  // namespace vtrain::gpu

#endif  // VTRAIN_PROFILER_AGENT_GPU_CUPTI_RECORDER_H_
