// vtrainctl answers that must not pass for success: a search with no plan
// exits 1 and says why (in text and JSON), and a search that found one leaves
// out what was not asked for.
#include <sstream>
#include <string>
#include <vector>

#include "client/commands.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace vtrain::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct Result {
  int code;
  std::string out, err;
};

Result Vtrainctl(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int code = RunVtrainctl(args, out, err);
  return {code, out.str(), err.str()};
}

TEST(AnswersTest, ASearchWithNoPlanExitsOneAndSaysWhy) {
  const std::vector<std::string> oom = {"search",         "--model", "gpt3-175b", "--gpus", "8",
                                        "--global-batch", "64",      "--threads", "1"};
  Result r = Vtrainctl(oom);
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("no plan: every one of the"));
  EXPECT_THAT(r.err, HasSubstr("out of memory"));
  EXPECT_THAT(r.out, Not(HasSubstr("deadline")));  // none was given
  std::vector<std::string> json = oom;
  json.push_back("--json");
  r = Vtrainctl(json);
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.out, HasSubstr("\"no_plan_reason\": \"every one of the"));
}

TEST(AnswersTest, ASearchWithAPlanExitsZeroWithoutAFrontierOfOne) {
  const Result r = Vtrainctl({"search", "--model", "gpt3-1.3b", "--gpus", "8", "--global-batch",
                              "64", "--threads", "1"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("best "));
  EXPECT_THAT(r.err, Not(HasSubstr("no plan")));
}

}  // namespace
}  // namespace vtrain::cli
