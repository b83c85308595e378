#include "core/spec/model.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace vtrain {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::vtrain::testing::StatusIs;

TEST(ModelPresetTest, TheGptPresetsThenTheLlamaPresetsEachInSizeOrder) {
  EXPECT_THAT(
      ModelPresetNames(),
      ElementsAre("gpt3-125m", "gpt3-350m", "gpt3-1.3b", "gpt3-2.7b", "gpt3-6.7b", "gpt3-13b",
                  "gpt3-175b", "mtnlg-530b", "llama2-7b", "llama2-13b", "llama2-70b", "llama3-8b",
                  "llama3-70b", "llama3.1-405b", "qwen3-30b-a3b", "gpt-oss-20b", "mixtral-8x7b",
                  "gpt-oss-120b", "mixtral-8x22b", "qwen3-235b-a22b", "deepseek-v3"));
  double previous = 0;
  for (const std::string& name : ModelPresetNames()) {
    if (ModelPreset(name)->arch != Architecture::kGpt) continue;
    SCOPED_TRACE(name);
    absl::StatusOr<ModelSpec> m = ModelPreset(name);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(m->name, name);
    EXPECT_GT(m->num_layers, 0);
    EXPECT_EQ(m->hidden_size % m->num_heads, 0);
    EXPECT_EQ(m->seq_len, 2048);
    EXPECT_EQ(m->vocab_size, 50257);
    EXPECT_EQ(m->ffn(), 4 * m->hidden_size);
    const double params = ModelParameterCount(*m);
    EXPECT_GT(params, previous);
    previous = params;
  }
}

TEST(ModelPresetTest, Gpt3175bShape) {
  // Brown et al. 2020, Table 2.1: 96 layers, d_model 12288, 96 heads.
  const ModelSpec m = *ModelPreset("gpt3-175b");
  EXPECT_EQ(m.num_layers, 96);
  EXPECT_EQ(m.hidden_size, 12288);
  EXPECT_EQ(m.num_heads, 96);
}

struct NominalSize {
  const char* name;
  double parameters;
  double tolerance;  // relative
};

