#include "common/nccl_tests.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace vtrain::common {
namespace {

using ::testing::HasSubstr;

TEST(NcclTestsTest, ReadsOutOfPlaceTimes) {
  // nccl-tests all_reduce_perf: size count type redop root time algbw busbw ...
  absl::StatusOr<CollectiveCurve> curve = ParseNcclTests(
      "#       size         count      type   redop    root     time   algbw   busbw\n"
      "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)\n"
      "     1048576        262144     float     sum      -1    20.50   51.15   89.52\n"
      "     2097152        524288     float     sum      -1    30.00   69.90  122.33\n",
      "ar.txt");
  ASSERT_TRUE(curve.ok()) << curve.status();
  ASSERT_EQ(curve->points().size(), 2u);
  EXPECT_DOUBLE_EQ(curve->points()[0].latency_ns, 20'500);  // 20.50 us
}

TEST(NcclTestsTest, ReadsAllToAll) {
  // nccl-tests 2.13 alltoall_perf: redop "none", root -1; the size is a
  // rank's send buffer.
  absl::StatusOr<CollectiveCurve> curve = ParseNcclTests(
      "# Collective test starting: alltoall_perf\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
      "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)\n"
      "     8388608       2097152     float    none      -1    61.20  137.07  119.93      0\n"
      "    16777216       4194304     float    none      -1   112.40  149.26  130.60      0\n",
      "a2a.txt");
  ASSERT_TRUE(curve.ok()) << curve.status();
  ASSERT_EQ(curve->points().size(), 2u);
  EXPECT_DOUBLE_EQ(curve->points()[0].bytes, 8388608);
  EXPECT_DOUBLE_EQ(curve->points()[1].latency_ns, 112'400);
}

// Regression: a line made only of separators used to index an empty split
// (a segfault in vtrain-agent import nccl-tests and vtrainctl --nccl-dir).
// A measurement row cut short says so, not "no measurement lines found".
TEST(NcclTestsTest, AShortMeasurementRowIsNamed) {
  absl::StatusOr<CollectiveCurve> curve =
      ParseNcclTests("#  size count type time\n1048576 262144 float\n", "short.txt");
  ASSERT_FALSE(curve.ok());
  EXPECT_THAT(std::string(curve.status().message()),
              HasSubstr("short.txt:2: a measurement line with 3 columns"));
}

TEST(NcclTestsTest, LinesOfOnlySeparatorsAreSkipped) {
  absl::StatusOr<CollectiveCurve> curve =
      ParseNcclTests(",,,,\n  \t \n1048576,262144,float,20.5\n , , \n", "commas.txt");
  ASSERT_TRUE(curve.ok()) << curve.status();
  EXPECT_EQ(curve->points().size(), 1u);
  for (const char* text : {",", ", ,\n,,,", " \t,\n"}) {
    absl::StatusOr<CollectiveCurve> none = ParseNcclTests(text, "empty.txt");
    EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(none.status().message(), HasSubstr("empty.txt: no measurement lines"));
  }
}

// nccl-tests 2.13 all_gather_perf: the size is the whole gathered buffer,
// redop "none", and a "Collective test starting" line names the test.
constexpr char kAllGather[] =
    "# Collective test starting: all_gather_perf\n"
    "# nThread 1 nGpus 8 minBytes 1048576 maxBytes 2097152 step: 2(factor) warmup iters: 5\n"
    "#       size         count      type   redop    root     time   algbw   busbw #wrong     "
    "time   algbw   busbw #wrong\n"
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            "
    "(us)  (GB/s)  (GB/s)\n"
    "     1048576         32768     float    none      -1    24.71   42.44   37.13      0    "
    "23.95   43.78   38.31      0\n"
    "     2097152         65536     float    none      -1    30.02   69.86   61.13      0    "
    "29.41   71.31   62.40      0\n"
    "# Avg bus bandwidth    : 49.63\n";

TEST(NcclTestsTest, ReadsAllGatherReduceScatterAndSendRecvOutput) {
  absl::StatusOr<CollectiveCurve> ag = ParseNcclTests(kAllGather, "ag.txt");
  ASSERT_TRUE(ag.ok()) << ag.status();
  ASSERT_EQ(ag->points().size(), 2u);
  EXPECT_DOUBLE_EQ(ag->points()[0].bytes, 1048576);
  EXPECT_DOUBLE_EQ(ag->points()[1].latency_ns, 30'020);  // out-of-place, not in-place
  // reduce_scatter_perf prints the same columns with redop "sum".
  absl::StatusOr<CollectiveCurve> rs = ParseNcclTests(
      "#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
      "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)\n"
      "     4194304        131072     float     sum      -1    45.10   93.00   81.38      0\n",
      "rs.txt");
  ASSERT_TRUE(rs.ok()) << rs.status();
  EXPECT_DOUBLE_EQ(rs->points()[0].latency_ns, 45'100);
  // Older all_gather_perf and sendrecv_perf have neither redop nor root.
  absl::StatusOr<CollectiveCurve> sr = ParseNcclTests(
      "#       size         count      type     time   algbw   busbw  error     time\n"
      "#        (B)    (elements)             (us)  (GB/s)  (GB/s)              (us)\n"
      "     1048576        262144     float    10.52   99.68   99.68  0e+00    10.47\n",
      "sr.txt");
  ASSERT_TRUE(sr.ok()) << sr.status();
  EXPECT_DOUBLE_EQ(sr->points()[0].latency_ns, 10'520);
}

// Regression: nccl-tests 2.10's all_reduce_perf has a redop column but no
// root; without reading the header the time was taken from the algbw column.
TEST(NcclTestsTest, TheHeaderSaysWhereTheTimeIs) {
  absl::StatusOr<CollectiveCurve> curve = ParseNcclTests(
      "#       size         count      type   redop     time   algbw   busbw  error     time\n"
      "#        (B)    (elements)                       (us)  (GB/s)  (GB/s)            (us)\n"
      "     1048576        262144     float     sum    30.12   34.81   60.92  0e+00    29.80\n",
      "old.txt");
  ASSERT_TRUE(curve.ok()) << curve.status();
  EXPECT_DOUBLE_EQ(curve->points()[0].latency_ns, 30'120);
}

TEST(NcclTestsTest, InfersTheCollectiveFromTheOutputOrTheFileName) {
  EXPECT_EQ(InferNcclCollective(kAllGather, "run1.txt"), Collective::kAllGather);
  // The output's own line wins over the name.
  EXPECT_EQ(InferNcclCollective(kAllGather, "allreduce_8gpu.txt"), Collective::kAllGather);
  EXPECT_EQ(InferNcclCollective("", "/data/allreduce_8gpu.txt"), Collective::kAllReduce);
  EXPECT_EQ(InferNcclCollective("", "reduce_scatter_perf_8.txt"), Collective::kReduceScatter);
  EXPECT_EQ(InferNcclCollective("", "ReduceScatter.log"), Collective::kReduceScatter);
  EXPECT_EQ(InferNcclCollective("", "sendrecv_perf_2gpu.txt"), Collective::kSendRecv);
  EXPECT_EQ(InferNcclCollective("# Collective test starting: sendrecv_perf\n", "x"),
            Collective::kSendRecv);
  EXPECT_EQ(InferNcclCollective("", "alltoall_perf_8gpu.txt"), Collective::kAllToAll);
  EXPECT_EQ(InferNcclCollective("# Collective test starting: alltoall_perf\n", "x"),
            Collective::kAllToAll);
  EXPECT_EQ(InferNcclCollective("", "/runs/all_gather/x.txt"), std::nullopt);  // name only
  EXPECT_EQ(InferNcclCollective("", "nccl.txt"), std::nullopt);
}

}  // namespace
}  // namespace vtrain::common
