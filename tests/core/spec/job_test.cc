#include "core/spec/job.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/spec_builders.h"
#include "tests/testing/status_matchers.h"

namespace vtrain {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::vtrain::testing::Gpt13bJob;
using ::vtrain::testing::IsOk;
using ::vtrain::testing::StatusIs;
using ::vtrain::testing::TinyJob;
using ::vtrain::testing::WithPlan;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();

TEST(ValidateJobTest, ValidJobsPass) {
  VTRAIN_EXPECT_OK(ValidateJob(TinyJob()));
  VTRAIN_EXPECT_OK(ValidateJob(Gpt13bJob()));
  // 3D: t=2 d=2 p=2 on 8 GPUs, 8 layers, 4 heads, global batch 8 = 2 * 2 * 2.
  VTRAIN_EXPECT_OK(ValidateJob(WithPlan(TinyJob(), 2, 2, 2, 2, 8)));
}

TEST(ValidateJobTest, Bf16IsAcceptedWhereTheGpuHasIt) {
  Job job = TinyJob();  // a100-sxm4-80gb
  job.plan.dtype = DType::kBf16;
  VTRAIN_EXPECT_OK(ValidateJob(job));
}

TEST(ValidateJobTest, Fp8AndGroupedQueryAttentionAreAcceptedWhereValid) {
  Job job = WithPlan(TinyJob(), 2, 1, 1, 1, 4);
  job.cluster.gpu = *GpuByName("h100-sxm5-80gb");
  job.plan.dtype = DType::kFp8;
  job.model.arch = Architecture::kLlama;
  job.model.num_kv_heads = 2;  // 4 heads in 2 groups, one group per TP rank
  VTRAIN_EXPECT_OK(ValidateJob(job));
}

// One constraint violation: the mutation and the field its message must name.
struct Violation {
  std::string name;
  std::function<void(Job&)> mutate;
  std::string field;
};

void PrintTo(const Violation& v, std::ostream* os) { *os << v.name; }

class SingleViolationTest : public ::testing::TestWithParam<Violation> {};

TEST_P(SingleViolationTest, IsInvalidArgumentNamingTheField) {
  Job job = TinyJob();
  GetParam().mutate(job);
  EXPECT_THAT(ValidateJob(job),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(GetParam().field)));
}

