#include "core/profile/default_profiles.h"

#include "absl/strings/str_cat.h"

namespace vtrain {

namespace {

// Fitted to the measured A100 Megatron runs and nccl-tests curves of
// ../shared/data by `vtrainctl calibrate ... --cpp` (see docs/accuracy.md); the header
// of the file records the cross-validated error.
void A100Calibration(AnalyticalParams& params, std::vector<ErrorBand>& bands) {
#include "core/profile/a100_params.inc"
}

}  // namespace

AnalyticalParams DefaultAnalyticalParams() {
  AnalyticalParams params;
  std::vector<ErrorBand> bands;
  A100Calibration(params, bands);
  return params;
}

std::vector<ErrorBand> DefaultErrorBands() {
  AnalyticalParams params;
  std::vector<ErrorBand> bands;
  A100Calibration(params, bands);
  return bands;
}

std::vector<ErrorBand> UncalibratedErrorBands(const std::vector<ErrorBand>& bands) {
  std::vector<ErrorBand> out;
  for (const ErrorBand& b : bands) {
    ErrorBand w = b;
    w.regime = absl::StrCat(kUncalibratedGpuRegimePrefix, b.regime);
    w.error_low = (1 + b.error_low) / kUncalibratedGpuSpread - 1;
    w.error_high = (1 + b.error_high) * kUncalibratedGpuSpread - 1;
    w.rows = 0;
    out.push_back(w);
  }
  return out;
}

ProfileSet DefaultProfileSet(const GpuSpec& gpu) {
  ProfileSet set;
  set.name = absl::StrCat("builtin-", gpu.name);
  set.gpu = gpu.name;
  set.provenance = absl::StrCat(
      "built-in analytical profile for ", gpu.name,
      ": roofline and host-dispatch model on the GPU's datasheet figures, with parameters "
      "calibrated on 464 measured A100-SXM4-80GB Megatron runs and nccl-tests all-reduce "
      "curves (core/profile/a100_params.inc); no measurements of this GPU");
  set.params = DefaultAnalyticalParams();
  set.error_bands = DefaultErrorBands();
  if (gpu.name != kCalibratedGpu) {
    // Efficiencies carried over from another GPU: say so, and widen.
    set.error_bands = UncalibratedErrorBands(set.error_bands);
    absl::StrAppend(&set.provenance,
                    "; the A100 efficiencies are carried over uncalibrated, so "
                    "the prediction intervals are widened 1.3x either way and "
                    "labelled uncalibrated_gpu/");
  }
  return set;
}

}  // namespace vtrain
