#include "core/plan/model_design.h"

#include <cmath>

#include "core/profile/default_profiles.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace vtrain {
namespace {

using ::testing::HasSubstr;
using ::vtrain::testing::StatusIs;

TEST(ModelDesignTest, TheFamilyHoldsMegatronsShapes) {
  const std::vector<ModelSpec> family = GptFamily(1e9, 1e12, 2048, 50257);
  bool has_76b = false, has_145b = false;
  for (size_t i = 0; i < family.size(); ++i) {
    const ModelSpec& m = family[i];
    EXPECT_EQ(m.hidden_size % 128, 0);
    EXPECT_EQ(m.hidden_size / m.num_heads, 128) << m.name;
    if (i > 0) {
      EXPECT_GT(ModelParameterCount(m), ModelParameterCount(family[i - 1]));
    }
    has_76b |= m.num_layers == 60 && m.hidden_size == 10240;
    has_145b |= m.num_layers == 80 && m.hidden_size == 12288;
  }
  EXPECT_TRUE(has_76b) << "the paper's 76.04B shape";
  EXPECT_TRUE(has_145b) << "the paper's naive 145.61B shape";
}

TEST(ModelDesignTest, HoffmannLossHasThePublishedCoefficients) {
  // L(N, D) = 1.69 + 406.4 / N^0.34 + 410.7 / D^0.28; at N = 70e9, D = 1.4e12
  // (Chinchilla): 406.4 / 70e9^0.34 = 0.0828..., 410.7 / 1.4e12^0.28 = 0.1608...
  EXPECT_NEAR(HoffmannLoss(70e9, 1.4e12),
              1.69 + 406.4 / std::pow(70e9, 0.34) + 410.7 / std::pow(1.4e12, 0.28), 1e-12);
  EXPECT_NEAR(HoffmannLoss(70e9, 1.4e12), 1.9336, 5e-3);
}

DesignSpec SmallSpec(double days) {
  DesignSpec spec;
  spec.candidates = GptFamily(0.3e9, 8e9, 2048, 50257);
  spec.cluster = DefaultCluster(*GpuByName("a100-sxm4-80gb"), 0);
  spec.max_gpus = 64;
  spec.global_batch = 256;
  spec.days = days;
  spec.plan_space.tensor_parallel = {1, 2, 4, 8};
  return spec;
}

TEST(ModelDesignTest, NaiveArithmeticAndTheLargestModelThatFits) {
  const ProfileSet profiles = DefaultProfileSet(*GpuByName("a100-sxm4-80gb"));
  const DesignSpec spec = SmallSpec(1);
  VTRAIN_ASSERT_OK_AND_ASSIGN(DesignResult r, DesignModel(spec, profiles));
  // 6 N (20 N) = 64 GPUs x 312 TFLOP/s x 86,400 s  =>  N = sqrt(1.725e21 / 120) = 3.79e9.
  const double expected = std::sqrt(64 * 312e12 * 86400 / 120);
  EXPECT_NEAR(r.naive_parameters, expected, 1e-6 * expected);
  EXPECT_NEAR(r.naive_tokens, 20 * expected, 1e-6 * 20 * expected);
  ASSERT_TRUE(r.optimal.has_value());
  EXPECT_LT(r.optimal->parameters, r.naive_parameters) << "real utilisation is below the peak";
  EXPECT_GE(r.optimal->budget_tokens, r.optimal->optimal_tokens);
  // The next larger candidate does not train its tokens within the budget.
  bool next_checked = false;
  for (size_t i = 0; i + 1 < r.candidates.size(); ++i) {
    if (r.candidates[i].parameters != r.optimal->parameters) continue;
    const DesignedModel& next = r.candidates[i + 1];
    EXPECT_TRUE(!next.fits || next.budget_tokens < next.optimal_tokens) << next.model.name;
    next_checked = true;
  }
  EXPECT_TRUE(next_checked);
}

TEST(ModelDesignTest, MoreDaysNeverGiveASmallerModel) {
  const ProfileSet profiles = DefaultProfileSet(*GpuByName("a100-sxm4-80gb"));
  double last = 0;
  for (double days : {0.25, 1.0, 4.0}) {
    VTRAIN_ASSERT_OK_AND_ASSIGN(DesignResult r, DesignModel(SmallSpec(days), profiles));
    const double n = r.optimal ? r.optimal->parameters : 0;
    EXPECT_GE(n, last) << days << " days";
    last = n;
  }
  EXPECT_GT(last, 0);
}

TEST(ModelDesignTest, BadSpecsNameTheField) {
  const ProfileSet profiles = DefaultProfileSet(*GpuByName("a100-sxm4-80gb"));
  DesignSpec spec = SmallSpec(0);
  EXPECT_THAT(DesignModel(spec, profiles),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--days")));
  spec = SmallSpec(1);
  spec.budget_usd = 1000;
  EXPECT_THAT(DesignModel(spec, profiles),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--price-usd-per-gpu-hour")));
}

}  // namespace
}  // namespace vtrain
