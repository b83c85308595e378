// The built-in profile sets: one per known GPU model, so a fresh build
// predicts with no server and no files. They hold no measurements; every
// lookup is ANALYTICAL, with parameters calibrated on measured A100 runs.
#ifndef VTRAIN_CORE_PROFILE_DEFAULT_PROFILES_H_
#define VTRAIN_CORE_PROFILE_DEFAULT_PROFILES_H_

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

// The built-in profile set for `gpu`. The A100-SXM4-80GB has the measured
// calibration; every other GPU carries its efficiencies over, with
// UncalibratedErrorBands; the H100 and B200 refit gemm_max_efficiency on
// published fp8 runs (core/profile/h100_params.inc, b200_params.inc) and add
// their bands for fp8 jobs (published_fp8_runs/); the B200 also has bands for
// bf16 jobs (published_bf16_runs/); the H200 takes the H100's fit and fp8 bands.
ProfileSet DefaultProfileSet(const GpuSpec& gpu);

}  // namespace vtrain

#endif  // VTRAIN_CORE_PROFILE_DEFAULT_PROFILES_H_
