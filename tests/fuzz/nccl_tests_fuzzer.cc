// Fuzzes nccl-tests output: the latency-curve reader and the rank inference.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "common/nccl_tests.h"
#include "profiler_agent/importers.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  vtrain::agent::InferNcclRanks(text, "all_reduce_8gpu.txt");
  absl::StatusOr<vtrain::CollectiveCurve> curve = vtrain::common::ParseNcclTests(text, "fuzz");
  if (!curve.ok()) return 0;
  for (double bytes : {1.0, 1e6, 1e12}) {
    const double ns = curve->LatencyNs(bytes);
    VTRAIN_FUZZ_CHECK(std::isfinite(ns) && ns > 0, std::to_string(ns));
  }
  return 0;
}
