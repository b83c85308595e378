// The GPU agent's plain C++ parts on fixtures the tests write themselves:
// record-to-table reduction, profile-set JSON (parsed back by protobuf and
// validated like a push), sanity checks, the injection library's
// configuration, the operator names it shares with core, and the built
// vtrain-agent-gpu on a machine without a GPU.
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "core/profile/profile.h"
#include "gtest/gtest.h"
#include "profiler_agent/gpu/checks.h"
#include "profiler_agent/gpu/inject_config.h"
#include "profiler_agent/gpu/operator_names.h"
#include "profiler_agent/gpu/profile_json.h"
#include "profiler_agent/gpu/trace.h"
#include "proto/convert.h"
#include "tests/testing/subprocess.h"

namespace vtrain::gpu {
namespace {

// A recorded session: `reps` repetitions of an operator "attention_fwd"
// (three kernels: gemm, softmax, gemm) and "mlp_fwd" (two kernels), each
// launched inside its own range on thread 7, kernels 100 ns after launch.
// Durations grow with the repetition so medians are checkable.
struct Recording {
  Trace trace;
  uint32_t next_corr = 1;
  uint64_t clock = 1'000'000;

  void Op(const std::string& name, const std::vector<std::pair<std::string, uint64_t>>& kernels,
          uint64_t gap_ns, uint64_t thread = 7) {
    const uint64_t start = clock;
    uint64_t gpu = clock + 100;
    for (const auto& [kname, duration] : kernels) {
      const uint32_t corr = next_corr++;
      trace.launches.push_back({corr, clock + 10, clock + 20, thread});
      trace.kernels.push_back({kname, gpu, gpu + duration, 7, corr});
      gpu += duration + gap_ns;
      clock += 30;
    }
    trace.ranges.push_back({name, start, clock + 5, thread});
    clock = gpu + 1000;
  }
};

TEST(ReduceTest, MediansAndGapsPerKernelPosition) {
  Recording r;
  for (uint64_t rep = 0; rep < 5; ++rep) {
    r.Op("attention_fwd", {{"gemm_qkv", 1000 + 10 * rep}, {"softmax", 300}, {"gemm_out", 800}},
         /*gap_ns=*/50 + rep);
    r.Op("mlp_fwd", {{"gemm_up", 2000}, {"gelu", 400 - rep}}, 20);
  }
  ReduceResult result = Reduce(r.trace);
  ASSERT_TRUE(result.error.empty()) << result.error;
  ASSERT_EQ(result.tables.size(), 2u);
  const OperatorTable& att = result.tables[0];
  EXPECT_EQ(att.op, "attention_fwd");
  EXPECT_EQ(att.repetitions, 5);
  EXPECT_EQ(att.consistent, 5);
  ASSERT_EQ(att.kernels.size(), 3u);
  EXPECT_EQ(att.kernels[0].name, "gemm_qkv");
  EXPECT_EQ(att.kernels[0].duration_ns, 1020);  // median of 1000..1040
  EXPECT_EQ(att.kernels[0].duration_min_ns, 1000);
  EXPECT_EQ(att.kernels[0].duration_max_ns, 1040);
  EXPECT_EQ(att.kernels[0].gap_ns, 52);  // median of 50..54
  EXPECT_EQ(att.kernels[2].gap_ns, 0);   // the last kernel of a range
  // Totals 2100..2140, median 2120: spread 40 / 2120.
  EXPECT_NEAR(att.spread, 40.0 / 2120.0, 1e-12);
  EXPECT_EQ(result.tables[1].op, "mlp_fwd");
  EXPECT_EQ(result.tables[1].kernels[1].duration_ns, 398);
  EXPECT_EQ(result.unattributed_kernels, 0);
}

TEST(ReduceTest, OddSequencesAreCountedNotAveraged) {
  Recording r;
  for (int rep = 0; rep < 4; ++rep) r.Op("loss_fwd", {{"max", 100}, {"sumexp", 200}}, 10);
  // One repetition launched an extra kernel (say, a lazy allocation).
  r.Op("loss_fwd", {{"max", 9999}, {"memset", 5}, {"sumexp", 9999}}, 10);
  ReduceResult result = Reduce(r.trace);
  ASSERT_EQ(result.tables.size(), 1u);
  EXPECT_EQ(result.tables[0].repetitions, 5);
  EXPECT_EQ(result.tables[0].consistent, 4);
  ASSERT_EQ(result.tables[0].kernels.size(), 2u);
  EXPECT_EQ(result.tables[0].kernels[0].duration_ns, 100);
  EXPECT_EQ(result.tables[0].kernels[0].duration_max_ns, 100);
}

TEST(ReduceTest, InnermostRangeOnTheLaunchingThreadWins) {
  Recording r;
  r.Op("attention_bwd", {{"dgrad", 500}}, 0, /*thread=*/3);
  // Wrap it in an outer framework range, and add a range on another thread
  // that covers the same time: neither may take the kernel.
  const OperatorRange inner = r.trace.ranges.back();
  r.trace.ranges.push_back({"outer", inner.start_ns - 5, inner.end_ns + 5, 3});
  r.trace.ranges.push_back({"other_thread", inner.start_ns, inner.end_ns, 4});
  // A kernel launched outside every range (warm-up).
  r.trace.launches.push_back({999, 10, 20, 3});
  r.trace.kernels.push_back({"warmup", 30, 40, 7, 999});
  // A kernel whose launch record was lost.
  r.trace.kernels.push_back({"orphan", 50, 60, 7, 12345});
  ReduceResult result = Reduce(r.trace);
  ASSERT_EQ(result.tables.size(), 1u);
  EXPECT_EQ(result.tables[0].op, "attention_bwd");
  EXPECT_EQ(result.unattributed_kernels, 2);
}

TEST(ReduceTest, NothingAttributableIsAnError) {
  EXPECT_FALSE(Reduce(Trace{}).error.empty());
  Recording r;
  r.Op("mlp_bwd", {{"k", 10}}, 0);
  r.trace.ranges.clear();
  ReduceResult result = Reduce(r.trace);
  EXPECT_NE(result.error.find("inside an operator range"), std::string::npos);
  EXPECT_EQ(Median({5, 1, 3, 2}), 2);  // the lower middle: a measured value
}

TEST(TraceTextTest, RoundTripsAndNamesBadLines) {
  Recording r;
  r.Op("attention_fwd", {{"void gemm<a, b>(int, float)", 100}, {"softmax", 20}}, 5);
  Trace back;
  ASSERT_EQ(TraceFromText(TraceToText(r.trace), &back), "");
  ASSERT_EQ(back.kernels.size(), 2u);
  EXPECT_EQ(back.kernels[0].name, "void gemm<a, b>(int, float)");  // commas survive
  EXPECT_EQ(back.kernels[1].end_ns, r.trace.kernels[1].end_ns);
  EXPECT_EQ(back.launches[1].correlation, r.trace.launches[1].correlation);
  EXPECT_EQ(back.ranges[0].name, "attention_fwd");
  EXPECT_EQ(back.ranges[0].thread, 7u);
  EXPECT_EQ(Reduce(back).tables[0].kernels[0].duration_ns, 100);
  Trace t;
  EXPECT_EQ(TraceFromText("# comment\nK,1,2,3,4,k\nX,1\n", &t),
            "line 3: unknown record type 'X' (K, L or R)");
  EXPECT_NE(TraceFromText("K,5,2,3,4,k\n", &t).find("end >= start"), std::string::npos);
  EXPECT_NE(TraceFromText("L,1,2,3\n", &t).find("line 1"), std::string::npos);
  EXPECT_NE(TraceFromText("L,1,2,3,4,5\n", &t).find("line 1"), std::string::npos);
  EXPECT_NE(TraceFromText("R,1,-2,3,x\n", &t).find("line 1"), std::string::npos);
}

ProfileSetFile SampleFile() {
  ProfileSetFile f;
  f.name = "measured h200";
  f.gpu = "h200-sxm-141gb";
  f.created_at = Rfc3339Utc(1'795'000'000);
  f.provenance = {"NVIDIA H200",           "13.0",        "13.0", "2.28.9", "node-1",
                  "profile --hidden 1024", "median of 10"};
  OperatorEntry e;
  e.op = "attention_fwd";
  e.hidden = 1024;
  e.heads = 16;
  e.ffn = 4096;
  e.seq = 2048;
  e.micro_batch = 1;
  e.tensor_parallel = 2;
  e.vocab = 50257;
  e.kernels = {{"void gemm<\"quoted\", \\back>(int)\x01\xff", 1500, 1400, 1600, 25},
               {"softmax_fwd_kernel", 300, 0, 0, 0}};
  f.operators.push_back(e);
  OperatorEntry adam;
  adam.op = "optimizer_step";
  adam.num_parameters = 123456789;
  adam.kernels = {{"adam_kernel", 9000, 0, 0, 0}};
  f.operators.push_back(adam);
  f.collectives.push_back(
      {"intra_node", "all_gather", 4, {{1024, 12000.5}, {2048, std::nan("")}, {1 << 20, 45000}}});
  return f;
}

TEST(ProfileJsonTest, ProtobufParsesItAndThePushValidationAcceptsIt) {
  const ProfileSetFile f = SampleFile();
  v1::ProfileSet proto;
  ASSERT_TRUE(proto::FromJson(ToProfileSetJson(f), &proto).ok()) << ToProfileSetJson(f);
  EXPECT_EQ(proto.gpu(), "h200-sxm-141gb");
  EXPECT_EQ(proto.provenance().gpu_name(), "NVIDIA H200");
  EXPECT_EQ(proto.provenance().nccl(), "2.28.9");
  EXPECT_EQ(proto.provenance().workload(), "profile --hidden 1024");
  EXPECT_EQ(proto.created_at().seconds(), 1'795'000'000);
  ASSERT_EQ(proto.operators_size(), 2);
  EXPECT_EQ(proto.operators(0).kernels(0).name(), "void gemm<\"quoted\", \\back>(int)\x01\u00ff");
  EXPECT_EQ(proto.operators(0).kernels(0).duration_ns(), 1500);
  EXPECT_EQ(proto.operators(0).kernels(0).gap_ns(), 25);
  EXPECT_EQ(proto.operators(0).kernels(0).duration_min_ns(), 1400);
  EXPECT_EQ(proto.operators(0).kernels(0).duration_max_ns(), 1600);
  EXPECT_EQ(proto.operators(0).key().tensor_parallel(), 2);
  EXPECT_EQ(proto.operators(1).key().num_parameters(), 123456789);
  ASSERT_EQ(proto.collectives_size(), 1);
  ASSERT_EQ(proto.collectives(0).points_size(), 2);  // the NaN point is left out
  EXPECT_DOUBLE_EQ(proto.collectives(0).points(0).latency_ns(), 12000.5);

  absl::StatusOr<ProfileSet> set = proto::ProfileSetFromProto(proto);
  ASSERT_TRUE(set.ok()) << set.status();
  const OperatorKey key =
      MakeOperatorKey("h200-sxm-141gb", DType::kFp16, OperatorKind::kAttentionFwd, 1024, 16, 4096,
                      2048, 1, 2, 50257, 0);
  ASSERT_TRUE(set->operators.count(key)) << "the file's key must be the simulator's key";
  EXPECT_EQ(set->operators.at(key).kernels[1].duration_ns, 300);
  const CollectiveKey ck{"h200-sxm-141gb", LinkScope::kIntraNode, Collective::kAllGather, 4};
  ASSERT_TRUE(set->collectives.count(ck));
  EXPECT_DOUBLE_EQ(set->collectives.at(ck).LatencyNs(1 << 20), 45000);
}

TEST(ProfileJsonTest, EmptySetsAndNamesAreValidJson) {
  ProfileSetFile f;
  f.gpu = "a100-sxm4-80gb";
  v1::ProfileSet proto;
  EXPECT_TRUE(proto::FromJson(ToProfileSetJson(f), &proto).ok());
  EXPECT_EQ(JsonString("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
  EXPECT_EQ(Rfc3339Utc(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(VtrainGpuName("NVIDIA A100-SXM4-80GB", int64_t{80} << 30), "a100-sxm4-80gb");
  EXPECT_EQ(VtrainGpuName("NVIDIA A100-SXM4-40GB", int64_t{40} << 30), "a100-sxm4-40gb");
  EXPECT_EQ(VtrainGpuName("NVIDIA H200", int64_t{141} << 30), "h200-sxm-141gb");
  EXPECT_EQ(VtrainGpuName("NVIDIA H100 80GB HBM3", int64_t{80} << 30), "h100-sxm5-80gb");
  EXPECT_EQ(VtrainGpuName("NVIDIA GeForce RTX 4090", int64_t{24} << 30), "");
}

std::vector<OperatorTable> GoodTables() {
  OperatorTable mlp{
      "mlp_fwd",
      10,
      10,
      {{"gemm_up", 1'000'000, 990'000, 1'010'000, 5}, {"gelu", 50'000, 49'000, 51'000, 0}},
      0.02};
  OperatorTable att{"attention_fwd", 10, 10, {{"gemm_qkv", 700'000, 690'000, 710'000, 0}}, 0.03};
  return {mlp, att};
}

TEST(ChecksTest, GoodTablesPass) {
  // 2 n h f FLOPs = 200 TFLOP in 1 ms... scaled: 2e11 FLOPs / 1 ms = 200 TFLOP/s.
  const GemmProbe probe{"mlp_fwd", 2e11};
  EXPECT_NEAR(ProbeFlops(GoodTables(), probe), 2e14, 1);
  EXPECT_TRUE(
      SanityProblems(GoodTables(), {"mlp_fwd", "attention_fwd"}, probe, 989e12, 0.25).empty());
}

TEST(ChecksTest, EachProblemIsReported) {
  const GemmProbe probe{"mlp_fwd", 2e11};
  // Faster than the chip: the timings must be wrong.
  EXPECT_EQ(SanityProblems(GoodTables(), {}, probe, 100e12, 0.25).size(), 1u);
  // Microseconds taken for nanoseconds would make it 1000x slower.
  std::vector<OperatorTable> slow = GoodTables();
  slow[0].kernels[0].duration_ns *= 1000;
  EXPECT_NE(SanityProblems(slow, {}, probe, 989e12, 0.25)[0].find("under 1%"), std::string::npos);
  std::vector<OperatorTable> bad = GoodTables();
  bad[1].consistent = 9;
  bad[1].kernels[0].duration_ns = 0;
  bad[0].spread = 0.5;
  const std::vector<std::string> problems =
      SanityProblems(bad, {"mlp_fwd", "attention_fwd", "loss_fwd"}, probe, 989e12, 0.25);
  ASSERT_EQ(problems.size(), 4u);  // missing loss_fwd, zero duration, sequence, spread
  EXPECT_NE(problems[0].find("loss_fwd"), std::string::npos);
  // A100: 108 SMs x 1410 MHz x 2048 = 312 TFLOP/s (datasheet).
  EXPECT_NEAR(PeakTensorFlops(8, 0, 108, 1'410'000), 311.9e12, 0.1e12);
  EXPECT_EQ(PeakTensorFlops(9, 0, 0, 1'980'000), 0);
}

TEST(InjectConfigTest, ShapeSpecs) {
  LayerShape s;
  EXPECT_EQ(ParseShapeSpec("hidden=2048,heads=16,seq=1024,micro_batch=2,tp=2,dtype=bf16", &s), "");
  EXPECT_EQ(s.hidden, 2048);
  EXPECT_EQ(s.ffn, 8192);
  EXPECT_EQ(s.tensor_parallel, 2);
  EXPECT_TRUE(s.bf16);
  EXPECT_NE(ParseShapeSpec("hidden=2048,heads=16,seq=1024", &s).find("micro_batch"),
            std::string::npos);
  EXPECT_NE(ParseShapeSpec("hidden=2304,heads=12,seq=1024,micro_batch=1,tp=8", &s)
                .find("heads=12 is not divisible by tensor_parallel=8"),
            std::string::npos);
  EXPECT_NE(ParseShapeSpec("hidden=x", &s).find("hidden='x'"), std::string::npos);
  EXPECT_NE(ParseShapeSpec("colour=red", &s).find("unknown key 'colour'"), std::string::npos);
  EXPECT_EQ(OperatorOfRange("attention_fwd"), "attention_fwd");
  EXPECT_EQ(OperatorOfRange("vtrain:optimizer_step"), "optimizer_step");
  EXPECT_EQ(OperatorOfRange("aten::mm"), "");
}

// The GPU half repeats core's operator names (it builds without core), so
// the lists must not drift: kOperatorNames is core's list in OperatorKind
// order, and the workloads' step order holds the same names, every forward
// before its backward and the optimizer step last (Operators() leaves it out
// when adam_params is 0).
// The MoE operators are the MoE workload's (kMoeOperatorNames), in core's
// order after the dense ones.
TEST(GpuOperatorNamesTest, EqualCoresOperatorKinds) {
  std::vector<std::string> core;
  for (int k = 0; k < kNumOperatorKinds; ++k) {
    core.emplace_back(OperatorKindName(static_cast<OperatorKind>(k)));
  }
  std::vector<std::string> gpu(std::begin(kOperatorNames), std::end(kOperatorNames));
  gpu.insert(gpu.end(), std::begin(kMoeOperatorNames), std::end(kMoeOperatorNames));
  EXPECT_EQ(gpu, core);

  std::vector<std::string> step(std::begin(kOperatorsInStepOrder), std::end(kOperatorsInStepOrder));
  EXPECT_EQ(step.back(), "optimizer_step");
  for (const std::string& op : step) {
    if (op.size() < 4 || op.compare(op.size() - 4, 4, "_bwd") != 0) continue;
    const std::string fwd = op.substr(0, op.size() - 4) + "_fwd";
    EXPECT_LT(std::find(step.begin(), step.end(), fwd), std::find(step.begin(), step.end(), op))
        << fwd << " must run before " << op;
  }
  step.insert(step.end(), std::begin(kMoeOperatorNames), std::end(kMoeOperatorNames));
  std::sort(step.begin(), step.end());
  std::sort(core.begin(), core.end());
  EXPECT_EQ(step, core);
}

#ifdef VTRAIN_TEST_AGENT_GPU
// The CUDA binary, built against the toolkit, on a machine without a GPU:
// bad input is refused first (exit 2, naming the flag); good input gets one
// line saying there is no usable GPU (exit 1).
TEST(AgentGpuBinaryTest, SaysSoWithoutAGpu) {
  const std::string out = ::testing::TempDir() + "/layer.json";
  absl::StatusOr<testing::ProcessResult> bad = testing::RunProcess(
      VTRAIN_TEST_AGENT_GPU, {"profile", "--hidden", "1000", "--heads", "3", "--seq-len", "128",
                              "--micro-batch", "1", "-o", out});
  ASSERT_TRUE(bad.ok()) << bad.status();
  EXPECT_EQ(bad->exit_code, 2);
  EXPECT_NE(bad->err.find("hidden=1000 is not divisible by heads=3"), std::string::npos)
      << bad->err;
  absl::StatusOr<testing::ProcessResult> unknown =
      testing::RunProcess(VTRAIN_TEST_AGENT_GPU, {"nccl", "--colour", "red"});
  ASSERT_TRUE(unknown.ok());
  EXPECT_EQ(unknown->exit_code, 2);
  EXPECT_NE(unknown->err.find("unknown flag --colour"), std::string::npos);

  absl::StatusOr<testing::ProcessResult> run = testing::RunProcess(
      VTRAIN_TEST_AGENT_GPU, {"profile", "--hidden", "1024", "--heads", "16", "--seq-len", "128",
                              "--micro-batch", "1", "-o", out});
  ASSERT_TRUE(run.ok()) << run.status();
  if (run->exit_code == 0) GTEST_SKIP() << "this machine has a GPU; tests/gpu/run.sh covers it";
  EXPECT_EQ(run->exit_code, 1);
  EXPECT_NE(run->err.find("no usable CUDA GPU"), std::string::npos) << run->err;
  EXPECT_EQ(std::count(run->err.begin(), run->err.end(), '\n'), 1) << run->err;
  absl::StatusOr<testing::ProcessResult> nccl =
      testing::RunProcess(VTRAIN_TEST_AGENT_GPU, {"nccl", "--check"});
  ASSERT_TRUE(nccl.ok());
  EXPECT_EQ(nccl->exit_code, 1);
  EXPECT_NE(nccl->err.find("no usable CUDA GPU"), std::string::npos) << nccl->err;
}

// A file the binary wrote, whole.
std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Profile-set JSON as a push reads it: the proto, then the set.
absl::StatusOr<ProfileSet> ParseProfileSetJson(const std::string& text) {
  v1::ProfileSet proto;
  if (absl::Status s = proto::FromJson(text, &proto); !s.ok()) return s;
  return proto::ProfileSetFromProto(proto);
}

// A kept recording, reduced again by the CUDA binary without a GPU: the
// same path as `profile` from the raw records to the file.
TEST(AgentGpuBinaryTest, ReducesAKeptRecording) {
  Recording r;
  for (uint64_t rep = 0; rep < 3; ++rep) {
    r.Op("mlp_fwd", {{"gemm_fc1", 1'000'000 + 1000 * rep}, {"gelu", 50'000}}, 3000);
  }
  const std::string raw = ::testing::TempDir() + "/raw.txt",
                    json = ::testing::TempDir() + "/reduced.json";
  std::ofstream(raw) << TraceToText(r.trace);
  absl::StatusOr<testing::ProcessResult> run =
      testing::RunProcess(VTRAIN_TEST_AGENT_GPU,
                          {"reduce", raw, "--gpu", "a100-sxm4-80gb", "--hidden", "1024", "--heads",
                           "16", "--seq-len", "2048", "--micro-batch", "1", "--check", "-o", json});
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->exit_code, 0) << run->out << run->err;
  EXPECT_NE(run->out.find("check: all 1 operators passed"), std::string::npos) << run->out;
  const std::string text = ReadText(json);
  absl::StatusOr<ProfileSet> set = ParseProfileSetJson(text);
  ASSERT_TRUE(set.ok()) << set.status() << "\n" << text;
  const OperatorKey key = MakeOperatorKey("a100-sxm4-80gb", DType::kFp16, OperatorKind::kMlpFwd,
                                          1024, 16, 4096, 2048, 1, 1, 50257, 0);
  ASSERT_TRUE(set->operators.count(key)) << text;
  EXPECT_EQ(set->operators.at(key).kernels[0].duration_ns, 1'001'000);
  EXPECT_EQ(set->operators.at(key).kernels[0].gap_ns, 3000);
  // A broken recording is bad input, named by line.
  std::ofstream(raw) << "K,1,2\n";
  run =
      testing::RunProcess(VTRAIN_TEST_AGENT_GPU,
                          {"reduce", raw, "--gpu", "a100-sxm4-80gb", "--hidden", "1024", "--heads",
                           "16", "--seq-len", "2048", "--micro-batch", "1", "-o", json});
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->exit_code, 2);
  EXPECT_NE(run->err.find("line 1: expected K,"), std::string::npos) << run->err;
}

// An MoE block's kept recording, reduced by the CUDA binary: the tables are
// filed under core's MoE keys (experts, top-k, EP), and a bad MoE flag is
// refused by name before anything runs.
TEST(AgentGpuBinaryTest, ReducesAnMoeRecordingUnderMoeKeys) {
  Recording r;
  for (uint64_t rep = 0; rep < 3; ++rep) {
    r.Op("moe_fwd", {{"gemm_router", 20'000}, {"gemm_expert", 300'000 + 1000 * rep}}, 2000);
    r.Op("moe_bwd", {{"gemm_expert_dgrad", 600'000}}, 0);
  }
  const std::string raw = ::testing::TempDir() + "/moe_raw.txt",
                    json = ::testing::TempDir() + "/moe.json";
  std::ofstream(raw) << TraceToText(r.trace);
  const std::vector<std::string> shape = {"--gpu",         "h100-sxm5-80gb",
                                          "--hidden",      "2048",
                                          "--heads",       "32",
                                          "--kv-heads",    "4",
                                          "--ffn",         "768",
                                          "--seq-len",     "4096",
                                          "--micro-batch", "1",
                                          "--dtype",       "bf16",
                                          "--arch",        "llama",
                                          "--experts",     "128",
                                          "--moe-top-k",   "8",
                                          "--ep",          "4"};
  std::vector<std::string> args = {"reduce", raw};
  args.insert(args.end(), shape.begin(), shape.end());
  args.insert(args.end(), {"-o", json});
  absl::StatusOr<testing::ProcessResult> run = testing::RunProcess(VTRAIN_TEST_AGENT_GPU, args);
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->exit_code, 0) << run->out << run->err;
  const std::string text = ReadText(json);
  absl::StatusOr<ProfileSet> set = ParseProfileSetJson(text);
  ASSERT_TRUE(set.ok()) << set.status() << "\n" << text;
  vtrain::LayerShape moe;
  moe.experts = 128;
  moe.top_k = 8;
  moe.expert_parallel = 4;
  for (OperatorKind op : {OperatorKind::kMoeFwd, OperatorKind::kMoeBwd}) {
    const OperatorKey key =
        WithLayerShape(MakeOperatorKey("h100-sxm5-80gb", DType::kBf16, op, 2048, 32, 768, 4096, 1,
                                       1, 151936, 0, Architecture::kLlama, 4),
                       moe);
    ASSERT_TRUE(set->operators.count(key)) << key.ToString() << "\n" << text;
  }
  const OperatorKey fwd =
      WithLayerShape(MakeOperatorKey("h100-sxm5-80gb", DType::kBf16, OperatorKind::kMoeFwd, 2048,
                                     32, 768, 4096, 1, 1, 151936, 0, Architecture::kLlama, 4),
                     moe);
  EXPECT_EQ(set->operators.at(fwd).kernels[1].duration_ns, 301'000);
  // --ep 3 does not divide 128 experts: bad input, named.
  args = {"reduce", raw};
  args.insert(args.end(), shape.begin(), shape.end());
  args.back() = "3";
  args.insert(args.end(), {"-o", json});
  run = testing::RunProcess(VTRAIN_TEST_AGENT_GPU, args);
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->exit_code, 2);
  EXPECT_NE(run->err.find("expert_parallel=3 must divide experts=128"), std::string::npos)
      << run->err;
}

// The injection library loads with every symbol resolved, exports
// InitializeInjection, and declines to record (without crashing the host
// process) when the shape is missing or there is no GPU.
TEST(InjectionLibraryTest, LoadsAndDeclinesCleanly) {
  void* lib = dlopen(VTRAIN_TEST_INJECT_LIB, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  using Init = int (*)();
  auto init = reinterpret_cast<Init>(dlsym(lib, "InitializeInjection"));
  ASSERT_NE(init, nullptr);
  EXPECT_EQ(dlsym(lib, "_ZN6vtrain3gpu6ReduceERKNS0_5TraceE"), nullptr) << "internals are hidden";
  unsetenv("VTRAIN_PROFILE_SHAPE");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(init(), 1);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("not recording: VTRAIN_PROFILE_SHAPE needs hidden"), std::string::npos) << err;
  setenv("VTRAIN_PROFILE_SHAPE", "hidden=1024,heads=16,seq=128,micro_batch=1", 1);
  ::testing::internal::CaptureStderr();
  init();
  err = ::testing::internal::GetCapturedStderr();
  unsetenv("VTRAIN_PROFILE_SHAPE");
  if (err.find("recording kernels") != std::string::npos) GTEST_SKIP() << "CUPTI works here";
  EXPECT_NE(err.find("not recording: cupti"), std::string::npos) << err;
}
#endif

}  // namespace
}  // namespace vtrain::gpu
