// The GPU agent's Llama and fp8 kernel plans against core's analytical kernel
// lists (so a measured table lines up with the analytical one kernel for
// kernel), the shape checks of Llama and fp8 workloads, and the keys their
// tables are filed under. No GPU needed.
#include "profiler_agent/gpu/llama_plan.h"

#include <string>
#include <vector>

#include "core/profile/analytical.h"
#include "core/profile/default_profiles.h"
#include "core/profile/profile.h"
#include "gtest/gtest.h"
#include "profiler_agent/gpu/inject_config.h"
#include "profiler_agent/gpu/moe_plan.h"
#include "profiler_agent/gpu/operator_names.h"
#include "profiler_agent/gpu/profile_json.h"
#include "profiler_agent/gpu/workloads.h"
#include "proto/convert.h"
#include "tests/testing/subprocess.h"

namespace vtrain::gpu {
namespace {

std::vector<std::string> CoreNames(DType dtype, OperatorKind op, int64_t t) {
  // Llama 3 8B's layer (h 4096, 32 heads, 8 KV heads, FFN 14336).
  const OperatorKey key = MakeOperatorKey("h100-sxm5-80gb", dtype, op, 4096, 32, 14336, 8192, 1, t,
                                          128256, 0, Architecture::kLlama, 8);
  std::vector<std::string> names;
  for (const KernelRecord& k :
       GenerateOperatorKernels(*GpuByName("h100-sxm5-80gb"), key, DefaultAnalyticalParams())) {
    names.push_back(k.name);
  }
  return names;
}

// Every Llama operator the plan covers, in 16 bits and in fp8, at t = 1 and
// t = 2: the workload's kernels are core's, in core's order.
TEST(LlamaPlanTest, StepsAreCoresKernelListInOrder) {
  int covered = 0;
  for (int k = 0; k < kNumOperatorKinds; ++k) {
    const OperatorKind op = static_cast<OperatorKind>(k);
    const std::string name(OperatorKindName(op));
    // No MoE workload in the GPU agent yet (gpu_tables_test.cc).
    if (op == OperatorKind::kMoeFwd || op == OperatorKind::kMoeBwd) continue;
    const bool shared = op == OperatorKind::kLossFwd || op == OperatorKind::kLossBwd ||
                        op == OperatorKind::kOptimizerStep;
    for (DType dtype : {DType::kFp16, DType::kBf16, DType::kFp8}) {
      const std::vector<Step> steps = LlamaOperatorSteps(name, dtype == DType::kFp8);
      if (shared) {
        // Run by the GPT code (tail_operators.cuh), as core shares them.
        EXPECT_TRUE(steps.empty()) << name;
        continue;
      }
      for (int64_t t : {1, 2}) {
        EXPECT_EQ(StepNames(steps), CoreNames(dtype, op, t))
            << name << " " << DTypeName(dtype) << " t=" << t;
      }
      ++covered;
    }
  }
  EXPECT_EQ(covered, 8 * 3);
  EXPECT_TRUE(LlamaOperatorSteps("no_such_operator", false).empty());
}

// The MoE workload's plan against core's MoE kernel list: a Qwen3-30B-A3B-
// like block (h 2048, 128 experts of width 768, top-8) with 128, 32 and 4
// local experts (EP 1, 4, 32), forward and backward, 16 bits, t = 1.
TEST(MoePlanTest, StepsAreCoresKernelListInOrder) {
  for (OperatorKind op : {OperatorKind::kMoeFwd, OperatorKind::kMoeBwd}) {
    const std::string name(OperatorKindName(op));
    for (DType dtype : {DType::kFp16, DType::kBf16}) {
      for (int64_t ep : {1, 4, 32}) {
        OperatorKey key = MakeOperatorKey("h100-sxm5-80gb", dtype, op, 2048, 32, 768, 4096, 1, 1,
                                          151936, 0, Architecture::kLlama, 4);
        vtrain::LayerShape shape;
        shape.experts = 128;
        shape.top_k = 8;
        shape.expert_parallel = ep;
        key = WithLayerShape(key, shape);
        std::vector<std::string> core;
        for (const KernelRecord& k : GenerateOperatorKernels(*GpuByName("h100-sxm5-80gb"), key,
                                                             DefaultAnalyticalParams())) {
          core.push_back(k.name);
        }
        const std::vector<MoeStep> steps = MoeOperatorSteps(name, 128 / ep);
        EXPECT_EQ(StepNames(steps), core) << name << " " << DTypeName(dtype) << " ep=" << ep;
        // Each expert GEMM names its local expert, in order within a pass.
        int64_t gemms = 0;
        for (const MoeStep& s : steps) gemms += s.kind == MoeStepKind::kExpertGemm ? 1 : 0;
        EXPECT_EQ(gemms, (op == OperatorKind::kMoeFwd ? 2 : 4) * (128 / ep)) << name;
      }
    }
  }
  EXPECT_TRUE(MoeOperatorSteps("mlp_fwd", 4).empty());
  EXPECT_TRUE(MoeOperatorSteps("moe_fwd", 0).empty());
}

// MoE shapes: what the workload covers, refused by name otherwise.
TEST(MoePlanTest, ShapeChecksNameTheField) {
  vtrain::gpu::LayerShape s;
  s.hidden = 2048;
  s.heads = 32;
  s.kv_heads = 4;
  s.ffn = 768;
  s.seq = 4096;
  s.micro_batch = 1;
  s.vocab = 151936;
  s.bf16 = true;
  s.llama = true;
  s.experts = 128;
  s.moe_top_k = 8;
  s.expert_parallel = 4;
  EXPECT_EQ(ValidateShape(s), "");
  auto says = [](vtrain::gpu::LayerShape bad, const char* what) {
    const std::string e = ValidateShape(bad);
    EXPECT_NE(e.find(what), std::string::npos) << e;
  };
  vtrain::gpu::LayerShape bad = s;
  bad.expert_parallel = 3;
  says(bad, "expert_parallel=3 must divide experts=128");
  bad = s;
  bad.moe_top_k = 9;
  says(bad, "moe_top_k=9");
  bad = s;
  bad.tensor_parallel = 2;
  bad.heads = 32;
  says(bad, "tensor_parallel=2 with experts");
  bad = s;
  bad.fp8 = true;
  says(bad, "16 bits");
  bad = s;
  bad.llama = false;
  says(bad, "--arch llama");
  bad = s;
  bad.seq = 3;
  bad.micro_batch = 1;
  bad.moe_top_k = 1;
  says(bad, "do not split evenly over 32 local experts");
  bad = s;
  bad.experts = 0;
  says(bad, "need experts > 0");
}

// Each fp8 GEMM is fed by the cast-transpose just before it (forward: the
// input's; backward: the output gradient's, shared by the dgrad and the
// wgrad of the same layer), and every cast, GEMM and step index names a
// layer that exists.
TEST(LlamaPlanTest, Fp8CastsFeedTheirOwnLayersGemms) {
  for (const char* op : kOperatorNames) {
    const std::vector<Step> steps = LlamaOperatorSteps(op, true);
    for (size_t i = 0; i < steps.size(); ++i) {
      const Step& s = steps[i];
      if (s.kind == StepKind::kGemmFwd && s.index != kLinearLogit) {
        ASSERT_GT(i, 0u);
        EXPECT_EQ(steps[i - 1].kind, StepKind::kCastTranspose) << op << " " << s.name;
        EXPECT_EQ(steps[i - 1].index, s.index) << op << " " << s.name;
      }
      if (s.kind == StepKind::kGemmDgrad && s.index != kLinearLogit) {
        ASSERT_GT(i, 0u);
        EXPECT_EQ(steps[i - 1].kind, StepKind::kCastTransposeGrad) << op << " " << s.name;
        EXPECT_EQ(steps[i - 1].index, s.index) << op << " " << s.name;
        ASSERT_LT(i + 1, steps.size());
        EXPECT_EQ(steps[i + 1].kind, StepKind::kGemmWgrad);
        EXPECT_EQ(steps[i + 1].index, s.index);
      }
      if (s.kind == StepKind::kGemmFwd || s.kind == StepKind::kGemmDgrad ||
          s.kind == StepKind::kGemmWgrad) {
        const int pass = s.kind == StepKind::kGemmFwd ? 0 : s.kind == StepKind::kGemmDgrad ? 1 : 2;
        EXPECT_EQ(s.name, LinearGemmName(s.index, pass));
      }
      if (s.kind == StepKind::kCastTranspose || s.kind == StepKind::kCastTransposeGrad) {
        EXPECT_LT(s.index, kNumFp8Linears) << "the logit layer stays in 16 bits";
      }
    }
  }
}

LayerShape Llama3Shape() {
  LayerShape s;
  s.hidden = 4096;
  s.heads = 32;
  s.kv_heads = 8;
  s.ffn = 14336;
  s.seq = 8192;
  s.micro_batch = 1;
  s.tensor_parallel = 2;
  s.vocab = 128256;
  s.bf16 = true;
  s.llama = true;
  return s;
}

TEST(LlamaShapeTest, ValidAndInvalidShapesNameTheField) {
  LayerShape s = Llama3Shape();
  EXPECT_EQ(ValidateShape(s), "");
  s.fp8 = true;
  EXPECT_EQ(ValidateShape(s), "");

  s = Llama3Shape();
  s.kv_heads = 6;
  EXPECT_NE(ValidateShape(s).find("kv_heads=6 does not divide heads=32"), std::string::npos);
  s.kv_heads = 1;
  EXPECT_NE(ValidateShape(s).find("kv_heads=1 is not divisible by tensor_parallel=2"),
            std::string::npos);
  s = Llama3Shape();
  s.heads = 8;  // head dim 512
  s.kv_heads = 8;
  EXPECT_NE(ValidateShape(s).find("head dim of at most 256"), std::string::npos);
  s = Llama3Shape();
  s.fp8 = true;
  s.seq = 8190;
  EXPECT_NE(ValidateShape(s).find("seq*micro_batch=8190 is not a multiple of 16"),
            std::string::npos);
  s = Llama3Shape();
  s.fp8 = true;
  s.bf16 = false;
  EXPECT_NE(ValidateShape(s).find("set bf16 with fp8"), std::string::npos);
  // A GPT layer in fp8 is valid too (the GPT workload runs its linear layers
  // in fp8 the same way).
  s = Llama3Shape();
  s.llama = false;
  s.kv_heads = 0;
  s.fp8 = true;
  EXPECT_EQ(ValidateShape(s), "");
}

// The injection library's shape (VTRAIN_PROFILE_SHAPE) names Llama and fp8
// runs of a framework, so their tables get the simulator's keys.
TEST(LlamaShapeTest, InjectionShapeSpecsTakeArchKvHeadsAndFp8) {
  LayerShape s;
  ASSERT_EQ(ParseShapeSpec("hidden=4096,heads=32,kv_heads=8,seq=8192,micro_batch=1,tp=2,"
                           "ffn=14336,arch=llama,dtype=fp8",
                           &s),
            "");
  EXPECT_TRUE(s.llama);
  EXPECT_TRUE(s.fp8);
  EXPECT_TRUE(s.bf16);
  EXPECT_EQ(s.kv_heads, 8);
  EXPECT_NE(ParseShapeSpec("hidden=4096,heads=32,seq=8,micro_batch=1,arch=mamba", &s)
                .find("arch='mamba' must be gpt or llama"),
            std::string::npos);
  EXPECT_NE(ParseShapeSpec("hidden=4096,heads=32,kv_heads=8,seq=8,micro_batch=1", &s)
                .find("kv_heads needs arch=llama"),
            std::string::npos);
}

// The tables of an fp8 Llama run go under the simulator's keys: fp8, arch
// llama and the KV heads for the layer's operators, no architecture for the
// loss and the optimizer step.
TEST(LlamaShapeTest, TablesAreFiledUnderTheSimulatorsKeys) {
  LayerShape s = Llama3Shape();
  s.fp8 = true;
  s.adam_params = 1000;
  std::vector<OperatorTable> tables;
  for (const char* op : {"attention_fwd", "mlp_bwd", "loss_fwd", "optimizer_step"}) {
    OperatorTable t;
    t.op = op;
    t.repetitions = t.consistent = 3;
    t.kernels.push_back({"k", 1000, 900, 1100, 10});
    tables.push_back(t);
  }
  ProfileSetFile f;
  f.gpu = "h100-sxm5-80gb";
  f.name = "llama fp8";
  f.operators = OperatorEntries(tables, s);
  v1::ProfileSet proto;
  ASSERT_TRUE(proto::FromJson(ToProfileSetJson(f), &proto).ok()) << ToProfileSetJson(f);
  absl::StatusOr<ProfileSet> set = proto::ProfileSetFromProto(proto);
  ASSERT_TRUE(set.ok()) << set.status();
  const std::string g = "h100-sxm5-80gb";
  const OperatorKey keys[] = {
      MakeOperatorKey(g, DType::kFp8, OperatorKind::kAttentionFwd, 4096, 32, 14336, 8192, 1, 2,
                      128256, 0, Architecture::kLlama, 8),
      MakeOperatorKey(g, DType::kFp8, OperatorKind::kMlpBwd, 4096, 32, 14336, 8192, 1, 2, 128256, 0,
                      Architecture::kLlama, 8),
      MakeOperatorKey(g, DType::kFp8, OperatorKind::kLossFwd, 4096, 32, 14336, 8192, 1, 2, 128256,
                      0),
      MakeOperatorKey(g, DType::kFp8, OperatorKind::kOptimizerStep, 0, 0, 0, 0, 0, 1, 0, 1000)};
  for (const OperatorKey& key : keys) {
    EXPECT_TRUE(set->operators.count(key)) << key.ToString() << " missing";
  }
  EXPECT_EQ(set->operators.size(), 4u);
}

#ifdef VTRAIN_TEST_AGENT_GPU
// The CUDA binary refuses bad Llama and fp8 shapes before touching a GPU
// (exit 2, naming the flag and the fix), and `selftest` on a machine without
// a GPU says so in one line (exit 1).
TEST(LlamaAgentGpuBinaryTest, RefusesBadLlamaAndFp8ShapesAndSelfTestNeedsAGpu) {
  const std::vector<std::string> base = {"profile", "--hidden",  "4096",     "--heads",
                                         "32",      "--seq-len", "100",      "--micro-batch",
                                         "1",       "-o",        "/dev/null"};
  auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    absl::StatusOr<testing::ProcessResult> r = testing::RunProcess(VTRAIN_TEST_AGENT_GPU, args);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : testing::ProcessResult{};
  };
  testing::ProcessResult r = run({"--arch", "llama", "--dtype", "fp8"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("seq*micro_batch=100 is not a multiple of 16"), std::string::npos) << r.err;
  r = run({"--dtype", "fp8"});  // a GPT layer in fp8: the same rule
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("seq*micro_batch=100 is not a multiple of 16"), std::string::npos) << r.err;
  r = run({"--kv-heads", "8"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--kv-heads needs --arch llama"), std::string::npos) << r.err;
  r = run({"--arch", "mamba"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--arch='mamba' must be gpt or llama"), std::string::npos) << r.err;

  absl::StatusOr<testing::ProcessResult> self =
      testing::RunProcess(VTRAIN_TEST_AGENT_GPU, {"selftest"});
  ASSERT_TRUE(self.ok()) << self.status();
  if (self->exit_code == 0) GTEST_SKIP() << "this machine has a GPU; tests/gpu/run.sh covers it";
  EXPECT_EQ(self->exit_code, 1);
  EXPECT_NE(self->err.find("no usable CUDA GPU"), std::string::npos) << self->err;
}
#endif

}  // namespace
}  // namespace vtrain::gpu
