#include "core/predict/sanity.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/predict/predictor.h"

namespace vtrain {
namespace {

struct Probe {
  const char* label;
  const char* model;
  int64_t gpus, tensor_parallel, pipeline_parallel, micro_batch, global_batch;
};

// One single-node and one multi-node job, so both error bands and both link
// scopes are exercised; small enough to predict in well under a millisecond.
constexpr Probe kProbes[] = {
    {"gpt3-1.3b on 8 GPUs (t=2)", "gpt3-1.3b", 8, 2, 1, 1, 64},
    {"gpt3-13b on 64 GPUs (t=8, p=2)", "gpt3-13b", 64, 8, 2, 2, 256},
};

bool Physical(double v) { return std::isfinite(v) && v > 0; }

void CheckOne(const Probe& probe, const ProfileSet& set, const GpuSpec& gpu,
              std::vector<std::string>& problems) {
  Job job;
  job.model = *ModelPreset(probe.model);
  job.cluster = DefaultCluster(gpu, probe.gpus);
  job.plan.tensor_parallel = probe.tensor_parallel;
  job.plan.pipeline_parallel = probe.pipeline_parallel;
  job.plan.micro_batch = probe.micro_batch;
  job.plan.global_batch = probe.global_batch;
  job.plan.data_parallel = probe.gpus / (probe.tensor_parallel * probe.pipeline_parallel);
  if (!ValidateJob(job).ok()) return;  // e.g. a GPU too small for the probe
  absl::StatusOr<Prediction> p = Predict(job, set);
  const std::string where = absl::StrCat("the set predicts ", probe.label);
  if (!p.ok()) {
    problems.push_back(absl::StrCat(where, " with an error: ", p.status().message()));
    return;
  }
  if (p->iteration_time_ns <= 0) {
    problems.push_back(absl::StrCat(where, " in ", p->iteration_time_ns, " ns"));
  }
  if (!Physical(p->mfu) || p->mfu > 1 || !Physical(p->hfu) || p->hfu > 1) {
    problems.push_back(absl::StrCat(where, " at MFU ", 100 * p->mfu, "% / HFU ", 100 * p->hfu,
                                    "% (must be above 0 and at most 100%)"));
  }
  if (!Physical(p->tokens_per_s)) {
    problems.push_back(absl::StrCat(where, " at ", p->tokens_per_s, " tokens/s"));
  }
  if (p->interval_coverage > 0 &&
      !(Physical(p->interval_low_ns) && std::isfinite(p->interval_high_ns) &&
        p->interval_low_ns <= p->interval_high_ns)) {
    problems.push_back(absl::StrCat(where, " with the interval ", p->interval_low_ns * 1e-6, " .. ",
                                    p->interval_high_ns * 1e-6, " ms"));
  }
}

}  // namespace

absl::Status CheckPredictionsArePhysical(const ProfileSet& set) {
  absl::StatusOr<GpuSpec> gpu =
      set.datasheet.has_value() ? absl::StatusOr<GpuSpec>(*set.datasheet) : GpuByName(set.gpu);
  if (!gpu.ok()) return absl::OkStatus();
  std::vector<std::string> problems;
  for (const Probe& probe : kProbes) CheckOne(probe, set, *gpu, problems);
  if (problems.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("profile_set: ", absl::StrJoin(problems, "; "),
                   "; check its params, error_bands and kernel tables"));
}

}  // namespace vtrain
