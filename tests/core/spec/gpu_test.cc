#include "core/spec/gpu.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace vtrain {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;
using ::vtrain::testing::StatusIs;

TEST(GpuTest, FiveKnownGpus) {
  EXPECT_THAT(GpuNames(), UnorderedElementsAre("v100-sxm2-32gb", "a100-sxm4-40gb", "a100-sxm4-80gb",
                                               "h100-sxm5-80gb", "h200-sxm-141gb"));
  for (const std::string& name : GpuNames()) {
    SCOPED_TRACE(name);
    absl::StatusOr<GpuSpec> gpu = GpuByName(name);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    EXPECT_EQ(gpu->name, name);
    EXPECT_GT(gpu->peak_fp16_flops_per_s, 0);
    EXPECT_GT(gpu->hbm_bandwidth_bytes_per_s, 0);
    EXPECT_GT(gpu->memory_bytes, 0);
    EXPECT_GT(gpu->num_sms, 0);
    EXPECT_GT(gpu->default_intra_node_bandwidth_bytes_per_s, 0);
    EXPECT_GT(gpu->default_inter_node_bandwidth_bytes_per_s, 0);
  }
}

TEST(GpuTest, PeakFlopsByDType) {
  const GpuSpec v100 = *GpuByName("v100-sxm2-32gb");
  EXPECT_EQ(v100.PeakFlops(DType::kFp16), 125e12);
  EXPECT_EQ(v100.PeakFlops(DType::kBf16), 0);  // no BF16 tensor cores
  const GpuSpec a100 = *GpuByName("a100-sxm4-80gb");
  EXPECT_EQ(a100.PeakFlops(DType::kFp16), 312e12);
  EXPECT_EQ(a100.PeakFlops(DType::kBf16), 312e12);
  // 80 GiB = 85,899,345,920 bytes.
  EXPECT_EQ(a100.memory_bytes, 85'899'345'920);
}

TEST(GpuTest, UnknownGpuIsNotFoundListingTheNames) {
  EXPECT_THAT(GpuByName("b200"), StatusIs(absl::StatusCode::kNotFound,
                                          AllOf(HasSubstr("'b200'"), HasSubstr("a100-sxm4-80gb"),
                                                HasSubstr("h200-sxm-141gb"))));
}

}  // namespace
}  // namespace vtrain
