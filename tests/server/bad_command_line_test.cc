// The catalogue of bad command lines: each vtrainctl mistake exits 2, names
// the flag or field, and prints nothing on stdout (the RPC half of the
// catalogue is bad_input_test.cc).
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/server.h"
#include "tests/server/server_testing.h"

namespace vtrain::server {
namespace {

// The same kind of mistakes on the command line: exit 2, the flag or field
// named, nothing on stdout.
TEST(BadCommandLineTest, EveryBadCommandLineExitsTwoNamingTheFlag) {
  TempDir dir_;
  std::unique_ptr<Server> server_ = StartServer(dir_.File("cli.db"));
  ASSERT_NE(server_, nullptr);
  const std::string bad_json = dir_.File("bad.json");
  std::ofstream(bad_json) << "{\"model\": {\"preset\": 12}";
  const std::string server = absl::StrCat("127.0.0.1:", server_->port());
  const std::vector<std::string> job = {"--model", "gpt3-1.3b",      "--gpus",
                                        "8",       "--global-batch", "64"};
  struct CliCase {
    std::vector<std::string> args;
    const char* says;
  };
  const std::vector<CliCase> cases = {
      {{"predict", "--bogus"}, "unknown flag --bogus"},
      {Concat({"predict", "--tp", "abc"}, job), "--tp"},
      {Concat({"predict", "--gpus", "x8"}, {"--model", "gpt3-1.3b", "--global-batch", "64"}),
       "--gpus"},
      {Concat({"predict", "--intra-node-bandwidth", "150"}, job), "--intra-node-bandwidth"},
      {Concat({"predict", "--schedule", "zigzag"}, job), "zigzag"},
      {Concat({"predict", "--recompute", "half"}, job), "half"},
      {Concat({"predict", "--dtype", "fp8"}, job), "plan.dtype"},
      {Concat({"predict", "--gradient-bucketing", "maybe"}, job), "--gradient-bucketing"},
      {Concat({"predict", "--bucket-size", "lots"}, job), "plan.bucket_size_bytes"},
      {Concat({"predict", "--tokens", "-5"}, job), "--tokens"},
      {Concat({"predict", "--tokens", "many"}, job), "--tokens"},
      {Concat({"predict", "--granularity", "atom"}, job), "atom"},
      {{"predict", "--model", "gpt3-1.3b", "--gpus", "8"}, "--global-batch"},
      {{"predict", "--model", "gpt5", "--global-batch", "8"}, "gpt5"},
      {{"predict", "-f", dir_.File("absent.json")}, "absent.json"},
      {{"predict", "-f", bad_json}, "bad.json"},
      {{"predict", "--vtrain-config", bad_json}, "bad.json"},
      {Concat({"predict", "--tp", "3"}, job), "plan.tensor_parallel"},
      {Concat({"predict", "--local", "--server", server}, job), "--local or --server"},
      {Concat({"predict", "--profile-set", "x"}, job), "--server"},
      {Concat({"predict", "--server", server, "--tp", "3"}, job), "plan.tensor_parallel"},
      {{"search", "--model", "gpt3-1.3b", "--global-batch", "64", "--max-gpus", "8", "--tp-values",
        "x"},
       "--tp-values"},
      {{"search", "--model", "gpt3-1.3b", "--global-batch", "64", "--max-gpus", "8", "--objective",
        "speed"},
       "speed"},
      {{"search", "--model", "gpt3-1.3b", "--global-batch", "64", "--max-gpus", "8", "--top", "0"},
       "--top"},
      {{"search", "--model", "gpt3-1.3b", "--global-batch", "64"}, "--gpus"},
      {{"search", "--model", "gpt3-1.3b", "--global-batch", "64", "--max-gpus", "8", "--server",
        server, "--tp-values", "0"},
       "tensor_parallel"},
      {{"profiles", "push", dir_.File("absent.json"), "--server", server}, "absent.json"},
      {{"bench", "--server", "10.0.0.1:1", "--method", "health"}, "loopback"},
      {{"bench", "--server", server, "--method", "health", "--concurrency", "0"}, "--concurrency"},
      {{"profiles", "frobnicate", "--server", server}, "frobnicate"},
      {{"curve", "--model", "gpt3-1.3b", "--global-batch", "64"}, "gpu_counts"},
      {{"curve", "--model", "gpt3-1.3b", "--global-batch", "64", "--gpu-counts", "8", "--policy",
        "fastest"},
       "--policy"},
      {{"curve", "--model", "gpt3-1.3b", "--global-batch", "64", "--gpu-counts", "8", "--format",
        "xml"},
       "--format"},
      {{"cluster-sim", "--gpus", "64"}, "--trace"},
      {{"plan-model", "--gpu", "a100-sxm4-80gb", "--days", "30"}, "--gpus"},
      {{"plan-model", "--gpus", "64"}, "--days"},
      {{"plan-model", "--gpus", "64", "--days", "-3"}, "--days"},
      {{"plan-model", "--gpus", "64", "--budget-usd", "1e6"}, "--price-usd-per-gpu-hour"},
      {{"plan-model", "--gpus", "64", "--days", "1", "--scaling-law", "kaplan"}, "--scaling-law"},
      {{"plan-model", "--gpus", "64", "--days", "1", "--min-params", "1e12", "--max-params", "1e9"},
       "--min-params"},
      {{"cluster-sim", "--trace", bad_json}, "bad.json: no jobs"},
      {{"cluster-sim", "--trace", bad_json, "--policy", "random"}, "bad.json"},
      {{"cluster-sim", "--trace", dir_.File("absent.csv")}, "absent.csv"},
  };
  for (const CliCase& c : cases) {
    const testing::ProcessResult r = Vtrainctl(c.args);
    const std::string what = absl::StrCat(c.args[0], " ", c.args.size() > 1 ? c.args[1] : "");
    EXPECT_EQ(r.exit_code, 2) << what << ": " << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << what << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << what << ": " << r.out;
  }
}

}  // namespace
}  // namespace vtrain::server