const Violation kViolations[] = {
    // Plan consistency.
    {"JobLargerThanCluster",
     [](Job& j) {
       j = WithPlan(j, 4, 1, 1, 1, 4);
       j.cluster.num_gpus = 2;
     },
     "cluster.num_gpus=2"},
    {"JobLargerThanClusterNamesDegrees",
     [](Job& j) {
       j = WithPlan(j, 2, 2, 1, 1, 4);
       j.cluster.num_gpus = 3;
     },
     "plan.tensor_parallel * plan.context_parallel * plan.pipeline_parallel * plan.data_parallel"},
    {"TensorParallelDoesNotDivideHeads", [](Job& j) { j = WithPlan(j, 3, 1, 1, 1, 4); },
     "plan.tensor_parallel=3 does not divide model.num_heads=4"},
    {"TensorParallelDoesNotDivideFfn",
     [](Job& j) {
       j.model.num_heads = 8;
       j.model.ffn_hidden_size = 100;  // 8 heads, t=8; FFN 100 is not a multiple of 8
       j = WithPlan(j, 8, 1, 1, 1, 4);
     },
     "plan.tensor_parallel=8 does not divide the FFN size 100"},
    {"PipelineDeeperThanTheLayers", [](Job& j) { j = WithPlan(j, 1, 1, 11, 1, 4); },
     "model.num_layers=8 cannot be laid over plan.pipeline_parallel * plan.virtual_stages = 11"},
    {"LayoutLayersDoNotAddUp",
     [](Job& j) {
       j = WithPlan(j, 1, 1, 2, 1, 4);
       j.plan.layout.chunks = {{.layers = 4, .embedding = true}, {.layers = 3, .loss = true}};
     },
     "plan.pipeline_layout holds 7 decoder layers (t) but model.num_layers=8"},
    {"LayoutChunksDoNotMatchStages",
     [](Job& j) {
       j = WithPlan(j, 1, 1, 4, 1, 4);
       j.plan.layout.chunks = {{.layers = 4, .embedding = true}, {.layers = 4, .loss = true}};
     },
     "plan.pipeline_layout has 2 chunks but plan.pipeline_parallel * plan.virtual_stages = 4"},
    {"FirstStageLayersLeaveAnUnevenRest",
     [](Job& j) {
       j = WithPlan(j, 1, 1, 4, 1, 4);
       j.plan.layout.first_stage_layers = 1;
     },
     "do not divide over the 3 middle stages"},
    {"LastStageLayersAboveTheModel",
     [](Job& j) {
       j = WithPlan(j, 1, 1, 2, 1, 4);
       j.plan.layout.last_stage_layers = 9;
     },
     "plan.last_stage_layers=9 is out of range"},
    {"GlobalBatchNotMultipleOfDataTimesMicro", [](Job& j) { j = WithPlan(j, 1, 2, 1, 2, 6); },
     "plan.global_batch=6"},
    {"HiddenNotDivisibleByHeads", [](Job& j) { j.model.hidden_size = 66; },
     "model.hidden_size=66 is not divisible by model.num_heads=4"},
    {"Bf16OnV100",
     [](Job& j) {
       j.cluster.gpu = *GpuByName("v100-sxm2-32gb");
       j.plan.dtype = DType::kBf16;
     },
     "plan.dtype=bf16"},
    {"Fp8OnA100", [](Job& j) { j.plan.dtype = DType::kFp8; },
     "plan.dtype=fp8 is not supported by GPU 'a100-sxm4-80gb'"},
    // Grouped-query attention (Megatron-Core: t divides the query groups).
    {"KvHeadsDoNotDivideHeads",
     [](Job& j) {
       j.model.arch = Architecture::kLlama;
       j.model.num_kv_heads = 3;
     },
     "model.num_kv_heads=3 does not divide model.num_heads=4"},
    {"KvHeadsOnGpt", [](Job& j) { j.model.num_kv_heads = 2; }, "needs model.arch=llama"},
    {"TensorParallelDoesNotDivideKvHeads",
     [](Job& j) {
       j.model.arch = Architecture::kLlama;
       j.model.num_kv_heads = 2;
       j = WithPlan(j, 4, 1, 1, 1, 4);
     },
     "plan.tensor_parallel=4 does not divide model.num_kv_heads=2"},
    {"NegativeKvHeads", [](Job& j) { j.model.num_kv_heads = -1; }, "model.num_kv_heads=-1"},
    // Non-positive sizes.
    {"ZeroLayers", [](Job& j) { j.model.num_layers = 0; }, "model.num_layers=0"},
    {"NegativeHidden", [](Job& j) { j.model.hidden_size = -64; }, "model.hidden_size=-64"},
    {"ZeroHeads", [](Job& j) { j.model.num_heads = 0; }, "model.num_heads=0"},
    {"ZeroSeqLen", [](Job& j) { j.model.seq_len = 0; }, "model.seq_len=0"},
    {"ZeroVocab", [](Job& j) { j.model.vocab_size = 0; }, "model.vocab_size=0"},
    {"NegativeFfn", [](Job& j) { j.model.ffn_hidden_size = -1; }, "model.ffn_hidden_size=-1"},
    {"ZeroTensorParallel", [](Job& j) { j.plan.tensor_parallel = 0; }, "plan.tensor_parallel=0"},
    {"NegativeDataParallel", [](Job& j) { j.plan.data_parallel = -2; }, "plan.data_parallel=-2"},
    {"ZeroPipelineParallel", [](Job& j) { j.plan.pipeline_parallel = 0; },
     "plan.pipeline_parallel=0"},
    {"ZeroMicroBatch", [](Job& j) { j.plan.micro_batch = 0; }, "plan.micro_batch=0"},
    {"ZeroGlobalBatch", [](Job& j) { j.plan.global_batch = 0; }, "plan.global_batch=0"},
    {"ZeroBucketWhenBucketing",
     [](Job& j) {
       j.plan.gradient_bucketing = true;
       j.plan.bucket_size_bytes = 0;
     },
     "plan.bucket_size_bytes=0"},
    {"TpOverlapWithoutSequenceParallel",
     [](Job& j) {
       j.plan.tensor_parallel = 2;
       j.cluster.num_gpus = 2;
       j.plan.tp_comm_overlap = true;
     },
     "plan.tp_comm_overlap=on needs plan.sequence_parallel=on"},
    {"ParamGatherOverlapWithoutDistributedOptimizer",
     [](Job& j) { j.plan.param_gather_overlap = true; },
     "plan.param_gather_overlap=on needs plan.data_parallel_sharding=optimizer"},
    {"ParamGatherOverlapUnderFsdp",
     [](Job& j) {
       j.plan.param_gather_overlap = true;
       j.plan.data_parallel_sharding = DataParallelSharding::kFull;
     },
     "not 'full'"},
    {"AllToAllThatCannotSplitTheHeads",
     [](Job& j) {
       j.plan.context_parallel = 8;  // 4 heads over 8 ranks
       j.cluster.num_gpus = 8;
       j.plan.cp_comm = ContextParallelComm::kA2A;
     },
     "plan.cp_comm=a2a splits the 4 heads"},
    {"AllToAllSizeWithoutHierarchicalCp",
     [](Job& j) {
       j.plan.context_parallel = 2;
       j.cluster.num_gpus = 2;
       j.plan.cp_a2a_size = 2;
     },
     "plan.cp_a2a_size=2 applies only to plan.cp_comm=a2a+p2p"},
    {"AllToAllSizeThatDoesNotDivideCp",
     [](Job& j) {
       j.plan.context_parallel = 4;
       j.cluster.num_gpus = 4;
       j.plan.cp_comm = ContextParallelComm::kA2AP2P;
       j.plan.cp_a2a_size = 3;
     },
     "plan.cp_a2a_size=3 does not divide plan.context_parallel=4"},
    {"Fp8RecipeWithoutFp8", [](Job& j) { j.plan.fp8_recipe = Fp8Recipe::kCurrent; },
     "plan.fp8_recipe=current applies to plan.dtype=fp8"},
    {"Mxfp8OffBlackwell",
     [](Job& j) {
       j.cluster.gpu = *GpuByName("h100-sxm5-80gb");
       j.plan.dtype = DType::kFp8;
       j.plan.fp8_recipe = Fp8Recipe::kMxfp8;
     },
     "plan.fp8_recipe=mxfp8 needs MX block scaling"},
    {"ZeroGpus", [](Job& j) { j.cluster.num_gpus = 0; }, "cluster.num_gpus=0"},
    {"ZeroGpusPerNode", [](Job& j) { j.cluster.gpus_per_node = 0; }, "cluster.gpus_per_node=0"},
    {"ZeroIntraNodeBandwidth", [](Job& j) { j.cluster.intra_node_bandwidth_bytes_per_s = 0; },
     "cluster.intra_node_bandwidth"},
    {"NegativeInterNodeBandwidth", [](Job& j) { j.cluster.inter_node_bandwidth_bytes_per_s = -1; },
     "cluster.inter_node_bandwidth"},
    {"NanIntraNodeBandwidth",
     [](Job& j) { j.cluster.intra_node_bandwidth_bytes_per_s = std::nan(""); },
     "cluster.intra_node_bandwidth"},
    {"NegativePrice", [](Job& j) { j.cluster.price_usd_per_gpu_hour = -1; },
     "cluster.price_usd_per_gpu_hour"},
    // Absurd values are rejected before any arithmetic can overflow.
    {"HugeHidden", [](Job& j) { j.model.hidden_size = 1'000'000'000'000; },
     "model.hidden_size=1000000000000 exceeds the maximum"},
    {"MaxInt64Layers", [](Job& j) { j.model.num_layers = kInt64Max; },
     "model.num_layers=9223372036854775807 exceeds the maximum"},
    {"MinInt64Layers", [](Job& j) { j.model.num_layers = kInt64Min; }, "model.num_layers"},
    {"MaxInt64Heads", [](Job& j) { j.model.num_heads = kInt64Max; }, "model.num_heads"},
    {"MaxInt64SeqLen", [](Job& j) { j.model.seq_len = kInt64Max; }, "model.seq_len"},
    {"MaxInt64Vocab", [](Job& j) { j.model.vocab_size = kInt64Max; }, "model.vocab_size"},
    {"MaxInt64Ffn", [](Job& j) { j.model.ffn_hidden_size = kInt64Max; }, "model.ffn_hidden_size"},
    {"MaxInt64Degrees",
     [](Job& j) {
       j.plan.tensor_parallel = kInt64Max;
       j.plan.data_parallel = kInt64Max;
       j.plan.pipeline_parallel = kInt64Max;
     },
     "plan.pipeline_parallel"},
    {"MaxInt64Batches",
     [](Job& j) {
       j.plan.micro_batch = kInt64Max;
       j.plan.global_batch = kInt64Max;
     },
     "plan.global_batch"},
    {"MaxInt64Gpus", [](Job& j) { j.cluster.num_gpus = kInt64Max; }, "cluster.num_gpus"},
    {"InfiniteBandwidth",
     [](Job& j) {
       j.cluster.inter_node_bandwidth_bytes_per_s = std::numeric_limits<double>::infinity();
     },
     "cluster.inter_node_bandwidth"},
    {"AbsurdBandwidth", [](Job& j) { j.cluster.intra_node_bandwidth_bytes_per_s = 1e300; },
     "cluster.intra_node_bandwidth"},
};

