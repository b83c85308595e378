#include "core/spec/job.h"

#include "gtest/gtest.h"

namespace vtrain {
namespace {

TEST(JobTest, Placeholder) { EXPECT_TRUE(true); }

}  // namespace
}  // namespace vtrain
