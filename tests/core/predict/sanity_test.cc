#include "core/predict/sanity.h"

#include "core/predict/predictor.h"
#include "core/profile/default_profiles.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace vtrain {
namespace {

using ::testing::HasSubstr;
using ::vtrain::testing::StatusIs;

TEST(SanityTest, TheBuiltInSetsArePhysical) {
  for (const std::string& name : GpuNames()) {
    VTRAIN_EXPECT_OK(CheckPredictionsArePhysical(DefaultProfileSet(*GpuByName(name)))) << name;
  }
}

TEST(SanityTest, KernelTablesThatBeatThePeakAreRefused) {
  const GpuSpec gpu = *GpuByName("a100-sxm4-80gb");
  ProfileSet set = DefaultProfileSet(gpu);
  // Every operator the single-node probe looks up, measured at 1 ns: far
  // faster than the GPU's peak FLOP/s allows.
  Job probe;
  probe.model = *ModelPreset("gpt3-1.3b");
  probe.cluster = DefaultCluster(gpu, 8);
  probe.plan.tensor_parallel = 2;
  probe.plan.data_parallel = 4;
  probe.plan.global_batch = 64;
  absl::StatusOr<Prediction> p = Predict(probe, set);
  ASSERT_TRUE(p.ok()) << p.status();
  int measured = 0;
  for (const LookupRecord& r : p->fidelity.records) {
    absl::StatusOr<OperatorKey> key = ParseOperatorKey(r.key);
    if (!key.ok()) continue;  // a collective
    OperatorProfile fast;
    fast.kernels = {{"too_fast", 1, 0, 0}};
    set.operators.insert_or_assign(*key, fast);
    ++measured;
  }
  ASSERT_GT(measured, 5);
  EXPECT_THAT(
      CheckPredictionsArePhysical(set),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("gpt3-1.3b on 8 GPUs (t=2) at MFU")));
}

TEST(SanityTest, IntervalsMustBeOrderedAndFinite) {
  ProfileSet set = DefaultProfileSet(*GpuByName("a100-sxm4-80gb"));
  set.error_bands = {{"single_node", 0.5, 0.2, 0.9, 10}};  // low above high
  EXPECT_THAT(CheckPredictionsArePhysical(set),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("interval")));
  EXPECT_THAT(ValidateProfileSetValues(set),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("error_bands[0]")));
}

TEST(SanityTest, ParameterRangesNameEveryBadField) {
  ProfileSet set = DefaultProfileSet(*GpuByName("h100-sxm5-80gb"));
  set.params.gemm_max_efficiency = 0;
  set.params.memory_efficiency = std::nan("");
  set.params.host_dispatch_ns = -1;
  absl::Status s = ValidateProfileSetValues(set);
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument,
                          HasSubstr("profile_set.params.gemm_max_efficiency=0 must be in")));
  EXPECT_THAT(s.message(), HasSubstr("profile_set.params.memory_efficiency=nan"));
  EXPECT_THAT(s.message(), HasSubstr("profile_set.params.host_dispatch_ns=-1"));
  VTRAIN_EXPECT_OK(ValidateProfileSetValues(DefaultProfileSet(*GpuByName("h100-sxm5-80gb"))));
}

}  // namespace
}  // namespace vtrain
