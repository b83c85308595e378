#include "core/profile/default_profiles.h"

#include <string>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace vtrain {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Every GPU data file's "calibration" names a built-in calibration (or none).
TEST(DefaultProfilesTest, EveryGpusCalibrationExists) {
  for (const std::string& name : GpuNames()) {
    const GpuSpec gpu = *GpuByName(name);
    SCOPED_TRACE(name);
    if (!gpu.calibration.empty()) {
      EXPECT_NE(FindCalibration(gpu.calibration), nullptr);
    }
  }
  EXPECT_NE(FindCalibration(kA100Calibration), nullptr);
  EXPECT_EQ(FindCalibration("no-such-fit"), nullptr);
}

// The fit a set gets comes from the GPU's calibration field, never from its
// name: a datasheet pushed for an H100 variant (no calibration) keeps the A100
// fit and widened bands, while the same figures with the H100's calibration
// get the H100 refit and its fp8 bands.
TEST(DefaultProfilesTest, TheFitFollowsTheCalibrationFieldNotTheName) {
  const ProfileSet a100 = DefaultProfileSet(*GpuByName("a100-sxm4-80gb"));
  const ProfileSet h100 = DefaultProfileSet(*GpuByName("h100-sxm5-80gb"));
  ASSERT_NE(h100.params.gemm_max_efficiency, a100.params.gemm_max_efficiency);

  GpuSpec pushed = *GpuByName("h100-sxm5-80gb");
  pushed.name = "h100-pcie-80gb";
  pushed.calibration.clear();
  const ProfileSet set = DefaultProfileSet(pushed);
  EXPECT_EQ(set.params.gemm_max_efficiency, a100.params.gemm_max_efficiency);
  for (const ErrorBand& b : set.error_bands) {
    EXPECT_TRUE(absl::StartsWith(b.regime, kUncalibratedGpuRegimePrefix)) << b.regime;
  }
  EXPECT_THAT(set.provenance, Not(HasSubstr("refitted")));

  pushed.calibration = "h100-nemo-fp8";
  const ProfileSet refit = DefaultProfileSet(pushed);
  EXPECT_EQ(refit.params.gemm_max_efficiency, h100.params.gemm_max_efficiency);
  EXPECT_THAT(refit.provenance,
              HasSubstr("carried over from the h100-sxm5-80gb to the h100-pcie-80gb"));
  int fp8_bands = 0;
  for (const ErrorBand& b : refit.error_bands) {
    fp8_bands += absl::StartsWith(b.regime, kPublishedRunsRegimePrefix) ? 1 : 0;
  }
  EXPECT_GT(fp8_bands, 0);
}

// The GPU the root calibration was measured on keeps its bands as measured;
// the H200 says that it borrows the H100's fit.
TEST(DefaultProfilesTest, ProvenanceSaysWhereTheFitCameFrom) {
  const ProfileSet a100 = DefaultProfileSet(*GpuByName("a100-sxm4-80gb"));
  for (const ErrorBand& b : a100.error_bands) {
    EXPECT_FALSE(absl::StartsWith(b.regime, kUncalibratedGpuRegimePrefix)) << b.regime;
  }
  EXPECT_THAT(DefaultProfileSet(*GpuByName("h200-sxm-141gb")).provenance,
              HasSubstr("carried over to the H200 (the same compute die)"));
  EXPECT_THAT(DefaultProfileSet(*GpuByName("b200-sxm-180gb")).provenance,
              HasSubstr("simumax-b200-bf16.csv"));
}

}  // namespace
}  // namespace vtrain
