// gMock matchers and assertion macros for absl::Status and absl::StatusOr
// (abseil 20220623 ships none): StatusIs(code[, message_matcher]), IsOk().
#ifndef VTRAIN_TESTS_TESTING_STATUS_MATCHERS_H_
#define VTRAIN_TESTS_TESTING_STATUS_MATCHERS_H_

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace vtrain::testing {

inline const absl::Status& GetStatus(const absl::Status& status) { return status; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}

// Matches an OK Status or StatusOr.
MATCHER(IsOk, negation ? "is not OK" : "is OK") {
  const absl::Status& status = GetStatus(arg);
  if (!status.ok()) *result_listener << "status is " << status;
  return status.ok();
}

// Matches a Status or StatusOr whose code is `code`.
MATCHER_P(StatusIs, code,
          absl::StrCat(negation ? "does not have" : "has", " code ",
                       absl::StatusCodeToString(code))) {
  const absl::Status& status = GetStatus(arg);
  *result_listener << "status is " << status;
  return status.code() == code;
}

// Matches a Status or StatusOr whose code is `code` and whose message matches
// `message_matcher` (e.g. ::testing::HasSubstr("plan.tensor_parallel")).
MATCHER_P2(StatusIs, code, message_matcher,
           absl::StrCat(negation ? "does not have" : "has", " code ",
                        absl::StatusCodeToString(code), " and a matching message")) {
  const absl::Status& status = GetStatus(arg);
  *result_listener << "status is " << status;
  if (status.code() != code) return false;
  return ::testing::ExplainMatchResult(message_matcher, std::string(status.message()),
                                       result_listener);
}

}  // namespace vtrain::testing

#define VTRAIN_EXPECT_OK(expr) EXPECT_THAT((expr), ::vtrain::testing::IsOk())
#define VTRAIN_ASSERT_OK(expr) ASSERT_THAT((expr), ::vtrain::testing::IsOk())

#define VTRAIN_TESTING_CONCAT_INNER_(a, b) a##b
#define VTRAIN_TESTING_CONCAT_(a, b) VTRAIN_TESTING_CONCAT_INNER_(a, b)

// `VTRAIN_ASSERT_OK_AND_ASSIGN(auto x, MakeX());` asserts the StatusOr is OK
// and moves its value into `lhs`.
#define VTRAIN_ASSERT_OK_AND_ASSIGN(lhs, rexpr) \
  VTRAIN_ASSERT_OK_AND_ASSIGN_IMPL_(VTRAIN_TESTING_CONCAT_(vtrain_statusor_, __LINE__), lhs, rexpr)
#define VTRAIN_ASSERT_OK_AND_ASSIGN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                      \
  ASSERT_TRUE(statusor.ok()) << statusor.status();              \
  lhs = std::move(statusor).value()

#endif  // VTRAIN_TESTS_TESTING_STATUS_MATCHERS_H_
