// The built-in profile sets: one per known GPU model, so a fresh build
// predicts with no server and no files. They hold no measurements; every
// lookup is ANALYTICAL, with parameters calibrated on measured A100 runs.
#ifndef VTRAIN_CORE_PROFILE_DEFAULT_PROFILES_H_
#define VTRAIN_CORE_PROFILE_DEFAULT_PROFILES_H_

#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/profile/profile.h"
#include "core/spec/gpu.h"

namespace vtrain {

// Parameters of the analytical model used when nothing better is known: the
// A100 calibration (core/profile/a100_params.inc), used for every GPU model.
AnalyticalParams DefaultAnalyticalParams();

// The prediction-interval bands of the A100 calibration.
std::vector<ErrorBand> DefaultErrorBands();

// The GPU model the built-in parameters and bands were calibrated on.
inline constexpr char kCalibratedGpu[] = "a100-sxm4-80gb";

// Prefix of the regime of a band that was not measured on the set's GPU (see
// UncalibratedErrorBands); RegimeOf's regimes follow it.
inline constexpr char kUncalibratedGpuRegimePrefix[] = "uncalibrated_gpu/";
// The band of two plans' ratio (core/calibrate/bands.h PairedBandOf); never
// a job's regime.
inline constexpr char kPairedRegime[] = "paired";

// Prefix of the regime of a band from the held-out errors of published fp8
// runs of the set's GPU (the H100 and B200 sets: throughput NVIDIA published,
// not runs measured here); RegimeOf's regimes follow it. Only fp8 jobs use
// these bands.
inline constexpr char kPublishedRunsRegimePrefix[] = "published_fp8_runs/";

// Prefix of the regime of a band from the errors of published bf16 runs of
// the set's GPU that its parameters were not fitted on (the B200 set: runs
// SimuMax measured, data/published/simumax-b200-bf16.csv); only bf16 jobs
// use these bands.
inline constexpr char kPublishedBf16RunsRegimePrefix[] = "published_bf16_runs/";

// Factor by which the bands widen for a GPU with no calibration of its own:
// measured/predicted ratios are assumed to spread a further 1.3x either way
// (a judgement, not a fit: transferring A100 efficiencies to another
// generation has no residuals to measure it by).
inline constexpr double kUncalibratedGpuSpread = 1.3;

// `bands` relabelled "uncalibrated_gpu/<regime>" and widened: the ratio
// measured / predicted = 1 / (1 + error) spreads by kUncalibratedGpuSpread,
// so error_low' = (1 + error_low) / 1.3 - 1 and error_high' = (1 +
// error_high) * 1.3 - 1; rows = 0, as no residuals back them.
std::vector<ErrorBand> UncalibratedErrorBands(const std::vector<ErrorBand>& bands);

// A fit of the analytical model that a GPU's data file names in "calibration"
// (docs/extending.md#a-new-gpu). The root, kA100Calibration, is the measured
// A100 fit every set starts from; the others refit parameters on published runs
// of their GPU (core/profile/*_params.inc, written by `vtrainctl calibrate
// --cpp`) and bring those runs' held-out errors as the bands of fp8 jobs.
struct BuiltinCalibration {
  absl::string_view name = {};
  absl::string_view fitted_on = {};  // the GPU whose runs it was fitted on
  // Sets the refitted parameters and the fp8 bands; nullptr for the root.
  void (*fit)(AnalyticalParams& params, std::vector<ErrorBand>& bands) = nullptr;
  // Bands of bf16 jobs from runs never fitted on (published_bf16_runs/), or nullptr.
  void (*bf16_bands)(std::vector<ErrorBand>& bands) = nullptr;
  absl::string_view provenance = {};       // appended to the set's provenance
  absl::string_view bf16_provenance = {};  // appended after the bf16 bands
  // Said when a GPU other than fitted_on uses it; empty: a generic sentence.
  absl::string_view carried_over = {};
};

// The root calibration's name, and every built-in calibration.
inline constexpr char kA100Calibration[] = "a100-megatron";
absl::Span<const BuiltinCalibration> BuiltinCalibrations();
// The calibration with this name, or nullptr.
const BuiltinCalibration* FindCalibration(absl::string_view name);

// The built-in profile set for `gpu`. The A100-SXM4-80GB has the measured
// calibration; every other GPU carries its efficiencies over, with
// UncalibratedErrorBands; a GPU whose `calibration` names a refit (the H100,
// H200 and B200 data files) takes its parameters, its bands for fp8 jobs
// (published_fp8_runs/) and, where it has them, bands for bf16 jobs
// (published_bf16_runs/). A GPU with no calibration (or a pushed datasheet)
// keeps the A100 fit, widened.
ProfileSet DefaultProfileSet(const GpuSpec& gpu);

}  // namespace vtrain

#endif  // VTRAIN_CORE_PROFILE_DEFAULT_PROFILES_H_
