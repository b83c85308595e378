// Fuzzes the cluster job-trace reader (vtrainctl cluster-sim --trace): any
// text is refused or read into jobs with finite times, at least one GPU and
// a deadline at or after the submission, in submission order.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "client/cluster_trace.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::vector<vtrain::client::TraceJob>> jobs =
      vtrain::client::ParseTrace(text, "fuzz");
  if (!jobs.ok()) return 0;
  VTRAIN_FUZZ_CHECK(!jobs->empty(), "an accepted trace has jobs");
  for (size_t i = 0; i < jobs->size(); ++i) {
    const vtrain::client::TraceJob& j = (*jobs)[i];
    VTRAIN_FUZZ_CHECK(
        std::isfinite(j.submit_s) && std::isfinite(j.deadline_s) && std::isfinite(j.duration_s),
        "finite times");
    VTRAIN_FUZZ_CHECK(j.num_gpu >= 1 && j.duration_s > 0 && j.deadline_s >= j.submit_s,
                      "a job's GPUs, duration and deadline");
    if (i > 0) VTRAIN_FUZZ_CHECK((*jobs)[i - 1].submit_s <= j.submit_s, "submission order");
  }
  return 0;
}
