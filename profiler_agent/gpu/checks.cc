#include "profiler_agent/gpu/checks.h"

#include <algorithm>
#include <cstdio>

namespace vtrain::gpu {
namespace {

const OperatorTable* Find(const std::vector<OperatorTable>& tables, const std::string& op) {
  for (const OperatorTable& t : tables) {
    if (t.op == op) return &t;
  }
  return nullptr;
}

std::string Format(const char* fmt, double a, double b) {
  char buf[160];
  std::snprintf(buf, sizeof(buf), fmt, a, b);
  return buf;
}

}  // namespace

double PeakTensorFlops(int cc_major, int cc_minor, int sm_count, int64_t clock_khz) {
  (void)cc_minor;
  if (sm_count <= 0 || clock_khz <= 0) return 0;
  const double per_sm_per_clock = cc_major == 8 ? 2048 : cc_major >= 9 ? 4096 : 1024;
  return per_sm_per_clock * sm_count * static_cast<double>(clock_khz) * 1e3;
}

double ProbeFlops(const std::vector<OperatorTable>& tables, const GemmProbe& probe) {
  const OperatorTable* t = Find(tables, probe.op);
  if (t == nullptr || t->kernels.empty()) return 0;
  int64_t longest = 0;
  for (const KernelStats& k : t->kernels) longest = std::max(longest, k.duration_ns);
  return longest > 0 ? probe.flops / (static_cast<double>(longest) * 1e-9) : 0;
}

std::vector<std::string> SanityProblems(const std::vector<OperatorTable>& tables,
                                        const std::vector<std::string>& expected_ops,
                                        const GemmProbe& probe, double peak_flops,
                                        double max_spread) {
  std::vector<std::string> problems;
  for (const std::string& op : expected_ops) {
    const OperatorTable* t = Find(tables, op);
    if (t == nullptr || t->kernels.empty()) problems.push_back(op + ": no kernel was recorded");
  }
  for (const OperatorTable& t : tables) {
    for (const KernelStats& k : t.kernels) {
      if (k.duration_ns <= 0) {
        problems.push_back(t.op + ": kernel '" + k.name + "' has a non-positive duration");
        break;
      }
    }
    if (t.consistent != t.repetitions) {
      problems.push_back(t.op + ": the kernel sequence changed between repetitions (" +
                         std::to_string(t.consistent) + " of " + std::to_string(t.repetitions) +
                         " agree)");
    }
    if (t.spread > max_spread) {
      problems.push_back(t.op + Format(": total kernel time varies by %.1f%% between repetitions "
                                       "(limit %.1f%%)",
                                       100 * t.spread, 100 * max_spread));
    }
  }
  if (peak_flops > 0 && Find(tables, probe.op) != nullptr) {
    const double achieved = ProbeFlops(tables, probe);
    if (achieved > peak_flops) {
      problems.push_back(probe.op + Format(": its GEMM ran at %.1f TFLOP/s, above the peak of %.1f",
                                           achieved / 1e12, peak_flops / 1e12));
    } else if (achieved < 0.01 * peak_flops) {
      problems.push_back(probe.op + Format(": its GEMM ran at %.3f TFLOP/s, under 1%% of the peak "
                                           "of %.1f (durations in the wrong unit?)",
                                           achieved / 1e12, peak_flops / 1e12));
    }
  }
  return problems;
}

}  // namespace vtrain::gpu
