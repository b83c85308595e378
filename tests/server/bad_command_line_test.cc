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
  // A job file and a vTrain configuration with one defect each, and a
  // one-job cluster trace (ITP columns).
  const std::string twice = dir_.File("twice.json");
  std::ofstream(twice) << R"({"model": {"preset": "gpt3-1.3b"}, "cluster": {"num_gpus": 8},
      "plan": {"global_batch": 64, "globalBatch": 32}})";
  const std::string zero_tp = dir_.File("zero_tp.json");
  std::ofstream(zero_tp) << R"({"model": {"preset": "gpt3-1.3b"}, "cluster": {"num_gpus": 8},
      "plan": {"global_batch": 64, "tensor_parallel": 0}})";
  const std::string config_base =
      R"("num_gpus": 8, "tensor_parallel_size": 1, "data_parallel_size": 8,
      "pipeline_parallel_size": 1, "global_batch_size": 64, "micro_batch_size": 1,
      "num_layers": 2, "hidden_size": 256, "num_attention_heads": 4, "max_length": 128)";
  const std::string misspelt = dir_.File("misspelt.json");
  std::ofstream(misspelt) << "{" << config_base << R"(, "micro_batch_sizee": 2})";
  const std::string string_flag = dir_.File("string_flag.json");
  std::ofstream(string_flag) << "{" << config_base << R"(, "use_checkpoint": "false"})";
  const std::string number_schedule = dir_.File("number_schedule.json");
  std::ofstream(number_schedule) << "{" << config_base << R"(, "pipeline_scheduling": 1})";
  const std::string trace = dir_.File("trace.csv");
  std::ofstream(trace) << "job_id,submission_time,num_iteration,model_name,deadline,batch_size,"
                          "num_gpu,duration\n1,0,1000,resnet50,7200,64,8,3600\n";
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
      {Concat({"predict", "--attention-impl", "sdpa"}, job), "--attention-impl"},
      {Concat({"predict", "--nodes-per-leaf", "2", "--placement", "scattered"}, job),
       "--placement"},
      {Concat({"predict", "--placement", "spread"}, job), "--nodes-per-leaf"},
      {Concat({"predict", "--nodes-per-leaf", "2", "--oversubscription", "0"}, job),
       "cluster.fabric.oversubscription"},
      {Concat({"predict", "--nodes-per-leaf", "1", "--cluster-nodes", "0.5"}, job),
       "--cluster-nodes"},
      {{"predict", "--model", "deepseek-v3", "--attention-impl", "unfused", "--gpus", "8",
        "--global-batch", "64"},
       "model.attention_impl=unfused"},
      {{"plan-model", "--gpus", "64", "--days", "10", "--attention-impl", "naive"},
       "--attention-impl"},
      {Concat({"predict", "--dtype", "fp8"}, job), "plan.dtype"},
      {Concat({"predict", "--gradient-bucketing", "maybe"}, job), "--gradient-bucketing"},
      {Concat({"predict", "--tp-comm-overlap", "yes"}, job), "--tp-comm-overlap"},
      {Concat({"predict", "--cp-comm", "ring"}, job), "plan.cp_comm='ring' is unknown"},
      {Concat({"predict", "--fp8-recipe", "tensorwise"}, job), "plan.fp8_recipe='tensorwise'"},
      {Concat({"predict", "--cp-a2a-size", "0"}, job), "plan.cp_a2a_size=0 (--cp-a2a-size)"},
      {Concat({"predict", "--nvlink-domain", "0"}, job),
       "cluster.nvlink_domain=0 (--nvlink-domain)"},
      {Concat({"predict", "--gpus-per-node", "4", "--nvlink-domain", "6"}, job),
       "cluster.nvlink_domain=6 is not a multiple"},
      {Concat({"predict", "--overlap-param-gather", "on", "--data-parallel-sharding", "none"}, job),
       "plan.param_gather_overlap=on needs plan.data_parallel_sharding=optimizer"},
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
      {{"search", "--model", "gpt3-1.3b", "--global-batch", "64", "--max-gpus", "8",
        "--overlap-param-gather", "sometimes"},
       "--overlap-param-gather"},
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
      {Concat({"predict", "--node-failure-rate", "-2"}, job), "--node-failure-rate"},
      {Concat({"predict", "--async-checkpoint", "yes"}, job), "--async-checkpoint='yes'"},
      {Concat({"predict", "--checkpoint-gbps", "fast"}, job), "--checkpoint-gbps"},
      {{"search", "--model", "gpt3-1.3b", "--global-batch", "64", "--max-gpus", "16",
        "--restart-minutes", "-1"},
       "--restart-minutes"},
      {{"plan-model", "--gpus", "64", "--days", "1", "--scaling-law", "kaplan"}, "--scaling-law"},
      {{"plan-model", "--gpus", "64", "--days", "1", "--min-params", "1e12", "--max-params", "1e9"},
       "--min-params"},
      {{"cluster-sim", "--trace", bad_json}, "bad.json: no jobs"},
      {{"cluster-sim", "--trace", bad_json, "--policy", "random"}, "bad.json"},
      {{"cluster-sim", "--trace", dir_.File("absent.csv")}, "absent.csv"},
      // A given 0 is refused, never read as "the default" (issue 28).
      {Concat({"predict", "--tp", "0"}, job), "plan.tensor_parallel=0"},
      {Concat({"predict", "--pp", "0"}, job), "plan.pipeline_parallel=0"},
      {Concat({"predict", "--micro-batch", "0"}, job), "plan.micro_batch=0"},
      {Concat({"predict", "--seq-len", "0"}, job), "model.seq_len=0"},
      {{"predict", "--model", "gpt3-1.3b", "--gpus", "0", "--global-batch", "64"},
       "cluster.num_gpus=0"},
      {{"predict", "--model", "gpt3-1.3b", "--gpus", "8", "--global-batch", "0"},
       "plan.global_batch=0 (--global-batch) must be at least 1"},
      {Concat({"predict", "--server", server, "--tp", "0"}, job), "plan.tensor_parallel=0"},
      {{"predict", "-f", zero_tp}, "plan.tensor_parallel=0"},
      {{"predict", "-f", twice}, "'plan.globalBatch' appears twice"},
      {{"predict", "--vtrain-config", misspelt}, "unknown key 'micro_batch_sizee'"},
      {{"predict", "--vtrain-config", string_flag}, "'use_checkpoint' must be true or false"},
      {{"predict", "--vtrain-config", number_schedule}, "'pipeline_scheduling' must be a string"},
      // Bounded, regular-file reads; ranges checked before use.
      {{"predict", "-f", "/dev/zero"}, "not a regular file"},
      {{"predict", "-f", dir_.File("")}, "is a directory"},
      {Concat({"predict", "--bucket-size", "1e30B"}, job), "out of range"},
      {Concat({"predict", "--max-tasks", "-1"}, job), "--max-tasks=-1"},
      {{"search", "--model", "gpt3-1.3b", "--global-batch", "64", "--gpus", "8", "--threads", "-5"},
       "--threads=-5"},
      {{"curve", "--model", "gpt3-1.3b", "--global-batch", "64", "--gpu-counts", "8", "--threads",
        "0"},
       "--threads=0"},
      {{"cluster-sim", "--trace", trace, "--gpus", "4"}, "at least one node"},
      {{"cluster-sim", "--trace", trace, "--windows", "1e30"}, "--windows='1e30'"},
      {{"cluster-sim", "--trace", trace, "--windows", "128@5-1"}, "--windows='5-1'"},
      {{"cluster-sim", "--trace", trace, "--jobs", "0"}, "study.windows[0]"},
      {{"cluster-sim", "--trace", trace, "--job-mix", "2027"}, "--job-mix='2027' is unknown"},
      {{"cluster-sim", "--trace", trace, "--gpus", "128,x"}, "--gpus='128,x'"},
      {{"cluster-sim", "--trace", trace, "--seed", "1", "--seeds", "1-3"}, "not both"},
      {{"cluster-sim", "--trace", trace, "--seeds", "1-3", "--csv"}, "draw one window"},
      {Concat({"predict", "--settings", "nemo"}, job),
       "plan.settings='nemo' is unknown; use tuned, megatron-defaults or paper"},
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
