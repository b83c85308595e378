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

// The built-in profile set for `gpu`.
ProfileSet DefaultProfileSet(const GpuSpec& gpu);

}  // namespace vtrain

#endif  // VTRAIN_CORE_PROFILE_DEFAULT_PROFILES_H_
