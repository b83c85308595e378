// Mixture-of-Experts and MLA model descriptions: the presets' parameter
// counts against hand counts and their model cards, the rules a MoE job must
// follow (each refused with the field named), and the expected load of the
// busiest expert-parallel rank.
#include "core/spec/moe.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/spec/job.h"
#include "core/spec/model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace vtrain {
namespace {

using ::testing::HasSubstr;
using ::vtrain::testing::StatusIs;

// Hand counts of a Llama-style MoE with standard attention: per layer the
// attention (Q and O of heads*d, K and V of kv*d, input norm), the router
// (E*h), the pre-MLP norm and `experts` SwiGLU experts of 3*h*f; untied
// embeddings and output layer, final norm.
double HandCount(double layers, double h, double heads, double kv, double d, double vocab,
                 double experts_all, double experts_used, double f) {
  const double attention = 2 * h * heads * d + 2 * h * kv * d + h;
  const double layer_fixed = attention + experts_all * h + h;
  return layers * (layer_fixed + experts_used * 3 * h * f) + 2 * vocab * h + h;
}

TEST(MoeParameterTest, PresetsMatchHandCountsAndModelCards) {
  struct Row {
    const char* preset;
    double total, active;  // by hand, from the config
    double published_total, published_active;
  } rows[] = {
      // Qwen3 Technical Report, Table 2: 235B total, 22B activated.
      {"qwen3-235b-a22b", HandCount(94, 4096, 64, 4, 128, 151936, 128, 128, 1536),
       HandCount(94, 4096, 64, 4, 128, 151936, 128, 8, 1536), 235e9, 22e9},
      // Mixtral of Experts (Jiang et al. 2024): 46.7B total, 12.9B active.
      {"mixtral-8x7b", HandCount(32, 4096, 32, 8, 128, 32000, 8, 8, 14336),
       HandCount(32, 4096, 32, 8, 128, 32000, 8, 2, 14336), 46.7e9, 12.9e9},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.preset);
    const ModelSpec m = *ModelPreset(r.preset);
    EXPECT_NEAR(ModelParameterCount(m) / r.total, 1.0, 1e-12);
    EXPECT_NEAR(ActiveParameterCount(m) / r.active, 1.0, 1e-12);
    EXPECT_NEAR(ModelParameterCount(m) / r.published_total, 1.0, 0.01);
    EXPECT_NEAR(ActiveParameterCount(m) / r.published_active, 1.0, 0.015);
  }
}

TEST(MoeParameterTest, DeepSeekV3CountsItsMlaDenseLayersAndSharedExpert) {
  const ModelSpec m = *ModelPreset("deepseek-v3");
  // By hand from config.json: MLA (W_DQ + norm, W_UQ/QR, W_DKV/KR + norm,
  // W_UK/UV, W_O, input norm), 3 dense layers of ffn 18432, 58 MoE layers of
  // 256 routed experts of 2048 (8 used), one shared expert, a sigmoid router
  // with a per-expert bias.
  const double h = 7168, heads = 128;
  const double attention = h * 1536 + 1536 + 1536 * heads * 192 + h * (512 + 64) + 512 +
                           512 * heads * (128 + 128) + heads * 128 * h + h;
  const double dense_layer = attention + 3 * h * 18432 + h;
  const double moe_fixed = attention + 256 * h + 256 + 3 * h * 2048 + h;
  const double ends = 2 * 129280 * h + h;
  const double total = 3 * dense_layer + 58 * (moe_fixed + 256 * 3 * h * 2048) + ends;
  const double active = 3 * dense_layer + 58 * (moe_fixed + 8 * 3 * h * 2048) + ends;
  EXPECT_NEAR(ModelParameterCount(m) / total, 1.0, 1e-12);
  EXPECT_NEAR(ActiveParameterCount(m) / active, 1.0, 1e-12);
  // DeepSeek-V3 Technical Report: 671B total, 37B activated per token.
  EXPECT_NEAR(ModelParameterCount(m) / 671e9, 1.0, 0.005);
  EXPECT_NEAR(ActiveParameterCount(m) / 37e9, 1.0, 0.03);
  EXPECT_EQ(m.MoeLayersIn(0, m.num_layers), 58);
  EXPECT_FALSE(m.IsMoeLayer(2));
  EXPECT_TRUE(m.IsMoeLayer(3));
}

TEST(MoeParameterTest, DenseModelsAreAllActive) {
  for (const std::string& name : ModelPresetNames()) {
    const ModelSpec m = *ModelPreset(name);
    if (m.is_moe()) {
      EXPECT_LT(ActiveParameterCount(m), ModelParameterCount(m)) << name;
    } else {
      EXPECT_EQ(ActiveParameterCount(m), ModelParameterCount(m)) << name;
    }
  }
}

