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

// Regression: a line made only of separators used to index an empty split
// (a segfault in vtrain-agent import nccl-tests and vtrainctl --nccl-dir).
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

}  // namespace
}  // namespace vtrain::common
