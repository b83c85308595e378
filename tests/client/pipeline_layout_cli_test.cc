// vtrainctl with uneven pipeline layouts: predict prints the layout and each
// stage's layers, a layout in Megatron's notation or first/last-stage layers
// are taken from flags and from a job file, search tries --pp-values that do
// not divide the layers, and bad layouts exit 2 naming the field.
#include <string>
#include <vector>

#include "common/exit_codes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/vtrainctl.h"

namespace vtrain {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::vtrain::testing::RunVtrainctlInProcess;

std::vector<std::string> LayoutCliGpt(std::vector<std::string> extra) {
  std::vector<std::string> args = {
      "predict", "--local", "--model", "gpt3-1.3b", "--layers",       "26", "--pp", "4",
      "--tp",    "2",       "--gpus",  "8",         "--global-batch", "32"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

TEST(PipelineLayoutCliTest, PredictPrintsTheLayoutAndEachStagesLayers) {
  const auto r = RunVtrainctlInProcess(LayoutCliGpt({}));
  ASSERT_EQ(r.code, common::kExitOk) << r.err;
  // 26 layers on 4 stages: the embedding and the loss take a layer's place.
  EXPECT_THAT(r.out, HasSubstr("layout   Et*6|t*7|t*7|t*6L (uneven)"));
  EXPECT_THAT(r.out, HasSubstr("    0  0-5 "));
  EXPECT_THAT(r.out, HasSubstr("    1  6-12 "));
  EXPECT_THAT(r.out, HasSubstr("    3  20-25 "));
  const auto json = RunVtrainctlInProcess(LayoutCliGpt({"--json"}));
  ASSERT_EQ(json.code, common::kExitOk) << json.err;
  EXPECT_THAT(json.out, HasSubstr("\"pipeline_layout\": \"Et*6|t*7|t*7|t*6L\""));
  // An even layout prints no layout line.
  const auto even = RunVtrainctlInProcess(LayoutCliGpt({"--layers", "24"}));
  ASSERT_EQ(even.code, common::kExitOk) << even.err;
  EXPECT_THAT(even.out, Not(HasSubstr("layout ")));
}

TEST(PipelineLayoutCliTest, ExplicitLayoutsAndStageLayersAreTaken) {
  const auto given =
      RunVtrainctlInProcess(LayoutCliGpt({"--pipeline-layout", "Et*8|(t*6|)*2t*6L"}));
  ASSERT_EQ(given.code, common::kExitOk) << given.err;
  EXPECT_THAT(given.out, HasSubstr("layout   Et*8|t*6|t*6|t*6L (uneven)"));
  const auto first = RunVtrainctlInProcess(LayoutCliGpt({"--first-stage-layers", "5"}));
  ASSERT_EQ(first.code, common::kExitOk) << first.err;
  EXPECT_THAT(first.out, HasSubstr("layout   Et*5|t*7|t*7|t*7L (uneven)"));
}

TEST(PipelineLayoutCliTest, SearchTriesPipelineDegreesThatDoNotDivideTheLayers) {
  const auto r = RunVtrainctlInProcess({"search", "--local", "--model", "gpt3-1.3b", "--layers",
                                        "26", "--gpus", "6", "--global-batch", "24", "--tp-values",
                                        "2", "--pp-values", "3", "--json"});
  ASSERT_EQ(r.code, common::kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"pipeline_parallel\": 3,"));
  // 26 layers on 3 stages: 27 = 26 + 1 divides, the loss counts as a layer.
  EXPECT_THAT(r.out, HasSubstr("\"pipeline_layout\": \"Et*9|t*9|t*8L\""));
  const auto text = RunVtrainctlInProcess({"search", "--local", "--model", "gpt3-1.3b", "--layers",
                                           "26", "--gpus", "6", "--global-batch", "24",
                                           "--tp-values", "2", "--pp-values", "3"});
  ASSERT_EQ(text.code, common::kExitOk) << text.err;
  EXPECT_THAT(text.out, HasSubstr("layout=Et*9|t*9|t*8L"));
}

TEST(PipelineLayoutCliTest, BadLayoutsAreRefusedNamingTheField) {
  const struct {
    std::vector<std::string> extra;
    const char* expected;
  } cases[] = {
      {{"--pipeline-layout", "Et*6|t*7|t*7|t*5L"},
       "plan.pipeline_layout holds 25 decoder layers (t) but model.num_layers=26"},
      {{"--pipeline-layout", "Et*6|t*7|q|t*6L"}, "an unknown token 'q'"},
      {{"--first-stage-layers", "0"}, "plan.first_stage_layers=0 (--first-stage-layers) must be"},
      {{"--first-stage-layers", "4"}, "do not divide over the 3 middle stages"},
      {{"--pp", "40", "--gpus", "80"}, "cannot be laid over"},
  };
  for (const auto& c : cases) {
    const auto r = RunVtrainctlInProcess(LayoutCliGpt(c.extra));
    EXPECT_EQ(r.code, common::kExitBadInput) << c.expected;
    EXPECT_THAT(r.err, HasSubstr(c.expected));
  }
}

}  // namespace
}  // namespace vtrain
