// vtrainctl with training tokens: the run with failures next to the
// failure-free one, in text and JSON; --node-failure-rate 0 gives the paper's
// failure-free answer; the reliability flags reach a job file's request.
#include <string>
#include <vector>

#include "common/exit_codes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/json.h"
#include "tests/testing/vtrainctl.h"
#include "vtrain/v1/vtrain.pb.h"

namespace vtrain {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::vtrain::testing::RunVtrainctlInProcess;

std::vector<std::string> Gpt(std::vector<std::string> extra) {
  std::vector<std::string> args = {"predict",
                                   "--local",
                                   "--model",
                                   "gpt3-13b",
                                   "--tp",
                                   "8",
                                   "--pp",
                                   "4",
                                   "--gpus",
                                   "512",
                                   "--global-batch",
                                   "1024",
                                   "--tokens",
                                   "300e9",
                                   "--price-usd-per-gpu-hour",
                                   "2"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

v1::PredictResponse Json(const std::vector<std::string>& args) {
  const auto r = RunVtrainctlInProcess(args);
  EXPECT_EQ(r.code, common::kExitOk) << r.err;
  v1::PredictResponse resp;
  EXPECT_TRUE(proto::FromJson(r.out, &resp).ok()) << r.out;
  return resp;
}

TEST(GoodputCliTest, PredictShowsTheRunWithFailures) {
  const auto r = RunVtrainctlInProcess(Gpt({}));
  ASSERT_EQ(r.code, common::kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("with failures    "));
  EXPECT_THAT(r.out, HasSubstr("interruptions (one every"));
  EXPECT_THAT(r.out, HasSubstr("checkpoints      every "));
  const v1::PredictResponse resp = Json(Gpt({"--json"}));
  const v1::Goodput& g = resp.goodput();
  EXPECT_GT(g.fraction(), 0.5);
  EXPECT_LT(g.fraction(), 1);
  EXPECT_NEAR(g.expected_days(), resp.training().time_s() / 86400 / g.fraction(), 1e-6);
  EXPECT_GT(g.expected_interruptions(), 0);
  EXPECT_GT(g.checkpoint_interval_s(), 0);
  EXPECT_GT(g.expected_cost_usd(), resp.training().cost_usd());
  // 64 nodes at the default rate.
  EXPECT_NEAR(g.job_mtbf_s(), 86400 / (64 * 6.5e-3), 1e-3);
}

TEST(GoodputCliTest, TheFlagsChangeTheAnswer) {
  const v1::PredictResponse base = Json(Gpt({"--json"}));
  const v1::PredictResponse none = Json(Gpt({"--json", "--node-failure-rate", "0"}));
  EXPECT_EQ(none.goodput().fraction(), 1);
  EXPECT_NEAR(none.goodput().expected_days(), none.training().time_s() / 86400, 1e-9);
  const v1::PredictResponse async = Json(Gpt({"--json", "--async-checkpoint", "on"}));
  EXPECT_LT(async.goodput().checkpoint_blocking_s(), base.goodput().checkpoint_blocking_s());
  const v1::PredictResponse slow =
      Json(Gpt({"--json", "--restart-minutes", "60", "--checkpoint-gbps", "1"}));
  EXPECT_LT(slow.goodput().fraction(), base.goodput().fraction());
  EXPECT_EQ(slow.cluster().reliability().restart_minutes(), 60);
  const v1::PredictResponse fixed = Json(Gpt({"--json", "--checkpoint-interval", "7200"}));
  EXPECT_NEAR(fixed.goodput().checkpoint_interval_s(), 7200, fixed.iteration_time_ms() / 1e3);
  // Without tokens there is no run to estimate.
  const auto no_tokens = RunVtrainctlInProcess(
      {"predict", "--local", "--model", "gpt3-1.3b", "--gpus", "8", "--global-batch", "64"});
  ASSERT_EQ(no_tokens.code, common::kExitOk) << no_tokens.err;
  EXPECT_THAT(no_tokens.out, Not(HasSubstr("with failures")));
}

TEST(GoodputCliTest, SearchShowsBothFigures) {
  const auto r = RunVtrainctlInProcess(
      {"search", "--local", "--model", "gpt3-1.3b", "--global-batch", "64", "--max-gpus", "16",
       "--tokens", "100e9", "--price-usd-per-gpu-hour", "2", "--objective", "cost"});
  ASSERT_EQ(r.code, common::kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("days and cost: failure-free/expected"));
  const auto csv =
      RunVtrainctlInProcess({"search", "--local", "--model", "gpt3-1.3b", "--global-batch", "64",
                             "--max-gpus", "16", "--tokens", "100e9", "--csv"});
  ASSERT_EQ(csv.code, common::kExitOk) << csv.err;
  EXPECT_THAT(csv.out, HasSubstr(",expected_days,expected_cost_usd,goodput\n"));
}

}  // namespace
}  // namespace vtrain
