// Pipeline layouts: the automatic layout against Megatron-Core's rules on
// the published shapes that need it (DeepSeek-V3's 61 layers, Qwen3-235B's
// 94, Llama 3.1 405B's 126), the first/last-stage options, the layout
// notation read and written back, and every bad layout refused by name.
#include "core/spec/pipeline_layout.h"

#include <cstdint>
#include <string>
#include <vector>

#include "core/spec/job.h"
#include "core/spec/model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace vtrain {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::vtrain::testing::StatusIs;

Job Layered(int64_t layers, int64_t p, int64_t v = 1) {
  Job job;
  job.model.num_layers = layers;
  job.model.hidden_size = 64;
  job.model.num_heads = 4;
  job.model.seq_len = 64;
  job.plan.pipeline_parallel = p;
  job.plan.virtual_stages = v;
  return job;
}

std::vector<int64_t> Counts(const Job& job) {
  absl::StatusOr<std::vector<ChunkLayers>> chunks = ResolvePipelineLayout(job);
  EXPECT_TRUE(chunks.ok()) << chunks.status();
  std::vector<int64_t> out;
  if (!chunks.ok()) return out;
  int64_t next = 0;
  for (const ChunkLayers& c : *chunks) {
    EXPECT_EQ(c.first_layer, next);  // contiguous, in model order
    next += c.num_layers;
    out.push_back(c.num_layers);
  }
  EXPECT_EQ(next, job.model.num_layers);
  EXPECT_TRUE(chunks->front().embedding);
  EXPECT_TRUE(chunks->back().loss);
  return out;
}

std::vector<int64_t> Runs(std::vector<std::pair<int64_t, int64_t>> runs) {
  std::vector<int64_t> out;
  for (auto [n, layers] : runs) out.insert(out.end(), n, layers);
  return out;
}

TEST(PipelineLayoutTest, EvenWhenTheChunksDivideTheLayers) {
  EXPECT_THAT(Counts(Layered(8, 4)), ElementsAreArray({2, 2, 2, 2}));
  EXPECT_THAT(Counts(Layered(96, 8, 3)), ElementsAreArray(Runs({{24, 4}})));
  EXPECT_TRUE(IsEvenLayout(*ResolvePipelineLayout(Layered(96, 8, 3))));
}

TEST(PipelineLayoutTest, AutoCountsTheEmbeddingAndTheLossAsALayerWhereThatDivides) {
  // Llama 3.1 405B: 126 layers on 8 stages x 8 chunks; 128 = 64 x 2, so the
  // first and last chunk hold one layer (Megatron-Core's
  // --account-for-embedding-in-pipeline-split and ...-loss-...).
  EXPECT_THAT(Counts(Layered(126, 8, 8)), ElementsAreArray(Runs({{1, 1}, {62, 2}, {1, 1}})));
  // Qwen3-235B-A22B: 94 layers on 8 x 4 chunks.
  EXPECT_THAT(Counts(Layered(94, 8, 4)), ElementsAreArray(Runs({{1, 2}, {30, 3}, {1, 2}})));
  // Only the loss: 7 layers on 2 stages.
  EXPECT_THAT(Counts(Layered(7, 2)), ElementsAreArray({4, 3}));
}

TEST(PipelineLayoutTest, AutoElseMakesTheEndsLighterTheLossChunkLightest) {
  // DeepSeek-V3: 61 layers on 16 stages; 4 per middle stage, 5 left for the
  // ends.
  EXPECT_THAT(Counts(Layered(61, 16)), ElementsAreArray(Runs({{1, 3}, {14, 4}, {1, 2}})));
  // Past what the ends can give up: refused, with the fix.
  // Down to an end chunk with the embedding or the loss alone: Qwen3-235B's
  // 94 layers on 32 x 3 chunks (96 = 94 + 2), and 8 layers on 10 stages.
  EXPECT_THAT(Counts(Layered(94, 32, 3)), ElementsAreArray(Runs({{1, 0}, {94, 1}, {1, 0}})));
  EXPECT_THAT(Counts(Layered(12, 8)), ElementsAreArray(Runs({{1, 0}, {6, 2}, {1, 0}})));
  EXPECT_THAT(ValidateJob(Layered(8, 11)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("model.num_layers=8 cannot be laid over plan.pipeline_parallel "
                                 "* plan.virtual_stages = 11 chunks")));
}

