#include "core/calibrate/calibration.h"

#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
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
  auto row = [](double measured, double predicted, double error, absl::Status status) {
    ValidationRow r;
    r.measured_ms = measured;
    r.predicted_ms = predicted;
    r.error = error;
    r.status = std::move(status);
    return r;
  };
  std::vector<ValidationRow> rows(3);
  rows[0] = row(100, 110, 0.10, absl::OkStatus());
  rows[1] = row(200, 180, -0.10, absl::OkStatus());
  rows[2] = row(300, 360, 0.20, absl::OkStatus());
  ErrorSummary s = Summarize(rows);
  EXPECT_EQ(s.count, 3);
  EXPECT_NEAR(s.mape, 0.4 / 3, 1e-12);
  EXPECT_NEAR(s.bias, 0.2 / 3, 1e-12);
  EXPECT_NEAR(s.max_abs_error, 0.2, 1e-12);
  EXPECT_NEAR(s.p90_abs_error, 0.2, 1e-12);  // rank ceil(0.9 * 3) = 3 of 0.1, 0.1, 0.2
  // R^2 = 1 - SS_res / SS_tot: SS_res = 100 + 400 + 3600, SS_tot = 20000.
  EXPECT_NEAR(s.r2, 1 - 4100.0 / 20000.0, 1e-12);
  // Failed rows are left out.
  rows.push_back(row(50, 0, 0, absl::InternalError("x")));
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

// `n` runs of random small valid jobs, measured as `truth` predicts them
// ("synthetic.csv:SEED").
std::vector<Measurement> SyntheticRows(const ProfileSet& truth, size_t n) {
  std::vector<Measurement> rows;
  for (uint64_t seed = 1; rows.size() < n; ++seed) {
    Job job = testing::RandomSmallJob(seed);
    job.cluster.gpu = *GpuByName(truth.gpu);
    if (!ValidateJob(job).ok()) continue;
    absl::StatusOr<Prediction> p = Predict(job, truth);
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) return rows;
    rows.push_back({job, p->iteration_time_ms(), "synthetic.csv:" + std::to_string(seed)});
  }
  return rows;
}

// Measurements made by the model itself with known parameters: calibration
// from other starting values must find parameters that reproduce them, and
// its cross-validated error must be small. This fails if the fit, the
// parameter plumbing or the fold bookkeeping is broken.
TEST(CalibrateTest, RecoversSyntheticMeasurements) {
  ProfileSet truth = DefaultProfileSet(*GpuByName("a100-sxm4-80gb"));
  truth.params.host_dispatch_ns = 40000;
  truth.params.gemm_max_efficiency = 0.7;
  const std::vector<Measurement> rows = SyntheticRows(truth, 24);
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
  // A base regime's band holds its own rows, or every row when it has fewer
  // than 8 of its own; finer regimes' bands only rows of their own regime.
  std::map<std::string, int64_t> base_rows;
  for (const Measurement& m : rows) ++base_rows[BaseRegimeOf(m.job)];
  int64_t based = 0;
  for (const ErrorBand& b : r->bands) {
    EXPECT_LE(b.error_low, 0) << b.regime;
    EXPECT_GE(b.error_high, 0) << b.regime;
    EXPECT_NEAR(std::log1p(b.error_high), -std::log1p(b.error_low), 1e-9) << b.regime;
    if (b.regime == "single_node" || b.regime == "multi_node") {
      const int64_t own = base_rows[b.regime];
      EXPECT_EQ(b.rows, own >= 8 ? own : 24) << b.regime;
      based += own;
    }
  }
  EXPECT_EQ(based, 24);
  // Held-out coverage is reported for every regime the rows fall in.
  int64_t covered = 0;
  for (const RegimeCoverage& c : r->band_coverage) covered += c.error.count;
  EXPECT_EQ(covered, 24);
}

// Two files that disagree (the small one measured 30% slower): weighing
// every file the same (balance_power 1) pulls the fit further toward the
// small file than weighing every row the same, power 0 is exactly the
// unbalanced fit, and 0.5 lies between.
TEST(CalibrateTest, BalancePowerSharesTheWeightBetweenFiles) {
  const ProfileSet truth = DefaultProfileSet(*GpuByName("a100-sxm4-80gb"));
  std::vector<Measurement> rows = SyntheticRows(truth, 12);
  for (size_t i = 0; i < rows.size(); ++i) {
    const bool small = i < 2;
    if (small) rows[i].measured_ms *= 1.3;
    rows[i].source = absl::StrCat(small ? "small.csv:" : "large.csv:", i);
  }
  auto fitted_host = [&](bool balance, double power) {
    CalibrateOptions o;
    o.params = {"host_dispatch_ns"};
    o.folds = 1;
    o.max_evaluations = 80;
    o.balance_sources = balance;
    o.balance_power = power;
    absl::StatusOr<CalibrationResult> r = Calibrate(rows, truth, o);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->params.host_dispatch_ns : 0.0;
  };
  const double unbalanced = fitted_host(false, 1);
  const double every_row = fitted_host(true, 0);
  const double half = fitted_host(true, 0.5);
  const double every_file = fitted_host(true, 1);
  EXPECT_DOUBLE_EQ(every_row, unbalanced);
  // Slower measurements pull host_dispatch_ns up (the random small jobs are
  // mostly host-bound), and the more weight the small file has, the further.
  EXPECT_GT(every_file, half);
  EXPECT_GT(half, every_row);
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

}  // namespace
}  // namespace vtrain
