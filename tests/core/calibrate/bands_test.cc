// Regimes, layer-shape folds and prediction-interval bands.
#include "core/calibrate/bands.h"

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/predict/predictor.h"
#include "core/profile/default_profiles.h"
#include "gtest/gtest.h"
#include "tests/testing/spec_builders.h"

namespace vtrain {
namespace {

Job RegimeShape(int64_t hidden, int64_t t, int64_t mb, int64_t d, int64_t p, int64_t layers) {
  Job job = testing::TinyJob();
  job.model.hidden_size = hidden;
  job.model.num_heads = 16;
  job.model.num_layers = layers;
  job.model.seq_len = 1024;
  return testing::WithPlan(job, t, d, p, mb, mb * d * 4);
}

TEST(RegimeOfTest, EachRegimeFromTheJob) {
  EXPECT_EQ(RegimeOf(RegimeShape(1024, 8, 1, 1, 1, 8)), "single_node_tp_node");
  EXPECT_EQ(RegimeOf(RegimeShape(1024, 2, 1, 2, 1, 8)), "single_node_host_bound");
  EXPECT_EQ(RegimeOf(RegimeShape(4096, 1, 8, 2, 1, 8)), "single_node_gpu_bound");
  // 12288-wide layers, 96 of them over p = 2 and t = 8: ~11 billion
  // parameters per GPU.
  Job big = RegimeShape(12288, 8, 1, 1, 2, 96);
  big.model.num_heads = 96;
  EXPECT_EQ(RegimeOf(big), "multi_node_large_params");
  EXPECT_EQ(BaseRegimeOf(big), "multi_node");
  EXPECT_EQ(RegimeOf(RegimeShape(1024, 8, 1, 1, 2, 8)), "multi_node_small_params");
  // A cluster larger than the job does not make a one-node job multi-node.
  Job small = RegimeShape(1024, 2, 1, 2, 1, 8);
  small.cluster.num_gpus = 64;
  EXPECT_EQ(BaseRegimeOf(small), "single_node");
}

TEST(ShapeFoldsTest, AShapeNeverSpansTwoFolds) {
  std::vector<Measurement> m;
  for (int64_t hidden : {1024, 2048, 3072}) {
    for (int64_t t : {1, 2, 4}) {
      for (int64_t mb : {1, 2}) {
        for (int64_t layers : {8, 16, 24}) {
          for (int64_t d : {1, 2})
            m.push_back({RegimeShape(hidden, t, mb, d, 1, layers), 1.0, "x"});
        }
      }
    }
  }
  for (uint64_t seed : {1, 2, 3}) {
    const std::vector<int> fold = ShapeFolds(m, 5, seed);
    ASSERT_EQ(fold.size(), m.size());
    std::map<std::string, std::set<int>> folds_of_shape;
    std::vector<int> rows_in_fold(5, 0);
    for (size_t i = 0; i < m.size(); ++i) {
      folds_of_shape[LayerShapeKey(m[i].job)].insert(fold[i]);
      ASSERT_GE(fold[i], 0);
      ASSERT_LT(fold[i], 5);
      ++rows_in_fold[fold[i]];
    }
    EXPECT_EQ(folds_of_shape.size(), 18u);
    for (const auto& [shape, folds] : folds_of_shape) EXPECT_EQ(folds.size(), 1u) << shape;
    // 18 shapes of 6 rows over 5 folds: 3 or 4 shapes each.
    for (int n : rows_in_fold) {
      EXPECT_GE(n, 18);
      EXPECT_LE(n, 24);
    }
    EXPECT_EQ(ShapeFolds(m, 5, seed), fold);  // deterministic
  }
  // Layers, d and p are not part of the shape; t and the micro-batch are.
  EXPECT_EQ(LayerShapeKey(RegimeShape(1024, 2, 1, 1, 1, 8)),
            LayerShapeKey(RegimeShape(1024, 2, 1, 4, 2, 24)));
  EXPECT_NE(LayerShapeKey(RegimeShape(1024, 2, 1, 1, 1, 8)),
            LayerShapeKey(RegimeShape(1024, 4, 1, 1, 1, 8)));
  EXPECT_NE(LayerShapeKey(RegimeShape(1024, 2, 1, 1, 1, 8)),
            LayerShapeKey(RegimeShape(1024, 2, 2, 1, 1, 8)));
}

TEST(BandOfTest, SymmetricInLogSpaceAndRobustToOutliers) {
  // 20 rows of the host-bound regime: log errors +-0.01 .. +-0.10 and two
  // huge outliers.
  std::vector<Measurement> m;
  std::vector<ValidationRow> rows;
  for (int i = 1; i <= 20; ++i) {
    m.push_back({RegimeShape(1024, 2, 1, 2, 1, 8), 100, "x"});
    ValidationRow r;
    const double log_error = (i % 2 == 0 ? 1 : -1) * 0.01 * ((i + 1) / 2);
    r.error = std::expm1(log_error);
    rows.push_back(r);
  }
  ErrorBand b = BandOf(m, rows, "single_node_host_bound", 0.9);
  EXPECT_EQ(b.rows, 20);
  // The 90% quantile of |log error| (rank ceil(0.9 * 20) = 18 of 0.01, 0.01,
  // 0.02, 0.02, ...): 0.09.
  EXPECT_NEAR(b.error_high, std::expm1(0.09), 1e-12);
  EXPECT_NEAR(b.error_low, std::expm1(-0.09), 1e-12);
  EXPECT_NEAR(std::log1p(b.error_high), -std::log1p(b.error_low), 1e-12);
  // The base regime holds the same rows; another regime none.
  EXPECT_EQ(BandOf(m, rows, "single_node", 0.9).rows, 20);
  EXPECT_EQ(BandOf(m, rows, "multi_node", 0.9).rows, 0);
  // Two outliers replacing the smallest errors move the band by one rank.
  rows[0].error = 3.0;
  rows[1].error = -0.9;
  const ErrorBand with_outliers = BandOf(m, rows, "single_node_host_bound", 0.9);
  EXPECT_NEAR(with_outliers.error_high, std::expm1(0.10), 1e-12);
}

TEST(PairedBandOfTest, CorrelatedErrorsOfOneJobGiveANarrowBand) {
  // One job (same model, GPUs, global batch), ten plans: errors +20% +-1%
  // (a shared bias: the ratio of two plans is nearly exact), and another job
  // with a single run (no pair).
  std::vector<Measurement> m;
  std::vector<ValidationRow> rows;
  for (int i = 0; i < 10; ++i) {
    Job plan = RegimeShape(1024, i % 2 == 0 ? 2 : 4, 1, i % 2 == 0 ? 2 : 1, 1, 8);
    plan.plan.global_batch = 16;  // 4 GPUs each: one job, two plans
    m.push_back({plan, 100, "x"});
    ValidationRow r;
    r.measured_ms = 100;
    r.error = std::expm1(0.2 + (i % 3 - 1) * 0.01);
    r.predicted_ms = 100 * (1 + r.error);
    rows.push_back(r);
  }
  Job other = RegimeShape(2048, 2, 1, 2, 1, 8);
  m.push_back({other, 100, "y"});
  ValidationRow lone;
  lone.measured_ms = 100;
  lone.predicted_ms = 300;
  lone.error = 2.0;
  rows.push_back(lone);
  const ErrorBand paired = PairedBandOf(m, rows, 0.9);
  EXPECT_EQ(paired.regime, kPairedRegime);
  EXPECT_EQ(paired.rows, 45);  // 10 choose 2; the lone run pairs with none
  // |differences| are 0, 0.01 or 0.02: the band is +-2%, while one run's is +-21%.
  EXPECT_NEAR(paired.error_high, std::expm1(0.02), 1e-12);
  EXPECT_NEAR(paired.error_low, std::expm1(-0.02), 1e-12);
  EXPECT_GT(BandOf(m, rows, "", 0.9).error_high, 0.2);
  // Independent errors of the same size give a band wider than one run's.
  for (int i = 0; i < 10; ++i) {
    rows[i].error = std::expm1(i % 2 == 0 ? 0.1 : -0.1);
  }
  EXPECT_NEAR(PairedBandOf(m, rows, 0.9).error_high, std::expm1(0.2), 1e-12);
  EXPECT_EQ(PairedBandOf({}, {}, 0.9).rows, 0);
}

TEST(BandsTest, CoverageAndWidthFollowTheBands) {
  std::vector<Measurement> m;
  std::vector<ValidationRow> rows;
  for (int i = 0; i < 10; ++i) {
    m.push_back({RegimeShape(1024, 2, 1, 2, 1, 8), 100, "x"});
    ValidationRow r;
    r.measured_ms = 100;
    r.predicted_ms = 100 + (i < 8 ? 5 : 50);  // 8 rows at +5%, 2 at +50%
    r.error = (r.predicted_ms - r.measured_ms) / r.measured_ms;
    rows.push_back(r);
  }
  const std::vector<ErrorBand> bands = {{"single_node", -0.1, 0.1, 0.9, 10}};
  ApplyBands(m, bands, rows);  // the fine regime has no band: its base's is used
  const std::vector<RegimeCoverage> c = CoverageByRegime(m, rows);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].regime, "single_node_host_bound");
  EXPECT_EQ(c[0].with_interval, 10);
  EXPECT_NEAR(c[0].coverage, 0.8, 1e-12);
  // Width (p / 0.9 - p / 1.1) / p.
  EXPECT_NEAR(c[0].median_width, 1 / 0.9 - 1 / 1.1, 1e-12);
  EXPECT_EQ(c[0].error.count, 10);
  // BandsOf: a band for the fine regime (10 rows >= 8) and its base.
  const std::vector<ErrorBand> fitted = BandsOf(m, rows, 0.9);
  ASSERT_EQ(fitted.size(), 2u);
  EXPECT_EQ(fitted[0].regime, "single_node");
  EXPECT_EQ(fitted[1].regime, "single_node_host_bound");
  EXPECT_TRUE(BandsOf(m, rows, 0.9, /*min_rows=*/11).size() == 1);
}

}  // namespace
}  // namespace vtrain
