// End-to-end tests of the vtrainctl binary (run as a child process with a
// time limit), and of its command dispatcher in-process.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/commands.h"
#include "core/predict/predictor.h"
#include "core/profile/default_profiles.h"
#include "core/spec/settings.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/json.h"
#include "tests/testing/spec_builders.h"
#include "tests/testing/subprocess.h"

namespace vtrain::client {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::vtrain::testing::ProcessResult;
using ::vtrain::testing::RunProcess;

std::string VtrainctlPath() {
  if (const char* path = std::getenv("VTRAIN_VTRAINCTL"); path != nullptr && *path != '\0') {
    return path;
  }
  return VTRAIN_TEST_VTRAINCTL;  // set by tests/CMakeLists.txt
}

ProcessResult RunBinary(const std::vector<std::string>& args) {
  absl::StatusOr<ProcessResult> r = RunProcess(VtrainctlPath(), args, /*timeout_s=*/120);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : ProcessResult{};
}

// The integer after "key": in a JSON document, or -1.
int64_t JsonInt(const std::string& json, const std::string& key) {
  const std::string prefix = "\"" + key + "\": ";
  const size_t at = json.find(prefix);
  if (at == std::string::npos) return -1;
  const size_t begin = at + prefix.size();
  size_t end = begin;
  while (end < json.size() && (std::isdigit(static_cast<unsigned char>(json[end])) ||
                               (end == begin && json[end] == '-'))) {
    ++end;
  }
  int64_t value = -1;
  if (!absl::SimpleAtoi(absl::string_view(json).substr(begin, end - begin), &value)) return -1;
  return value;
}

const std::vector<std::string> kGpt13b = {"predict",        "--local", "--model", "gpt3-1.3b",
                                          "--gpus",         "8",       "--tp",    "2",
                                          "--global-batch", "64"};

std::vector<std::string> With(std::vector<std::string> base, const std::vector<std::string>& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

TEST(VtrainctlEndToEndTest, PredictJson) {
  const ProcessResult r = RunBinary(With(kGpt13b, {"--json"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, IsEmpty());
  // The protobuf JSON mapping of PredictResponse: proto field names, enum
  // names, 64-bit integers as numbers, zero fields printed.
  EXPECT_THAT(r.out, AllOf(HasSubstr("\"iteration_time_ms\": "), HasSubstr("\"stages\": ["),
                           HasSubstr("\"granularity\": \"GRANULARITY_OPERATOR\""),
                           HasSubstr("\"data_parallel\": 4,"), HasSubstr("\"idle_ms\": 0,"),
                           HasSubstr("\"worst\": \"FIDELITY_ANALYTICAL\"")));
  EXPECT_EQ(r.out.front(), '{');
  EXPECT_EQ(r.out.substr(r.out.size() - 2), "}\n");
  EXPECT_GT(JsonInt(r.out, "iteration_time_ns"), 0);
  v1::PredictResponse parsed;
  ASSERT_TRUE(proto::FromJson(r.out, &parsed).ok());
  EXPECT_EQ(parsed.model().preset(), "gpt3-1.3b");
  EXPECT_EQ(parsed.plan().data_parallel(), 4);
  EXPECT_EQ(parsed.iteration_time_ns(), JsonInt(r.out, "iteration_time_ns"));
  EXPECT_EQ(proto::ToJson(parsed), r.out) << "printing is deterministic and lossless";
  EXPECT_EQ(parsed.profile_set_id().rfind("sha256:", 0), 0u) << parsed.profile_set_id();
}

TEST(VtrainctlEndToEndTest, KernelGranularityGivesTheSameIterationTime) {
  const ProcessResult op = RunBinary(With(kGpt13b, {"--json"}));
  const ProcessResult kernel = RunBinary(With(kGpt13b, {"--json", "--granularity", "kernel"}));
  ASSERT_EQ(op.exit_code, 0) << op.err;
  ASSERT_EQ(kernel.exit_code, 0) << kernel.err;
  EXPECT_THAT(kernel.out, HasSubstr("\"granularity\": \"GRANULARITY_KERNEL\""));
  const int64_t op_ns = JsonInt(op.out, "iteration_time_ns");
  EXPECT_GT(op_ns, 0);
  EXPECT_EQ(JsonInt(kernel.out, "iteration_time_ns"), op_ns);
  EXPECT_GT(JsonInt(kernel.out, "num_tasks"), JsonInt(op.out, "num_tasks"));
}

TEST(VtrainctlEndToEndTest, FlagsMapToTheSameJobAsTheLibrary) {
  // The flags of kGpt13b describe Gpt13bJob(): gpt3-1.3b, t=2, d=8/2=4, p=1,
  // micro-batch 1, global batch 64, A100-80GB defaults.
  const ProcessResult r = RunBinary(With(kGpt13b, {"--json"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Nothing but the plan given: the tuned settings fill the rest.
  Job job = vtrain::testing::Gpt13bJob();
  FillSettings(GivenSettings{}, job);
  EXPECT_EQ(job.plan.dtype, DType::kBf16);
  EXPECT_EQ(job.plan.recompute, Recompute::kNone);
  EXPECT_TRUE(job.plan.tp_comm_overlap);
  absl::StatusOr<Prediction> p = Predict(job, DefaultProfileSet(job.cluster.gpu));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(JsonInt(r.out, "iteration_time_ns"), p->iteration_time_ns);
  // The paper's settings are the library job's own (fp16, full
  // recomputation), with the paper's unfused attention.
  const ProcessResult paper = RunBinary(With(kGpt13b, {"--settings", "paper", "--json"}));
  ASSERT_EQ(paper.exit_code, 0) << paper.err;
  Job paper_job = vtrain::testing::Gpt13bJob();
  paper_job.model.attention_impl = AttentionImpl::kUnfused;
  p = Predict(paper_job, DefaultProfileSet(paper_job.cluster.gpu));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(JsonInt(paper.out, "iteration_time_ns"), p->iteration_time_ns);
}

TEST(VtrainctlEndToEndTest, TrainingOptionFlagsMapToTheJobAndBadValuesNameTheFlag) {
  // gpt3-1.3b on 16 GPUs: t=2, c=2, p=2, d=2; 24 layers over 2 * 2 chunks;
  // 64 / 2 = 32 micro-batches, a multiple of p.
  const std::vector<std::string> flags = {"predict",
                                          "--local",
                                          "--model",
                                          "gpt3-1.3b",
                                          "--gpus",
                                          "16",
                                          "--tp",
                                          "2",
                                          "--pp",
                                          "2",
                                          "--cp",
                                          "2",
                                          "--global-batch",
                                          "64",
                                          "--virtual-stages",
                                          "2",
                                          "--sequence-parallel",
                                          "on",
                                          "--recompute",
                                          "selective",
                                          "--data-parallel-sharding",
                                          "optimizer",
                                          "--json"};
  const ProcessResult r = RunBinary(flags);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Job job = vtrain::testing::Gpt13bJob();
  job.cluster.num_gpus = 16;
  job.plan.pipeline_parallel = 2;
  job.plan.context_parallel = 2;
  job.plan.data_parallel = 2;
  job.plan.virtual_stages = 2;
  job.plan.sequence_parallel = true;
  job.plan.recompute = Recompute::kSelective;
  job.plan.data_parallel_sharding = DataParallelSharding::kOptimizer;
  GivenSettings given;
  given.sequence_parallel = given.recompute = given.sharding = true;
  FillSettings(given, job);
  absl::StatusOr<Prediction> p = Predict(job, DefaultProfileSet(job.cluster.gpu));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(JsonInt(r.out, "iteration_time_ns"), p->iteration_time_ns);
  const ProcessResult bad_sp = RunBinary(With(kGpt13b, {"--sequence-parallel", "yes"}));
  EXPECT_EQ(bad_sp.exit_code, common::kExitBadInput);
  EXPECT_THAT(bad_sp.err, HasSubstr("--sequence-parallel"));
  const ProcessResult bad_shard = RunBinary(With(kGpt13b, {"--data-parallel-sharding", "zero2"}));
  EXPECT_EQ(bad_shard.exit_code, common::kExitBadInput);
  EXPECT_THAT(bad_shard.err, HasSubstr("plan.data_parallel_sharding='zero2'"));
  const ProcessResult bad_v = RunBinary(With(kGpt13b, {"--virtual-stages", "2"}));
  EXPECT_EQ(bad_v.exit_code, common::kExitBadInput);
  EXPECT_THAT(bad_v.err, HasSubstr("plan.virtual_stages=2"));
}

TEST(VtrainctlEndToEndTest, HumanReadableTable) {
  const ProcessResult r =
      RunBinary(With(kGpt13b, {"--tokens", "1e9", "--price-usd-per-gpu-hour", "2"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, AllOf(HasSubstr("iteration time"), HasSubstr("MFU"), HasSubstr("training"),
                           HasSubstr("analytical")));
}

TEST(VtrainctlEndToEndTest, TensorParallelNotDividingHeadsIsBadInput) {
  // 16 heads; t = 3 on 6 GPUs (d = 2).
  const ProcessResult r = RunBinary({"predict", "--local", "--model", "gpt3-1.3b", "--gpus", "6",
                                     "--tp", "3", "--global-batch", "64"});
  EXPECT_EQ(r.exit_code, common::kExitBadInput);
  EXPECT_THAT(r.err, HasSubstr("plan.tensor_parallel=3"));
  EXPECT_THAT(r.out, IsEmpty());
}

TEST(VtrainctlEndToEndTest, GpusNotDivisibleByTpIsBadInput) {
  const ProcessResult r = RunBinary({"predict", "--local", "--model", "gpt3-1.3b", "--gpus", "8",
                                     "--tp", "3", "--global-batch", "64"});
  EXPECT_EQ(r.exit_code, common::kExitBadInput);
  EXPECT_THAT(r.err, AllOf(HasSubstr("cluster.num_gpus=8"), HasSubstr("--tp")));
}

TEST(VtrainctlEndToEndTest, UnknownFlagIsBadInput) {
  const ProcessResult r = RunBinary(With(kGpt13b, {"--bogus", "1"}));
  EXPECT_EQ(r.exit_code, common::kExitBadInput);
  EXPECT_THAT(r.err, HasSubstr("unknown flag --bogus"));
}

TEST(VtrainctlEndToEndTest, BandwidthWithoutUnitIsBadInput) {
  const ProcessResult r = RunBinary(With(kGpt13b, {"--intra-node-bandwidth", "150"}));
  EXPECT_EQ(r.exit_code, common::kExitBadInput);
  EXPECT_THAT(r.err, AllOf(HasSubstr("--intra-node-bandwidth='150'"), HasSubstr("unit")));
}

TEST(VtrainctlEndToEndTest, UnknownPresetIsBadInputListingNames) {
  const ProcessResult r =
      RunBinary({"predict", "--model", "gpt5", "--gpus", "8", "--global-batch", "64"});
  EXPECT_EQ(r.exit_code, common::kExitBadInput);
  EXPECT_THAT(r.err, AllOf(HasSubstr("'gpt5'"), HasSubstr("gpt3-175b")));
}

TEST(VtrainctlEndToEndTest, MissingGlobalBatchIsBadInput) {
  const ProcessResult r = RunBinary({"predict", "--model", "gpt3-1.3b", "--gpus", "8"});
  EXPECT_EQ(r.exit_code, common::kExitBadInput);
  EXPECT_THAT(r.err, HasSubstr("--global-batch"));
}

TEST(VtrainctlEndToEndTest, TinyMaxTasksIsAFailureNotBadInput) {
  const ProcessResult r = RunBinary(With(kGpt13b, {"--max-tasks", "10"}));
  EXPECT_EQ(r.exit_code, common::kExitFailure);
  EXPECT_THAT(r.err, HasSubstr("max_tasks=10"));
}

TEST(VtrainctlEndToEndTest, PresetsListsModelsAndGpus) {
  const ProcessResult r = RunBinary({"presets"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, AllOf(HasSubstr("gpt3-175b"), HasSubstr("mtnlg-530b"),
                           HasSubstr("a100-sxm4-80gb"), HasSubstr("v100-sxm2-32gb")));
}

TEST(VtrainctlEndToEndTest, UsageErrors) {
  const ProcessResult none = RunBinary({});
  EXPECT_EQ(none.exit_code, common::kExitBadInput);
  EXPECT_THAT(none.err, HasSubstr("usage: vtrainctl"));
  const ProcessResult unknown = RunBinary({"train"});
  EXPECT_EQ(unknown.exit_code, common::kExitBadInput);
  EXPECT_THAT(unknown.err, HasSubstr("unknown command 'train'"));
  const ProcessResult help = RunBinary({"help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("predict"));
  const ProcessResult predict_help = RunBinary({"predict", "--help"});
  EXPECT_EQ(predict_help.exit_code, 0);
  EXPECT_THAT(predict_help.out, AllOf(HasSubstr("--global-batch"), HasSubstr("--granularity")));
}

TEST(VtrainctlInProcessTest, DispatcherReturnsExitCodesAndWritesStreams) {
  std::ostringstream out, err;
  EXPECT_EQ(RunVtrainctl({"presets"}, out, err), common::kExitOk);
  EXPECT_THAT(out.str(), HasSubstr("gpt3-175b"));
  EXPECT_THAT(err.str(), IsEmpty());

  std::ostringstream out2, err2;
  EXPECT_EQ(RunVtrainctl(
                {"predict", "--local", "--layers", "4", "--hidden", "64", "--heads", "4",
                 "--seq-len", "128", "--gpus", "2", "--tp", "2", "--global-batch", "4", "--json"},
                out2, err2),
            common::kExitOk)
      << err2.str();
  EXPECT_GT(JsonInt(out2.str(), "iteration_time_ns"), 0);
  EXPECT_THAT(out2.str(), HasSubstr("\"preset\": \"\","));
  EXPECT_THAT(out2.str(), HasSubstr("\"hidden_size\": 64,"));

  std::ostringstream out3, err3;
  EXPECT_EQ(
      RunVtrainctl({"predict", "--model", "gpt3-125m", "--global-batch", "8", "--dtype", "fp4"},
                   out3, err3),
      common::kExitBadInput);
  EXPECT_THAT(err3.str(), HasSubstr("plan.dtype='fp4'"));
  // fp8 parses but the default A100 has no fp8 tensor cores.
  std::ostringstream out4, err4;
  EXPECT_EQ(
      RunVtrainctl({"predict", "--model", "gpt3-125m", "--global-batch", "8", "--dtype", "fp8"},
                   out4, err4),
      common::kExitBadInput);
  EXPECT_THAT(err4.str(), HasSubstr("plan.dtype=fp8 is not supported by GPU 'a100-sxm4-80gb'"));
  EXPECT_THAT(out3.str(), IsEmpty());
}

}  // namespace
}  // namespace vtrain::client

namespace vtrain::client {
namespace {

std::string CliTempPath(const std::string& name) {
  const char* dir = std::getenv("TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/vtrainctl_test_", getpid(), "_", name);
}

void WriteText(const std::string& path, const std::string& text) {
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs(text.c_str(), f);
  std::fclose(f);
}

TEST(VtrainctlFilesTest, JobFileAndVtrainConfigGiveTheFlagsResult) {
  const ProcessResult flags = RunBinary(With(kGpt13b, {"--json"}));
  const std::string job = CliTempPath("job.json");
  WriteText(job, R"({"model":{"preset":"gpt3-1.3b"},"cluster":{"num_gpus":8},)"
                 R"("plan":{"tensor_parallel":2,"global_batch":64}})");
  const ProcessResult from_job = RunBinary({"predict", "-f", job, "--json"});
  EXPECT_EQ(from_job.exit_code, 0) << from_job.err;
  EXPECT_EQ(JsonInt(from_job.out, "iteration_time_ns"), JsonInt(flags.out, "iteration_time_ns"));

  const std::string config = CliTempPath("vtrain.json");
  WriteText(config, R"({"num_gpus": 8, "tensor_parallel_size": 2, "data_parallel_size": 4,
    "pipeline_parallel_size": 1, "global_batch_size": 64, "micro_batch_size": 1,
    "num_layers": 24, "hidden_size": 2048, "num_attention_heads": 16, "max_length": 2048,
    "vocab_size": 50257, "use_checkpoint": true, "use_gradient_bucket": false,
    "ddp_bucket_size": 25, "inter_node_bandwidth": 800, "intra_node_bandwidth": 150,
    "pipeline_scheduling": "1f1b", "node_size": 8, "gpu_name": "A100"})");
  const ProcessResult from_config = RunBinary({"predict", "--vtrain-config", config, "--json"});
  EXPECT_EQ(from_config.exit_code, 0) << from_config.err;
  // vTrain's files are the paper's runs: its settings (fp16, full
  // recomputation, unfused attention).
  const ProcessResult unfused = RunBinary(With(kGpt13b, {"--settings", "paper", "--json"}));
  EXPECT_EQ(JsonInt(from_config.out, "iteration_time_ns"),
            JsonInt(unfused.out, "iteration_time_ns"));
  // Flash attention, the default, is faster on this GPT shape.
  EXPECT_LT(JsonInt(flags.out, "iteration_time_ns"), JsonInt(unfused.out, "iteration_time_ns"));

  // A job file with a bad field, and a file combined with job flags: bad input.
  WriteText(job,
            R"({"model":{"preset":"gpt3-1.3b"},"plan":{"tensor_parallel":3,"global_batch":64}})");
  const ProcessResult bad = RunBinary({"predict", "-f", job});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("plan.tensor_parallel"));
  // Job flags are laid over a file and win: the file's t=3 becomes 2.
  const ProcessResult mixed =
      RunBinary({"predict", "-f", job, "--tp", "2", "--gpus", "8", "--json"});
  EXPECT_EQ(mixed.exit_code, 0) << mixed.err;
  EXPECT_EQ(JsonInt(mixed.out, "iteration_time_ns"), JsonInt(flags.out, "iteration_time_ns"));
  WriteText(job, R"({"model":{"preset":"gpt3-1.3b"},"plan":{"global_batch":64}})");
  for (const char* flag : {"--recompute", "--dtype", "--gpu"}) {
    const char* value = std::string(flag) == "--recompute" ? "full"
                        : std::string(flag) == "--dtype"   ? "fp16"
                                                           : "h100-sxm5-80gb";
    const ProcessResult over =
        RunBinary({"predict", "-f", job, flag, value, "--gpus", "8", "--json"});
    EXPECT_EQ(over.exit_code, 0) << flag << ": " << over.err;
    EXPECT_THAT(over.out,
                HasSubstr(std::string(flag) == "--gpu"     ? "\"gpu\": \"h100-sxm5-80gb\""
                          : std::string(flag) == "--dtype" ? "\"dtype\": \"DTYPE_FP16\""
                                                           : "\"recompute\": \"RECOMPUTE_FULL\""))
        << flag;
  }
  EXPECT_EQ(RunBinary({"predict", "-f", job, "--node-failure-rate", "3"}).exit_code, 0);
  WriteText(config, R"({"num_layers": "many"})");
  const ProcessResult bad_config = RunBinary({"predict", "--vtrain-config", config});
  EXPECT_EQ(bad_config.exit_code, 2);
  EXPECT_THAT(bad_config.err, HasSubstr("num_layers"));
  std::remove(job.c_str());
  std::remove(config.c_str());
}

TEST(VtrainctlFilesTest, TraceWritesChromeTraceEvents) {
  const std::string path = CliTempPath("trace.json");
  const ProcessResult r = RunBinary({"trace", "--model", "gpt3-1.3b", "--gpus", "16", "--tp", "2",
                                     "--pp", "4", "--global-batch", "32", "-o", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  FILE* f = std::fopen(path.c_str(), "r");
  ASSERT_NE(f, nullptr);
  std::string text;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
  std::fclose(f);
  std::remove(path.c_str());
  EXPECT_THAT(text, HasSubstr("\"traceEvents\""));
  EXPECT_THAT(text, HasSubstr("\"ph\":\"X\""));
  EXPECT_THAT(text, HasSubstr("\"name\":\"stage 3\""));
  EXPECT_THAT(text, HasSubstr("pipeline_send_recv"));
  EXPECT_THAT(r.out, HasSubstr("slices"));
}

TEST(VtrainctlSearchTest, SearchFindsPlansAndPrintsCsv) {
  const ProcessResult r = RunBinary(
      {"search", "--model", "gpt3-1.3b", "--global-batch", "64", "--max-gpus", "16", "--csv"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("tensor_parallel,data_parallel,pipeline_parallel"));
  EXPECT_GT(std::count(r.out.begin(), r.out.end(), '\n'), 5);
  // The training-option lists widen the space; the options show in the CSV.
  const ProcessResult wide =
      RunBinary({"search", "--model", "gpt3-1.3b", "--global-batch", "64", "--gpus", "8", "--csv",
                 "--sequence-parallel-values", "off,on", "--sharding-values", "none,optimizer",
                 "--recompute-values", "full,selective"});
  ASSERT_EQ(wide.exit_code, 0) << wide.err;
  EXPECT_THAT(wide.out, AllOf(HasSubstr("data_parallel_sharding"), HasSubstr(",optimizer"),
                              HasSubstr(",selective,")));
  const ProcessResult bad_list = RunBinary({"search", "--model", "gpt3-1.3b", "--global-batch",
                                            "64", "--gpus", "8", "--sharding-values", "zero9"});
  EXPECT_EQ(bad_list.exit_code, 2);
  EXPECT_THAT(bad_list.err, HasSubstr("--sharding-values"));
  const ProcessResult bad = RunBinary({"search", "--model", "gpt3-1.3b", "--global-batch", "64"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--gpus"));
}

}  // namespace
}  // namespace vtrain::client

namespace vtrain::client {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(VtrainctlCurveTest, PlotsBothPoliciesAndPrintsTheElasticFlowTable) {
  const std::string svg = CliTempPath("curve.svg");
  const ProcessResult r =
      RunBinary({"curve", "--model", "gpt3-1.3b", "--global-batch", "64", "--gpu-counts", "8,16,32",
                 "--compare", "--plot", svg, "--format", "elasticflow"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // ElasticFlow's file, once per policy: GPU counts across, a global batch down.
  EXPECT_THAT(r.out, HasSubstr("global_batch_size,8,16,32\n64,"));
  const std::string text = Slurp(svg);
  std::remove(svg.c_str());
  EXPECT_EQ(text.rfind("<svg", 0), 0u);
  EXPECT_THAT(text, HasSubstr("gpt3-1.3b (data-parallel)"));
  EXPECT_THAT(text, HasSubstr("gpt3-1.3b (best)"));
  size_t paths = 0;
  for (size_t at = text.find("<path"); at != std::string::npos; at = text.find("<path", at + 1)) {
    ++paths;
  }
  EXPECT_EQ(paths, 2u) << "one line per policy";
}

}  // namespace
}  // namespace vtrain::client

namespace vtrain::client {
namespace {

// plan-model's inverse question: the fewest GPUs that train a model of about
// N parameters on T tokens in D days; more days never need more GPUs.
TEST(VtrainctlPlanModelTest, TheInverseQuestionFindsTheFewestGpus) {
  auto gpus_for = [](const char* days) -> int64_t {
    const ProcessResult r = RunBinary({"plan-model", "--params", "6.7e9", "--tokens", "1e11",
                                       "--days", days, "--gpus", "512", "--global-batch", "512"});
    if (r.exit_code != 0) return -1;
    const size_t at = r.out.find(" GPUs ");
    const size_t on = r.out.rfind(" on ", at);
    int64_t n = -1;
    if (at == std::string::npos || on == std::string::npos ||
        !absl::SimpleAtoi(r.out.substr(on + 4, at - on - 4), &n)) {
      return -1;
    }
    return n;
  };
  const int64_t ten = gpus_for("10");
  const int64_t forty = gpus_for("40");
  ASSERT_GT(ten, 0);
  ASSERT_GT(forty, 0);
  EXPECT_LE(forty, ten);
  const ProcessResult impossible = RunBinary(
      {"plan-model", "--params", "6.7e9", "--tokens", "1e11", "--days", "0.0001", "--gpus", "64"});
  EXPECT_EQ(impossible.exit_code, 1);
  EXPECT_THAT(impossible.out, HasSubstr("infeasible: on up to 64 GPUs"));
  // Under --json the infeasible answer is JSON too, with the reason; still exit 1.
  const ProcessResult json = RunBinary({"plan-model", "--params", "6.7e9", "--tokens", "1e11",
                                        "--days", "0.0001", "--gpus", "64", "--json"});
  EXPECT_EQ(json.exit_code, 1);
  EXPECT_THAT(json.out, HasSubstr("\"feasible\": false"));
  EXPECT_THAT(json.out, HasSubstr("\"reason\": \"on up to 64 GPUs"));
  // The Llama family in bf16, over the same RPC message.
  const ProcessResult llama = RunBinary({"plan-model", "--family", "llama", "--dtype", "bf16",
                                         "--gpu", "h100-sxm5-80gb", "--params", "8e9", "--tokens",
                                         "1e12", "--days", "30", "--gpus", "1024", "--json"});
  ASSERT_EQ(llama.exit_code, 0) << llama.err;
  EXPECT_THAT(llama.out, HasSubstr("\"feasible\": true"));
  EXPECT_THAT(llama.out, HasSubstr("\"arch\": \"ARCHITECTURE_LLAMA\""));
  EXPECT_THAT(llama.out, HasSubstr("\"dtype\": \"DTYPE_BF16\""));
  // The forward question with no answer exits 1 too, its JSON without "optimal".
  const ProcessResult none = RunBinary({"plan-model", "--gpus", "8", "--days", "0.001",
                                        "--min-params", "1e11", "--max-params", "2e11", "--json"});
  EXPECT_EQ(none.exit_code, 1) << none.err;
  EXPECT_THAT(none.out, Not(HasSubstr("\"optimal\"")));
  EXPECT_THAT(none.out, HasSubstr("\"candidates\""));
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"plan-model", "--gpus", "64", "--days", "1", "--family", "bert"},
        {"plan-model", "--gpus", "64", "--days", "1", "--params", "7e9"},
        {"plan-model", "--gpus", "64", "--days", "1", "--dtype", "fp4"}}) {
    const ProcessResult r = RunBinary(bad);
    EXPECT_EQ(r.exit_code, 2) << absl::StrJoin(bad, " ");
  }
}

TEST(VtrainctlPlanModelTest, PlotsTheBudgetTheLineAndBothAnswers) {
  const std::string svg = CliTempPath("plan.svg");
  const ProcessResult r =
      RunBinary({"plan-model", "--gpus", "64", "--days", "1", "--min-params", "3e8", "--max-params",
                 "8e9", "--global-batch", "256", "--plot", svg});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string text = Slurp(svg);
  std::remove(svg.c_str());
  EXPECT_THAT(text, HasSubstr("tokens trainable in the budget"));
  EXPECT_THAT(text, HasSubstr("D = 20 N"));
  EXPECT_THAT(text, HasSubstr("naive: "));
  EXPECT_THAT(text, HasSubstr("compute-optimal: "));
}

}  // namespace
}  // namespace vtrain::client
