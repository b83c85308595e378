// vtrainctl answers that must not pass for success: a search with no plan
// exits 1 and says why (in text and JSON), and a search that found one leaves
// out what was not asked for.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "client/commands.h"
#include "client/svg_plot.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/testing/vtrainctl.h"

namespace vtrain::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using Result = ::vtrain::testing::CliResult;
constexpr auto& Vtrainctl = ::vtrain::testing::RunVtrainctlInProcess;

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
  const Result r = Vtrainctl(
      {"search", "--model", "gpt3-1.3b", "--gpus", "8", "--global-batch", "64", "--threads", "1"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("best "));
  EXPECT_THAT(r.err, Not(HasSubstr("no plan")));
}

// A one-job ElasticFlow trace under $TMPDIR (8 GPUs for an hour, its
// deadline two hours on), its job named `id`; the caller removes it.
std::string OneJobTrace(const std::string& name, const std::string& id) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string path = std::string(tmp != nullptr ? tmp : "/tmp") + "/answers_" + name + "_" +
                           std::to_string(getpid()) + ".csv";
  std::ofstream(path) << "job_id,submission_time,num_iteration,model_name,deadline,batch_size,"
                         "num_gpu,duration\n"
                      << id << ",0,1000,resnet50,7200,64,8,3600\n";
  return path;
}

// Trace fields reach the JSON escaped: a job id with a quote and a
// backslash still gives a document that parses, holding the id as written.
TEST(AnswersTest, ClusterSimJsonEscapesTraceFields) {
  const std::string path = OneJobTrace("trace", "a\"b\\c");
  const Result r = Vtrainctl(
      {"cluster-sim", "--trace", path, "--gpus", "16", "--jobs", "1", "--threads", "1", "--json"});
  std::remove(path.c_str());
  ASSERT_EQ(r.code, 0) << r.err;
  google::protobuf::Struct doc;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(r.out, &doc).ok()) << r.out;
  // vtrainctl sends a study of one window: its outcomes are the window's.
  const auto& windows = doc.fields().at("windows").list_value();
  ASSERT_EQ(windows.values_size(), 1);
  const auto& outcomes = windows.values(0).struct_value().fields().at("outcomes").list_value();
  ASSERT_EQ(outcomes.values_size(), 2);  // elasticflow, vtrain
  const auto& jobs = outcomes.values(0).struct_value().fields().at("jobs").list_value();
  ASSERT_EQ(jobs.values_size(), 1);
  EXPECT_EQ(jobs.values(0).struct_value().fields().at("id").string_value(), "a\"b\\c");
}

// --sensitivity says so above the table, and a value out of range is refused
// naming the field and the flag.
TEST(AnswersTest, ClusterSimSensitivitySaysWhatRanAndRefusesARangeItCannotMean) {
  const std::string path = OneJobTrace("sensitivity", "j1");
  const Result ok = Vtrainctl({"cluster-sim", "--trace", path, "--gpus", "16", "--jobs", "1",
                               "--threads", "1", "--sensitivity", "0.001"});
  const Result bad = Vtrainctl({"cluster-sim", "--trace", path, "--gpus", "16", "--jobs", "1",
                                "--threads", "1", "--sensitivity", "2"});
  std::remove(path.c_str());
  ASSERT_EQ(ok.code, 0) << ok.err;
  EXPECT_THAT(ok.out, HasSubstr("sensitivity check: \"vtrain\" runs on the data-parallel tables "
                                "0.1% faster"));
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, HasSubstr("sensitivity=2 (--sensitivity) must be in [0, 0.5]"));
}

TEST(AnswersTest, UsageListsEveryCommand) {
  const Result r = Vtrainctl({"help"});
  EXPECT_EQ(r.code, 0);
  for (const char* c : {"predict", "presets", "search", "curve", "cluster-sim", "plan-model",
                        "trace", "profiles", "bench", "validate", "calibrate", "help"}) {
    EXPECT_THAT(r.out, HasSubstr(std::string("  ") + c + " ")) << c;
  }
  const Result unknown = Vtrainctl({"frobnicate"});
  EXPECT_EQ(unknown.code, 2);
  EXPECT_THAT(unknown.err, HasSubstr("unknown command 'frobnicate'"));
}

TEST(AnswersTest, CompareMarksTheRowsWherePlansDiffer) {
  const Result r = Vtrainctl({"compare", "--model", "gpt3-1.3b", "--gpus", "8", "--global-batch",
                              "64", "--", "--tp", "2", "--", "--tp", "4", "--micro-batch", "2"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("plan 1"));
  EXPECT_THAT(r.out, HasSubstr("plan 2"));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("\\* t +2 +4"));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("\\* d +4 +2"));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("\\* micro-batch +1 +2"));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("\n  gpus +8 +8"));  // the same: not marked
  EXPECT_THAT(r.out, HasSubstr("iteration ms"));
  // The difference has its own interval (the A100 set's paired band), and
  // each plan gets a verdict against the first.
  EXPECT_THAT(r.out, ::testing::ContainsRegex("vs first, 90% +- +[-+][0-9]+\\.\\.[-+][0-9]+%"));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("plan 2 vs plan 1: [-+][0-9.]+%, 90% interval "));
  EXPECT_THAT(r.out, HasSubstr("pairs of plans of one job"));
  // GPT-3 175B: 8x8x... pipeline against selective recomputation, 24% apart,
  // is outside the paired error; t4p32 against t8p16, 4% apart, within it.
  const Result far = Vtrainctl({"compare",     "--model",
                                "gpt3-175b",   "--gpus",
                                "512",         "--global-batch",
                                "1536",        "--micro-batch",
                                "1",           "--settings",
                                "paper",       "--",
                                "--tp",        "8",
                                "--pp",        "16",
                                "--",          "--tp",
                                "4",           "--pp",
                                "32",          "--",
                                "--tp",        "8",
                                "--pp",        "8",
                                "--recompute", "selective"});
  ASSERT_EQ(far.code, 0) << far.err;
  EXPECT_THAT(far.out,
              ::testing::ContainsRegex("plan 2 vs plan 1: [^\n]*: within the paired error"));
  EXPECT_THAT(far.out, ::testing::ContainsRegex("plan 3 vs plan 1: [^\n]*: faster\n"));
  // One plan is not a comparison; a bad plan is named.
  Result one = Vtrainctl({"compare", "--model", "gpt3-1.3b", "--gpus", "8", "--global-batch", "64",
                          "--", "--tp", "2"});
  EXPECT_EQ(one.code, 2);
  EXPECT_THAT(one.err, HasSubstr("two or more plans"));
  Result bad = Vtrainctl({"compare", "--model", "gpt3-1.3b", "--gpus", "8", "--global-batch", "64",
                          "--", "--tp", "2", "--", "--tp", "3"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, HasSubstr("plan 2: "));
}

