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

TEST(ModelPresetTest, AllEightPresetsExistInSizeOrder) {
  EXPECT_THAT(ModelPresetNames(), ElementsAre("gpt3-125m", "gpt3-350m", "gpt3-1.3b", "gpt3-2.7b",
                                              "gpt3-6.7b", "gpt3-13b", "gpt3-175b", "mtnlg-530b"));
  double previous = 0;
  for (const std::string& name : ModelPresetNames()) {
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
