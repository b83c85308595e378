// Sanity checks on freshly measured tables, so a broken run (wrong clock
// units, a kernel sequence that changes between repetitions, a GEMM faster
// than the chip can be) is caught on the GPU node, not in a prediction.
// Plain C++17.
#ifndef VTRAIN_PROFILER_AGENT_GPU_CHECKS_H_
#define VTRAIN_PROFILER_AGENT_GPU_CHECKS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "profiler_agent/gpu/trace.h"

namespace vtrain::gpu {

// Dense tensor-core peak of a device from its compute capability, SM count
// and clock (FLOP/s): 2048 FP16 FLOPs per SM per clock on sm_80 (A100: 108 SMs
// x 1.41 GHz x 2048 = 312 TFLOP/s, NVIDIA A100 datasheet) and 4096 on sm_90
// (H100 SXM: 132 x 1.83 GHz x 4096 = 989 TFLOP/s, H100 datasheet); 1024 for
// other parts. 0 when a field is unknown.
double PeakTensorFlops(int cc_major, int cc_minor, int sm_count, int64_t clock_khz);

struct GemmProbe {
  std::string op;    // the operator whose largest kernel is a GEMM
  double flops = 0;  // that GEMM's floating-point operations
};

// Problems found, one line each; empty when the tables pass:
//  - an operator missing or with no kernels, a kernel with duration <= 0;
//  - a kernel sequence that differed between repetitions;
//  - the spread of an operator's total time above `max_spread`;
//  - the GEMM probe's largest kernel running above `peak_flops`, or below
//    1% of it (durations in the wrong unit).
std::vector<std::string> SanityProblems(const std::vector<OperatorTable>& tables,
                                        const std::vector<std::string>& expected_ops,
                                        const GemmProbe& probe, double peak_flops,
                                        double max_spread);

// The probe's achieved FLOP/s (flops / its largest kernel's median
// duration); 0 when the operator is missing.
double ProbeFlops(const std::vector<OperatorTable>& tables, const GemmProbe& probe);

}  // namespace vtrain::gpu

#endif  // VTRAIN_PROFILER_AGENT_GPU_CHECKS_H_
