#include "profiler_agent/gpu/layer_profiler.h"

#include "profiler_agent/gpu/cupti_recorder.h"

namespace vtrain::gpu {

LayerProfile ProfileLayer(const LayerProfileOptions& options, std::ostream& progress) {
  LayerProfile result;
  const LayerShape& shape = options.shape;
  if (std::string e = ValidateShape(shape); !e.empty()) {
    result.error = e;
    return result;
  }
  std::string error;
  std::unique_ptr<LayerWorkload> workload = LayerWorkload::Create(shape, &error);
  if (!workload) {
    result.error = error;
    return result;
  }
  result.operators = workload->Operators();
  // Warm-up: first launches load modules and fill caches; they are recorded
  // by CUPTI but fall outside every range, and are dropped below.
  for (int w = 0; w < options.warmup; ++w) {
    for (const std::string& op : result.operators) {
      if (std::string e = workload->Run(op); !e.empty()) {
        result.error = op + ": " + e;
        return result;
      }
    }
    if (std::string e = workload->Synchronize(); !e.empty()) {
      result.error = "warm-up: " + e;
      return result;
    }
  }
  CuptiRecorder::Collect();  // discard the warm-up's records
  progress << "recording " << result.operators.size() << " operators x " << options.repetitions
           << " repetitions\n";
  std::vector<OperatorRange> ranges;
  for (int rep = 0; rep < options.repetitions; ++rep) {
    for (const std::string& op : result.operators) {
      // Each operator runs on its own, the stream drained before and after,
      // so its gaps are its own (the KernelRecord definition).
      const uint64_t start = CuptiRecorder::Now();
      std::string e = workload->Run(op);
      if (e.empty()) e = workload->Synchronize();
      if (!e.empty()) {
        result.error = op + ": " + e;
        return result;
      }
      ranges.push_back({op, start, CuptiRecorder::Now(), 0});
    }
  }
  Trace trace = CuptiRecorder::Collect();
  // One thread launched everything: the ranges are that thread's.
  for (LaunchActivity& l : trace.launches) l.thread = 0;
  trace.ranges = std::move(ranges);
  result.trace = trace;
  ReduceResult reduced = Reduce(trace);
  if (!reduced.error.empty()) {
    result.error = reduced.error;
    return result;
  }
  result.unattributed_kernels = reduced.unattributed_kernels;
  result.entries = OperatorEntries(reduced.tables, shape);
  result.tables = std::move(reduced.tables);
  return result;
}

}  // namespace vtrain::gpu
