#include "proto/json_keys.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/json.h"
#include "tests/testing/status_matchers.h"
#include "vtrain/v1/vtrain.pb.h"

namespace vtrain::proto {
namespace {

using ::testing::HasSubstr;
using ::vtrain::testing::StatusIs;

TEST(JsonKeysTest, AKeyTwiceInOneObjectIsRefusedWithItsPath) {
  EXPECT_THAT(CheckNoDuplicateKeys(R"({"a": 1, "a": 2})"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'a' appears twice")));
  EXPECT_THAT(CheckNoDuplicateKeys(R"({"plan": {"global_batch": 1, "x": [1, {}],
                                       "global_batch": 2}})"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'plan.global_batch'")));
  // Both spellings of one field are the same field.
  EXPECT_THAT(CheckNoDuplicateKeys(R"({"global_batch": 1, "globalBatch": 2})"),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(JsonKeysTest, TheSameKeyInDifferentObjectsIsFine) {
  VTRAIN_EXPECT_OK(CheckNoDuplicateKeys(R"({"a": {"b": 1}, "c": {"b": 2}})"));
  VTRAIN_EXPECT_OK(CheckNoDuplicateKeys(R"([{"b": 1}, {"b": 2}])"));
  // Keys inside strings, escaped quotes and braces in values are not keys.
  VTRAIN_EXPECT_OK(CheckNoDuplicateKeys(R"({"a": "\"a\": {", "b": "}", "c": "\\"})"));
  // Malformed text is left to the parser.
  VTRAIN_EXPECT_OK(CheckNoDuplicateKeys(R"({"a": "unterminated)"));
}

TEST(JsonKeysTest, DeepNestingIsRefused) {
  EXPECT_THAT(CheckNoDuplicateKeys(std::string(1000, '[')),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("nested deeper")));
}

TEST(JsonKeysTest, FromJsonRefusesARepeatedKey) {
  v1::PredictRequest r;
  EXPECT_THAT(
      FromJson(R"({"plan": {"global_batch": 64, "global_batch": 32}})", &r),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'plan.global_batch' appears twice")));
  VTRAIN_EXPECT_OK(FromJson(R"({"plan": {"global_batch": 64}})", &r));
  EXPECT_EQ(r.plan().global_batch(), 64);
}

}  // namespace
}  // namespace vtrain::proto
