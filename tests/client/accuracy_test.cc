// Accuracy regression guard: the built-in A100 profiles against the measured
// A100 runs in data/a100-megatron-measured (read at test time). The
// thresholds sit a little above the errors measured when the parameters were
// generated (core/profile/a100_params.inc); the built-in parameters were
// fitted on these rows, so these are in-sample figures that guard against
// regressions, not accuracy claims (those are the cross-validated figures).
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/commands.h"
#include "client/measurements.h"
#include "common/files.h"
#include "core/calibrate/calibration.h"
#include "core/predict/predictor.h"
#include "core/profile/default_profiles.h"
#include "gtest/gtest.h"

namespace vtrain::client {
namespace {

std::string DataDir() {
  const char* src = std::getenv("VTRAIN_SOURCE_DIR");
  return std::string(src != nullptr ? src : VTRAIN_TEST_SOURCE_DIR) +
         "/data/a100-megatron-measured";
}

std::vector<Measurement> Load(const std::string& file) {
  const std::string path = DataDir() + "/" + file;
  absl::StatusOr<std::string> text = common::ReadFile(path);
  // The data ships in the repository: a missing file is a failure, not a skip.
  EXPECT_TRUE(text.ok()) << text.status();
  if (!text.ok()) return {};
  absl::StatusOr<std::vector<Measurement>> rows =
      ParseMeasurementCsv(*text, file, MegatronA100Setup());
  EXPECT_TRUE(rows.ok()) << rows.status();
  return rows.ok() ? *rows : std::vector<Measurement>{};
}

TEST(AccuracyTest, BuiltInA100ProfilesStayWithinTheirMeasuredError) {
  const std::vector<Measurement> single = Load("single_node_calibration.csv");
  const std::vector<Measurement> multi = Load("multi_node_calibration.csv");
  ASSERT_FALSE(single.empty() || multi.empty()) << "no measured data under " << DataDir();
  EXPECT_EQ(single.size(), 432u);
  EXPECT_EQ(multi.size(), 32u);
  const ProfileSet set = DefaultProfileSet(*GpuByName("a100-sxm4-80gb"));
  ValidateOptions o;
  o.threads = 2;
  const ValidationReport rs = Validate(single, set, o);
  const ValidationReport rm = Validate(multi, set, o);
  EXPECT_EQ(rs.failed, 0);
  EXPECT_EQ(rm.failed, 0);
  // Measured with the committed parameters (vtrainctl validate, the rows
  // they were fitted to; the layer-shape cross-validated figures are in
  // core/profile/a100_params.inc): single-node MAPE 7.07%, R^2 0.981;
  // multi-node MAPE 7.44%, R^2 0.980. A regression past these thresholds
  // fails.
  EXPECT_LT(rs.overall.mape, 0.08);
  EXPECT_LT(rm.overall.mape, 0.08);
  EXPECT_GT(rs.overall.r2, 0.96);
  EXPECT_GT(rm.overall.r2, 0.97);
  // Every regime has an interval, and the built-in 90% intervals (from
  // held-out errors) hold at least 85% of the calibration runs of each
  // (88.0% to 100% when committed).
  for (const ValidationReport* r : {&rs, &rm}) {
    for (const RegimeCoverage& c : r->regimes) {
      EXPECT_EQ(c.with_interval, c.error.count) << c.regime;
      EXPECT_GE(c.coverage, 0.85) << c.regime;
    }
  }
}

TEST(AccuracyTest, PredictGivesTheNumbersValidateGives) {
  const std::vector<Measurement> multi = Load("multi_node_calibration.csv");
  ASSERT_FALSE(multi.empty()) << "no measured data under " << DataDir();
  const ProfileSet set = DefaultProfileSet(*GpuByName("a100-sxm4-80gb"));
  const ValidationReport r = Validate(multi, set);
  for (size_t i = 0; i < multi.size(); ++i) {
    absl::StatusOr<Prediction> p = Predict(multi[i].job, set);
    ASSERT_TRUE(p.ok());
    EXPECT_DOUBLE_EQ(p->iteration_time_ms(), r.rows[i].predicted_ms) << multi[i].source;
  }
}

// calibrate --rows-csv writes every held-out row with its fold, and a layer
// shape never spans two folds.
TEST(CalibrateCommandTest, RowsCsvHasEveryHeldOutRowAndItsFold) {
  const std::string source = DataDir() + "/single_node_calibration.csv";
  absl::StatusOr<std::string> text = common::ReadFile(source);
  ASSERT_TRUE(text.ok()) << text.status();
  // The header and 30 runs.
  std::vector<std::string> lines = absl::StrSplit(*text, '\n');
  lines.resize(31);
  const std::string dir = ::testing::TempDir();
  const std::string csv = dir + "/calib_rows_in.csv", rows = dir + "/calib_rows_out.csv";
  ASSERT_TRUE(common::WriteFile(csv, absl::StrJoin(lines, "\n") + "\n").ok());
  std::ostringstream out, err;
  ASSERT_EQ(RunCalibrate({"--measurements", csv, "--folds", "3", "--max-evaluations", "10",
                          "--threads", "1", "--rows-csv", rows},
                         out, err),
            0)
      << err.str();
  absl::StatusOr<std::string> written = common::ReadFile(rows);
  ASSERT_TRUE(written.ok()) << written.status();
  std::vector<std::string> got = absl::StrSplit(*written, '\n', absl::SkipEmpty());
  ASSERT_EQ(got.size(), 31u);
  EXPECT_EQ(got[0].substr(0, 34), "source,fold,regime,layer_shape,mea");
  std::map<std::string, std::set<std::string>> folds_of_shape;
  for (size_t i = 1; i < got.size(); ++i) {
    std::vector<std::string> cells = absl::StrSplit(got[i], ',');
    ASSERT_EQ(cells.size(), 9u) << got[i];
    EXPECT_EQ(cells[0], absl::StrCat("calib_rows_in.csv:", i + 1));
    EXPECT_TRUE(cells[1] == "0" || cells[1] == "1" || cells[1] == "2") << got[i];
    folds_of_shape[cells[3]].insert(cells[1]);
    double measured = 0, predicted = 0;
    ASSERT_TRUE(absl::SimpleAtod(cells[4], &measured));
    ASSERT_TRUE(absl::SimpleAtod(cells[5], &predicted));
    EXPECT_GT(measured, 0);
    EXPECT_GT(predicted, 0);
  }
  EXPECT_GT(folds_of_shape.size(), 3u);
  for (const auto& [shape, folds] : folds_of_shape) EXPECT_EQ(folds.size(), 1u) << shape;
  // With --cpp (regenerating the built-in parameters) the rows are written too.
  const std::string cpp_rows = dir + "/calib_rows_cpp.csv";
  std::ostringstream cpp_out, cpp_err;
  ASSERT_EQ(RunCalibrate({"--measurements", csv, "--folds", "3", "--max-evaluations", "10",
                          "--threads", "1", "--rows-csv", cpp_rows, "--cpp"},
                         cpp_out, cpp_err),
            0)
      << cpp_err.str();
  EXPECT_NE(cpp_out.str().find("params.gemm_max_efficiency = "), std::string::npos);
  absl::StatusOr<std::string> cpp_written = common::ReadFile(cpp_rows);
  ASSERT_TRUE(cpp_written.ok()) << cpp_written.status();
  EXPECT_EQ(std::vector<std::string>(absl::StrSplit(*cpp_written, '\n', absl::SkipEmpty())).size(),
            31u);
}

TEST(CalibrateCommandTest, BadBalancePowerNamesTheFlag) {
  for (const char* bad : {"2", "-0.5", "nan", "half"}) {
    std::ostringstream out, err;
    EXPECT_NE(RunCalibrate({"--measurements", "unused.csv", "--balance-power", bad}, out, err), 0)
        << bad;
    EXPECT_NE(err.str().find("--balance-power"), std::string::npos) << err.str();
  }
}

TEST(MeasurementCsvTest, ParsesCrlfAndNamesBadCells) {
  const MeasurementSetup setup = MegatronA100Setup();
  absl::StatusOr<std::vector<Measurement>> ok = ParseMeasurementCsv(
      "num_gpus,global_batch,micro_batch,hidden_size,num_heads,num_layers,seq_len,tp,dp,pp,"
      "iter_time_ms\r\n8,16,1,1024,16,24,1024,8,1,1,1949.9\r\n",
      "x.csv", setup);
  ASSERT_TRUE(ok.ok()) << ok.status();
  ASSERT_EQ(ok->size(), 1u);
  EXPECT_EQ((*ok)[0].job.plan.tensor_parallel, 8);
  EXPECT_DOUBLE_EQ((*ok)[0].measured_ms, 1949.9);
  EXPECT_EQ((*ok)[0].source, "x.csv:2");
  absl::StatusOr<std::vector<Measurement>> bad = ParseMeasurementCsv(
      "num_gpus,global_batch,micro_batch,hidden_size,num_heads,num_layers,seq_len,tp,dp,pp,"
      "iter_time_ms\n8,16,1,1024,16,24,1024,eight,1,1,1949.9\n",
      "x.csv", setup);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("x.csv:2"), std::string::npos);
  EXPECT_NE(bad.status().message().find("'tp'"), std::string::npos);
  EXPECT_FALSE(ParseMeasurementCsv("a,b\n1,2\n", "y.csv", setup).ok());
}

TEST(NcclTestsTest, ReadsNanosecondAndMicrosecondFiles) {
  absl::StatusOr<CollectiveCurve> ns = common::ParseNcclTests(
      "size(B),count,type,time(ns),busbw(GB/s),time(ns),busbw(GB/s)\n"
      "1048576,262144,float,92790,19.78,92150,19.91\n2097152,524288,float,93250,39.36,92970,39."
      "47\n",
      "a.txt");
  ASSERT_TRUE(ns.ok()) << ns.status();
  EXPECT_DOUBLE_EQ(ns->LatencyNs(1048576), 92790);
  absl::StatusOr<CollectiveCurve> us = common::ParseNcclTests(
      "#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
      "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)\n"
      "     1048576        262144     float     sum      -1    45.21   23.19   40.59      0\n",
      "b.txt");
  ASSERT_TRUE(us.ok()) << us.status();
  EXPECT_DOUBLE_EQ(us->LatencyNs(1048576), 45210);
  EXPECT_FALSE(common::ParseNcclTests("# nothing\n", "c.txt").ok());
}

}  // namespace
}  // namespace vtrain::client
