// vtrainctl behaviour fixed alongside the accuracy work: a vTrain
// configuration takes the price from the command line and may name a
// cluster larger than the job (the paper's MT-NLG plan), a cost search with
// no deadline or GPU count warns, and the memory headroom is a flag.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/commands.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/vtrainctl.h"

namespace vtrain::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using Issue16Result = ::vtrain::testing::CliResult;
constexpr auto& RunCtl = ::vtrain::testing::RunVtrainctlInProcess;

std::string WriteTempFile(const std::string& name, const std::string& text) {
  const char* dir = std::getenv("TMPDIR");
  const std::string path =
      absl::StrCat(dir != nullptr ? dir : "/tmp", "/issue16_test_", getpid(), "_", name);
  FILE* f = std::fopen(path.c_str(), "w");
  EXPECT_NE(f, nullptr);
  if (f != nullptr) {
    std::fputs(text.c_str(), f);
    std::fclose(f);
  }
  return path;
}

// The number after `key` in a JSON document (first occurrence), or -1.
double JsonNumber(const std::string& json, const std::string& key) {
  const size_t at = json.find("\"" + key + "\": ");
  if (at == std::string::npos) return -1;
  return std::strtod(json.c_str() + at + key.size() + 4, nullptr);
}

// vTrain's config_mtnlg_8_12_21.json as the paper describes the plan (MT-NLG
// 530B: 105 layers, hidden 20480, 128 heads, sequence 2048, global batch
// 1920; t = 8, d = 12, p = 21 on a 3,360-GPU A100 cluster of 8-GPU nodes).
constexpr char kMtnlgConfig[] = R"({"num_gpus": 3360, "tensor_parallel_size": 8,
  "data_parallel_size": 12, "pipeline_parallel_size": 21, "global_batch_size": 1920,
  "micro_batch_size": 1, "num_layers": 105, "hidden_size": 20480, "num_attention_heads": 128,
  "max_length": 2048, "vocab_size": 51200, "use_checkpoint": true,
  "use_gradient_bucket": false, "ddp_bucket_size": 25, "inter_node_bandwidth": 800,
  "intra_node_bandwidth": 150, "pipeline_scheduling": "1f1b", "node_size": 8,
  "gpu_name": "A100"})";