TEST(PipelineLayoutTest, FirstAndLastStageLayersAsMegatronSplitsThem) {
  Job job = Layered(61, 8);
  job.plan.layout.first_stage_layers = 7;
  job.plan.layout.last_stage_layers = 6;
  EXPECT_THAT(Counts(job), ElementsAreArray({7, 8, 8, 8, 8, 8, 8, 6}));
  // Only the first given: the other 7 stages share the rest.
  job.plan.layout.last_stage_layers = 0;
  job.plan.layout.first_stage_layers = 5;
  EXPECT_THAT(Counts(job), ElementsAreArray({5, 8, 8, 8, 8, 8, 8, 8}));
  // With interleaving each stage's layers split evenly over its chunks, in
  // model order chunk * p + stage.
  Job v = Layered(20, 4, 2);
  v.plan.layout.first_stage_layers = 2;
  v.plan.layout.last_stage_layers = 6;
  EXPECT_THAT(Counts(v), ElementsAreArray({1, 3, 3, 3, 1, 3, 3, 3}));
  v.plan.layout.last_stage_layers = 0;
  v.plan.layout.first_stage_layers = 5;  // 5 layers over 2 chunks
  EXPECT_THAT(ValidateJob(v), StatusIs(absl::StatusCode::kInvalidArgument,
                                       HasSubstr("plan.first_stage_layers=5 do not divide over "
                                                 "plan.virtual_stages=2")));
  Job one = Layered(8, 1);
  one.plan.layout.first_stage_layers = 4;
  EXPECT_THAT(ValidateJob(one), StatusIs(absl::StatusCode::kInvalidArgument,
                                         HasSubstr("need plan.pipeline_parallel of at least 2")));
}

TEST(PipelineLayoutTest, ReadsMegatronsNotation) {
  // DeepSeek-V3 as Megatron-Core's DeepSeek-V3 recipes lay it on 16 x 2
  // chunks: 3 dense layers with the embedding, 2 per chunk, the MTP module
  // and the loss in chunks of their own.
  absl::StatusOr<std::vector<ChunkContent>> chunks =
      ParsePipelineLayout("Et*3|(tt|)*29m|L", "plan.pipeline_layout");
  ASSERT_TRUE(chunks.ok()) << chunks.status();
  ASSERT_EQ(chunks->size(), 32u);
  EXPECT_TRUE((*chunks)[0].embedding);
  EXPECT_EQ((*chunks)[0].layers, 3);
  for (int k = 1; k <= 29; ++k) EXPECT_EQ((*chunks)[k].layers, 2) << k;
  EXPECT_EQ((*chunks)[30].mtp_layers, 1);
  EXPECT_EQ((*chunks)[30].layers, 0);
  EXPECT_TRUE((*chunks)[31].loss);
  // Commas and spaces separate tokens; nested groups repeat.
  chunks = ParsePipelineLayout("E, t*2 | ((t|)*2)*2 t, L", "f");
  ASSERT_TRUE(chunks.ok()) << chunks.status();
  ASSERT_EQ(chunks->size(), 6u);
  EXPECT_EQ((*chunks)[0].layers, 2);
  EXPECT_EQ((*chunks)[5].layers, 1);
  EXPECT_TRUE((*chunks)[5].loss);

  Job job = Layered(61, 16, 2);
  job.model.mtp_layers = 1;
  job.plan.layout.chunks = *ParsePipelineLayout("Et*3|(tt|)*29m|L", "f");
  VTRAIN_ASSERT_OK_AND_ASSIGN(std::vector<ChunkLayers> laid, ResolvePipelineLayout(job));
  EXPECT_EQ(laid[30].mtp_layers, 1);
  EXPECT_EQ(laid[31].num_layers, 0);
  EXPECT_EQ(laid[31].first_layer, 61);
  EXPECT_EQ(FormatPipelineLayout(laid), "Et*3|(t*2|)*29m|L");
}

