#include "common/flag_parser.h"

#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace vtrain::common {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Optional;
using ::vtrain::testing::StatusIs;

FlagParser MakeParser() {
  FlagParser p("vtrainctl test");
  p.AddValue("gpus", "N", "GPUs");
  p.AddValue("tokens", "N", "tokens");
  p.AddValue("model", "PRESET", "model preset");
  p.AddSwitch("json", "print JSON");
  return p;
}

TEST(FlagParserTest, ValuesWithSpaceOrEquals) {
  FlagParser p = MakeParser();
  VTRAIN_ASSERT_OK(p.Parse({"--gpus", "8", "--model=gpt3-175b", "--tokens=3e11"}));
  EXPECT_TRUE(p.Has("gpus"));
  EXPECT_THAT(p.Get("model"), Optional(std::string("gpt3-175b")));
  EXPECT_THAT(*p.GetInt("gpus"), Optional(8));
  EXPECT_THAT(*p.GetDouble("tokens"), Optional(3e11));
  EXPECT_FALSE(p.Has("json"));
  EXPECT_FALSE(p.Switch("json"));
  EXPECT_EQ(p.Get("json"), std::nullopt);
  EXPECT_EQ(*p.GetInt("json"), std::nullopt);  // absent: nullopt, not an error
}

TEST(FlagParserTest, ValueMayContainEqualsAndLookLikeAFlag) {
  FlagParser p = MakeParser();
  VTRAIN_ASSERT_OK(p.Parse({"--model=a=b", "--tokens", "--json"}));
  EXPECT_THAT(p.Get("model"), Optional(std::string("a=b")));
  // A value flag takes the next argument whatever it is.
  EXPECT_THAT(p.Get("tokens"), Optional(std::string("--json")));
  EXPECT_FALSE(p.Switch("json"));
}

TEST(FlagParserTest, Switches) {
  FlagParser p = MakeParser();
  VTRAIN_ASSERT_OK(p.Parse({"--json"}));
  EXPECT_TRUE(p.Switch("json"));
  FlagParser off = MakeParser();
  VTRAIN_ASSERT_OK(off.Parse({"--json=false"}));
  EXPECT_FALSE(off.Switch("json"));
  FlagParser on = MakeParser();
  VTRAIN_ASSERT_OK(on.Parse({"--json=true"}));
  EXPECT_TRUE(on.Switch("json"));
  FlagParser bad = MakeParser();
  EXPECT_THAT(bad.Parse({"--json=yes"}), StatusIs(absl::StatusCode::kInvalidArgument,
                                                  HasSubstr("--json='yes' is not a boolean")));
}

TEST(FlagParserTest, UnderscoresSpellTheDashedNameAndDashHIsHelp) {
  FlagParser f("tool");
  f.AddValue("push-token-file", "FILE", "token");
  f.AddSwitch("help", "help");
  VTRAIN_ASSERT_OK(f.Parse({"--push_token_file=/t", "-h"}));
  EXPECT_EQ(f.Get("push-token-file").value_or(""), "/t");
  EXPECT_TRUE(f.Switch("help"));
}

TEST(FlagParserTest, LastValueWins) {
  FlagParser p = MakeParser();
  VTRAIN_ASSERT_OK(p.Parse({"--gpus", "8", "--gpus=16"}));
  EXPECT_THAT(*p.GetInt("gpus"), Optional(16));
}

TEST(FlagParserTest, UnknownFlagIsNamed) {
  FlagParser p = MakeParser();
  EXPECT_THAT(p.Parse({"--gpus", "8", "--bogus", "1"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("unknown flag --bogus"), HasSubstr("vtrainctl test"))));
  FlagParser q = MakeParser();
  EXPECT_THAT(q.Parse({"--bogus=1"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--bogus")));
}

TEST(FlagParserTest, MissingValueIsNamed) {
  FlagParser p = MakeParser();
  EXPECT_THAT(p.Parse({"--gpus"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("--gpus needs a value"), HasSubstr("--gpus N"))));
}

TEST(FlagParserTest, StrayArgumentsAreErrors) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"8"}, {"-g"}, {"--"}, {""}, {"--json", "extra"}}) {
    FlagParser p = MakeParser();
    EXPECT_THAT(p.Parse(args),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unexpected argument")));
  }
}

TEST(FlagParserTest, TypedGettersNameTheFlagOnBadValues) {
  FlagParser p = MakeParser();
  VTRAIN_ASSERT_OK(p.Parse({"--gpus", "eight", "--tokens", "lots"}));
  EXPECT_THAT(p.GetInt("gpus"), StatusIs(absl::StatusCode::kInvalidArgument,
                                         HasSubstr("--gpus='eight' is not an integer")));
  EXPECT_THAT(p.GetDouble("tokens"), StatusIs(absl::StatusCode::kInvalidArgument,
                                              HasSubstr("--tokens='lots' is not a number")));
  FlagParser q = MakeParser();
  VTRAIN_ASSERT_OK(q.Parse({"--gpus", "1.5", "--tokens", "inf"}));
  EXPECT_THAT(q.GetInt("gpus"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(q.GetDouble("tokens"), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(FlagParserTest, UsageListsEveryFlag) {
  const std::string usage = MakeParser().Usage();
  EXPECT_THAT(usage, AllOf(HasSubstr("--gpus N"), HasSubstr("--model PRESET"), HasSubstr("--json"),
                           HasSubstr("print JSON"), HasSubstr("model preset")));
}

}  // namespace
}  // namespace vtrain::common

namespace vtrain::common {
namespace {

TEST(FlagParserTest, IntListsNameTheBadItem) {
  FlagParser f("tool");
  f.AddValue("counts", "A,B", "counts");
  VTRAIN_ASSERT_OK(f.Parse({"--counts=8,16,,32"}));
  absl::StatusOr<std::vector<int64_t>> counts = f.GetIntList("counts");
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(*counts, (std::vector<int64_t>{8, 16, 32}));
  FlagParser bad("tool");
  bad.AddValue("counts", "A,B", "counts");
  VTRAIN_ASSERT_OK(bad.Parse({"--counts=8,x"}));
  EXPECT_THAT(bad.GetIntList("counts"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--counts: 'x'")));
  FlagParser absent("tool");
  absent.AddValue("counts", "A,B", "counts");
  VTRAIN_ASSERT_OK(absent.Parse({}));
  EXPECT_TRUE(absent.GetIntList("counts")->empty());
}

}  // namespace
}  // namespace vtrain::common
