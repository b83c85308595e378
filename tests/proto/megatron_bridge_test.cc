// Megatron-Bridge ConfigContainer dumps as jobs (proto/megatron_bridge.h):
// each fixture in data/megatron-bridge/ predicts the same iteration as the
// same job written as a Megatron-LM launch (data/megatron-launches/, itself
// checked against vtrainctl flags); every field is mapped, listed as
// ignored, or refused by its YAML path and line.
#include "proto/megatron_bridge.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/vtrainctl.h"

namespace vtrain::proto {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::vtrain::testing::RunVtrainctlInProcess;

std::string DataPath(const std::string& path) {
  const char* src = std::getenv("VTRAIN_SOURCE_DIR");
  return absl::StrCat(src != nullptr ? src : VTRAIN_TEST_SOURCE_DIR, "/data/", path);
}

std::string ReadData(const std::string& path) {
  std::ifstream in(DataPath(path));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The job a vtrainctl command prints as flags (--print-flags).
std::string PrintedFlags(std::vector<std::string> args) {
  args.insert(args.begin(), "predict");
  args.push_back("--print-flags");
  const auto r = RunVtrainctlInProcess(args);
  EXPECT_EQ(r.code, 0) << r.err;
  return r.out;
}

void ExpectSameJob(const std::string& yaml, const std::string& launch,
                   const std::vector<std::string>& extra) {
  std::vector<std::string> a = {"--megatron-bridge-config", DataPath("megatron-bridge/" + yaml)};
  std::vector<std::string> b = {"--megatron-args", DataPath("megatron-launches/" + launch)};
  a.insert(a.end(), extra.begin(), extra.end());
  b.insert(b.end(), extra.begin(), extra.end());
  // A dump writes every field, so it says c=1 where the launch leaves it out.
  std::string from_yaml = PrintedFlags(a);
  EXPECT_THAT(from_yaml, HasSubstr("--layers"));
  if (size_t at = from_yaml.find(" --cp 1 "); at != std::string::npos) from_yaml.erase(at, 7);
  EXPECT_EQ(from_yaml, PrintedFlags(b));
  a.insert(a.begin(), {"predict", "--json"});
  b.insert(b.begin(), {"predict", "--json"});
  const auto pa = RunVtrainctlInProcess(a), pb = RunVtrainctlInProcess(b);
  ASSERT_EQ(pa.code, 0) << pa.err;
  ASSERT_EQ(pb.code, 0) << pb.err;
  const auto ns = [](const std::string& json) {
    const size_t at = json.find("\"iteration_time_ns\": ");
    return at == std::string::npos ? std::string() : json.substr(at, 40);
  };
  EXPECT_FALSE(ns(pa.out).empty());
  EXPECT_EQ(ns(pa.out), ns(pb.out));
}

TEST(MegatronBridgeTest, Gpt3DumpIsTheSameJobAsItsLaunchScript) {
  ExpectSameJob("gpt3_175b.yaml", "gpt3_175b.sh",
                {"--gpu", "a100-sxm4-80gb", "--gpus-per-node", "8"});
}

// A recipe's dump predicts the same iteration as the flags read off it by
// hand (the YAML's values, not vtrain's printing of them).
void ExpectSameAsFlags(const std::string& yaml, std::vector<std::string> flags) {
  const auto a =
      RunVtrainctlInProcess({"predict", "--json", "--megatron-bridge-config",
                             DataPath("megatron-bridge/" + yaml), "--gpu", "h100-sxm5-80gb"});
  ASSERT_EQ(a.code, 0) << a.err;
  flags.insert(flags.begin(),
               {"predict", "--json", "--settings", "megatron-defaults", "--gpu", "h100-sxm5-80gb"});
  const auto b = RunVtrainctlInProcess(flags);
  ASSERT_EQ(b.code, 0) << b.err;
  const auto ns = [](const std::string& json) {
    const size_t at = json.find("\"iteration_time_ns\": ");
    return at == std::string::npos ? std::string() : json.substr(at, 40);
  };
  EXPECT_FALSE(ns(a.out).empty());
  EXPECT_EQ(ns(a.out), ns(b.out));
}

// The performance recipes' dumps say ddp.grad_reduce_in_fp32: false, so
// their gradient buffer is bf16 (--grad-reduce-in-bf16 in Megatron-LM's words).
TEST(MegatronBridgeTest, RecipeDumpsKeepBf16Gradients) {
  for (const char* yaml : {"deepseek_v3.yaml", "llama3_70b.yaml"}) {
    absl::StatusOr<std::string> text =
        common::ReadFile(DataPath(std::string("megatron-bridge/") + yaml));
    ASSERT_TRUE(text.ok()) << text.status();
    absl::StatusOr<MegatronJob> job = RequestFromBridgeConfig(*text, yaml);
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_TRUE(job->request.plan().has_fp32_grads()) << yaml;
    EXPECT_FALSE(job->request.plan().fp32_grads()) << yaml;
  }
}

TEST(MegatronBridgeTest, Llama3RecipeDumpIsTheSameJobAsItsFlags) {
  ExpectSameAsFlags("llama3_70b.yaml",
                    {"--arch", "llama", "--layers", "80", "--hidden", "8192", "--ffn", "28672",
                     "--heads", "64", "--kv-heads", "8", "--seq-len", "8192", "--vocab", "128256",
                     "--gpus", "64", "--tp", "4", "--pp", "4", "--cp", "2", "--virtual-stages", "5",
                     "--sequence-parallel", "on", "--tp-comm-overlap", "on",
                     "--data-parallel-sharding", "optimizer", "--gradient-bucketing", "on",
                     // ddp.bucket_size counts parameters: 134217728 fp32 gradients.
                     "--bucket-size", "536870912", "--overlap-param-gather", "on", "--dtype",
                     "bf16", "--micro-batch", "1", "--global-batch", "256", "--recompute", "none",
                     "--fp32-grads", "off"});
}

TEST(MegatronBridgeTest, DeepSeekRecipeDumpIsThePresetsJobAtItsPlan) {
  ExpectSameAsFlags("deepseek_v3.yaml", {"--model",
                                         "deepseek-v3",
                                         "--gpus",
                                         "1024",
                                         "--tp",
                                         "2",
                                         "--pp",
                                         "8",
                                         "--virtual-stages",
                                         "4",
                                         "--pipeline-layout",
                                         "Et|(tt|)*30mL",
                                         "--ep",
                                         "64",
                                         "--etp",
                                         "1",
                                         "--sequence-parallel",
                                         "on",
                                         "--moe-dispatcher",
                                         "hybridep",
                                         "--micro-batch",
                                         "1",
                                         "--global-batch",
                                         "16384",
                                         "--dtype",
                                         "fp8",
                                         "--fp8-recipe",
                                         "current",
                                         "--data-parallel-sharding",
                                         "optimizer",
                                         "--bucket-size",
                                         "536870912",
                                         "--overlap-param-gather",
                                         "on",
                                         "--bf16-moments",
                                         "on",
                                         "--fp32-grads",
                                         "off",
                                         "--recompute",
                                         "selective",
                                         "--recompute-modules",
                                         "mla_up_proj,mlp"});
}

TEST(MegatronBridgeTest, BuilderShapeAndRecipeNameAreRead) {
  absl::StatusOr<MegatronJob> job = RequestFromBridgeConfig(
      ReadData("megatron-bridge/llama3_8b_builder.yaml"), "llama3_8b_builder.yaml");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->request.model().num_layers(), 32);
  EXPECT_EQ(job->request.model().num_kv_heads(), 8);
  EXPECT_EQ(job->request.plan().context_parallel(), 2);
  EXPECT_EQ(job->request.plan().dtype(), v1::DTYPE_BF16);  // mixed_precision: bf16_mixed
}

TEST(MegatronBridgeTest, WorldSizeComesFromTheDataParallelSize) {
  absl::StatusOr<MegatronJob> job =
      RequestFromBridgeConfig(ReadData("megatron-bridge/gpt3_175b.yaml"), "gpt3.yaml");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->request.cluster().num_gpus(), 4 * 8 * 16);
  EXPECT_EQ(job->request.plan().tensor_parallel(), 8);
  EXPECT_EQ(job->request.model().vocab_size(), 50257);
  // Sections and fields that do not change the step time are listed once.
  EXPECT_THAT(job->ignored, Contains("checkpoint (checkpoints)"));
  EXPECT_THAT(job->ignored, Contains("optimizer.lr (learning rate)"));
}

