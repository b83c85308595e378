// `vtrain-agent-gpu selftest`: runs the Llama, fp8 and MoE kernels of the
// workloads (llama_kernels.cuh, fp8_kernels.cuh, moe_kernels.cuh, the fp8
// cuBLASLt GEMM) on small shapes and compares their outputs with CPU
// references in double precision, then builds and runs a small Llama
// workload and a small MoE block in bf16 (and Llama and GPT ones in fp8 on a
// GPU that has fp8). For the first session with a GPU: measured tables
// are only worth having once this passes.
#ifndef VTRAIN_PROFILER_AGENT_GPU_SELFTEST_H_
#define VTRAIN_PROFILER_AGENT_GPU_SELFTEST_H_

#include <ostream>
#include <string>

namespace vtrain::gpu {

// Runs every check on the current CUDA device, printing one line per check
// to `out`. Returns "" when all passed, else a message naming the failed
// checks (or the CUDA call that failed).
std::string RunKernelSelfTest(std::ostream& out);

}  // namespace vtrain::gpu

#endif  // VTRAIN_PROFILER_AGENT_GPU_SELFTEST_H_
