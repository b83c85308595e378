// Turns profiling work (the keys predictions found no measurement for, as
// the registry's NextProfilingWork returns them) into runs of
// vtrain-agent-gpu: one `profile` run per layer shape, one `nccl` run per
// GPU count. Pure; the serve loop executes the runs.
#ifndef VTRAIN_PROFILER_AGENT_WORK_H_
#define VTRAIN_PROFILER_AGENT_WORK_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace vtrain::agent {

struct ProfilingRun {
  std::vector<std::string> args;  // vtrain-agent-gpu arguments, without -o
  std::vector<std::string> keys;  // the work keys the run answers
};

struct WorkPlan {
  std::vector<ProfilingRun> runs;
  std::vector<std::string> skipped;  // "KEY: why", for keys this node cannot answer
};

// Plans runs for `keys` on a node with `local_gpus` GPUs of model `gpu`.
// Operator keys of one (dtype, arch, hidden, seq, micro-batch, t) share a
// layer run; fields a key does not fix get valid defaults (heads hidden/128
// or t, KV heads = heads, ffn 4 x hidden, vocab 50257). Llama keys get
// Llama runs (--arch llama --kv-heads N); fp8 keys fp8 runs of either
// architecture. Optimizer keys ride along with a layer run
// (or a small one of their own). Intra-node collectives over at most
// `local_gpus` ranks become NCCL sweeps at that rank count; other keys
// (inter-node collectives, another GPU model, unparsable text) are skipped
// with the reason.
WorkPlan PlanProfilingWork(const std::vector<std::string>& keys, const std::string& gpu,
                           int local_gpus);

}  // namespace vtrain::agent

#endif  // VTRAIN_PROFILER_AGENT_WORK_H_