// The predict table shows every plan option that is not the default, each
// stage's chunks under interleaving, and fp8 MFU against both peaks.
TEST(AnswersTest, PredictTableShowsThePlanAsGiven) {
  const Result r =
      Vtrainctl({"predict", "--model", "gpt3-1.3b", "--gpus", "8", "--tp", "2", "--pp", "2",
                 "--virtual-stages", "2", "--global-batch", "64", "--sequence-parallel", "on",
                 "--data-parallel-sharding", "optimizer"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("t=2 d=2 p=2 v=2"));
  EXPECT_THAT(r.out, HasSubstr("interleaved, sequence parallel, sharding optimizer"));
  // 24 layers in 2 x 2 chunks of 6: stage 0 holds 0-5 and 12-17.
  EXPECT_THAT(r.out, ::testing::ContainsRegex("\n +0  0-5,12-17 "));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("\n +1  6-11,18-23 "));
  const Result fp8 =
      Vtrainctl({"predict", "--model", "llama2-7b", "--gpu", "h100-sxm5-80gb", "--gpus", "8",
                 "--tp", "2", "--global-batch", "64", "--dtype", "fp8"});
  ASSERT_EQ(fp8.code, 0) << fp8.err;
  EXPECT_THAT(fp8.out, HasSubstr("of the fp8 peak; MFU"));
  EXPECT_THAT(fp8.out, HasSubstr("of the bf16 peak"));
}

// A count without a plan says why, and the plot leaves a gap there.
TEST(AnswersTest, CurvePointsWithoutAPlanSayWhy) {
  const Result dp =
      Vtrainctl({"curve", "--model", "gpt3-1.3b", "--global-batch", "64", "--gpu-counts", "8,24",
                 "--policy", "data-parallel", "--threads", "1"});
  ASSERT_EQ(dp.code, 0) << dp.err;
  EXPECT_THAT(dp.out, HasSubstr("24  no plan: global_batch=64 is not divisible by the "
                                "data-parallel degree d=24"));
  const Result best = Vtrainctl({"curve", "--model", "gpt3-1.3b", "--global-batch", "64",
                                 "--gpu-counts", "8,17", "--threads", "1"});
  ASSERT_EQ(best.code, 0) << best.err;
  // 17 GPUs: no pipeline depth tried (divisors of 24, 2..16, powers of two)
  // times a d that divides 64.
  EXPECT_THAT(best.out, HasSubstr("17  no plan: no combination of t, c, p, d and micro-batch"));
  const std::string svg =
      LinesSvg({{"s", {{1, 1}, {2, std::nan("")}, {3, 3}}, false}}, "t", "x", "y");
  // Two pieces: M to the first point, M again after the gap.
  EXPECT_EQ(svg.find("M", svg.find("M") + 1) != std::string::npos, true);
  EXPECT_THAT(svg, Not(HasSubstr(" L")));
}

// Trace slices say what they are: micro-batch, chunk, layers, and the bytes
// of each transfer and collective.
TEST(AnswersTest, TraceSlicesCarryTheirArguments) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string path = std::string(tmp != nullptr ? tmp : "/tmp") + "/answers_trace_" +
                           std::to_string(getpid()) + ".json";
  const Result r = Vtrainctl({"trace", "--model", "gpt3-1.3b", "--gpus", "16", "--tp", "2", "--pp",
                              "4", "--global-batch", "32", "-o", path});
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream in(path);
  const std::string json((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::remove(path.c_str());
  google::protobuf::Struct doc;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &doc).ok());
  bool forward = false, send = false;
  for (const google::protobuf::Value& e : doc.fields().at("traceEvents").list_value().values()) {
    const auto& f = e.struct_value().fields();
    if (f.at("ph").string_value() != "X") continue;
    const auto& args = f.at("args").struct_value().fields();
    if (f.at("name").string_value() == "forward" && f.at("pid").number_value() == 1 &&
        args.at("micro_batch").number_value() == 3) {
      forward = true;
      EXPECT_EQ(args.at("layers").string_value(), "6-11");  // 24 layers over 4 stages
      EXPECT_EQ(args.at("chunk").number_value(), 0);
    }
    if (f.at("name").string_value() == "pipeline_send_recv") {
      send = true;
      // micro-batch 1 x sequence 2048 x hidden 2048 x 2 bytes, scattered over t = 2.
      EXPECT_EQ(args.at("bytes").number_value(), 1 * 2048 * 2048 * 2 / 2);
    }
  }
  EXPECT_TRUE(forward);
  EXPECT_TRUE(send);
}

}  // namespace
}  // namespace vtrain::client