TEST(PipelineLayoutTest, WrittenLayoutsReadBackTheSame) {
  for (auto [layers, p, v] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {61, 16, 1}, {94, 8, 4}, {126, 8, 8}, {7, 2, 1}, {8, 4, 1}, {13, 5, 1}, {1, 1, 1}}) {
    Job job = Layered(layers, p, v);
    VTRAIN_ASSERT_OK_AND_ASSIGN(std::vector<ChunkLayers> laid, ResolvePipelineLayout(job));
    const std::string text = FormatPipelineLayout(laid);
    Job again = job;
    VTRAIN_ASSERT_OK_AND_ASSIGN(again.plan.layout.chunks, ParsePipelineLayout(text, "f"));
    EXPECT_THAT(Counts(again), ElementsAreArray(Counts(job))) << text;
  }
  EXPECT_EQ(FormatPipelineLayout(*ResolvePipelineLayout(Layered(61, 16))), "Et*3|(t*4|)*14t*2L");
  EXPECT_EQ(FormatPipelineLayout(*ResolvePipelineLayout(Layered(8, 2))), "Et*4|t*4L");
}

TEST(PipelineLayoutTest, BadNotationIsRefusedWithThePlace) {
  struct Case {
    const char* text;
    const char* says;
  } cases[] = {
      {"Et*3|x|L", "an unknown token 'x'"},
      {"Et*3|(tt|*2L", "a '(' without its ')'"},
      {"Et*3)|L", "an unmatched ')'"},
      {"Et*|L", "'*' without a count"},
      {"Et*0|L", "a repeat count of 0"},
      {"tE|L", "E (the embedding) must open its chunk"},
      {"Et|tLL", "L (the loss) appears twice"},
      {"(t*9999999|)*9999999", "more than 1048576 tokens"},
      {"Et*12345678|L", "a repeat count over 9999999"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(ParsePipelineLayout(c.text, "plan.pipeline_layout"),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         ::testing::AllOf(HasSubstr("plan.pipeline_layout"), HasSubstr(c.says))))
        << c.text;
  }
}

TEST(PipelineLayoutTest, LayoutsThatDoNotFitTheModelAreRefusedByName) {
  struct Case {
    const char* text;
    int64_t p;
    const char* says;
  } cases[] = {
      {"Et*4|t*4L", 4, "has 2 chunks but plan.pipeline_parallel * plan.virtual_stages = 4"},
      {"Et*4|t*3L", 2, "holds 7 decoder layers (t) but model.num_layers=8"},
      {"Et*4|t*4mL", 2, "holds 1 MTP modules (m) but model.mtp_layers=0"},
      {"t*4|Et*4L", 2, "does not open with the embedding (E)"},
      {"Et*4|Et*4L", 2, "has the embedding (E) in chunk 1"},
      {"Et*4|t*4", 2, "does not end with the loss (L)"},
      {"Et*4L|t*4", 2, "the loss (L) in chunk 0"},
      {"Et*8||L", 3, "chunk 1 holds nothing"},
  };
  for (const Case& c : cases) {
    Job job = Layered(8, c.p);
    job.cluster.num_gpus = c.p;
    VTRAIN_ASSERT_OK_AND_ASSIGN(job.plan.layout.chunks, ParsePipelineLayout(c.text, "f"));
    EXPECT_THAT(ValidateJob(job),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         ::testing::AllOf(HasSubstr("plan.pipeline_layout"), HasSubstr(c.says))))
        << c.text;
  }
  Job both = Layered(8, 2);
  both.plan.layout.chunks = *ParsePipelineLayout("Et*4|t*4L", "f");
  both.plan.layout.first_stage_layers = 4;
  EXPECT_THAT(ValidateJob(both),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("give one or the other")));
}

}  // namespace
}  // namespace vtrain
