// A tuned search contains the plans experts run: at the published GPU count
// and global batch, `search` returns a plan predicted at least as fast as
// vtrain's prediction of the published plan (under the same tuned settings).
// The plans are the recipes' (Megatron-Bridge performance configs), not
// their published step times.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/vtrainctl.h"

namespace vtrain {
namespace {

using ::vtrain::testing::RunVtrainctlInProcess;

double JsonDouble(const std::string& json, const std::string& key, size_t from = 0) {
  const size_t at = json.find("\"" + key + "\": ", from);
  if (at == std::string::npos) return -1;
  return std::stod(json.substr(at + key.size() + 4));
}

struct Published {
  const char* name;
  std::vector<std::string> job;   // model, GPU, GPUs, batch, precision
  std::vector<std::string> plan;  // the recipe's plan
};

TEST(SearchPublishedTest, TheSearchFindsAPlanAtLeastAsFastAsThePublishedOne) {
  const Published cases[] = {
      {"DeepSeek-V3 on 1,024 H100",
       {"--model", "deepseek-v3", "--gpu", "h100-sxm5-80gb", "--gpus", "1024", "--global-batch",
        "8192", "--dtype", "fp8"},
       {"--tp", "2", "--pp", "8", "--virtual-stages", "4", "--ep", "64"}},
      {"Qwen3-235B-A22B on 256 H100",
       {"--model", "qwen3-235b-a22b", "--gpu", "h100-sxm5-80gb", "--gpus", "256", "--global-batch",
        "2048", "--dtype", "bf16"},
       {"--tp", "2", "--pp", "8", "--virtual-stages", "4", "--ep", "32"}},
      {"Llama 3.1 405B on 1,024 H100",
       {"--model", "llama3.1-405b", "--gpu", "h100-sxm5-80gb", "--gpus", "1024", "--global-batch",
        "512", "--dtype", "bf16"},
       {"--tp", "8", "--pp", "8", "--virtual-stages", "8", "--cp", "2"}},
  };
  for (const Published& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<std::string> predict = {"predict", "--json"};
    predict.insert(predict.end(), c.job.begin(), c.job.end());
    predict.insert(predict.end(), c.plan.begin(), c.plan.end());
    const auto published = RunVtrainctlInProcess(predict);
    ASSERT_EQ(published.code, 0) << published.err;
    // The published plan fits at its recipe's settings.
    EXPECT_THAT(published.out, ::testing::HasSubstr("\"fits\": true"));
    std::vector<std::string> search = {"search", "--json", "--top", "1"};
    search.insert(search.end(), c.job.begin(), c.job.end());
    const auto found = RunVtrainctlInProcess(search);
    ASSERT_EQ(found.code, 0) << found.err;
    const double best = JsonDouble(found.out, "iteration_time_ms", found.out.find("\"best\""));
    const double theirs = JsonDouble(published.out, "iteration_time_ms");
    ASSERT_GT(best, 0);
    EXPECT_LE(best, theirs * (1 + 1e-9)) << "published plan " << theirs << " ms";
  }
}

}  // namespace
}  // namespace vtrain
