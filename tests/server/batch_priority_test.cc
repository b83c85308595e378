// Batch work: it runs on a thread of its own at the lower priority, and
// what it hands to its CallerThread runs on the thread that started it
// (where gRPC is entered), one call at a time and before Run returns.
#include "server/batch_priority.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace vtrain::server {
namespace {

using ::vtrain::testing::StatusIs;

TEST(BatchPriorityTest, TheBodyRunsElsewhereAtIdlePolicyAndItsStatusComesBack) {
  const std::thread::id caller = std::this_thread::get_id();
  std::thread::id body_thread;
  int policy = -1;
  const absl::Status s = RunAtBatchPriority([&] {
    body_thread = std::this_thread::get_id();
    policy = sched_getscheduler(0);
    return absl::ResourceExhaustedError("over");
  });
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_NE(body_thread, caller);
#if defined(__linux__)
  EXPECT_EQ(policy, SCHED_IDLE);
  EXPECT_NE(sched_getscheduler(0), SCHED_IDLE);  // the caller keeps its own
#endif
}

TEST(BatchPriorityTest, HandedWorkRunsOnTheCallersThreadBeforeRunReturns) {
  const std::thread::id caller = std::this_thread::get_id();
  std::vector<std::thread::id> ran_on;
  std::vector<int> order;
  VTRAIN_ASSERT_OK(RunAtBatchPriority([&](CallerThread& to_caller) {
    for (int i = 0; i < 3; ++i) {
      to_caller.Run([&] {
        ran_on.push_back(std::this_thread::get_id());
        order.push_back(i);  // `i` still this iteration's: Run waited
      });
      if (order.size() != static_cast<size_t>(i + 1)) return absl::InternalError("not run yet");
    }
    return absl::OkStatus();
  }));
  ASSERT_EQ(ran_on.size(), 3u);
  for (const std::thread::id& id : ran_on) EXPECT_EQ(id, caller);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
}

TEST(BatchPriorityTest, ManyBatchThreadsHandWorkOneAtATime) {
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int> inside{0}, most_inside{0}, runs{0}, elsewhere{0};
  VTRAIN_ASSERT_OK(RunAtBatchPriority([&](CallerThread& to_caller) {
    std::vector<std::thread> workers;  // as a search's threads per slot
    for (int t = 0; t < 4; ++t) {
      workers.emplace_back([&] {
        for (int i = 0; i < 50; ++i) {
          to_caller.Run([&] {
            const int now = ++inside;
            most_inside = std::max(most_inside.load(), now);
            if (std::this_thread::get_id() != caller) ++elsewhere;
            ++runs;
            --inside;
          });
        }
      });
    }
    for (std::thread& w : workers) w.join();
    return absl::OkStatus();
  }));
  EXPECT_EQ(runs.load(), 200);
  EXPECT_EQ(most_inside.load(), 1);
  EXPECT_EQ(elsewhere.load(), 0);
}

TEST(BatchPriorityTest, ABodyThatHandsNothingBackEndsTheCallersLoop) {
  int ran = 0;
  VTRAIN_ASSERT_OK(RunAtBatchPriority([&](CallerThread&) {
    ++ran;
    return absl::OkStatus();
  }));
  EXPECT_EQ(ran, 1);
}

}  // namespace
}  // namespace vtrain::server