INSTANTIATE_TEST_SUITE_P(AllConstraints, SingleViolationTest, ::testing::ValuesIn(kViolations),
                         [](const ::testing::TestParamInfo<Violation>& info) {
                           return info.param.name;
                         });

TEST(ValidateJobTest, ReportsEveryViolationInOneMessage) {
  Job job = TinyJob();
  job.model.hidden_size = 66;               // not divisible by 4 heads
  job = WithPlan(job, 3, 2, 11, 2, 6);      // t=3 vs heads 4; p=11 vs 8 layers; 6 % (2*2)
  job.cluster.num_gpus = 7;                 // 3 * 2 * 11 = 66 != 7
  job.cluster.gpus_per_node = 0;            // non-positive
  job.cluster.price_usd_per_gpu_hour = -3;  // negative
  const absl::Status status = ValidateJob(job);
  ASSERT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument));
  const std::string message(status.message());
  EXPECT_THAT(message, AllOf(HasSubstr("model.hidden_size=66"), HasSubstr("cluster.num_gpus=7"),
                             HasSubstr("plan.tensor_parallel=3 does not divide"),
                             HasSubstr("model.num_layers=8 cannot be laid over"),
                             HasSubstr("plan.global_batch=6"), HasSubstr("cluster.gpus_per_node=0"),
                             HasSubstr("cluster.price_usd_per_gpu_hour=-3")));
  // Seven violations (the FFN, 4 * 66 = 264 = 3 * 88, is a multiple of t=3
  // and adds none). Parts are separated by "; "; a violation's part starts
  // with the field it names, a fix's part ("use ...", "choose ...") does not.
  const std::vector<std::string> parts = absl::StrSplit(message, "; ");
  int violations = 0;
  for (const std::string& part : parts) {
    if (absl::StartsWith(part, "model.") || absl::StartsWith(part, "plan.") ||
        absl::StartsWith(part, "cluster.")) {
      ++violations;
    }
  }
  EXPECT_EQ(violations, 7) << message;
}

