// vtrainctl with Mixture-of-Experts models: presets --json lists every model
// with its parameter and active-parameter counts, a MoE prediction prints its
// expert layout and routing, search tries --ep-values, and every bad MoE flag
// is refused with exit 2 naming the flag or field.
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "common/exit_codes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/vtrainctl.h"

namespace vtrain {
namespace {

using ::testing::HasSubstr;
using ::vtrain::testing::RunVtrainctlInProcess;

TEST(MoeCliTest, PresetsJsonListsParametersAndActiveParameters) {
  const auto r = RunVtrainctlInProcess({"presets", "--json"});
  ASSERT_EQ(r.code, common::kExitOk) << r.err;
  // DeepSeek-V3: 671B total, 37.6B active (hand count in moe_test.cc).
  // The vtrain.v1.PresetsResponse, one field a line.
  EXPECT_THAT(r.out, HasSubstr("\"name\": \"deepseek-v3\",\n      \"arch\": \"llama\",\n      "
                               "\"parameters\": 671026419200,\n      \"active_parameters\": "
                               "37552297472"));
  EXPECT_THAT(r.out, HasSubstr("\"name\": \"llama3-8b\""));
  EXPECT_THAT(r.out, HasSubstr("\"name\": \"mixtral-8x7b\""));
}

std::vector<std::string> Deepseek(std::vector<std::string> extra) {
  std::vector<std::string> args = {
      "predict",  "--local", "--model",        "deepseek-v3", "--gpu",   "h100-sxm5-80gb",
      "--layers", "60",      "--pp",           "4",           "--dp",    "32",
      "--ep",     "32",      "--global-batch", "256",         "--dtype", "bf16"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

TEST(MoeCliTest, PredictPrintsTheExpertLayoutAndRouting) {
  const auto r = RunVtrainctlInProcess(Deepseek({"--routing", "lognormal:0.5"}));
  ASSERT_EQ(r.code, common::kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("moe      256 experts, top-8, expert ffn 2048, 1 shared, first 3 "
                               "layers dense, MLA, 1 MTP; ep=32 etp=1, hybridep dispatch"));
  // The preset's recipe (Megatron-Bridge): flex, selective recomputation of
  // the MLP and MLA's up-projections; megatron-defaults: allgather, none.
  EXPECT_THAT(r.out, HasSubstr("recompute selective (mlp,mla_up_proj)"));
  EXPECT_THAT(r.out, HasSubstr("settings tuned (Megatron-Bridge DeepSeek-V3"));
  const auto plain = RunVtrainctlInProcess(Deepseek({"--settings", "megatron-defaults"}));
  ASSERT_EQ(plain.code, common::kExitOk) << plain.err;
  EXPECT_THAT(plain.out, HasSubstr("ep=32 etp=1, allgather dispatch"));
  EXPECT_THAT(plain.out, HasSubstr("recompute none"));
  EXPECT_THAT(r.out, HasSubstr("routing  log-normal sigma 0.50: busiest EP rank"));
  const auto flex =
      RunVtrainctlInProcess(Deepseek({"--moe-dispatcher", "flex", "--moe-overlap", "on",
                                      "--virtual-stages", "3", "--recompute", "selective"}));
  ASSERT_EQ(flex.code, common::kExitOk) << flex.err;
  EXPECT_THAT(flex.out, HasSubstr("ep=32 etp=1, flex dispatch overlapped"));
  const auto modules = RunVtrainctlInProcess(
      Deepseek({"--recompute", "selective", "--recompute-modules", "moe_act,layernorm"}));
  ASSERT_EQ(modules.code, common::kExitOk) << modules.err;
  EXPECT_THAT(modules.out, HasSubstr("recompute selective (layernorm,moe_act)"));
}

TEST(MoeCliTest, BadMoeFlagsAreRefusedNamingTheField) {
  const struct {
    std::vector<std::string> extra;
    const char* expected;
  } cases[] = {
      {{"--ep", "3"}, "plan.expert_parallel=3 does not divide model.moe.num_experts=256"},
      {{"--ep", "0"}, "plan.expert_parallel=0 (--ep) must be at least 1"},
      {{"--routing", "zipf"}, "--routing 'zipf' must be balanced or lognormal:SIGMA"},
      {{"--moe-dispatcher", "nvshmem"}, "plan.moe_dispatcher='nvshmem' is unknown"},
      {{"--moe-overlap", "yes"}, "(--moe-overlap) must be on or off"},
      // Megatron-Core's 1F1B all-to-all overlap runs only interleaved when p > 1.
      {{"--moe-overlap", "on", "--recompute", "none"},
       "plan.moe_overlap with plan.pipeline_parallel=4 needs the "
       "interleaved 1F1B schedule"},
      {{"--moe-overlap", "on", "--virtual-stages", "3", "--recompute", "full"},
       "plan.moe_overlap cannot run with plan.recompute=full"},
      {{"--moe-overlap", "on", "--virtual-stages", "3", "--recompute", "none", "--moe-dispatcher",
        "allgather"},
       "plan.moe_overlap works with the alltoall and flex dispatchers"},
      {{"--capacity-factor", "100"}, "plan.capacity_factor=100 must be 0 (dropless)"},
      {{"--moe-top-k", "300"}, "model.moe.top_k=300"},
      {{"--attention", "linear"}, "model.attention='linear' is unknown"},
      {{"--etp", "3"}, "plan.expert_tensor_parallel=3 does not divide model.moe.expert_ffn"},
      // Megatron's --recompute-modules.
      {{"--recompute-modules", "moe_act", "--recompute", "full"},
       "plan.recompute_modules=moe_act needs plan.recompute=selective"},
      {{"--recompute", "selective", "--recompute-modules", "layernorm,experts"},
       "plan.recompute_modules: 'experts' is unknown"},
      {{"--recompute", "selective", "--recompute-modules", "moe", "--moe-overlap", "on",
        "--virtual-stages", "3"},
       "Megatron-Core cannot recompute moe under the all-to-all overlap"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.expected);
    const auto r = RunVtrainctlInProcess(Deepseek(c.extra));
    EXPECT_EQ(r.code, common::kExitBadInput);
    EXPECT_THAT(r.err, HasSubstr(c.expected));
  }
}

TEST(MoeCliTest, SearchTriesExpertParallelDegrees) {
  const auto r = RunVtrainctlInProcess({"search",
                                        "--local",
                                        "--model",
                                        "qwen3-30b-a3b",
                                        "--gpu",
                                        "h100-sxm5-80gb",
                                        "--gpus",
                                        "16",
                                        "--global-batch",
                                        "64",
                                        "--dtype",
                                        "bf16",
                                        "--tp-values",
                                        "1,2",
                                        "--ep-values",
                                        "1,4,8",
                                        "--max-micro-batch",
                                        "1",
                                        "--top",
                                        "1000",
                                        "--json"});
  ASSERT_EQ(r.code, common::kExitOk) << r.err;
  // Plans of each EP degree were evaluated, t = 2 among them.
  EXPECT_THAT(r.out, HasSubstr("\"expert_parallel\": 8"));
  EXPECT_THAT(r.out, HasSubstr("\"expert_parallel\": 4"));
  EXPECT_THAT(r.out, HasSubstr("\"tensor_parallel\": 2"));
}

}  // namespace
}  // namespace vtrain