TEST(Issue16FixesTest, VtrainConfigWithALargerClusterAndAPriceIsCosted) {
  const std::string config = WriteTempFile("mtnlg.json", kMtnlgConfig);
  const Issue16Result r = RunCtl({"predict", "--vtrain-config", config, "--tokens", "270e9",
                                  "--price-usd-per-gpu-hour", "4.096", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const double cost = JsonNumber(r.out, "cost_usd");
  const double gpu_hours = JsonNumber(r.out, "gpu_hours");
  EXPECT_GT(cost, 0);
  EXPECT_NEAR(cost, gpu_hours * 4.096, 1e-6 * cost);
  // The same job on exactly its 2,016 GPUs costs the same: the cluster's
  // idle GPUs are not the job's.
  const Issue16Result exact = RunCtl(
      {"predict", "--model",        "mtnlg-530b", "--settings", "paper", "--vocab",
       "51200",   "--tp",           "8",          "--dp",       "12",    "--pp",
       "21",      "--global-batch", "1920",       "--tokens",   "270e9", "--price-usd-per-gpu-hour",
       "4.096",   "--json"});
  ASSERT_EQ(exact.code, 0) << exact.err;
  EXPECT_DOUBLE_EQ(JsonNumber(exact.out, "iteration_time_ms"),
                   JsonNumber(r.out, "iteration_time_ms"));
  EXPECT_NEAR(JsonNumber(exact.out, "cost_usd"), cost, 1e-6 * cost);
  // The table says how many of the cluster's GPUs the job uses.
  const Issue16Result table = RunCtl({"predict", "--vtrain-config", config});
  EXPECT_EQ(table.code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("the job uses 2016 of the cluster's 3360 GPUs"));
  // A job needing more GPUs than the cluster has is still refused.
  const Issue16Result too_big = RunCtl({"predict", "--model", "gpt3-1.3b", "--gpus", "8", "--tp",
                                        "2", "--dp", "8", "--global-batch", "64"});
  EXPECT_EQ(too_big.code, 2);
  EXPECT_THAT(too_big.err, HasSubstr("exceeds cluster.num_gpus=8"));
  std::remove(config.c_str());
}

TEST(Issue16FixesTest, CostSearchWithoutDeadlineOrGpuCountWarns) {
  const std::vector<std::string> base = {
      "search", "--model",     "gpt3-1.3b", "--global-batch",           "64", "--tokens",
      "1e9",    "--tp-values", "1,2",       "--price-usd-per-gpu-hour", "4"};
  std::vector<std::string> cost = base;
  for (const char* a : {"--max-gpus", "16", "--objective", "cost"}) cost.push_back(a);
  const Issue16Result r = RunCtl(cost);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("WARNING: objective 'cost' with no deadline"));
  EXPECT_THAT(r.out, HasSubstr("WARNING: objective 'cost'"));
  std::vector<std::string> json = cost;
  json.push_back("--json");
  EXPECT_THAT(RunCtl(json).out, HasSubstr("\"warnings\": [\n    \"objective 'cost'"));
  // An exact GPU count, or the time objective: no warning.
  std::vector<std::string> exact = base;
  for (const char* a : {"--gpus", "8", "--objective", "cost"}) exact.push_back(a);
  EXPECT_THAT(RunCtl(exact).err, Not(HasSubstr("WARNING")));
  std::vector<std::string> time = base;
  for (const char* a : {"--max-gpus", "16"}) time.push_back(a);
  EXPECT_THAT(RunCtl(time).err, Not(HasSubstr("WARNING")));
}

TEST(Issue16FixesTest, MemoryHeadroomDropsPlansNearTheCapacity) {
  // GPT-3 13B on 8 GPUs with t = 8: about 27 GiB of model states per GPU
  // plus activations; a headroom of 0 keeps plans that 0.5 of the memory
  // free would drop.
  const std::vector<std::string> base = {"search", "--model", "gpt3-13b", "--global-batch",
                                         "32",     "--gpus",  "8",        "--json"};
  std::vector<std::string> none = base, half = base, bad = base;
  for (const char* a : {"--memory-headroom", "0"}) none.push_back(a);
  for (const char* a : {"--memory-headroom", "0.5"}) half.push_back(a);
  for (const char* a : {"--memory-headroom", "0.9"}) bad.push_back(a);
  const Issue16Result r0 = RunCtl(none), r5 = RunCtl(half);
  ASSERT_EQ(r0.code, 0) << r0.err;
  ASSERT_EQ(r5.code, 0) << r5.err;
  EXPECT_GT(JsonNumber(r5.out, "out_of_memory"), JsonNumber(r0.out, "out_of_memory"));
  const Issue16Result refused = RunCtl(bad);
  EXPECT_EQ(refused.code, 2);
  EXPECT_THAT(refused.err, HasSubstr("memory_headroom"));
  // predict: the same flag decides whether one plan fits (t = 4 on 4 GPUs:
  // about 52 GB of model states, inside 97% of 80 GiB, outside half of it).
  const std::vector<std::string> predict = {"predict", "--model", "gpt3-13b", "--gpus",
                                            "4",       "--tp",    "4",        "--global-batch",
                                            "32",      "--json"};
  std::vector<std::string> strict = predict;
  for (const char* a : {"--memory-headroom", "0.5"}) strict.push_back(a);
  EXPECT_THAT(RunCtl(predict).out, HasSubstr("\"fits\": true"));
  EXPECT_THAT(RunCtl(strict).out, HasSubstr("\"fits\": false"));
}

}  // namespace
}  // namespace vtrain::client
