#include "core/calibrate/calibration.h"

#include <cmath>

#include "core/calibrate/minimize.h"
#include "core/predict/predictor.h"
#include "core/profile/default_profiles.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/spec_builders.h"

namespace vtrain {
namespace {

TEST(MinimizeTest, FindsTheMinimumOfAShiftedQuadratic) {
  auto f = [](const std::vector<double>& x) {
    return (x[0] - 3) * (x[0] - 3) + 10 * (x[1] + 1) * (x[1] + 1) + 2;
  };
  MinimizeOptions o;
  o.max_evaluations = 2000;
  o.tolerance = 1e-12;
  MinimizeResult r = Minimize(f, {0, 0}, o);
  EXPECT_NEAR(r.x[0], 3, 1e-3);
  EXPECT_NEAR(r.x[1], -1, 1e-3);
  EXPECT_NEAR(r.value, 2, 1e-6);
}

TEST(SummarizeTest, MapeR2AndBiasByHand) {
  // Errors +10%, -10%, +20%: MAPE 13.33%, bias +6.67%, max 20%.
  std::vector<ValidationRow> rows(3);
  rows[0] = {100, 110, 0.10, absl::OkStatus()};
  rows[1] = {200, 180, -0.10, absl::OkStatus()};
  rows[2] = {300, 360, 0.20, absl::OkStatus()};
  ErrorSummary s = Summarize(rows);
  EXPECT_EQ(s.count, 3);
  EXPECT_NEAR(s.mape, 0.4 / 3, 1e-12);
  EXPECT_NEAR(s.bias, 0.2 / 3, 1e-12);
  EXPECT_NEAR(s.max_abs_error, 0.2, 1e-12);
  // R^2 = 1 - SS_res / SS_tot: SS_res = 100 + 400 + 3600, SS_tot = 20000.
  EXPECT_NEAR(s.r2, 1 - 4100.0 / 20000.0, 1e-12);
  // Failed rows are left out.
  rows.push_back({50, 0, 0, absl::InternalError("x")});
  EXPECT_EQ(Summarize(rows).count, 3);
}

TEST(DominantParallelismTest, LargestDegreeWins) {
  ParallelPlan p;
  EXPECT_EQ(DominantParallelism(p), "none");
  p.tensor_parallel = 8;
  p.data_parallel = 2;
  EXPECT_EQ(DominantParallelism(p), "tp");
  p.pipeline_parallel = 16;
  EXPECT_EQ(DominantParallelism(p), "pp");
  p.data_parallel = 32;
  EXPECT_EQ(DominantParallelism(p), "dp");
}

// Measurements made by the model itself with known parameters: calibration
// from other starting values must find parameters that reproduce them, and
// its cross-validated error must be small. This fails if the fit, the
// parameter plumbing or the fold bookkeeping is broken.
TEST(CalibrateTest, RecoversSyntheticMeasurements) {
  const GpuSpec gpu = *GpuByName("a100-sxm4-80gb");
  ProfileSet truth = DefaultProfileSet(gpu);
  truth.params.host_dispatch_ns = 40000;
  truth.params.gemm_max_efficiency = 0.7;
  std::vector<Measurement> rows;
  for (uint64_t seed = 1; rows.size() < 24; ++seed) {
    Job job = testing::RandomSmallJob(seed);
    job.cluster.gpu = gpu;
    if (!ValidateJob(job).ok()) continue;
    absl::StatusOr<Prediction> p = Predict(job, truth);
    ASSERT_TRUE(p.ok()) << p.status();
    rows.push_back({job, p->iteration_time_ms(), "synthetic.csv:" + std::to_string(seed)});
  }
  ProfileSet start = truth;
  start.params.host_dispatch_ns = 15000;
  start.params.gemm_max_efficiency = 0.4;
  CalibrateOptions options;
  options.params = {"host_dispatch_ns", "gemm_max_efficiency"};
  options.folds = 3;
  options.max_evaluations = 150;
  absl::StatusOr<CalibrationResult> r = Calibrate(rows, start, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_LT(r->fit_mape, 0.01);
  EXPECT_LT(r->cross_validated.overall.mape, 0.02);
  EXPECT_EQ(r->cross_validated.overall.count, 24);
  EXPECT_EQ(r->fold_mape.size(), 3u);
  ASSERT_FALSE(r->bands.empty());
  int64_t banded = 0;
  for (const ErrorBand& b : r->bands) {
    EXPECT_TRUE(b.regime == "single_node" || b.regime == "multi_node") << b.regime;
    EXPECT_LE(b.error_low, b.error_high);
    banded += b.rows;
  }
  EXPECT_EQ(banded, 24);
}

TEST(CalibrateTest, UnknownParameterAndTooFewRowsAreInvalid) {
  ProfileSet set = DefaultProfileSet(*GpuByName("a100-sxm4-80gb"));
  std::vector<Measurement> rows(3);
  CalibrateOptions o;
  o.params = {"warp_speed"};
  EXPECT_EQ(Calibrate(rows, set, o).status().code(), absl::StatusCode::kInvalidArgument);
  o.params = {};
  o.folds = 5;
  EXPECT_EQ(Calibrate(rows, set, o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(BandOfTest, CentralQuantilesOfTheRegime) {
  std::vector<Measurement> m(21);
  std::vector<ValidationRow> rows(21);
  for (int i = 0; i < 21; ++i) {
    m[i].job.cluster.num_gpus = 8;
    m[i].job.cluster.gpus_per_node = 8;
    rows[i].error = (i - 10) / 100.0;  // -10% .. +10%
  }
  ErrorBand b = BandOf(m, rows, "single_node", 0.9);
  EXPECT_EQ(b.rows, 21);
  EXPECT_NEAR(b.error_low, -0.09, 1e-12);  // rank round(0.05 * 20) = 1
  EXPECT_NEAR(b.error_high, 0.09, 1e-12);  // rank round(0.95 * 20) = 19
  EXPECT_EQ(BandOf(m, rows, "multi_node", 0.9).rows, 0);
}

}  // namespace
}  // namespace vtrain