TEST(ModelParameterCountTest, PresetsHaveRoughlyTheirNominalSize) {
  // gpt3-175b: 96 * (12 * 12288^2 + 13 * 12288) + (50257 + 2048) * 12288
  //   + 2 * 12288 = 174,604,259,328, 0.2% under 175e9.
  // mtnlg-530b: 105 * (12 * 20480^2 + 13 * 20480) + (50257 + 2048) * 20480
  //   + 2 * 20480 = 529,581,506,560, 0.1% under 530e9.
  // The smaller GPT-3 rows are within 2% of their names (gpt3-2.7b is the
  // farthest: 2,651,553,280, 1.8% under).
  const NominalSize kSizes[] = {
      {"gpt3-125m", 125e6, 0.02}, {"gpt3-350m", 350e6, 0.02},  {"gpt3-1.3b", 1.3e9, 0.02},
      {"gpt3-2.7b", 2.7e9, 0.02}, {"gpt3-6.7b", 6.7e9, 0.02},  {"gpt3-13b", 13e9, 0.02},
      {"gpt3-175b", 175e9, 0.02}, {"mtnlg-530b", 530e9, 0.03},
  };
  for (const NominalSize& size : kSizes) {
    SCOPED_TRACE(size.name);
    const double params = ModelParameterCount(*ModelPreset(size.name));
    EXPECT_NEAR(params / size.parameters, 1.0, size.tolerance) << params;
  }
  EXPECT_DOUBLE_EQ(ModelParameterCount(*ModelPreset("gpt3-175b")), 174'604'259'328.0);
  EXPECT_DOUBLE_EQ(ModelParameterCount(*ModelPreset("mtnlg-530b")), 529'581'506'560.0);
}

TEST(ModelParameterCountTest, SmallModelGolden) {
  ModelSpec m;
  m.num_layers = 2;
  m.hidden_size = 64;
  m.num_heads = 4;
  m.seq_len = 128;
  m.vocab_size = 512;
  // Layer: 4h^2 + 2hf + 9h + f with h = 64, f = 256:
  //   16,384 + 32,768 + 576 + 256 = 49,984.
  EXPECT_DOUBLE_EQ(LayerParameterCount(m), 49'984.0);
  // Model: 2 * 49,984 + 512 * 64 + 128 * 64 + 2 * 64
  //   = 99,968 + 32,768 + 8,192 + 128 = 141,056.
  EXPECT_DOUBLE_EQ(ModelParameterCount(m), 141'056.0);
  // An explicit FFN width replaces 4h: f = 128 gives 16,384 + 16,384 + 576 + 128.
  m.ffn_hidden_size = 128;
  EXPECT_DOUBLE_EQ(LayerParameterCount(m), 33'472.0);
}

// Hand counts: a Llama layer holds Q and O projections 2h^2, K and V
// projections 2 h (kv_heads * h / heads), gate, up and down 3hf, two RMSNorm
// weights 2h; the model adds untied input and output embeddings 2vh and the
// final RMSNorm h.
struct LlamaCount {
  const char* name;
  int64_t layers, hidden, heads, kv_heads, ffn, vocab, seq;
  double layer_parameters, parameters;
};

TEST(ModelParameterCountTest, LlamaPresetsMatchHandCountsAndModelCards) {
  const LlamaCount kCounts[] = {
      // 2 * 4096^2 + 2 * 4096 * 4096 + 3 * 4096 * 11008 + 8192 = 202,383,360;
      // 32 layers + 2 * 32000 * 4096 + 4096 = 6,738,415,616 (model card: 7B;
      // the Hugging Face checkpoint holds 6.74B).
      {"llama2-7b", 32, 4096, 32, 32, 11008, 32000, 4096, 202'383'360.0, 6'738'415'616.0},
      // 2 * 5120^2 * 2 + 3 * 5120 * 13824 + 10240 = 317,204,480;
      // 40 layers + 2 * 32000 * 5120 + 5120 = 13,015,864,320.
      {"llama2-13b", 40, 5120, 40, 40, 13824, 32000, 4096, 317'204'480.0, 13'015'864'320.0},
      // 2 * 8192^2 + 2 * 8192 * 1024 + 3 * 8192 * 28672 + 16384 = 855,654,400;
      // 80 layers + 2 * 32000 * 8192 + 8192 = 68,976,648,192 (69.0B).
      {"llama2-70b", 80, 8192, 64, 8, 28672, 32000, 4096, 855'654'400.0, 68'976'648'192.0},
      // 2 * 4096^2 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 8192 = 218,112,000;
      // 32 layers + 2 * 128256 * 4096 + 4096 = 8,030,261,248 (8.03B).
      {"llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192, 218'112'000.0, 8'030'261'248.0},
      // 80 * 855,654,400 + 2 * 128256 * 8192 + 8192 = 70,553,706,496 (70.6B).
      {"llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192, 855'654'400.0, 70'553'706'496.0},
      // 2 * 16384^2 + 2 * 16384 * 1024 + 3 * 16384 * 53248 + 32768
      //   = 3,187,703,808; 126 layers + 2 * 128256 * 16384 + 16384
      //   = 405,853,388,800 (405.9B).
      {"llama3.1-405b", 126, 16384, 128, 8, 53248, 128256, 8192, 3'187'703'808.0,
       405'853'388'800.0},
  };
  for (const LlamaCount& c : kCounts) {
    SCOPED_TRACE(c.name);
    const ModelSpec m = *ModelPreset(c.name);
    EXPECT_EQ(m.arch, Architecture::kLlama);
    EXPECT_EQ(m.num_layers, c.layers);
    EXPECT_EQ(m.hidden_size, c.hidden);
    EXPECT_EQ(m.num_heads, c.heads);
    EXPECT_EQ(m.kv_heads(), c.kv_heads);
    EXPECT_EQ(m.ffn(), c.ffn);
    EXPECT_EQ(m.vocab_size, c.vocab);
    EXPECT_EQ(m.seq_len, c.seq);
    EXPECT_DOUBLE_EQ(LayerParameterCount(m), c.layer_parameters);
    EXPECT_DOUBLE_EQ(ModelParameterCount(m), c.parameters);
  }
}

TEST(PaddedVocabTest, LlamaPadsToAMultipleOf128TimesTpGptDoesNot) {
  const ModelSpec llama3 = *ModelPreset("llama3-8b");
  // 128256 = 128 * 1002 is already a multiple of 128 and of 256.
  EXPECT_EQ(PaddedVocab(llama3, 1), 128256);
  EXPECT_EQ(PaddedVocab(llama3, 2), 128256);
  // Multiple of 1024: ceil(128256 / 1024) = 126 -> 129,024.
  EXPECT_EQ(PaddedVocab(llama3, 8), 129024);
  const ModelSpec llama2 = *ModelPreset("llama2-7b");
  EXPECT_EQ(PaddedVocab(llama2, 1), 32000);  // 250 * 128
  EXPECT_EQ(PaddedVocab(llama2, 4), 32256);  // 63 * 512
  const ModelSpec gpt = *ModelPreset("gpt3-175b");
  EXPECT_EQ(PaddedVocab(gpt, 8), 50257);
}

TEST(StageParametersTest, UntiedLlamaEmbeddingsOnBothEndsTiedGptOnlyWhenSplit) {
  const ModelSpec llama = *ModelPreset("llama3-8b");
  // First stage: 129,024 / 8 rows of 4096; no position table.
  EXPECT_DOUBLE_EQ(EmbeddingParametersPerGpu(llama, 8), 16'128.0 * 4096);
  // Last stage: the output layer's rows plus the final RMSNorm, with or
  // without pipelining.
  EXPECT_DOUBLE_EQ(OutputParametersPerGpu(llama, 8, 1), 16'128.0 * 4096 + 4096);
  EXPECT_DOUBLE_EQ(OutputParametersPerGpu(llama, 8, 4), 16'128.0 * 4096 + 4096);
  EXPECT_FALSE(TiedEmbeddings(llama));
  const ModelSpec gpt = *ModelPreset("gpt3-1.3b");
  EXPECT_TRUE(TiedEmbeddings(gpt));
  EXPECT_DOUBLE_EQ(EmbeddingParametersPerGpu(gpt, 2), 50257.0 / 2 * 2048 + 2048.0 * 2048);
  EXPECT_DOUBLE_EQ(OutputParametersPerGpu(gpt, 2, 1), 2 * 2048.0);
  EXPECT_DOUBLE_EQ(OutputParametersPerGpu(gpt, 2, 2), 2 * 2048.0 + 50257.0 / 2 * 2048);
}

TEST(ArchitectureTest, NamesRoundTripAndUnknownNamesTheField) {
  for (Architecture a : {Architecture::kGpt, Architecture::kLlama}) {
    EXPECT_EQ(*ParseArchitecture(ArchitectureName(a)), a);
  }
  EXPECT_THAT(ParseArchitecture("mamba"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("model.arch"), HasSubstr("gpt or llama"))));
}

TEST(ModelPresetTest, UnknownPresetIsNotFoundListingTheNames) {
  EXPECT_THAT(ModelPreset("gpt4"),
              StatusIs(absl::StatusCode::kNotFound,
                       AllOf(HasSubstr("'gpt4'"), HasSubstr("gpt3-125m"), HasSubstr("gpt3-175b"),
                             HasSubstr("mtnlg-530b"))));
  EXPECT_THAT(ModelPreset(""), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(ModelPreset("GPT3-175B"), StatusIs(absl::StatusCode::kNotFound));
}

}  // namespace
}  // namespace vtrain
