#include "common/files.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace vtrain::common {
namespace {

using ::testing::HasSubstr;
using ::vtrain::testing::StatusIs;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/files_test_", getpid(), "_", name);
}

TEST(FilesTest, ReadsWhatWasWritten) {
  const std::string path = TempPath("a.txt");
  VTRAIN_ASSERT_OK(WriteFile(path, std::string("a\0b", 3)));
  absl::StatusOr<std::string> text = ReadFile(path);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, std::string("a\0b", 3));
  unlink(path.c_str());
}

TEST(FilesTest, RefusesDevicesDirectoriesAndFilesOverTheLimit) {
  EXPECT_THAT(ReadFile("/dev/zero"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a regular file")));
  EXPECT_THAT(ReadFile("/"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is a directory")));
  const std::string path = TempPath("big.txt");
  VTRAIN_ASSERT_OK(WriteFile(path, std::string(100, 'x')));
  EXPECT_THAT(ReadFile(path, /*max_bytes=*/99),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("above the limit of 99")));
  EXPECT_TRUE(ReadFile(path, /*max_bytes=*/100).ok());
  unlink(path.c_str());
}

TEST(FilesTest, ErrorsSayTheOsReason) {
  EXPECT_THAT(ReadFile(TempPath("absent")),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("No such file or directory")));
  EXPECT_THAT(
      WriteFile("/nonexistent/dir/x", "x"),
      StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("No such file or directory")));
}

}  // namespace
}  // namespace vtrain::common
