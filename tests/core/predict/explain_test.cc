// explain (core/predict/explain.h): given the prediction of the same job
// with one setting changed as the "measurement", the change ranked first is
// that setting (or one predicting the very same time), for every change it
// ranks, on a dense and a MoE job; bad measurements are refused by name.
#include "core/predict/explain.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/profile/default_profiles.h"
#include "core/spec/settings.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace vtrain {
namespace {

using ::testing::HasSubstr;

Job Dense() {
  Job job;
  job.model = *ModelPreset("llama3-8b");
  job.model.num_layers = 8;
  job.cluster = DefaultCluster(*GpuByName("h100-sxm5-80gb"), 32);
  job.plan.tensor_parallel = 2;
  job.plan.context_parallel = 2;
  job.plan.pipeline_parallel = 2;
  job.plan.data_parallel = 4;
  job.plan.global_batch = 32;
  job.plan.dtype = DType::kFp8;
  FillSettings(GivenSettings{.dtype = true}, job);
  return job;
}

Job Moe() {
  Job job;
  job.model = *ModelPreset("qwen3-30b-a3b");
  job.model.num_layers = 4;
  job.cluster = DefaultCluster(*GpuByName("h100-sxm5-80gb"), 16);
  job.plan.tensor_parallel = 2;
  job.plan.data_parallel = 8;
  job.plan.expert_parallel = 8;
  job.plan.global_batch = 32;
  FillSettings(GivenSettings{}, job);
  return job;
}

void ExpectEachChangeIsNamed(const Job& job) {
  ASSERT_TRUE(ValidateJob(job).ok()) << ValidateJob(job);
  const ProfileSet& profiles = DefaultProfileSet(job.cluster.gpu);
  const PredictOptions options;
  absl::StatusOr<Prediction> base = Predict(job, profiles, options);
  ASSERT_TRUE(base.ok()) << base.status();
  int named = 0;
  for (const SettingChange& s : SettingChanges(job)) {
    SCOPED_TRACE(s.change);
    absl::StatusOr<Prediction> changed = Predict(s.job, profiles, options);
    ASSERT_TRUE(changed.ok()) << changed.status();
    if (changed->iteration_time_ns == base->iteration_time_ns) continue;  // no effect: no gap
    const double measured = static_cast<double>(changed->iteration_time_ns) * 1e-6;
    absl::StatusOr<Explanation> e = Explain(job, *base, measured, profiles, options);
    ASSERT_TRUE(e.ok()) << e.status();
    ASSERT_FALSE(e->toward.empty());
    const ExplainCandidate& top = e->toward.front();
    EXPECT_TRUE(top.change == s.change || std::abs(top.iteration_time_ms - measured) < 1e-6)
        << "ranked first: " << top.change;
    EXPECT_NEAR(top.closes, 1, 1e-9);
    ++named;
  }
  EXPECT_GE(named, 6) << "too few changes had an effect to check";
}

TEST(ExplainTest, NamesTheChangedSettingOfADenseJob) { ExpectEachChangeIsNamed(Dense()); }

TEST(ExplainTest, NamesTheChangedSettingOfAMoeJob) { ExpectEachChangeIsNamed(Moe()); }

TEST(ExplainTest, PlacesTheMeasurementAndRefusesABadOne) {
  const Job job = Dense();
  const ProfileSet& profiles = DefaultProfileSet(job.cluster.gpu);
  absl::StatusOr<Prediction> base = Predict(job, profiles, PredictOptions{});
  ASSERT_TRUE(base.ok());
  const double predicted = static_cast<double>(base->iteration_time_ns) * 1e-6;
  absl::StatusOr<Explanation> above = Explain(job, *base, 10 * predicted, profiles, {});
  ASSERT_TRUE(above.ok());
  EXPECT_EQ(above->position, "above");
  // Far above: the slow edge of the band is among the changes toward it.
  bool edge = false;
  for (const ExplainCandidate& c : above->toward) {
    edge = edge || c.change.find("slow edge") != std::string::npos;
  }
  EXPECT_TRUE(edge);
  absl::StatusOr<Explanation> inside = Explain(job, *base, predicted, profiles, {});
  ASSERT_TRUE(inside.ok());
  EXPECT_EQ(inside->position, "inside");
  EXPECT_TRUE(inside->toward.empty());  // nothing is closer than the prediction itself
  for (double bad : {0.0, -5.0, std::nan(""), static_cast<double>(INFINITY)}) {
    EXPECT_THAT(Explain(job, *base, bad, profiles, {}).status().message(),
                HasSubstr("measured_ms="));
  }
}

}  // namespace
}  // namespace vtrain
