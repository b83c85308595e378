// Decoding of CUPTI activity records into the agent's Trace: kernels,
// runtime/driver launches, NVTX markers paired START/END into ranges, and
// the device's name. Separate from the recorder's callbacks so that tests
// can feed it records built by hand (no GPU needed).
#ifndef VTRAIN_PROFILER_AGENT_GPU_CUPTI_RECORDS_H_
#define VTRAIN_PROFILER_AGENT_GPU_CUPTI_RECORDS_H_

#include <cupti.h>

#include <cstdint>
#include <string>
#include <unordered_map>

#include "profiler_agent/gpu/trace.h"

namespace vtrain::gpu {

// Demangled kernel name ("void layer_norm_fwd_kernel<__half>(...)"); the
// name as given when it does not demangle; "unknown" for null.
std::string Demangle(const char* name);

// Accumulates records; not thread-safe (the recorder holds its lock).
class RecordDecoder {
 public:
  // Appends what `record` says to the trace. Kinds it does not use are
  // ignored; an END marker without its START is dropped.
  void Add(const CUpti_Activity* record);

  Trace& trace() { return trace_; }
  // Moves the trace out (open markers stay, to pair with later ENDs).
  Trace TakeTrace();
  // The first device record's name and memory ("" / 0 when none came).
  const std::string& device_name() const { return device_name_; }
  uint64_t device_memory() const { return device_memory_; }
  size_t records() const {
    return trace_.kernels.size() + trace_.launches.size() + trace_.ranges.size();
  }

 private:
  struct OpenMarker {
    std::string name;
    uint64_t start_ns = 0;
    uint64_t thread = 0;
  };
  Trace trace_;
  std::unordered_map<uint32_t, OpenMarker> open_markers_;
  std::string device_name_;
  uint64_t device_memory_ = 0;
};

}  // namespace vtrain::gpu

#endif  // VTRAIN_PROFILER_AGENT_GPU_CUPTI_RECORDS_H_
