// Bearer-token checks: every refusal is UNAUTHENTICATED and says what to do.
#include "server/auth.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace vtrain::server {
namespace {

using ::testing::HasSubstr;
using ::vtrain::testing::StatusIs;

TEST(AuthTest, AcceptsOnlyTheExactBearerToken) {
  VTRAIN_EXPECT_OK(CheckBearerToken("Bearer tok", "tok"));
  EXPECT_THAT(CheckBearerToken("Bearer tokx", "tok"),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("wrong")));
  EXPECT_THAT(CheckBearerToken("Bearer to", "tok"), StatusIs(absl::StatusCode::kUnauthenticated));
  EXPECT_THAT(CheckBearerToken("tok", "tok"), StatusIs(absl::StatusCode::kUnauthenticated));
  EXPECT_THAT(CheckBearerToken("bearer tok", "tok"), StatusIs(absl::StatusCode::kUnauthenticated));
}

TEST(AuthTest, MissingMetadataOrServerTokenSaysWhichFlag) {
  EXPECT_THAT(CheckBearerToken(std::nullopt, "tok"),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("--token-file")));
  EXPECT_THAT(CheckBearerToken("Bearer ", ""),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("--push-token-file")));
}

TEST(AuthTest, TokenEqualsComparesWholeStrings) {
  EXPECT_TRUE(TokenEquals("", ""));
  EXPECT_TRUE(TokenEquals("abc", "abc"));
  EXPECT_FALSE(TokenEquals("abc", "abd"));
  EXPECT_FALSE(TokenEquals("abc", "ab"));
  EXPECT_FALSE(TokenEquals("", "a"));
  EXPECT_FALSE(TokenEquals(absl::string_view("a\0", 2), "a"));
}

}  // namespace
}  // namespace vtrain::server