TEST(MoeParameterTest, LayerFrequencyAlternates) {
  ModelSpec m = *ModelPreset("mixtral-8x7b");
  m.moe.layer_freq = 2;
  EXPECT_TRUE(m.IsMoeLayer(0));
  EXPECT_FALSE(m.IsMoeLayer(1));
  EXPECT_EQ(m.MoeLayersIn(0, 32), 16);
  // Half the layers dense: fewer parameters than all MoE.
  EXPECT_LT(ModelParameterCount(m), ModelParameterCount(*ModelPreset("mixtral-8x7b")));
}

Job MoeJob(const char* preset, int64_t t, int64_t d, int64_t p, int64_t ep) {
  Job job;
  job.model = *ModelPreset(preset);
  job.cluster = DefaultCluster(*GpuByName("h100-sxm5-80gb"), t * d * p);
  job.plan.tensor_parallel = t;
  job.plan.data_parallel = d;
  job.plan.pipeline_parallel = p;
  job.plan.expert_parallel = ep;
  job.plan.sequence_parallel = true;
  job.plan.global_batch = 4 * d;
  job.plan.dtype = DType::kBf16;
  return job;
}

TEST(MoeValidationTest, AGoodLayoutIsValid) {
  EXPECT_TRUE(ValidateJob(MoeJob("qwen3-235b-a22b", 2, 32, 2, 16)).ok());
  EXPECT_TRUE(ValidateJob(MoeJob("mixtral-8x7b", 1, 8, 4, 8)).ok());
}

TEST(MoeValidationTest, EachRuleNamesItsField) {
  struct Case {
    const char* what;
    void (*mutate)(Job&);
    const char* expected;
  } cases[] = {
      {"ep does not divide experts", [](Job& j) { j.plan.expert_parallel = 3; },
       "plan.expert_parallel=3 does not divide model.moe.num_experts=8"},
      {"etp does not divide expert ffn", [](Job& j) { j.plan.expert_tensor_parallel = 5; },
       "plan.expert_tensor_parallel=5 does not divide model.moe.expert_ffn"},
      {"ep*etp larger than a stage", [](Job& j) { j.plan.expert_tensor_parallel = 4; },
       "exceeds the 8 ranks of a pipeline stage"},
      {"ep with tp needs sp",
       [](Job& j) {
         j.plan.tensor_parallel = 2;
         j.plan.data_parallel = 4;
         j.plan.sequence_parallel = false;
       },
       "needs plan.sequence_parallel"},
      {"top_k above experts", [](Job& j) { j.model.moe.top_k = 9; }, "model.moe.top_k=9"},
      {"no MoE layer left", [](Job& j) { j.model.moe.dense_layers = 32; },
       "model.moe.dense_layers=32"},
      {"capacity factor", [](Job& j) { j.plan.moe.capacity_factor = -1; },
       "plan.capacity_factor=-1"},
      {"routing sigma", [](Job& j) { j.plan.moe.routing_sigma = 9; }, "plan.routing_sigma=9"},
      {"gpt experts", [](Job& j) { j.model.arch = Architecture::kGpt; },
       "model.moe.num_experts needs model.arch=llama"},
      {"mla dims without mla", [](Job& j) { j.model.mla.kv_lora_rank = 512; },
       "model.mla dimensions are set but model.attention is not mla"},
      {"mla without latent",
       [](Job& j) {
         j.model.attention = AttentionKind::kMla;
         j.model.num_kv_heads = 0;
         j.model.mla.rope_head_dim = 64;
         j.model.mla.value_head_dim = 128;
       },
       "model.mla.kv_lora_rank=0"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Job job = MoeJob("mixtral-8x7b", 1, 8, 4, 8);
    c.mutate(job);
    EXPECT_THAT(ValidateJob(job),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.expected)));
  }
}

TEST(MoeValidationTest, ExpertFieldsOnADenseModelAreRefused) {
  Job job = MoeJob("mixtral-8x7b", 1, 8, 1, 1);
  job.model = *ModelPreset("llama3-8b");
  job.plan.expert_parallel = 2;
  job.model.moe.top_k = 2;
  EXPECT_THAT(ValidateJob(job),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("plan.expert_parallel is set but model.moe.num_experts=0"),
                             HasSubstr("model.moe.top_k is set"))));
}

TEST(ExpertLoadTest, ExpectedMaxOfNormalsMatchesKnownValues) {
  EXPECT_EQ(ExpectedMaxOfNormals(1), 0);
  EXPECT_NEAR(ExpectedMaxOfNormals(2), 1 / std::sqrt(M_PI), 1e-6);  // 0.5642
  EXPECT_NEAR(ExpectedMaxOfNormals(3), 1.5 / std::sqrt(M_PI), 1e-6);
  EXPECT_NEAR(ExpectedMaxOfNormals(10), 1.538753, 1e-5);  // order-statistics tables
  EXPECT_NEAR(ExpectedMaxOfNormals(100), 2.507594, 1e-5);
}