TEST(ValidateJobTest, OutOfRangeFieldsSuppressDerivedChecksInsteadOfOverflowing) {
  // With every degree at INT64_MAX the product t*d*p would overflow; each
  // degree is reported on its own and no product is formed.
  Job job = TinyJob();
  job.plan.tensor_parallel = kInt64Max;
  job.plan.data_parallel = kInt64Max;
  job.plan.pipeline_parallel = kInt64Max;
  job.plan.micro_batch = kInt64Max;
  const absl::Status status = ValidateJob(job);
  ASSERT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(
      std::string(status.message()),
      AllOf(HasSubstr("plan.tensor_parallel="), HasSubstr("plan.data_parallel="),
            HasSubstr("plan.pipeline_parallel="), HasSubstr("plan.micro_batch="),
            Not(HasSubstr("does not equal cluster.num_gpus")), Not(HasSubstr("does not divide"))));
}

TEST(ParallelPlanTest, NumMicroBatches) {
  // 64 / (4 * 2) = 8.
  Job job = WithPlan(TinyJob(), 1, 4, 1, 2, 64);
  EXPECT_EQ(job.plan.num_micro_batches(), 8);
}

TEST(DefaultClusterTest, UsesTheGpuDefaults) {
  const GpuSpec gpu = *GpuByName("h100-sxm5-80gb");
  const ClusterSpec c = DefaultCluster(gpu, 64);
  EXPECT_EQ(c.num_gpus, 64);
  EXPECT_EQ(c.gpus_per_node, 8);
  EXPECT_EQ(c.gpu.name, "h100-sxm5-80gb");
  EXPECT_EQ(c.intra_node_bandwidth_bytes_per_s, gpu.default_intra_node_bandwidth_bytes_per_s);
  EXPECT_EQ(c.inter_node_bandwidth_bytes_per_s, gpu.default_inter_node_bandwidth_bytes_per_s);
  EXPECT_EQ(c.price_usd_per_gpu_hour, 0);
}