TEST(MegatronBridgeTest, ShapesPrecisionRecipesAndLayouts) {
  const std::string text =
      "model:\n"
      "  _target_: megatron.bridge.models.gpt.gpt_builder.GPTModelConfig\n"
      "  seq_length: 4096\n"
      "  vocab_size: 32000\n"
      "  transformer:\n"
      "    num_layers: 8\n"
      "    hidden_size: 1024\n"
      "    num_attention_heads: 16\n"
      "    num_query_groups: 4\n"
      "    gated_linear_unit: true\n"
      "    activation_func: {_call_: false, _target_: torch.nn.functional.silu}\n"
      "    pipeline_model_parallel_size: 2\n"
      "    pipeline_model_parallel_layout:\n"
      "    - [embedding, decoder, decoder, decoder]\n"
      "    - [decoder, decoder, decoder, decoder, decoder, loss]\n"
      "    recompute_granularity: selective\n"
      "    recompute_modules: [core_attn, mlp]\n"
      "mixed_precision: bf16_with_fp8_current_scaling_mixed\n"
      "optimizer:\n"
      "  use_precision_aware_optimizer: true\n"
      "  exp_avg_dtype: {_call_: false, _target_: torch.bfloat16}\n"
      "  exp_avg_sq_dtype: {_call_: false, _target_: torch.bfloat16}\n"
      "train: {global_batch_size: 64, micro_batch_size: 2}\n";
  absl::StatusOr<MegatronJob> job = RequestFromBridgeConfig(text, "b.yaml");
  ASSERT_TRUE(job.ok()) << job.status();
  const v1::PredictRequest& r = job->request;
  EXPECT_EQ(r.model().num_layers(), 8);
  EXPECT_EQ(r.model().num_kv_heads(), 4);
  EXPECT_EQ(r.model().arch(), v1::ARCHITECTURE_LLAMA);
  EXPECT_EQ(r.plan().dtype(), v1::DTYPE_FP8);
  EXPECT_EQ(r.plan().fp8_recipe(), v1::FP8_RECIPE_CURRENT);
  EXPECT_EQ(r.plan().pipeline_layout(), "Ettt|tttttL");
  EXPECT_EQ(r.plan().recompute(), v1::RECOMPUTE_SELECTIVE);
  EXPECT_THAT(std::vector<std::string>(r.plan().recompute_modules().begin(),
                                       r.plan().recompute_modules().end()),
              Contains("mlp"));
  EXPECT_TRUE(r.plan().bf16_moments());
  // No ddp section: Megatron-LM's default for bf16, an fp32 gradient buffer.
  EXPECT_TRUE(r.plan().fp32_grads());
  EXPECT_EQ(r.plan().micro_batch(), 2);
  EXPECT_FALSE(job->notes.empty());  // no world size: give --gpus
}

