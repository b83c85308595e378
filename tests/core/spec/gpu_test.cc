#include "core/spec/gpu.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace vtrain {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsSupersetOf;
using ::vtrain::testing::StatusIs;

// The GPU models are data files (data/gpus/*.json): every one of them is a
// datasheet CheckGpuDatasheet accepts, as a pushed one would have to be.
TEST(GpuTest, EveryBuiltInGpuIsAValidDatasheet) {
  EXPECT_THAT(GpuNames(), IsSupersetOf({"v100-sxm2-32gb", "a100-sxm4-40gb", "a100-sxm4-80gb",
                                        "h100-sxm5-80gb", "h200-sxm-141gb", "b200-sxm-180gb"}));
  for (const std::string& name : GpuNames()) {
    SCOPED_TRACE(name);
    absl::StatusOr<GpuSpec> gpu = GpuByName(name);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    EXPECT_TRUE(CheckGpuDatasheet(*gpu, name).ok()) << CheckGpuDatasheet(*gpu, name);
    EXPECT_EQ(gpu->name, name);
    EXPECT_GT(gpu->peak_fp16_flops_per_s, 0);
    EXPECT_GT(gpu->hbm_bandwidth_bytes_per_s, 0);
    EXPECT_GT(gpu->memory_bytes, 0);
    EXPECT_GT(gpu->num_sms, 0);
    EXPECT_GT(gpu->default_intra_node_bandwidth_bytes_per_s, 0);
    EXPECT_GT(gpu->default_inter_node_bandwidth_bytes_per_s, 0);
  }
}

// The data files' "order" sets the order GPUs are listed in.
TEST(GpuTest, ListedInTheirDataFilesOrder) {
  std::vector<std::string> first_six = GpuNames();
  first_six.resize(6);
  EXPECT_THAT(first_six, ElementsAre("v100-sxm2-32gb", "a100-sxm4-40gb", "a100-sxm4-80gb",
                                     "h100-sxm5-80gb", "h200-sxm-141gb", "b200-sxm-180gb"));
}

// MX block scaling is a field of the GPU's data, not a guess from its name: a
// datasheet pushed for another Blackwell-named GPU does not get it.
TEST(GpuTest, MxBlockScalingIsTheDataFilesField) {
  EXPECT_TRUE(SupportsMxfp8(*GpuByName("b200-sxm-180gb")));
  EXPECT_FALSE(SupportsMxfp8(*GpuByName("h100-sxm5-80gb")));
  GpuSpec pushed = *GpuByName("b200-sxm-180gb");
  pushed.name = "b200-pcie-test";
  pushed.mx_block_scaling = false;
  EXPECT_FALSE(SupportsMxfp8(pushed));
  EXPECT_THAT(MxBlockScalingGpuNames(), ::testing::Contains("b200-sxm-180gb"));
  EXPECT_THAT(MxBlockScalingGpuNames(), ::testing::Not(::testing::Contains("h200-sxm-141gb")));
}

TEST(GpuTest, PeakFlopsByDType) {
  const GpuSpec v100 = *GpuByName("v100-sxm2-32gb");
  EXPECT_EQ(v100.PeakFlops(DType::kFp16), 125e12);
  EXPECT_EQ(v100.PeakFlops(DType::kBf16), 0);  // no BF16 tensor cores
  const GpuSpec a100 = *GpuByName("a100-sxm4-80gb");
  EXPECT_EQ(a100.PeakFlops(DType::kFp16), 312e12);
  EXPECT_EQ(a100.PeakFlops(DType::kBf16), 312e12);
  EXPECT_EQ(a100.PeakFlops(DType::kFp8), 0);  // no fp8 tensor cores
  // 80 GiB = 85,899,345,920 bytes.
  EXPECT_EQ(a100.memory_bytes, 85'899'345'920);
}

TEST(GpuTest, HopperDatasheetFigures) {
  // H100 SXM5 datasheet: 989.4 / 1,978.9 TFLOP/s dense bf16 / fp8, 3.35 TB/s
  // HBM3, 80 GB, 132 SMs; 8 x 400 Gb/s per node.
  const GpuSpec h100 = *GpuByName("h100-sxm5-80gb");
  EXPECT_DOUBLE_EQ(h100.PeakFlops(DType::kBf16), 989.4e12);
  EXPECT_DOUBLE_EQ(h100.PeakFlops(DType::kFp8), 1978.9e12);
  EXPECT_DOUBLE_EQ(h100.hbm_bandwidth_bytes_per_s, 3.35e12);
  EXPECT_EQ(h100.num_sms, 132);
  EXPECT_DOUBLE_EQ(h100.default_inter_node_bandwidth_bytes_per_s, 8 * 400e9 / 8);
  // H200: the same compute, 4.8 TB/s HBM3e and 141 GB (143,771 MiB).
  const GpuSpec h200 = *GpuByName("h200-sxm-141gb");
  EXPECT_DOUBLE_EQ(h200.PeakFlops(DType::kFp8), h100.PeakFlops(DType::kFp8));
  EXPECT_DOUBLE_EQ(h200.hbm_bandwidth_bytes_per_s, 4.8e12);
  EXPECT_EQ(h200.memory_bytes, int64_t{143771} << 20);
}

TEST(DTypeTest, NamesRoundTripIncludingFp8) {
  for (DType d : {DType::kFp16, DType::kBf16, DType::kFp8}) {
    EXPECT_EQ(*ParseDType(DTypeName(d)), d);
  }
  EXPECT_THAT(ParseDType("fp4"), StatusIs(absl::StatusCode::kInvalidArgument,
                                          AllOf(HasSubstr("plan.dtype"), HasSubstr("fp8"))));
}

TEST(GpuTest, UnknownGpuIsNotFoundListingTheNames) {
  EXPECT_THAT(GpuByName("b200"), StatusIs(absl::StatusCode::kNotFound,
                                          AllOf(HasSubstr("'b200'"), HasSubstr("a100-sxm4-80gb"),
                                                HasSubstr("h200-sxm-141gb"))));
}

}  // namespace
}  // namespace vtrain