TEST(ParseBandwidthTest, DecimalBytes) {
  // 150 * 10^9 bytes per second.
  EXPECT_THAT(ParseBandwidth("150GB/s", "f"), IsOk());
  EXPECT_EQ(*ParseBandwidth("150GB/s", "f"), 150e9);
  EXPECT_EQ(*ParseBandwidth("2TB/s", "f"), 2e12);
  EXPECT_EQ(*ParseBandwidth("500MB/s", "f"), 500e6);
}

TEST(ParseBandwidthTest, BitsAreEighthsOfBytes) {
  // 800 Gb/s = 800 * 10^9 / 8 = 100 * 10^9 bytes per second.
  EXPECT_EQ(*ParseBandwidth("800Gb/s", "f"), 100e9);
  // 1.6 Tb/s = 1.6 * 10^12 / 8 = 200 * 10^9 bytes per second.
  EXPECT_DOUBLE_EQ(*ParseBandwidth("1.6Tb/s", "f"), 200e9);
}

TEST(ParseBandwidthTest, BinaryBytes) {
  // 25 GiB/s = 25 * 2^30 = 26,843,545,600 bytes per second, not 25 * 10^9.
  EXPECT_EQ(*ParseBandwidth("25GiB/s", "f"), 26'843'545'600.0);
  EXPECT_EQ(*ParseBandwidth("1KiB/s", "f"), 1024.0);
}

TEST(ParseBandwidthTest, IgnoresSurroundingAndInnerSpaces) {
  EXPECT_EQ(*ParseBandwidth("  150 GB/s ", "f"), 150e9);
}

TEST(ParseBandwidthTest, ErrorsNameTheField) {
  for (const char* text : {"150", "", "fast", "GB/s", "-5GB/s", "0GB/s", "abcGB/s", "nanGB/s",
                           "infGB/s", "150 GB", "150gb/s"}) {
    SCOPED_TRACE(text);
    EXPECT_THAT(
        ParseBandwidth(text, "cluster.intra_node_bandwidth"),
        StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cluster.intra_node_bandwidth")));
  }
}

TEST(ParseBandwidthTest, MissingUnitSaysSo) {
  EXPECT_THAT(ParseBandwidth("150", "--intra-node-bandwidth"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("--intra-node-bandwidth='150'"), HasSubstr("unit"))));
}

TEST(PlanEnumsTest, NamesRoundTrip) {
  for (PipelineSchedule s : {PipelineSchedule::kGpipe, PipelineSchedule::k1F1B}) {
    EXPECT_EQ(*ParseSchedule(ScheduleName(s)), s);
  }
  for (Recompute r : {Recompute::kNone, Recompute::kFull, Recompute::kSelective}) {
    EXPECT_EQ(*ParseRecompute(RecomputeName(r)), r);
  }
  for (DType d : {DType::kFp16, DType::kBf16, DType::kFp8}) {
    EXPECT_EQ(*ParseDType(DTypeName(d)), d);
  }
  for (DataParallelSharding s : {DataParallelSharding::kNone, DataParallelSharding::kOptimizer,
                                 DataParallelSharding::kFull}) {
    EXPECT_EQ(*ParseSharding(ShardingName(s)), s);
  }
}

TEST(PlanEnumsTest, UnknownNamesAreErrorsNamingTheField) {
  EXPECT_THAT(ParseSchedule("interleaved"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("plan.schedule")));
  EXPECT_THAT(ParseRecompute("partial"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("plan.recompute")));
  EXPECT_THAT(ParseSharding("zero2"), StatusIs(absl::StatusCode::kInvalidArgument,
                                               HasSubstr("plan.data_parallel_sharding")));
  EXPECT_THAT(ParseDType("fp4"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("plan.dtype")));
}

TEST(ValidateJobTest, ContextParallelismCountsInTheGpusAndSplitsTheSequence) {
  // t=2 c=2 p=2 d=1 on 8 GPUs; seq 128 is divisible by 2c = 4.
  Job job = WithPlan(TinyJob(), 2, 1, 2, 1, 4);
  job.plan.context_parallel = 2;
  EXPECT_THAT(ValidateJob(job), StatusIs(absl::StatusCode::kInvalidArgument,
                                         HasSubstr("2 * 2 * 2 * 1 = 8 GPUs exceeds "
                                                   "cluster.num_gpus=4")));
  job.cluster.num_gpus = 8;
  VTRAIN_EXPECT_OK(ValidateJob(job));
  // 2c = 6 does not divide 128.
  job.plan.context_parallel = 3;
  job.cluster.num_gpus = 12;
  EXPECT_THAT(ValidateJob(job),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("not divisible by 2 * plan.context_parallel = 6")));
  job.plan.context_parallel = 0;
  EXPECT_THAT(ValidateJob(job),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("plan.context_parallel=0")));
}