TEST(MegatronBridgeTest, RefusesWhatChangesTheStepTimeByItsPathAndLine) {
  auto refusal = [](const std::string& text) {
    absl::StatusOr<MegatronJob> job = RequestFromBridgeConfig(text, "r.yaml");
    EXPECT_FALSE(job.ok());
    EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(job.status().message());
  };
  const std::string model = "model:\n  num_layers: 4\n  hidden_size: 256\n";
  // A field Megatron-Core has, not at its default and not modelled.
  EXPECT_THAT(refusal(model + "  cpu_offloading: true\n"),
              HasSubstr("r.yaml:4: model.cpu_offloading"));
  // A field no Megatron-Bridge this build knows, not off.
  EXPECT_THAT(refusal(model + "  brand_new_overlap: 3\n"),
              HasSubstr("model.brand_new_overlap is not a field vtrain reads"));
  EXPECT_THAT(refusal(model + "  fp4: e2m1\n"), HasSubstr("fp4 training"));
  EXPECT_THAT(refusal(model + "peft:\n  dim: 8\n"), HasSubstr("peft"));
  EXPECT_THAT(refusal(model + "optimizer: {optimizer: sgd}\n"), HasSubstr("optimizer.optimizer"));
  EXPECT_THAT(refusal(model + "  seq_length: 4096\ndataset: {seq_length: 2048}\n"),
              HasSubstr("differs from model.seq_length"));
  EXPECT_THAT(refusal("model:\n  _target_: megatron.bridge.models.T5ModelProvider\n"),
              HasSubstr("GPT-style decoders"));
  EXPECT_THAT(refusal("train: {micro_batch_size: 1}\n"), HasSubstr("no 'model:' mapping"));
  EXPECT_THAT(refusal(model + "  recompute_granularity: everything\n"),
              HasSubstr("model.recompute_granularity (as --recompute-granularity) must be"));
  EXPECT_THAT(refusal("model: !!python/object:os.system {}\n"), HasSubstr("r.yaml:1: the tag"));
  // Off, at their defaults, or not changing the step time: accepted.
  absl::StatusOr<MegatronJob> ok =
      RequestFromBridgeConfig(model +
                                  "  bf16: true\n  cpu_offloading: false\n  brand_new_overlap: "
                                  "null\n  deallocate_pipeline_outputs: "
                                  "true\n  init_method_std: 0.02\n",
                              "ok.yaml");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_THAT(ok->ignored,
              Contains("model.deallocate_pipeline_outputs (at Megatron-Core's default)"));
}

TEST(MegatronBridgeTest, TheConfigTravelsInTheRequest) {
  // Over gRPC (and in -f job files) the dump is text in the request.
  const std::string json = absl::StrCat(
      "{\"megatron_bridge_config\": ",
      "\"model:\\n  num_layers: 4\\n  hidden_size: 256\\n  num_attention_heads: 4\\n"
      "  seq_length: 512\\n  vocab_size: 1000\\n  bf16: true\\ntrain: {global_batch_size: 8, "
      "micro_batch_size: 1}\\n\", \"cluster\": {\"gpu\": \"a100-sxm4-80gb\", \"num_gpus\": 8}}");
  const std::string path = ::testing::TempDir() + "/bridge_job.json";
  std::ofstream(path) << json;
  const auto r = RunVtrainctlInProcess({"predict", "-f", path});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("4 layers, hidden 256"));
  const auto both = RunVtrainctlInProcess(
      {"predict", "--megatron-bridge-config", DataPath("megatron-bridge/gpt3_175b.yaml"),
       "--megatron-args", DataPath("megatron-launches/gpt3_175b.sh")});
  EXPECT_NE(both.code, 0);
  EXPECT_THAT(both.err, HasSubstr("give one of --megatron-args, --megatron-bridge-config"));
}

}  // namespace
}  // namespace vtrain::proto