TEST(ExpertLoadTest, ForcedBalanceSpreadsBinomially) {
  // DeepSeek-V3 at EP 64, t = 1, one 4,096-token sequence a rank: each rank
  // gets about 1.3% more than the mean on its busiest; dropless keeps all.
  const Job job = MoeJob("deepseek-v3", 1, 64, 1, 64);
  const ExpertLoad load = ExpectedExpertLoad(job.model, job.plan);
  EXPECT_GT(load.max_over_mean, 1.008);
  EXPECT_LT(load.max_over_mean, 1.02);
  EXPECT_EQ(load.kept, 1);
  // More tokens a micro-batch average out more.
  Job longer = job;
  longer.plan.micro_batch = 4;
  EXPECT_LT(ExpectedExpertLoad(longer.model, longer.plan).max_over_mean, load.max_over_mean);
  // One EP rank holds every expert: nothing to wait for.
  Job one = job;
  one.plan.expert_parallel = 1;
  EXPECT_EQ(ExpectedExpertLoad(one.model, one.plan).max_over_mean, 1);
  // A capacity factor pads every expert to it.
  Job capped = job;
  capped.plan.moe.capacity_factor = 1.25;
  EXPECT_DOUBLE_EQ(ExpectedExpertLoad(capped.model, capped.plan).max_over_mean, 1.25);
}

TEST(ExpertLoadTest, ForcedBalanceSpreadAgreesWithDrawnRouting) {
  // Draw the routing as Megatron's forced balance does (each token's top-k
  // of fresh normal logits: k distinct experts, uniformly) and compare the
  // busiest rank's mean excess with the closed form.
  ModelSpec model = *ModelPreset("qwen3-30b-a3b");  // 128 experts, top-8
  model.seq_len = 256;
  ParallelPlan plan;
  plan.data_parallel = 8;
  plan.expert_parallel = 8;  // 16 experts a rank; 8 x 256 tokens routed
  const double predicted = ForcedBalanceSpread(model, plan) - 1;
  std::mt19937_64 rng(42);
  constexpr int kDraws = 4000;
  const int64_t experts = 128, ep = 8, tokens = 8 * 256, k = 8;
  double excess = 0;
  std::vector<int64_t> per_rank(ep);
  std::vector<int64_t> pick(experts);
  std::iota(pick.begin(), pick.end(), 0);
  for (int d = 0; d < kDraws; ++d) {
    std::fill(per_rank.begin(), per_rank.end(), 0);
    for (int64_t t = 0; t < tokens; ++t) {
      // A partial Fisher-Yates shuffle of any permutation: k distinct experts.
      for (int64_t j = 0; j < k; ++j) {
        const int64_t r = j + static_cast<int64_t>(rng() % static_cast<uint64_t>(experts - j));
        std::swap(pick[j], pick[r]);
        ++per_rank[pick[j] / (experts / ep)];
      }
    }
    const double mean = static_cast<double>(tokens * k) / static_cast<double>(ep);
    excess += static_cast<double>(*std::max_element(per_rank.begin(), per_rank.end())) / mean - 1;
  }
  excess /= kDraws;
  EXPECT_NEAR(excess, predicted, 0.1 * predicted) << "drawn " << excess;
}

TEST(ExpertLoadTest, ImbalanceGrowsWithSigmaAndWithEp) {
  Job job = MoeJob("deepseek-v3", 1, 64, 1, 8);
  double previous = 1;
  for (double sigma : {0.25, 0.5, 1.0}) {
    job.plan.moe.routing_sigma = sigma;
    const ExpertLoad load = ExpectedExpertLoad(job.model, job.plan);
    EXPECT_GT(load.max_over_mean, previous) << sigma;
    EXPECT_EQ(load.kept, 1);
    previous = load.max_over_mean;
  }
  // Fewer experts per rank average less: EP 64 is more imbalanced than EP 8.
  Job wide = job;
  wide.plan.expert_parallel = 64;
  EXPECT_GT(ExpectedExpertLoad(wide.model, wide.plan).max_over_mean, previous);
  // One EP rank holds every expert: its load is the whole.
  Job one = job;
  one.plan.expert_parallel = 1;
  EXPECT_NEAR(ExpectedExpertLoad(one.model, one.plan).max_over_mean, 1.0, 1e-12);
}

TEST(ExpertLoadTest, CapacityCutsTheBusiestRankAndDropsTokens) {
  Job job = MoeJob("deepseek-v3", 1, 64, 1, 64);
  job.plan.moe.routing_sigma = 1.0;
  const ExpertLoad dropless = ExpectedExpertLoad(job.model, job.plan);
  job.plan.moe.capacity_factor = 1.25;
  const ExpertLoad capped = ExpectedExpertLoad(job.model, job.plan);
  EXPECT_DOUBLE_EQ(capped.max_over_mean, 1.25);  // padded to capacity
  EXPECT_LT(capped.max_over_mean, dropless.max_over_mean);
  EXPECT_LT(capped.kept, 1);
  EXPECT_GT(capped.kept, 0.5);
  // Balanced routing under a capacity below 1 keeps that fraction.
  job.plan.moe.routing_sigma = 0;
  job.plan.moe.capacity_factor = 0.5;
  EXPECT_DOUBLE_EQ(ExpectedExpertLoad(job.model, job.plan).kept, 0.5);
}

}  // namespace
}  // namespace vtrain