TEST(ValidateJobTest, VirtualStagesFollowMegatronsRules) {
  // 8 layers, p=2, V=2: 2 layers per chunk; 4 micro-batches, a multiple of p.
  Job job = WithPlan(TinyJob(), 1, 1, 2, 1, 4);
  job.plan.virtual_stages = 2;
  VTRAIN_EXPECT_OK(ValidateJob(job));
  job.plan.virtual_stages = 3;  // 8 layers over 2 * 3 chunks: laid out unevenly
  VTRAIN_EXPECT_OK(ValidateJob(job));
  job.plan.virtual_stages = 6;  // 12 chunks for 8 layers: too many
  EXPECT_THAT(ValidateJob(job),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("plan.pipeline_parallel * plan.virtual_stages = 12")));
  job.plan.virtual_stages = 2;
  job.plan.global_batch = 3;  // 3 micro-batches, not a multiple of p = 2
  EXPECT_THAT(ValidateJob(job), StatusIs(absl::StatusCode::kInvalidArgument,
                                         HasSubstr("multiple of plan.pipeline_parallel=2")));
  job = WithPlan(TinyJob(), 1, 1, 1, 1, 4);
  job.plan.virtual_stages = 2;
  EXPECT_THAT(ValidateJob(job), StatusIs(absl::StatusCode::kInvalidArgument,
                                         HasSubstr("plan.pipeline_parallel of at least 2")));
  job = WithPlan(TinyJob(), 1, 1, 2, 1, 4);
  job.plan.virtual_stages = 2;
  job.plan.schedule = PipelineSchedule::kGpipe;
  EXPECT_THAT(ValidateJob(job),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("needs plan.schedule=1f1b")));
}

TEST(ParallelPlanTest, SequenceParallelismIsANoOpWithoutTensorParallelism) {
  ParallelPlan plan;
  plan.sequence_parallel = true;
  EXPECT_FALSE(plan.sequence_parallel_active());
  plan.tensor_parallel = 2;
  EXPECT_TRUE(plan.sequence_parallel_active());
}

}  // namespace
}  // namespace vtrain
