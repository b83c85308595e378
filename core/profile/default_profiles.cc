#include "core/profile/default_profiles.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace vtrain {

namespace {

// Fitted to the measured A100 Megatron runs and nccl-tests curves of
// data/ by `vtrainctl calibrate ... --cpp` (see docs/accuracy.md); the header
// of the file records the cross-validated error.
void A100Calibration(AnalyticalParams& params, std::vector<ErrorBand>& bands) {
#include "core/profile/a100_params.inc"
}

// Refitted on published runs of the GPU (data/published; docs/accuracy.md).
void H100Calibration(AnalyticalParams& params, std::vector<ErrorBand>& bands) {
#include "core/profile/h100_params.inc"
}

void B200Calibration(AnalyticalParams& params, std::vector<ErrorBand>& bands) {
#include "core/profile/b200_params.inc"
}

// The B200 set's errors on measured bf16 runs it was not fitted on.
void B200Bf16Bands(std::vector<ErrorBand>& bands){
#include "core/profile/b200_bf16_bands.inc"
}

// `bands` labelled as measured on published runs of the set's GPU: `prefix`
// is kPublishedRunsRegimePrefix (fp8) or kPublishedBf16RunsRegimePrefix.
std::vector<ErrorBand> PublishedRunsBands(std::vector<ErrorBand> bands, const char* prefix) {
  for (ErrorBand& b : bands) b.regime = absl::StrCat(prefix, b.regime);
  return bands;
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

const BuiltinCalibration* FindCalibration(absl::string_view name) {
  for (const BuiltinCalibration& c : BuiltinCalibrations()) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

absl::Span<const BuiltinCalibration> BuiltinCalibrations() {
  static constexpr char kH100Fit[] =
      "; gemm_max_efficiency refitted on NVIDIA's published NeMo fp8 H100 runs "
      "(data/published/nemo-h100-fp8.csv, core/profile/h100_params.inc)";
  static constexpr BuiltinCalibration kCalibrations[] = {
      {.name = kA100Calibration, .fitted_on = kCalibratedGpu},
      {.name = "h100-nemo-fp8",
       .fitted_on = "h100-sxm5-80gb",
       .fit = H100Calibration,
       .provenance = kH100Fit},
      {.name = "h100-nemo-fp8-on-h200",
       .fitted_on = "h100-sxm5-80gb",
       .fit = H100Calibration,
       .provenance = kH100Fit,
       .carried_over = ", carried over to the H200 (the same compute die) with the H100's "
                       "fp8 bands: MLPerf Training's two H200 Llama 3.1 405B runs, never "
                       "fitted on, fall 2.0-2.5% under (data/published/mlperf-h200-fp8.csv)"},
      {.name = "b200-nemo-fp8",
       .fitted_on = "b200-sxm-180gb",
       .fit = B200Calibration,
       .bf16_bands = B200Bf16Bands,
       .provenance = "; gemm_max_efficiency refitted on NVIDIA's published NeMo fp8 B200 runs "
                     "(data/published/nemo-b200-fp8.csv, core/profile/b200_params.inc)",
       .bf16_provenance = "; bf16 jobs on one node: bands of its errors on SimuMax's measured "
                          "bf16 runs (data/published/simumax-b200-bf16.csv, "
                          "core/profile/b200_bf16_bands.inc)"},
  };
  return kCalibrations;
}

ProfileSet DefaultProfileSet(const GpuSpec& gpu) {
  ProfileSet set;
  set.name = absl::StrCat("builtin-", gpu.name);
  set.gpu = gpu.name;
  set.provenance = absl::StrCat(
      "built-in analytical profile for ", gpu.name,
      ": roofline and host-dispatch model on the GPU's datasheet figures, with parameters "
      "calibrated on 464 measured A100-SXM4-80GB Megatron runs and nccl-tests all-reduce "
      "curves (core/profile/a100_params.inc)");
  set.params = DefaultAnalyticalParams();
  set.error_bands = DefaultErrorBands();
  if (gpu.name == kCalibratedGpu) return set;
  // Efficiencies carried over from another GPU: say so, and widen.
  set.error_bands = UncalibratedErrorBands(set.error_bands);
  const BuiltinCalibration* c = FindCalibration(gpu.calibration);
  if (c != nullptr && c->fit != nullptr) {
    // GEMM efficiency refitted on published fp8 runs; their bands for fp8 jobs.
    std::vector<ErrorBand> fp8_bands;
    c->fit(set.params, fp8_bands);
    absl::StrAppend(&set.provenance, c->provenance);
    if (!c->carried_over.empty()) {
      absl::StrAppend(&set.provenance, c->carried_over);
    } else if (gpu.name != c->fitted_on) {
      absl::StrAppend(&set.provenance, ", carried over from the ", c->fitted_on, " to the ",
                      gpu.name, " with its bands");
    }
    for (ErrorBand& b : PublishedRunsBands(fp8_bands, kPublishedRunsRegimePrefix)) {
      set.error_bands.push_back(b);
    }
    if (c->bf16_bands != nullptr) {
      std::vector<ErrorBand> bf16_bands;
      c->bf16_bands(bf16_bands);
      for (ErrorBand& b : PublishedRunsBands(bf16_bands, kPublishedBf16RunsRegimePrefix)) {
        set.error_bands.push_back(b);
      }
      absl::StrAppend(&set.provenance, c->bf16_provenance);
    }
  }
  absl::StrAppend(
      &set.provenance,
      "; the other A100 efficiencies are carried over uncalibrated, so the "
      "prediction intervals are widened 1.3x either way and labelled "
      "uncalibrated_gpu/",
      absl::StartsWith(set.error_bands.back().regime, kPublishedRunsRegimePrefix) ||
              absl::StartsWith(set.error_bands.back().regime, kPublishedBf16RunsRegimePrefix)
          ? " (fp8 jobs: bands of the published runs' held-out errors, labelled "
            "published_fp8_runs/)"
          : "");
  return set;
}

}  // namespace vtrain
