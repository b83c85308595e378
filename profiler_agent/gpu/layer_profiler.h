// Profiles one layer shape on the current GPU: runs the operator workloads
// (workloads.h) with warm-up, records their kernels with CUPTI over several
// repetitions and reduces them to operator tables (trace.h).
#ifndef VTRAIN_PROFILER_AGENT_GPU_LAYER_PROFILER_H_
#define VTRAIN_PROFILER_AGENT_GPU_LAYER_PROFILER_H_

#include <ostream>
#include <string>
#include <vector>

#include "profiler_agent/gpu/profile_json.h"
#include "profiler_agent/gpu/trace.h"
#include "profiler_agent/gpu/workloads.h"

namespace vtrain::gpu {

struct LayerProfileOptions {
  LayerShape shape;
  int warmup = 3;
  int repetitions = 10;
};

struct LayerProfile {
  std::vector<OperatorTable> tables;
  std::vector<OperatorEntry> entries;  // the tables under their keys
  std::vector<std::string> operators;  // what the workload ran
  int64_t unattributed_kernels = 0;
  Trace trace;        // the raw records the tables came from
  std::string error;  // non-empty: the run failed
};

// Runs and records every operator of `options.shape`; progress lines go to
// `progress`. The CUPTI recorder must have been started (CuptiRecorder::Start).
LayerProfile ProfileLayer(const LayerProfileOptions& options, std::ostream& progress);

}  // namespace vtrain::gpu

#endif  // VTRAIN_PROFILER_AGENT_GPU_LAYER_PROFILER_H_
